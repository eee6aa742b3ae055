"""Where rlconsole keeps things: every path it decides on this machine, in one module
(posting's `locations.py` is the model), so that "where does X go" has one answer and
tests can point all of them elsewhere with the environment.

- config (`RLCONSOLE_CONFIG_DIR`, else the platform's user config dir, e.g.
  `$XDG_CONFIG_HOME/rlconsole`): the user's profiles and failure catalog;
- state (`RLCONSOLE_STATE_DIR`, else the platform's user state dir, e.g.
  `$XDG_STATE_HOME/rlconsole`), made 0700 because what it holds says what ran where:
  the debug log, the run history, the log spools, CSV exports;
- the simulated cluster's state (`RLCONSOLE_SIM_DIR`, else `<state>/sim`).

Remote paths (on the cluster) are never decided here: they belong to the profile.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tui.core.errors import UsageError

APP = "rlconsole"


def config_dir() -> Path:
    env = os.environ.get("RLCONSOLE_CONFIG_DIR")
    if env:
        return Path(env)
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP))


def user_profiles_dir() -> Path:
    return config_dir() / "profiles"


def user_catalog_path() -> Path:
    """The user's extra failure signatures (`tui/core/diagnosis.py`)."""
    return config_dir() / "diagnosis.yaml"


def state_dir() -> Path:
    """Created on first use, 0700; only ever one of this user's own (`ForeignStateDir`)."""
    from platformdirs import user_state_dir

    d = Path(os.environ.get("RLCONSOLE_STATE_DIR") or user_state_dir(APP))
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.stat(d)  # (a link given as the dir is the user's choice: followed)
    if st.st_uid != os.getuid():
        raise ForeignStateDir(d, st.st_uid)
    return d


class ForeignStateDir(UsageError, PermissionError):
    """The state dir exists and belongs to another user (`$XDG_STATE_HOME/rlconsole` made
    0777 by someone else in a shared place): its log, spools and run history would be
    theirs to read and to plant. Refused: a usage error (one line, exit 2) and an OSError
    (what a start that tolerates an unwritable state dir already handles)."""

    def __init__(self, path: Path, uid: int) -> None:
        super().__init__(f"state directory {path} belongs to another user (uid {uid}), not to you: "
                         "not used; set RLCONSOLE_STATE_DIR or XDG_STATE_HOME to a directory of your own")


def log_path() -> Path:
    return state_dir() / "rlconsole.log"


def history_path() -> Path:
    return state_dir() / "runs.jsonl"


def spool_root() -> Path:
    """One directory per job below it (`tui/core/job/watcher.py`); created 0700."""
    d = state_dir() / "spool"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def exports_dir() -> Path:
    return state_dir() / "exports"


def sim_dir() -> Path:
    """The simulated cluster's state dir (not created here: `sim up` makes it)."""
    env = os.environ.get("RLCONSOLE_SIM_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_state_dir

    return Path(user_state_dir(APP)) / "sim"


def _tighten(top: Path) -> int:
    """Remove group/other access from `top` and, when it is a directory, everything
    below it that this user owns: 0755 -> 0700, 0644 -> 0600 (owner bits are kept).
    Symlinks are neither followed nor changed (a chmod through one could reach a file
    outside rlconsole's dirs). The walk is top-down, so a directory is private before
    what is in it is looked at. The number of entries changed."""
    uid = os.getuid()
    changed = 0

    def fix(p: Path) -> bool:
        nonlocal changed
        try:
            st = os.lstat(p)
        except OSError:
            return False
        is_dir = stat.S_ISDIR(st.st_mode)
        if not (is_dir or stat.S_ISREG(st.st_mode)) or st.st_uid != uid:
            return False  # a link, a socket, someone else's: not ours to change
        if st.st_mode & 0o077:
            try:
                os.chmod(p, stat.S_IMODE(st.st_mode) & 0o700)
                changed += 1
            except OSError:
                pass  # leave it: a start never stops over this
        return is_dir

    if fix(top):
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            for name in (*dirnames, *filenames):
                fix(Path(dirpath) / name)
    return changed


def _own_entries() -> list[tuple[Path, list[Path]]]:
    """rlconsole's own local files, by root: what the functions above name (the debug
    log and its rotations, the run history, spools, exports; the user's profiles and
    failure catalog). Anything else in those dirs (another tool's files, when a dir is
    shared; the simulated cluster's dir, whose modes are the sim's) is not touched."""
    from platformdirs import user_state_dir

    state = Path(os.environ.get("RLCONSOLE_STATE_DIR") or user_state_dir(APP))
    config = config_dir()
    try:
        logs = sorted(state.glob("rlconsole.log*")) + sorted(state.glob("runs.jsonl*"))
    except OSError:
        logs = []
    return [(state, [*logs, state / "spool", state / "exports"]),
            (config, [config / "profiles", config / "diagnosis.yaml"])]


def tighten_permissions() -> dict[Path, int]:
    """Make what an older version left readable to others private (new files are
    private from creation: the CLI's umask 077; this fixes the ones from before).
    Returns, for each root where something changed, how many entries; empty when all
    was private already, so a second start says nothing."""
    out: dict[Path, int] = {}
    for root, entries in _own_entries():
        if not root.is_dir():
            continue  # absent: nothing to tighten (a root given as a link is the user's choice: followed)
        n = _tighten_root(root) + sum(_tighten(e) for e in entries)
        if n:
            out[root] = n
    return out


def _tighten_root(p: Path) -> int:
    """The root dir itself (not what is in it: only rlconsole's own entries are)."""
    try:
        st = os.stat(p)
        if st.st_uid != os.getuid() or not st.st_mode & 0o077:
            return 0
        os.chmod(p, stat.S_IMODE(st.st_mode) & 0o700)
        return 1
    except OSError:
        return 0


def tightened_message(changed: dict[Path, int]) -> str | None:
    """The one line that says what `tighten_permissions` did (None: nothing)."""
    if not changed:
        return None
    parts = [f"{n} file{'s' if n != 1 else ''} under {d}" for d, n in changed.items()]
    return ("tightened permissions of " + " and ".join(parts)
            + " (group/other access removed: they say what ran where)")
