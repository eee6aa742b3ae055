"""The run history survives a full disk (issue 15, item 12).

`record_run` ignored a short write: the torn record was followed by the next one on the
same line and both were lost. A real short write is made here with RLIMIT_FSIZE (the
kernel writes what fits and stops, as on a full disk) in a child process: the record that
did not fit must be reported, and the next record, written when there is room again,
must read back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tui.core.job.history import RunRecord, history_path, record_run, runs

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import resource, signal, sys, os
from tui.core.job.history import RunRecord, record_run, history_path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # EFBIG / a short count instead of a kill
size = history_path().stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, size + 40))
try:
    record_run(RunRecord(profile="p", profile_path="/x", job_id="torn", submitted_at=2.0,
                         entrypoint=["python3"] * 20, runtime_env={"env_vars": {}}))
except OSError as e:
    print("ERR", e)
    sys.exit(3)
print("OK")
"""


def _rec(job_id: str, t: float) -> RunRecord:
    return RunRecord(profile="p", profile_path="/x", job_id=job_id, submitted_at=t,
                     entrypoint=["python3", "-m", "verl"], runtime_env={"env_vars": {"A": "1"}})


def test_short_write_is_reported_and_the_next_record_survives(tmp_path: Path) -> None:
    record_run(_rec("first", 1.0))
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                               "RLCONSOLE_STATE_DIR": str(history_path().parent)})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "bytes written" in proc.stdout and "not recorded" in proc.stdout
    raw = history_path().read_bytes()
    assert not raw.endswith(b"\n")  # the torn record really is on disk, unterminated
    record_run(_rec("after", 3.0))
    assert [r.job_id for r in runs("p")] == ["first", "after"]
    last = history_path().read_text().splitlines()[-1]
    assert json.loads(last)["job_id"] == "after"


def test_a_torn_line_from_any_writer_costs_only_itself(tmp_path: Path) -> None:
    record_run(_rec("a", 1.0))
    with history_path().open("a") as f:
        f.write('{"profile": "p", "job_id": "half')  # a crash mid-record, no newline
    record_run(_rec("b", 2.0))
    record_run(_rec("c", 3.0))
    assert [r.job_id for r in runs("p")] == ["a", "b", "c"]
