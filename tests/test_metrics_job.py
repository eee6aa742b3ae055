"""`rlconsole metrics --job ID` reads the job's locally spooled driver log (no SSH)."""

from __future__ import annotations

import json

import pytest

from tui.cli import main
from tui.core.job.watcher import spool_dir


def test_metrics_from_the_spool(capsys: pytest.CaptureFixture[str]) -> None:
    d = spool_dir() / "raysubmit_abc"
    d.mkdir(parents=True)
    (d / "driver.log").write_text(
        "(TaskRunner pid=1) step:1 - critic/score/mean:0.25 - timing_s/step:10.0\n"
        "(TaskRunner pid=1) step:2 - critic/score/mean:0.50 - timing_s/step:11.0\n")
    assert main(["metrics", "--job", "raysubmit_abc"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["step"] for r in rows] == [1, 2]
    assert main(["metrics", "--job", "raysubmit_abc", "--csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("step")


@pytest.mark.parametrize("job", ["../etc", "a/b", "..", "nothere"])
def test_metrics_job_refuses_paths_and_unknown(job: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--job", job]) == 2
    err = capsys.readouterr().err
    assert "--job" in err and "Traceback" not in err


def test_metrics_needs_exactly_one_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics"]) == 2
    assert "SOURCE" in capsys.readouterr().err
