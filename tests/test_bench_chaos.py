"""The chaos benchmark's quick mode as a test: a real job on the simulated cluster, the
console and `watch` attached, one fault of each kind (head and worker sshd stopped, a
node away, the console SIGKILLed and restarted, a second console, a slow dashboard, a
stall, the driver log rotated, a hot card) in a seeded order; then nothing may be lost
or doubled: log lines, steps, alert episodes, notifications (benchmarks/bench_chaos.py).

It runs the benchmark as a user does (a subprocess, its own XDG dirs) and reads its
`--json` counts. In a module of its own (beside a fast check that the counts count), so
`--dist loadfile` gives it one worker while the other modules go on; it needs dockerd
(skips without, fails under CI=true).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_dockerd

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 840
"""The quick mode takes ~3-4 min on two shared cores; a hang still fails below the suite's
900 s per-test limit, with the benchmark's output."""


@pytest.mark.integration
def test_quick_chaos_loses_and_doubles_nothing(tmp_path: Path) -> None:
    require_dockerd()
    env = dict(os.environ)
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    env["TMPDIR"] = str(tmp_path)
    for var in ("RLCONSOLE_STATE_DIR", "RLCONSOLE_SIM_DIR", "RLCONSOLE_PROFILE", "RLCONSOLE_STATIC_BACKEND"):
        env.pop(var, None)
    try:
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_chaos.py"), "--quick", "--json"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(f"bench_chaos --quick did not finish within {TIMEOUT_S}s:\n{err[-4000:]}")
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stderr.startswith("seed "), r.stderr[:200]  # the seed first, to replay a failure
    res = json.loads(r.stdout)
    assert set(res) == {"seed", "faults", "lost_lines", "duplicated_lines", "steps_missed", "steps_duplicated",
                        "alerts_unended", "alerts_doubled", "notifications_doubled", "console_restarts",
                        "rss_mb_max"}
    faults = r.stderr[-3000:]
    assert res["faults"] >= 6, faults
    assert res["console_restarts"] >= 1 and res["rss_mb_max"] > 0, res
    counts = {k: v for k, v in res.items() if k not in ("seed", "faults", "console_restarts", "rss_mb_max")}
    assert counts == dict.fromkeys(counts, 0), f"seed {res['seed']} (replay: --seed): {counts}\n{faults}"


def test_the_counts_count(tmp_path: Path) -> None:
    """The benchmark's measures can fail: a lost line, a duplicated one, a missed and a
    doubled step, an episode opened twice or never ended, two notifications for one
    episode are each counted (a measure that reads 0 whatever happened proves nothing)."""
    from benchmarks.bench_chaos import MARKER_PREFIX, check_alerts, check_notifications, compare_log, step_counts

    rot, cur, spool = tmp_path / "rotated.log", tmp_path / "driver.log", tmp_path / "spool.log"
    rot.write_bytes(b"a\nb\r\n")
    cur.write_bytes(b"c\nd\n")
    spool.write_bytes(b"a\nb\r\n" + MARKER_PREFIX.encode() + b"truncated ----\nc\nd\n")
    assert compare_log([rot, cur], spool) == (0, 0)  # the marker is not a line of the job's
    spool.write_bytes(b"a\nb\r\nc\nc\n")
    assert compare_log([rot, cur], spool) == (1, 1)  # d lost, c doubled
    assert step_counts([1, 2, 2, 4], 4) == (1, 1)
    eps = {"stall": [("open", 10.0), ("end", 20.0), ("open", 30.0), ("end", 40.0)],
           "node:n2": [("open", 10.0), ("open", 12.0), ("end", 15.0)],
           "card:n1:0:hot": [("open", 50.0)],
           "job-end": [("open", 60.0)]}
    assert check_alerts(eps) == (1, 1, 6)  # the card never ended, node:n2 opened while open
    bodies = [{"key": "stall", "time": 10.5}, {"key": "stall", "time": 30.5},  # one per episode
              {"key": "node:n2", "time": 11.0}, {"key": "node:n2", "time": 14.0}]  # two in one
    assert check_notifications(eps, bodies) == 1
    # two episodes of one key a second apart (a worker's sshd stopped, then the node
    # away: seed 188939197), one notification each: nothing doubled; the second's
    # notification is within the first's slack, but inside the second
    eps = {"node:node2": [("open", 999.2), ("end", 1002.7), ("open", 1003.7), ("end", 1013.2)]}
    bodies = [{"key": "node:node2", "time": 999.2}, {"key": "node:node2", "time": 1003.7}]
    assert check_notifications(eps, bodies) == 0
    bodies.append({"key": "node:node2", "time": 1004.0})
    assert check_notifications(eps, bodies) == 1
