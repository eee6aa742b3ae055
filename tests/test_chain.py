"""The whole seed procedure, headless, on the simulated cluster: real SSH, real dockerd,
real Ray (4 nodes, 32 declared GPUs), the stand-in VeRL tree.

containers -> model -> convert -> setup-ray -> submit -> (steps) -> stop -> stop --cluster,
checking the state after each step; every action run twice says "nothing to do" the
second time; failing steps (a converter that exits non-zero, a worker that cannot join,
a submit while a job runs) give one line naming the node and the command's output.
(Preflight on the correct profile and on each planted fault: test_chain_preflight.py, on
the worker's sim with Ray kept up.)
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ray_logs, require_dockerd
from tui.cli import main
from tui.core.profile import load_profile
from tui.core.state import ClusterState

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chain_sim(shared_sim: Any) -> Path:
    """The worker's shared 4 x 8 sim (as `sim up` left it; put back so when the module
    ends), with this module's own console state dir."""
    require_dockerd()
    return Path(shared_sim.profile_path)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def snapshot(profile_path: Path) -> ClusterState:
    from tui.core.probes import snapshot as snap

    return asyncio.run(snap(load_profile(profile_path)))


def variant(src: Path, dst: Path, edit: Any) -> Path:
    data = yaml.safe_load(src.read_text())
    edit(data)
    dst.write_text(yaml.safe_dump(data, sort_keys=False))
    return dst


