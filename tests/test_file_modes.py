"""Files rlconsole writes are private from creation (issue 15, item 11).

The state directory was 0755 and `rlconsole.log` and the spool's `driver.log` were 0644:
anyone on the machine could read which commands ran where and the job's whole log. The
CLI sets umask 077 at start, and the places that create files give explicit modes.
Checked in real child processes started under a permissive umask (022).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOOD = Path(__file__).parent / "data" / "good_profile.yaml"

CHILD = r"""
import sys
from tui.cli import main
rc = main(["render", "--profile", sys.argv[1]])
# what a console or `status` does next in the same process: spool a job's driver log
from tui.core.job.watcher import spool_dir
from tui.core.job.spool import LogSpool
sp = LogSpool(spool_dir() / "raysubmit_x" / "driver.log")
sp.append(b"step:1 - a:1\n")
sp.save_index()
from tui.core.job.history import RunRecord, record_run
record_run(RunRecord(profile="p", profile_path="/x", job_id="j", submitted_at=1.0, entrypoint=["x"],
                     runtime_env={"env_vars": {}}))
sys.exit(rc)
"""


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_state_dir_log_spool_and_history_are_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "RLCONSOLE_STATE_DIR": str(state)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(GOOD)], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path, preexec_fn=lambda: os.umask(0o022))
    assert proc.returncode == 0, proc.stderr
    files = [state / "rlconsole.log", state / "runs.jsonl", state / "spool" / "raysubmit_x" / "driver.log",
             state / "spool" / "raysubmit_x" / "driver.log.idx"]
    dirs = [state, state / "spool", state / "spool" / "raysubmit_x"]
    for f in files:
        assert f.is_file(), f
        assert _mode(f) & 0o077 == 0, f"{f} is {_mode(f):04o}"
    for d in dirs:
        assert _mode(d) == 0o700, f"{d} is {_mode(d):04o}"


# --------------------------------------------------- issue 27: state left by an older version


def _plant(tmp_path: Path) -> dict[str, Path]:
    """What an older version (umask 022, no explicit modes) left: 0755 dirs, 0644 files,
    under the state and config dirs; links in the state dir to a file and a dir outside
    it; the simulated cluster's dir, whose modes are the sim's own; another tool's file."""
    state, config, outside = tmp_path / "state", tmp_path / "config", tmp_path / "outside"
    dirs = [state, state / "spool", state / "spool" / "raysubmit_old", state / "exports",
            config, config / "profiles", outside, state / "sim"]
    files = [state / "rlconsole.log", state / "runs.jsonl", state / "spool" / "raysubmit_old" / "driver.log",
             state / "exports" / "metrics.csv", config / "profiles" / "mine.yaml", config / "diagnosis.yaml",
             outside / "secret.txt", state / "sim" / "node1.log", state / "notes.txt"]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o755)
    for f in files:
        f.write_text("x\n")
        f.chmod(0o644)
    (state / "rlconsole.log.1").symlink_to(outside / "secret.txt")
    (state / "spool" / "link-to-file").symlink_to(outside / "secret.txt")
    (state / "spool" / "link-to-dir").symlink_to(outside)
    return {"state": state, "config": config, "outside": outside}


def _start(tmp_path: Path, d: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    """The CLI's start-up (`main`), in a real process under umask 022."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path),
           "RLCONSOLE_STATE_DIR": str(d["state"]), "RLCONSOLE_CONFIG_DIR": str(d["config"])}
    return subprocess.run([sys.executable, "-m", "tui.cli", "render", "--profile", str(GOOD)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path, preexec_fn=lambda: os.umask(0o022))


def test_start_tightens_what_an_older_version_left_and_says_so_once(tmp_path: Path) -> None:
    d = _plant(tmp_path)
    state, config, outside = d["state"], d["config"], d["outside"]
    first = _start(tmp_path, d)
    assert first.returncode == 0, first.stderr
    said = [ln for ln in first.stderr.splitlines() if "tightened permissions" in ln]
    assert said == [f"rlconsole: tightened permissions of 8 files under {state} and 4 files under {config} "
                    "(group/other access removed: they say what ran where)"], first.stderr
    for p in (state, state / "spool", state / "spool" / "raysubmit_old", state / "exports",
              config, config / "profiles"):
        assert _mode(p) == 0o700, f"{p} is {_mode(p):04o}"
    for p in (state / "rlconsole.log", state / "runs.jsonl", state / "spool" / "raysubmit_old" / "driver.log",
              state / "exports" / "metrics.csv", config / "profiles" / "mine.yaml", config / "diagnosis.yaml"):
        assert _mode(p) == 0o600, f"{p} is {_mode(p):04o}"
    # links are not followed out of rlconsole's dirs; the sim's dir keeps its modes, and
    # a file that is not rlconsole's is not touched
    assert _mode(outside) == 0o755 and _mode(outside / "secret.txt") == 0o644
    assert _mode(state / "sim") == 0o755 and _mode(state / "sim" / "node1.log") == 0o644
    assert _mode(state / "notes.txt") == 0o644

    second = _start(tmp_path, d)
    assert second.returncode == 0, second.stderr
    assert "tightened" not in second.stderr, second.stderr


async def test_console_shows_the_tightening_as_one_alert(tmp_path: Path, monkeypatch) -> None:
    """The console's screen hides stderr: the same line is a warning alert there."""
    from tui.app import RlconsoleApp
    from tui.backend.static import demo_backend
    from tui.cli.main import _startup_notices

    d = _plant(tmp_path)
    monkeypatch.setenv("RLCONSOLE_STATE_DIR", str(d["state"]))
    monkeypatch.setenv("RLCONSOLE_CONFIG_DIR", str(d["config"]))
    notices = _startup_notices()
    assert len(notices) == 1 and "tightened permissions of 8 files under" in notices[0]
    assert _startup_notices() == []  # the next start has nothing to say
    app = RlconsoleApp(demo_backend(), notices=notices)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if any(a.source == "console" for a in app.main_screen.alerts):
                break
            await pilot.pause(0.02)
        mine = [a for a in app.main_screen.alerts if a.source == "console"]
        assert [(a.level, a.message) for a in mine] == [("warning", notices[0])]


def test_a_state_dir_of_another_user_is_not_used(tmp_path: Path) -> None:
    """Issue 39 N7: `$XDG_STATE_HOME/rlconsole` made 0777 by another user (a shared place)
    was used silently: the debug log and spools were created in it, theirs to read and
    plant in. Now a command that needs the state dir refuses in one line (exit 2) and
    nothing is created there; one that does not (render) runs without its log."""
    shared = tmp_path / "shared"
    foreign = shared / "rlconsole"
    foreign.mkdir(parents=True)
    foreign.chmod(0o777)
    if os.geteuid() == 0:
        os.chown(foreign, 65534, 65534)
    else:  # (not root: a directory of root's stands for another user's)
        shared, foreign = Path("/usr"), Path("/usr/rlconsole")
        if foreign.exists() or os.stat("/usr").st_uid == os.getuid():
            import pytest

            pytest.skip("no directory of another user to point at")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "XDG_STATE_HOME": str(shared),
           "RLCONSOLE_CONFIG_DIR": str(tmp_path / "config")}
    profile = str(REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml")
    r = subprocess.run([sys.executable, "-m", "tui.cli", "runs", "-P", profile], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and "belongs to another user" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "tui.cli", "render", "-P", profile], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    if foreign.exists():
        assert list(foreign.iterdir()) == []  # no rlconsole.log, no spool/
