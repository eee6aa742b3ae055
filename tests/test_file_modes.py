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
from tui.core.jobwatch import spool_dir
from tui.core.logspool import LogSpool
sp = LogSpool(spool_dir() / "raysubmit_x" / "driver.log")
sp.append(b"step:1 - a:1\n")
sp.save_index()
from tui.core.history import RunRecord, record_run
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
