"""Two runs on the simulated cluster, the second resumed from the first's checkpoint
(issue 30, items 1, 3, 4, end to end: real SSH, real dockerd, real Ray, the stand-in
trainer). A `watch`-like LiveBackend follows the jobs; submit and stop run from the CLI.
`runs --json` shows both with GPU-hours and the parent link; `journal --markdown` of the
second names its submit, its stop and the alerts it raised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.test_sim_faults import BgWatch, _set
from tui.cli import main
from tui.core.job.history import last_run
from tui.core.profile import load_profile

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sim(ray_sim: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The worker's shared sim with Ray up (`ray_sim`), through a profile of this
    module's: long jobs, a checkpoint every 2 steps, a step every 0.5 s (the job's own
    environment), the console refreshing every 0.5 s."""
    data = yaml.safe_load(Path(ray_sim.profile_path).read_text())
    o = data["training"]["overrides"]
    _set(o, "trainer.total_epochs", 1000)
    _set(o, "trainer.save_freq", 2)
    data.setdefault("env", {})["RLCONSOLE_SIM_STEP_S"] = "0.5"
    data["monitoring"].update(refresh_s=0.5)
    path = tmp_path_factory.mktemp("runs-profile") / "runs.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    yield path


def _checkpoints(w: BgWatch, job_id: str) -> list[int]:
    b: Any = w.backend
    if b.watcher is None or b.watcher.job_id != job_id:
        return []
    return [e.data["step"] for e in b.journal() if e.kind == "checkpoint"]


def _state(w: BgWatch, job_id: str) -> str | None:
    b: Any = w.backend
    if b.watcher is None or b.watcher.job_id != job_id:
        return None
    states = [e.data["status"] for e in b.journal() if e.kind == "state"]
    return states[-1] if states else None


def test_two_runs_the_second_resumed(sim: Path, ray_sim: Any, capsys: pytest.CaptureFixture[str]) -> None:
    P = ["--profile", str(sim)]
    name = load_profile(sim).name
    w = BgWatch(sim)
    try:
        assert main(["submit", *P, "--yes", "--skip-checks"]) == 0
        first = last_run(name)
        assert first is not None
        w.until(lambda: _state(w, first.job_id) == "RUNNING", "the first run RUNNING in its journal")
        w.until(lambda: any(s >= 2 for s in _checkpoints(w, first.job_id)), "a checkpoint of the first run")
        assert main(["stop", *P, "--yes"]) == 0
        w.until(lambda: _state(w, first.job_id) == "STOPPED", "the first run STOPPED")
        capsys.readouterr()

        assert main(["submit", *P, "--yes", "--skip-checks"]) == 0
        out = capsys.readouterr().out
        second = last_run(name)
        assert second is not None and second.job_id != first.job_id
        parent = second.extra["parent"]
        assert parent["job_id"] == first.job_id and parent["step"] >= 2
        assert f"resuming step {parent['step']} of {first.job_id}" in out
        w.until(lambda: _state(w, second.job_id) == "RUNNING", "the second run RUNNING")
        mark = len(w.alerts)
        assert main(["sim", "fault", "card-hot", "--node", "node2", "--card", "3"]) == 0
        w.until(lambda: w.opened("card:node2:3:hot", mark), "node2 card 3 hot")
        assert main(["sim", "fault", "clear"]) == 0
        w.until(lambda: w.ended("card:node2:3:hot", mark), "the card cool again")
        assert main(["stop", *P, "--yes"]) == 0
        w.until(lambda: _state(w, second.job_id) == "STOPPED", "the second run STOPPED")
    finally:
        w.close()
    capsys.readouterr()

    assert main(["runs", "--json", *P]) == 0
    got = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    a, b = got[first.job_id], got[second.job_id]
    assert a["gpu_hours"] > 0 and b["gpu_hours"] > 0 and a["cards"] == ray_sim.gpus
    assert b["parent"] == {"job_id": first.job_id, "step": parent["step"]} and a["parent"] is None
    assert a["status"] == b["status"] == "STOPPED" and b["step"] and b["total_steps"]

    assert main(["journal", second.job_id, "--markdown", *P]) == 0
    md = capsys.readouterr().out
    timeline = md.split("## Timeline")[1].split("## Diagnosis")[0]
    assert f"Resumed from step {parent['step']} of run {first.job_id}".replace("_", "\\_") in md
    assert "submit finished: submitted" in timeline and "stop finished" in timeline
    for key_text in ("node2 card 3 at 93", "ended: "):
        assert key_text in timeline, timeline
    hot = [ln for ln in timeline.splitlines() if "node2 card 3" in ln]
    assert len([ln for ln in hot if "ended" not in ln]) >= 1
    # watched by the backend and by the CLI's status/stop: each state once
    from tui.core.job.journal import Journal

    states = [e.data["status"] for e in Journal.for_job(second.job_id).entries() if e.kind == "state"]
    assert states.count("STOPPED") == 1 and states.count("RUNNING") == 1, states
