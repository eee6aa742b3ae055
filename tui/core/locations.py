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
    """Created on first use, 0700."""
    from platformdirs import user_state_dir

    d = Path(os.environ.get("RLCONSOLE_STATE_DIR") or user_state_dir(APP))
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def log_path() -> Path:
    return state_dir() / "rlconsole.log"


def history_path() -> Path:
    return state_dir() / "runs.jsonl"


def spool_root() -> Path:
    """One directory per job below it (`tui/core/jobwatch.py`); created 0700."""
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


def _tighten_tree(root: Path, skip: set[Path]) -> int:
    """Remove group/other access from `root` and everything below it that this user
    owns: 0755 -> 0700, 0644 -> 0600 (owner bits are kept). Symlinks are neither
    followed nor changed (a chmod through one could reach a file outside rlconsole's
    dirs); nor are `skip`'s trees. The walk is top-down, so a directory is private
    before what is in it is looked at. The number of entries changed."""
    uid = os.getuid()
    changed = 0

    def fix(p: Path) -> None:
        nonlocal changed
        try:
            st = os.lstat(p)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode) or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            return
        if st.st_uid != uid or not st.st_mode & 0o077:
            return
        try:
            os.chmod(p, stat.S_IMODE(st.st_mode) & 0o700)
            changed += 1
        except OSError:
            pass  # not ours to change after all: leave it, never stop the start

    try:
        if not root.is_dir() or stat.S_ISLNK(os.lstat(root).st_mode):
            return 0
    except OSError:
        return 0
    fix(root)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in (*dirnames, *filenames):
            fix(here / name)
    return changed


def tighten_permissions() -> dict[Path, int]:
    """Make what an older version left readable to others private: the state dir (the
    debug log, run history, spools, exports) and the config dir (profiles, failure
    catalog). New files are private from creation (the CLI's umask 077); this fixes the
    ones from before. Returns, for each dir where something changed, how many entries;
    empty when all was private already (so a second start says nothing). The simulated
    cluster's dir is left alone: the sim sets the modes its nodes need."""
    from platformdirs import user_state_dir

    state = Path(os.environ.get("RLCONSOLE_STATE_DIR") or user_state_dir(APP))
    out: dict[Path, int] = {}
    for root in (state, config_dir()):
        n = _tighten_tree(root, {sim_dir(), state / "sim"})
        if n:
            out[root] = n
    return out


def tightened_message(changed: dict[Path, int]) -> str | None:
    """The one line that says what `tighten_permissions` did (None: nothing)."""
    if not changed:
        return None
    parts = [f"{n} file{'s' if n != 1 else ''} under {d}" for d, n in changed.items()]
    return ("tightened permissions of " + " and ".join(parts)
            + " (group/other access removed: they say what ran where)")
