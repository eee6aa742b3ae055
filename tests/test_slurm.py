"""Bring-up through Slurm (issue 38) on `sim up --slurm`: a real Slurm (Debian's munged,
slurmctld, one slurmd a node in its own UTS + mount namespace) runs the simulated nodes.

One Slurm sim for the module (2 nodes x 2 cards: the chain is the costly part). The chain
is the headless one a user runs: status before any allocation (the nodes slurm1.. down,
saying why), containers (gets the allocation: one sbatch holder job; a second containers
reuses it), convert, setup-ray, submit, steps with the allocation's time left in
`status --json`, the walltime warning, then the backend contract on that allocation and
Ray, then `stop --cluster` refusing without --yes and naming the Slurm job, and `--yes`
releasing it (squeue empty). Then `sim down` with a job queued cancels it and
stops every daemon by PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ray_logs, require_slurm
from tui.cli import main

pytestmark = pytest.mark.integration

CHAIN_S = 420.0  # a phase's bound: the machine is shared


@pytest.fixture(scope="module")
def slurm_sim(tmp_path_factory: pytest.TempPathFactory) -> Any:
    require_slurm()
    from tui.sim.cluster import sim_down, sim_up

    mp = pytest.MonkeyPatch()
    state = tmp_path_factory.mktemp("slurm-state")
    mp.setenv("RLCONSOLE_STATE_DIR", str(state / "console"))  # the allocation record, across the module's tests
    sim = tmp_path_factory.mktemp("slurm-sim")
    try:
        path = Path(sim_up(2, 2, state_dir=sim, slurm=True))
        yield sim, path
    finally:
        sim_down(state_dir=sim)
        mp.undo()


@pytest.fixture(autouse=True)
def _queue_left_empty(request: pytest.FixtureRequest) -> Any:
    """A test of the Slurm sim that failed half-way leaves its allocation: cancelled after
    it, so that the module's next tests start on an empty queue (they wait for one) and
    fail only for their own reasons."""
    yield
    if "slurm_sim" not in request.fixturenames:
        return
    sim, _ = request.getfixturevalue("slurm_sim")
    if not (sim / "state.json").exists():  # the test took the sim down itself
        return
    left = [j.split()[0] for j in squeue(sim)]
    if left:
        subprocess.run(["scancel", *left], env=slurm_env(sim), capture_output=True, timeout=30)


def slurm_env(sim: Path) -> dict[str, str]:
    return dict(os.environ, SLURM_CONF=str(sim / "slurm" / "slurm.conf"))


def squeue(sim: Path) -> list[str]:
    r = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, env=slurm_env(sim), timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.split("\n")[:-1]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def status_json(P: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    rc, out, err = run(["status", "--json", *P], capsys)
    assert rc == 0, err
    return json.loads(out)


def until(what: str, cond: Any, timeout: float = CHAIN_S, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def test_the_slurm_sim_is_a_real_slurm(slurm_sim: Any) -> None:
    """sinfo lists the nodes idle with their fake GPUs; each node's step sees its own host
    name and address and the node's own tools first on PATH (its TaskProlog)."""
    sim, path = slurm_sim
    env = slurm_env(sim)
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t %G"], capture_output=True, text=True, env=env, timeout=30)
    assert sorted(r.stdout.split("\n")[:-1]) == ["node1 idle gpu:2", "node2 idle gpu:2"], r.stdout + r.stderr
    r = subprocess.run(["srun", "-N2", "--gpus-per-node=1", "-l", "sh", "-c",
                        "echo $(hostname) $(hostname -i) $CUDA_VISIBLE_DEVICES $(command -v docker)"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.split("\n")[:-1])
    assert lines == [f"0: node1 127.0.0.2 0 {sim}/nodes/node1/bin/docker",
                     f"1: node2 127.0.0.3 0 {sim}/nodes/node2/bin/docker"], r.stdout
    assert "scheduler: slurm" in path.read_text() and "transport: srun" in path.read_text()


def short_walltime(path: Path, dst: Path) -> Path:
    """The sim's Slurm profile with a walltime (10 min) shorter than its run (160 steps at
    5 s a step): the walltime warning's case."""
    import yaml

    data = yaml.safe_load(path.read_text())
    data["cluster"]["time"] = "10"
    data["training"].setdefault("env", {})["RLCONSOLE_SIM_STEP_S"] = "5"
    dst.write_text(yaml.safe_dump(data, sort_keys=False))
    return dst


async def _walltime_alert(path: Path) -> Any:
    import asyncio

    from tui.backend.live import LiveBackend
    from tui.core.profile import load_profile

    b = LiveBackend(load_profile(path))
    alerts: list[Any] = []
    b.subscribe_alerts(alerts.append)
    await asyncio.wait_for(b.start(), 60)
    try:
        while True:
            found = next((a for a in alerts if a.source == "slurm"), None)
            if found is not None:
                return found
            await asyncio.sleep(0.5)
    finally:
        await asyncio.wait_for(b.stop(), 60)


def test_chain_through_slurm(slurm_sim: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import asyncio

    sim, sim_profile = slurm_sim
    path = short_walltime(sim_profile, tmp_path / "slurm-short.yaml")
    P = ["--profile", str(path)]
    until("an empty queue", lambda: squeue(sim) == [], 60)

    # -- before any allocation: the nodes are slurm1.. and say why they are down
    st = status_json(P, capsys)
    assert [n["name"] for n in st["nodes"]] == ["slurm1", "slurm2"]
    assert not any(n["reachable"] for n in st["nodes"])
    assert "no Slurm allocation" in st["nodes"][0]["error"]
    assert st["allocation"]["job_id"] is None and st["allocation"]["state"] == "NONE"

    # -- containers gets the allocation (one holder job), then the containers on its nodes
    rc, out, err = run(["containers", "--yes", *P], capsys)
    assert rc == 0, out + err
    assert "asking Slurm for 2 nodes x 2 GPUs" in out and "runs on node1, node2; head node1" in out
    jobs = squeue(sim)
    assert len(jobs) == 1 and jobs[0].endswith("RUNNING"), jobs
    job = jobs[0].split()[0]
    # a second console's containers reuses it: never a second allocation
    rc, out, err = run(["containers", "--yes", *P], capsys)
    assert rc == 0, out + err
    assert f"using Slurm job {job} on node1, node2" in out and "sbatch" not in out
    assert squeue(sim) == jobs

    st = status_json(P, capsys)
    assert [n["name"] for n in st["nodes"]] == ["node1", "node2"]
    assert all(n["reachable"] and n["container"]["status"] == "running" for n in st["nodes"])
    a = st["allocation"]
    assert a["job_id"] == job and a["state"] == "RUNNING" and a["nodes"] == ["node1", "node2"]
    assert 0 < a["time_left_s"] <= 600

    # -- the rest of the chain, every command over srun job steps
    for cmd in (["convert", "--yes"], ["setup-ray", "--yes"], ["submit", "--yes"]):
        rc, out, err = run([*cmd, *P], capsys)
        assert rc == 0, f"{cmd}: " + (out + err)[-2000:] + "\n" + ray_logs(sim)
    got = until("three training steps in status --json",
                lambda: (lambda s: s if s["job"] and (s["job"]["step"] or 0) >= 3 else None)(status_json(P, capsys)))
    assert got["job"]["status"] == "RUNNING" and got["ray"]["nodes_alive"] == 2 and got["ray"]["gpus_total"] == 4
    assert got["allocation"]["state"] == "RUNNING"
    rc, out, _ = run(["status", *P], capsys)
    assert f"Allocation: Slurm job {job} RUNNING on node1,node2" in out

    # -- the walltime (10 min) ends before the run's ETA (160 steps x 5 s): the console warns
    alert = asyncio.run(asyncio.wait_for(_walltime_alert(path), 240))
    assert alert.level == "warning" and alert.key == "walltime", alert
    assert f"the allocation (Slurm job {job}) ends in" in alert.message, alert.message
    assert "of 160: the last checkpoint before it is step" in alert.message, alert.message

    # -- the backend contract on this allocation and this Ray: its containers, convert and
    # setup-ray find their work done (done above over srun), one Slurm sim and one Ray
    # bring-up for both (issue 37). The chain's job stopped first (a submit waits for it);
    # the allocation given the time the contract needs (root may raise a job's limit).
    rc, out, err = run(["stop", "--yes", *P], capsys)
    assert rc == 0, out + err
    r = subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=60"], capture_output=True, text=True,
                       env=slurm_env(sim), timeout=30)
    assert r.returncode == 0, r.stderr
    asyncio.run(_contract_on_the_allocation(sim_profile))
    capsys.readouterr()

    # -- stop --cluster: asks first, naming the Slurm job; --yes releases it
    rc, out, err = run(["stop", "--cluster", *P], capsys)
    assert rc != 0 and f"release Slurm job {job} (scancel)" in err, err
    assert squeue(sim) == jobs
    rc, out, err = run(["stop", "--cluster", "--yes", *P], capsys)
    assert rc == 0, out + err
    assert f"Slurm job {job} cancelled" in out
    assert out.count("container train-rl stopped") == 2, out  # before scancel: dockerd's outlive it
    assert [_container_status(sim, n) for n in ("node1", "node2")] == ["exited", "exited"]
    until("the queue to empty", lambda: squeue(sim) == [], 60)
    st = status_json(P, capsys)
    assert st["allocation"]["state"] == "NONE" and not any(n["reachable"] for n in st["nodes"])


async def _contract_on_the_allocation(path: Path) -> None:
    """tests/test_backend_contract.py's contract on LiveBackend over the srun transport, in
    the allocation the profile has (its nodes found as a second console finds them)."""
    from tests.test_backend_contract import live_contract, within
    from tui.core import slurm as core_slurm
    from tui.core.profile import load_profile

    prof = load_profile(path)

    async def allocation() -> list[Any]:
        return [ev async for ev in core_slurm.acquire(prof, "containers")]
    evs = await within("the allocation", allocation(), 120)
    assert evs[-1].kind == "step" and [n.name for n in prof.nodes] == ["node1", "node2"], evs[-1]
    await live_contract("live-slurm", prof, path.parent, 2, 2)


def _container_status(sim: Path, node: str) -> str:
    """The node's container as its own `docker` says (the node's environment, as Slurm's
    TaskProlog gives its tasks), outside any allocation."""
    env = dict(os.environ)
    for line in (sim / "nodes" / node / "task.env").read_text().splitlines():
        k, _, v = line.removeprefix("export ").partition("=")
        env[k] = v
    r = subprocess.run([str(sim / "nodes" / node / "bin" / "docker"), "inspect", "--format", "{{.State.Status}}",
                        "train-rl"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


async def _keys_u_c_r_s_and_x(path: Path, sim: Path) -> None:
    from tests.pilot_helpers import SIZE, key_runs, settle
    from tests.pilot_helpers import until as pilot_until
    from tui.app import RlconsoleApp
    from tui.backend.live import LiveBackend
    from tui.core.profile import load_profile
    from widgets.confirm import ConfirmationModal
    from widgets.ray_pane import RayPane

    app = RlconsoleApp(LiveBackend(load_profile(path)), bell=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        b = app.backend
        main = app.main_screen

        # before any allocation: the nodes are slurm1.., down, and the allocation NONE
        await pilot_until(pilot, lambda: b.state is not None and b.state.allocation is not None
                          and b.state.allocation.state == "NONE", 60)
        assert [n.name for n in b.state.nodes] == ["slurm1", "slurm2"] and not any(n.reachable for n in b.state.nodes)
        await pilot.press("u")
        await pilot_until(pilot, lambda: isinstance(app.screen, ConfirmationModal), 120)
        assert "Ask Slurm for 2 nodes x 2 GPUs for 4:00:00 in partition sim" in app.screen.message
        await pilot.press("y")
        # the console's nodes keep their names and learn where they are: reachable, cards reporting
        await pilot_until(pilot, lambda: b.state is not None and b.state.allocation.state == "RUNNING"
                          and all(n.reachable and n.gpu and len(n.gpu.cards) == 2 for n in b.state.nodes), 180)
        assert b.state.allocation.nodes == ["node1", "node2"]
        assert [n.address for n in b.state.nodes] == ["127.0.0.2", "127.0.0.3"]
        await settle(pilot)
        await pilot_until(pilot, lambda: "Slurm job" in str(app.screen.query_one(RayPane).render()), 30)
        await pilot_until(pilot, lambda: "containers" not in main.running, 180)
        job = b.state.allocation.job_id
        for key, action in (("c", "convert"), ("r", "setup-ray"), ("s", "submit")):
            await key_runs(pilot, key, action)
        await pilot_until(pilot, lambda: b.state.job is not None and (b.state.job.step or 0) >= 1, 180)
        await pilot.press("X")
        await pilot_until(pilot, lambda: isinstance(app.screen, ConfirmationModal), 120)
        assert f"release Slurm job {job} (scancel)" in app.screen.message
        await pilot.press("y")
        await pilot_until(pilot, lambda: b.state.allocation.state == "NONE"
                          and not any(n.reachable for n in b.state.nodes), 180)


def test_console_keys_u_c_r_s_and_x_on_slurm(slurm_sim: Any) -> None:
    """In the console, the seed's procedure on a Slurm cluster, started before any
    allocation (nodes slurm1.., down): `u` asks before a new allocation (naming what it asks
    Slurm for), gets one, and the same nodes come up where Slurm put them, cards reporting,
    the Ray pane naming the Slurm job; `c`, `r` and `s` (its plan confirmed) convert, start
    Ray and submit over srun, and training steps reach the Training pane; `X` asks naming
    the job it releases, releases it, and the nodes go down."""
    import asyncio

    sim, path = slurm_sim
    until("an empty queue", lambda: squeue(sim) == [], 60)
    asyncio.run(asyncio.wait_for(_keys_u_c_r_s_and_x(path, sim), CHAIN_S))
    until("the queue to empty", lambda: squeue(sim) == [], 60)


def test_sim_down_cancels_jobs_then_stops_every_daemon(slurm_sim: Any) -> None:
    from tui.sim.cluster import sim_down

    sim, _ = slurm_sim
    rec = json.loads((sim / "state.json").read_text())["slurm"]
    r = subprocess.run(["sbatch", "--parsable", "-N2", "--time=5", "--output=/dev/null", "--wrap", "sleep infinity"],
                       capture_output=True, text=True, env=slurm_env(sim), timeout=30)
    assert r.returncode == 0, r.stderr
    until("the job to run", lambda: any(j.endswith("RUNNING") for j in squeue(sim)), 60)
    pids = [rec["pids"]["munged"], rec["pids"]["slurmctld"], *rec["pids"]["slurmd"].values()]
    assert all(Path(f"/proc/{p}").exists() for p in pids)
    assert sim_down(state_dir=sim)
    assert [p for p in pids if Path(f"/proc/{p}").exists()
            and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]] == []
    assert not sim.exists()


# --------------------------------------------------------------------------- no sim


def test_squeue_time_left_and_walltime_forms() -> None:
    from tui.core.slurm import parse_time_left

    assert parse_time_left("3:59:52") == 14392 and parse_time_left("1-00:00:05") == 86405
    assert parse_time_left("12:30") == 750 and parse_time_left("UNLIMITED") is None
    assert parse_time_left("INVALID") is None


def test_the_console_pane_shows_the_allocation() -> None:
    """The Ray pane's first line: the Slurm job, its state (and why it pends), nodes and
    time left; nothing for a profile without a scheduler."""
    from tui.core.slurm import Allocation
    from tui.core.state import ClusterState
    from widgets.ray_pane import ray_markup

    st = ClusterState("p", False)
    assert "Slurm" not in ray_markup(st, 2, 4).plain
    st.allocation = Allocation("17", "PENDING", reason="Resources")
    assert ray_markup(st, 2, 4).plain.splitlines()[0] == "Slurm job 17 PENDING (Resources)"
    st.allocation = Allocation("17", "RUNNING", nodes=["node1", "node2"], time_left_s=3725)
    first = ray_markup(st, 2, 4).plain.splitlines()[0]
    assert first.startswith("Slurm job 17 RUNNING, 2 nodes, ") and first.endswith(" left"), first
    st.allocation = Allocation("", "NONE")
    assert ray_markup(st, 2, 4).plain.splitlines()[0] == "no Slurm allocation: u asks Slurm for one"


def test_srun_argv_is_data() -> None:
    """A node's command reaches srun as one argv element (never a local shell), and the
    holder job's sbatch line carries the profile's keys as separate options."""
    import asyncio

    from tui.core.profile import load_profile_text
    from tui.core.slurm import Allocation, apply, sbatch_argv
    from tui.core.srun import SrunPool

    text = (Path(__file__).parent / "data" / "good_profile.yaml").read_text()
    i, j = text.index("nodes:"), text.index("container:")
    prof = load_profile_text(text[:i] + "cluster:\n  scheduler: slurm\n  partition: gpu\n  nodes: 2\n"
                             "  gpus_per_node: 8\n  time: '2:00:00'\n  qos: high\n"
                             "  extra_sbatch: ['--mem=200G', '--comment=a b; rm -rf /']\n" + text[j:], "s.yaml")
    assert sbatch_argv(prof) == [
        "sbatch", "--parsable", "--job-name=rlconsole-tiny", "--nodes=2", "--gpus-per-node=8", "--time=2:00:00",
        "--output=/dev/null", "--partition=gpu", "--qos=high", "--mem=200G", "--comment=a b; rm -rf /",
        "--wrap", "exec sleep infinity"]

    async def go() -> list[str]:
        pool = SrunPool(prof)
        apply(prof, Allocation("5", "RUNNING", nodes=["gn1", "gn2"], addresses={"gn1": "10.0.0.1"}), rename=False)
        pool.allocation = Allocation("5", "RUNNING", nodes=["gn1", "gn2"])
        s = pool.session("slurm1")
        s._set_state("connected", None)
        return s._argv(s.wrap(["echo", "$(reboot)"], container=True))
    argv = asyncio.run(go())
    assert argv[:9] == ["srun", "--overlap", "--jobid=5", "--nodes=1", "--ntasks=1", "-w", "gn1", "--quiet", "--"]
    assert argv[9:11] == ["/bin/sh", "-c"] and len(argv) == 12
    assert argv[11] == "docker exec train-rl sh -c 'echo '\"'\"'$(reboot)'\"'\"''"
    assert prof.nodes[0].address == "10.0.0.1" and prof.nodes[0].slurm_host == "gn1"


def test_walltime_warning_names_the_step_and_the_last_checkpoint_before_it() -> None:
    """The allocation ends before the run's ETA: "ends at step ~N: the last checkpoint
    before it is step M" (M from trainer.save_freq, or the last one saved); one episode
    that ends when the run fits again."""
    from types import SimpleNamespace

    from tui.core.slurm import Allocation, WalltimeRule, walltime_message

    now = 1_000_000.0
    a = Allocation("9", "RUNNING", nodes=["n1"], time_left_s=3600, seen_at=now)
    # 10 s a step, 1000 steps to go: 10000 s > 3600 s left -> step 100 + 360 = 460; save_freq 100 -> 400
    msg = walltime_message(a, 100, 1100, 10.0, 10000.0, 100, 100, now=now)
    assert msg == ("the allocation (Slurm job 9) ends in 1:00:00, at step ~460 of 1100: "
                   "the last checkpoint before it is step 400")
    assert walltime_message(a, 100, 1100, 10.0, 3000.0, 100, 100, now=now) is None  # fits
    assert walltime_message(Allocation("9", "PENDING"), 100, 1100, 10.0, 10000.0, 100, 100, now=now) is None
    assert "no checkpoint is saved before it" in (walltime_message(a, 1, 1100, 10.0, 10000.0, 1000, None, now=now)
                                                  or "")
    rule = WalltimeRule(100)
    late = SimpleNamespace(status="RUNNING", step=100, total_steps=1100, step_time_s=10.0, eta_s=10000.0,
                           last_checkpoint=100)
    [opened] = rule.observe(a, late, now=now)
    assert opened.level == "warning" and opened.key == "walltime" and "step ~460" in opened.message
    assert rule.observe(a, late, now=now + 1) == []  # one episode, not one alert a refresh
    fits = SimpleNamespace(**{**late.__dict__, "eta_s": 100.0})
    [ended] = rule.observe(a, fits, now=now + 2)
    assert ended.ends and ended.key == "walltime"


SBATCH_SCRIPT = """#!/bin/bash
#SBATCH --job-name=grpo-on-slurm
#SBATCH -N 2
#SBATCH --ntasks-per-node=1
#SBATCH --mem=200G
#SBATCH -p gpu
#SBATCH --time=02:00:00
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=64
#SBATCH --output=slurm-%j.out

image=/images/verl.sif
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
nodes_array=($nodes)
head_node=${nodes_array[0]}
srun --nodes=1 --ntasks=1 -w "$head_node" apptainer run --nv --bind /data $image \\
    ray start --head --port=6379 --num-gpus "${SLURM_GPUS_PER_NODE}" --block &
sleep 10
PYTHONUNBUFFERED=1 srun --overlap --nodes=1 --ntasks=1 -w "$head_node" \\
    apptainer run --nv --bind /data $image \\
    python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=/data/train.parquet \\
    trainer.n_gpus_per_node="${SLURM_GPUS_PER_NODE}" \\
    trainer.nnodes="${SLURM_NNODES}" \\
    trainer.save_freq=10 2>&1 | tee run.log
"""


def test_import_of_an_sbatch_script_writes_a_slurm_profile(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`rlconsole import` of a script in the shape of VeRL's examples/slurm/ray_on_slurm.slurm:
    the launch inside `srun ... apptainer run ... IMAGE python3 -m verl...` is found, the
    #SBATCH lines become `cluster:` (the job's name and output files dropped, the rest in
    extra_sbatch), and the trainer's $SLURM_NNODES / $SLURM_GPUS_PER_NODE take their counts."""
    import yaml

    from tui.core.profile import load_profile

    script = tmp_path / "grpo.slurm"
    script.write_text(SBATCH_SCRIPT)
    out = tmp_path / "grpo.yaml"
    rc, text, err = run(["import", str(script), "-o", str(out)], capsys)
    assert rc == 0, err
    assert "trainer.nnodes: $SLURM_NNODES is the allocation's count: 2, from #SBATCH line 3" in text + err
    data = yaml.safe_load(out.read_text())
    assert "nodes" not in data
    assert data["cluster"]["scheduler"] == "slurm" and data["cluster"]["transport"] == "srun"
    prof = load_profile(out)
    c = prof.cluster
    assert (c.nodes, c.gpus_per_node, c.time, c.partition) == (2, 4, "02:00:00", "gpu")
    assert c.extra_sbatch == ["--mem=200G", "--cpus-per-task=64"]
    assert prof.override_value("trainer.nnodes") == 2 and prof.override_value("trainer.n_gpus_per_node") == 4
    assert prof.override_value("algorithm.adv_estimator") == "grpo"
    assert [n.name for n in prof.nodes] == ["slurm1", "slurm2"] and prof.total_gpus == 8


def test_watch_prints_the_allocation_when_it_changes() -> None:
    """`watch`: one line per change of the allocation (state, nodes, pending reason), not
    one per refresh as its time left runs down."""
    import io

    from tui.cli.watch import Watch
    from tui.core.notify import Notifier
    from tui.core.profile import load_profile
    from tui.core.slurm import Allocation
    from tui.core.state import ClusterState

    out = io.StringIO()
    w = Watch(load_profile(Path(__file__).parent / "data" / "good_profile.yaml"), Notifier([], "warning"), out)
    seq = [Allocation("", "NONE"), Allocation("8", "PENDING", reason="Resources"),
           Allocation("8", "PENDING", reason="Resources"),
           Allocation("8", "RUNNING", nodes=["n1", "n2"], time_left_s=600),
           Allocation("8", "RUNNING", nodes=["n1", "n2"], time_left_s=590)]
    for a in seq:
        st = ClusterState("tiny", False)
        st.allocation = a
        w.on_state(st)
    lines = [ln.split(" ", 2)[2] for ln in out.getvalue().splitlines()]
    assert lines[:2] == ["ALLOCATION no Slurm allocation (containers, key u, asks Slurm for one)",
                         "ALLOCATION Slurm job 8 PENDING (Resources)"], lines
    assert len(lines) == 3 and lines[2].startswith("ALLOCATION Slurm job 8 RUNNING on n1,n2, 0:"), lines


def test_sim_up_slurm_says_in_one_line_that_it_needs_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("RLCONSOLE_SIM_DIR", str(tmp_path / "sim"))
    rc, out, err = run(["sim", "up", "--slurm"], capsys)
    assert rc != 0 and out == ""
    assert len(err.splitlines()) == 1 and "sim up --slurm needs root" in err, err
    assert not (tmp_path / "sim" / "config.json").exists()


def test_transport_is_chosen_in_one_place() -> None:
    """`open_pool`: srun for a Slurm profile (the default), SSH with the allocation read for
    `transport: ssh`, plain SSH for a static profile; before an allocation the SSH pool
    knows of none."""
    import asyncio

    from tui.core.profile import load_profile_text
    from tui.core.srun import SrunPool
    from tui.core.ssh import SessionPool
    from tui.core.transport import open_pool, transport_name

    text = (Path(__file__).parent / "data" / "good_profile.yaml").read_text()
    i, j = text.index("nodes:"), text.index("container:")

    def slurm(transport: str) -> Any:
        return load_profile_text(text[:i] + "cluster:\n  scheduler: slurm\n  nodes: 2\n  gpus_per_node: 8\n"
                                 f"  time: '1:00:00'\n  transport: {transport}\n" + text[j:], "s.yaml")

    async def go() -> None:
        static = load_profile_text(text, "t.yaml")
        assert transport_name(static) == "ssh" and type(open_pool(static)) is SessionPool
        assert transport_name(slurm("srun")) == "srun" and isinstance(open_pool(slurm("srun")), SrunPool)
        pool = open_pool(slurm("ssh"))
        assert isinstance(pool, SessionPool) and transport_name(slurm("ssh")) == "ssh"
        await pool.look()
        assert pool.allocation is None
        await pool.close()
    asyncio.run(asyncio.wait_for(go(), 60))


def test_srun_moves_a_loopback_dashboard_to_the_heads_address() -> None:
    """srun has no tunnel: a dashboard the profile keeps on loopback (the seed's 127.0.0.1)
    listens on the head's address once the allocation names it (the head changes with the
    allocation); the preflight says what that exposes. An address the profile gives stays."""
    from tui.core.checks import static_checks
    from tui.core.profile import load_profile_text
    from tui.core.slurm import Allocation, apply

    text = (Path(__file__).parent / "data" / "good_profile.yaml").read_text()
    i, j = text.index("nodes:"), text.index("container:")
    prof = load_profile_text(text[:i] + "cluster:\n  scheduler: slurm\n  nodes: 2\n  gpus_per_node: 8\n"
                             "  time: '1:00:00'\n" + text[j:], "s.yaml")
    assert prof.ray.dashboard_host == "127.0.0.1"
    apply(prof, Allocation("5", "RUNNING", nodes=["gn1", "gn2"], addresses={"gn1": "10.0.0.1", "gn2": "10.0.0.2"}))
    assert prof.ray.dashboard_host == "10.0.0.1" and prof.head.address == "10.0.0.1"
    apply(prof, Allocation("6", "RUNNING", nodes=["gn7", "gn8"], addresses={"gn7": "10.0.0.7", "gn8": "10.0.0.8"}))
    assert prof.ray.dashboard_host == "10.0.0.7"  # a new allocation, a new head
    [dash] = [r for r in static_checks(prof) if r.id == "ray.dashboard"]
    assert dash.status == "warn" and "transport: ssh keeps it on the head's loopback" in (dash.fix or "")
    fixed = load_profile_text(text[:i] + "cluster:\n  scheduler: slurm\n  nodes: 2\n  gpus_per_node: 8\n"
                              "  time: '1:00:00'\n" + text[j:].replace("ray:\n", "ray:\n  dashboard_host: 10.9.9.9\n", 1)
                              if "ray:\n" in text[j:] else text[:i] + "cluster:\n  scheduler: slurm\n  nodes: 2\n"
                              "  gpus_per_node: 8\n  time: '1:00:00'\n" + text[j:] + "ray:\n  dashboard_host: 10.9.9.9\n",
                              "f.yaml")
    apply(fixed, Allocation("5", "RUNNING", nodes=["gn1", "gn2"], addresses={"gn1": "10.0.0.1"}))
    assert fixed.ray.dashboard_host == "10.9.9.9"


async def test_a_cancelled_slurm_command_is_killed_and_reaped(tmp_path: Path) -> None:
    """The console polls squeue; closing its pool cancels a poll in flight. The command
    is then killed and reaped at once, not left running with its pipes to be finalised
    after the event loop closed (CI printed asyncio's "Event loop is closed" from such a
    transport at the end of a Slurm test). The command here is a shell that records its
    PID and sleeps: after the cancel that PID is gone."""
    import asyncio

    from tui.core.profile import load_profile
    from tui.core.slurm import slurm_cmd

    prof = load_profile(Path(__file__).parent / "data" / "good_profile.yaml")
    pidfile = tmp_path / "pid"
    task = asyncio.ensure_future(slurm_cmd(prof, ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"], timeout=120))
    for _ in range(200):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        await asyncio.sleep(0.05)
    pid = int(pidfile.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    assert not Path(f"/proc/{pid}").exists(), f"the cancelled command {pid} still runs (or was not reaped)"
