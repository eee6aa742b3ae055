"""Runs side by side (issue 30 item 2): another run's series read from its local spool,
a resumed run stitched onto its parent by step, and `rlconsole metrics --job A --job B`."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tui.cli import main
from tui.core.job.compare import load_run_series, side_by_side, stitch
from tui.core.job.history import RunRecord, record_run
from tui.core.locations import spool_root


def _spool(job: str, steps: range, reward: float) -> None:
    d = spool_root() / job
    d.mkdir(parents=True, exist_ok=True)
    (d / "driver.log").write_text("".join(
        f"(TaskRunner pid=1) step:{s} - critic/score/mean:{reward + s / 100} - timing_s/step:10.0\n"
        for s in steps))


def _history(job: str, parent: str | None = None, step: int | None = None) -> None:
    extra = {"parent": {"job_id": parent, "step": step}} if parent else {}
    record_run(RunRecord(profile="p", profile_path="/p.toml", job_id=job, submitted_at=1.0,
                         entrypoint=["python3"], runtime_env={}, extra=extra))


def test_stitch_takes_the_parent_up_to_the_childs_first_step() -> None:
    parent = [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)]
    child = [(4, 1.4), (3, 1.3), (5, 1.5)]
    assert stitch(parent, child) == [(1, 0.1), (2, 0.2), (3, 1.3), (4, 1.4), (5, 1.5)]
    assert stitch(parent, []) == parent and stitch([], child) == sorted(child)


def test_a_resumed_run_continues_its_parent_from_the_spools() -> None:
    _spool("raysubmit_a", range(1, 7), 0.0)      # ran to step 6, checkpoint at 4
    _spool("raysubmit_b", range(5, 9), 1.0)      # resumed from 4: steps 5..8
    _spool("raysubmit_c", range(1, 4), 2.0)      # unrelated
    _history("raysubmit_a")
    _history("raysubmit_b", "raysubmit_a", 4)
    _history("raysubmit_c")
    got = load_run_series("raysubmit_b", ["reward", "critic/score/mean"])
    assert got == [(1, 0.01), (2, 0.02), (3, 0.03), (4, 0.04), (5, 1.05), (6, 1.06), (7, 1.07), (8, 1.08)]
    assert load_run_series("raysubmit_c", ["critic/score/mean"]) == [(1, 2.01), (2, 2.02), (3, 2.03)]
    assert load_run_series("raysubmit_c", ["nope"]) == []
    assert load_run_series("raysubmit_gone", ["critic/score/mean"]) == []


def test_a_loop_in_the_history_ends_the_chain() -> None:
    _spool("raysubmit_x", range(1, 3), 0.0)
    _spool("raysubmit_y", range(2, 4), 1.0)
    _history("raysubmit_x", "raysubmit_y", 1)
    _history("raysubmit_y", "raysubmit_x", 1)
    assert load_run_series("raysubmit_y", ["critic/score/mean"]) == [(1, 0.01), (2, 1.02), (3, 1.03)]


def test_metrics_two_jobs_side_by_side_csv(capsys: pytest.CaptureFixture[str]) -> None:
    _spool("raysubmit_a", range(1, 7), 0.0)
    _spool("raysubmit_b", range(5, 9), 1.0)
    _spool("raysubmit_c", range(1, 4), 2.0)
    _history("raysubmit_b", "raysubmit_a", 4)
    assert main(["metrics", "--job", "raysubmit_b", "--job", "raysubmit_c", "--key", "critic/score/mean",
                 "--csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["step", "raysubmit_b:critic/score/mean", "raysubmit_c:critic/score/mean"]
    assert rows[1] == ["1", "0.01", "2.01"] and rows[3] == ["3", "0.03", "2.03"]
    assert rows[4] == ["4", "0.04", ""] and rows[5] == ["5", "1.05", ""] and rows[-1] == ["8", "1.08", ""]
    assert main(["metrics", "--job", "raysubmit_b", "--job", "raysubmit_c", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["metrics"]["raysubmit_c:timing_s/step"] == 10.0 and len(data) == 8
    assert side_by_side(["raysubmit_c"], ["timing_s/step"])[0] == {"step": 1, "metrics": {
        "raysubmit_c:timing_s/step": 10.0}}


@pytest.mark.parametrize("argv", [["--job", "../x", "--job", "raysubmit_a"],
                                  ["--job", "raysubmit_nothere", "--job", "raysubmit_a"],
                                  ["--job", "raysubmit_a", "--key", "x"]])
def test_metrics_jobs_bad_input_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    _spool("raysubmit_a", range(1, 3), 0.0)
    assert main(["metrics", *argv, "--csv"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert ("--key" if "--key" in argv else argv[1]) in err