def test_the_whole_chain(chain_sim: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole_chain(chain_sim, tmp_path, capsys)


def whole_chain(chain_sim: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], failures: bool = True,
                stop_cluster: bool = True) -> None:
    """The chain on the sim at `chain_sim` (any shape, any SSH server: test_sim_openssh
    runs it on OpenSSH's sshd, tests/nonroot_chain.py as a user without Docker).

    `failures=False` leaves out the failure cases (a converter that fails, a half-written
    checkpoint, a worker that cannot join Ray, then starting only that worker): they are
    the actions' own logic, the same over any SSH server and container runtime, and run
    here on the 4 x 8 sim (test_the_whole_chain); the worker that cannot join alone is a
    third of a chain's time (its join deadline). Every step of the chain, its idempotent
    second run and its output stay in either way.

    `stop_cluster=False` ends with the job stopped and Ray left up, for a caller that runs
    more on this Ray (test_sim_openssh: the backend contract) and stops the cluster itself
    (`stop_the_cluster`)."""
    P = ["--profile", str(chain_sim)]
    prof = load_profile(chain_sim)
    n = len(prof.nodes)
    cards = sum(nd.gpus for nd in prof.nodes)
    last_node = prof.nodes[-1].name

    # -- containers
    rc, out, _ = run(["containers", *P, "--yes"], capsys)
    assert rc == 0, out
    st = snapshot(chain_sim)
    assert [nd.container.status for nd in st.nodes] == ["running"] * n
    rc, out, _ = run(["containers", *P, "--yes"], capsys)
    assert rc == 0 and "nothing to do" in out.splitlines()[-1]

    # -- model
    rc, out, _ = run(["model", *P, "--yes"], capsys)
    assert rc == 0, out
    assert (Path(prof.paths.hf_model) / "config.json").exists()
    rc, out, _ = run(["model", *P, "--yes"], capsys)
    assert rc == 0 and "nothing to do" in out.splitlines()[-1]

    # -- convert: a failing converter first (an unknown flag: argparse exits 2)
    mcore = Path(prof.paths.mcore_checkpoint)
    if failures:
        bad = variant(chain_sim, tmp_path / "badconv.yaml",
                      lambda d: d["convert"].update(extra_args=["--no-such-flag"]))
        rc, out, _ = run(["convert", "--profile", str(bad), "--yes"], capsys)
        last = out.splitlines()[-1]
        assert rc == 1 and last.startswith("convert: [node1] FAILED: converter exited 2"), last
        assert "--no-such-flag" in last or "unrecognized" in last
        for leftover in mcore.glob("*") if mcore.exists() else []:
            leftover.unlink()
    rc, out, _ = run(["convert", *P, "--yes"], capsys)
    assert rc == 0, out
    names = {p.name for p in mcore.iterdir()}
    assert {".metadata", "common.pt"} <= names and any(n.endswith(".distcp") for n in names)
    rc, out, _ = run(["convert", *P, "--yes"], capsys)
    assert rc == 0 and "already holds a complete checkpoint" in out
    if failures:
        # a half-written output is detected, not silently skipped
        (mcore / "common.pt").unlink()
        rc, out, _ = run(["convert", *P, "--yes"], capsys)
        assert rc == 1 and "half-written" in out and "common.pt" in out
        rc, out, _ = run(["convert", *P, "--yes", "--force"], capsys)
        assert rc == 0 and (mcore / "common.pt").exists(), out

    # -- setup-ray: a worker that cannot join first
    if failures:
        def break_worker(d: dict) -> None:
            d["nodes"][-1]["ray_args"] = d["nodes"][-1]["ray_args"] + ["--no-such-ray-flag"]
            d["ray"]["join_timeout_s"] = 40
        broken = variant(chain_sim, tmp_path / "badray.yaml", break_worker)
        rc, out, _ = run(["setup-ray", "--profile", str(broken), "--yes"], capsys)
        last = out.splitlines()[-1]
        assert rc == 1 and f"did not join: {last_node}" in last, out[-2000:]
        assert "no-such-ray-flag" in last or "no such option" in last.lower()

    # with the right profile (after the failure: only the node that is missing is started)
    rc, out, _ = run(["setup-ray", *P, "--yes"], capsys)
    assert rc == 0, out[-2000:] + "\n" + ray_logs(chain_sim.parent)
    if failures:
        assert f"starting only {last_node}" in out
    st = snapshot(chain_sim)
    assert st.ray.available and st.ray.nodes_alive == n and int(st.ray.gpus_total) == cards
    rc, out, _ = run(["setup-ray", *P, "--yes"], capsys)
    assert rc == 0 and "nothing changed" in out.splitlines()[-1]

    # -- submit (runs the preflight first: the sim's profile passes it)
    rc, out, _ = run(["submit", *P, "--yes"], capsys)
    assert rc == 0, out[-3000:] + "\n" + ray_logs(chain_sim.parent)
    job_id = json.loads((Path(__import__("os").environ["RLCONSOLE_STATE_DIR"]) / "runs.jsonl").read_text().splitlines()[-1])["job_id"]
    rc, out, _ = run(["submit", *P, "--yes", "--skip-checks"], capsys)
    last = out.splitlines()[-1]
    assert rc == 1 and "a job is already running" in last and job_id in last

    # steps arrive: status --json shows step, total, throughput, reward, checkpoint
    deadline = time.monotonic() + 120
    job: dict = {}
    while time.monotonic() < deadline:
        rc, out, _ = run(["status", *P, "--json"], capsys)
        job = json.loads(out)["job"] or {}
        if job.get("status") == "RUNNING" and (job.get("step") or 0) >= 6 and job.get("last_checkpoint"):
            break
        time.sleep(2)
    assert job.get("id") == job_id and job["status"] == "RUNNING", job
    assert job["step"] >= 6 and job["total_steps"] and job["total_steps"] > job["step"]
    assert "perf/throughput" in job["metrics"] and "critic/rewards/mean" in job["metrics"]
    assert job["last_checkpoint"] >= 5
    busy = [c for n in json.loads(run(["status", *P, "--json"], capsys)[1])["nodes"] for c in n["gpus"]
            if (c["util_pct"] or 0) > 0]
    assert len(busy) == cards
    # check while the job runs: its cards busy with its workers are no finding; the running
    # job is a warning whose fix a command-line user can follow
    rc, out, _ = run(["check", *P, "--json"], capsys)
    res = {(r["id"], r["node"]): r for r in json.loads(out)["results"]}
    free = [r for (i, _), r in res.items() if i == "cards.free"]
    assert free and all(r["status"] == "pass" and job_id in r["message"] for r in free), free
    jobs = res[("ray.jobs", None)]
    assert jobs["status"] == "warn" and job_id in jobs["message"] and "rlconsole stop" in jobs["fix"], jobs

    # -- logs: the driver log, with VeRL step lines
    rc, out, _ = run(["logs", *P], capsys)
    assert rc == 0 and "Total training steps:" in out and "(TaskRunner pid=" in out and " step:1 - " in out
    rc, tail, _ = run(["logs", *P, "--tail", "3"], capsys)
    # split on \n only: tqdm lines hold \r, which splitlines() would also split on
    later = run(["logs", *P], capsys)[1].rstrip("\n").split("\n")  # the job keeps writing: a superset
    t = tail.rstrip("\n").split("\n")
    assert rc == 0 and len(t) == 3 and any(later[i:i + 3] == t for i in range(len(later)))
    # -- metrics --job: the spool `logs` filled, read locally
    rc, out, _ = run(["metrics", "--job", job_id], capsys)
    assert rc == 0 and any(r["step"] == 1 for r in json.loads(out))

    # -- stop, then stop again (a no-op), then the cluster
    rc, out, _ = run(["stop", *P, "--yes"], capsys)
    assert rc == 0 and "every card is free" in out.splitlines()[-1], out[-2000:]
    st = snapshot(chain_sim)
    assert all((c.util_pct or 0) == 0 for nd in st.nodes for c in nd.gpus)
    rc, out, _ = run(["stop", *P, "--yes"], capsys)
    assert rc == 0 and "nothing to do" in out.splitlines()[-1]
    if stop_cluster:
        stop_the_cluster(chain_sim, capsys)


def stop_the_cluster(chain_sim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The chain's last step: `stop --cluster`, and Ray is gone."""
    rc, out, _ = run(["stop", "--profile", str(chain_sim), "--yes", "--cluster"], capsys)
    assert rc == 0, out[-2000:]
    st = snapshot(chain_sim)
    assert not st.ray.available


def test_actions_refuse_headless_without_yes(chain_sim: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    rc, out, err = run(["stop", "--profile", str(chain_sim)], capsys)
    assert rc == 2 and "refusing without --yes" in err and out == ""
