"""Every alert kind, raised by the live path (`LiveBackend`: real SSH, real Ray, real
dockerd) on the simulated cluster, by planting its cause for real: a card held hot and
its memory nearly full, and a card left out of its node's report, through the sim's card
tool, the trainer stopped with SIGSTOP
(steps stall) and resumed, a node's sshd stopped and started, throughput and MFU outside
a profile's range, the driver killed (job FAILED), a raylet killed (Ray loses the node).
Each alert must open once and, where its cause ends, end.

The worker's sim with Ray up (`ray_sim`) and one submitted job for the module; the job runs through the first test and
is killed in the second. Every wait has a timeout that names what it waited for.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from tui.backend.live import LiveBackend
from tui.cli import main
from tui.core.alerts import Alert
from tui.core.job.metrics import MetricsSummary
from tui.core.profile import load_profile

pytestmark = pytest.mark.integration

WAIT_S = 180.0
"""Per wait: generous, the machine may be shared; a hang still fails with a message."""


@pytest.fixture(scope="module")
def live_job(ray_sim: Any, tmp_path_factory: pytest.TempPathFactory):
    """The worker's shared sim with Ray up (`ray_sim`) and a long job running (a step a
    second, the job's own environment); yields (sim state dir, profile path)."""
    sim = Path(ray_sim.state_dir)
    data = yaml.safe_load(Path(ray_sim.profile_path).read_text())
    data["training"]["overrides"].setdefault("trainer", {})["total_epochs"] = 1000  # outlives the module
    data.setdefault("env", {})["RLCONSOLE_SIM_STEP_S"] = "1.0"
    data["monitoring"].update(stall_factor=5, refresh_s=1.0)
    prof = tmp_path_factory.mktemp("alerts-profile") / "alerts.yaml"
    prof.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["submit", "--skip-checks", "--profile", str(prof), "--yes"]) == 0, "submit failed on the sim"
    yield sim, prof


def variant(src: Path, dst: Path, **monitoring: Any) -> Path:
    data = yaml.safe_load(src.read_text())
    data["monitoring"].update(monitoring)
    dst.write_text(yaml.safe_dump(data, sort_keys=False))
    return dst


class Watch:
    """A LiveBackend and every alert it delivered."""

    def __init__(self, profile_path: Path) -> None:
        self.backend = LiveBackend(load_profile(profile_path))
        self.alerts: list[Alert] = []
        self.summaries: list[MetricsSummary] = []
        self.backend.subscribe_alerts(self.alerts.append)
        self.backend.subscribe_metrics(lambda s, _series: self.summaries.append(s))

    async def __aenter__(self) -> "Watch":
        await asyncio.wait_for(self.backend.start(), WAIT_S)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.wait_for(self.backend.stop(), 60)

    async def until(self, cond: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        end = time.monotonic() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() > end:
                seen = "\n  ".join(a.one_line() + (" [ends]" if a.ends else "") for a in self.alerts[-15:])
                st = self.backend.state
                ray = st.ray if st is not None else None
                where = (f"ray: available={ray.available} source={ray.source} error={ray.error!r} "
                         f"jobs={[(j.id, j.status) for j in ray.jobs]}" if ray is not None else "no state")
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; {where}; "
                                     f"last alerts:\n  {seen}")
            await asyncio.sleep(0.2)

    def opened(self, key: str, since: int = 0) -> list[Alert]:
        return [a for a in self.alerts[since:] if a.key == key and not a.ends]

    def ended(self, key: str, since: int = 0) -> list[Alert]:
        return [a for a in self.alerts[since:] if a.key == key and a.ends]

    def step(self) -> int:
        return max((s.step or 0 for s in self.summaries), default=0)


def sim_processes(sim: Path, node: str | None, match: Callable[[list[bytes]], bool]) -> list[int]:
    """Host PIDs of this sim's processes (on `node`, or any node) whose argv matches."""
    prefix = f"RLCONSOLE_SIM_NODE_DIR={sim}/nodes/{node or ''}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(prefix) and (node is None or e in (prefix, prefix + b"/")) for e in env) and match(argv):
            out.append(int(entry))
    return out


def trainer_pids(sim: Path) -> list[int]:
    """The process that runs the training loop: the TaskRunner actor, or (the sim's Ray
    has no log monitor) the driver itself."""
    runner = sim_processes(sim, None, lambda a: b"TaskRunner" in a[0])
    if runner:
        return runner
    return sim_processes(sim, None, lambda a: Path(a[0].decode(errors="replace")).name.startswith("python")
                         and b"verl.trainer.main_ppo" in a)


async def test_cards_stall_node_and_ranges_on_the_live_path(live_job, tmp_path: Path) -> None:
    sim, prof = live_job
    # a profile whose throughput and MFU ranges the sim's run cannot meet (2 steps in a row)
    tight = variant(prof, tmp_path / "tight.yaml", throughput_tokens_per_s_per_node=[1, 2],
                    mfu_pct=[95, 100], out_of_range_steps=2)
    async with Watch(tight) as w:
        await w.until(lambda: w.step() >= 3, "steps from the running job")

        # -- throughput / MFU out of the profile's range, after N steps, once
        await w.until(lambda: w.opened("range:throughput") and w.opened("range:mfu"), "range alerts")
        assert "outside the profile's 1-2" in w.opened("range:throughput")[0].message
        s0 = w.step()
        await w.until(lambda: w.step() >= s0 + 3, "three more steps")
        assert len(w.opened("range:throughput")) == 1 and len(w.opened("range:mfu")) == 1

        # -- a hot card with its memory nearly full, through the sim's card tool
        sess = w.backend.pool.session("node2")
        r = await asyncio.wait_for(sess.run(
            "sleep 600 >/dev/null 2>&1 & pid=$!; printf '{\"pid\": %s, \"util\": 50, \"mem_mib\": 80000, "
            "\"temp_c\": 93}' $pid > $RLCONSOLE_SIM_NODE_DIR/gpu-load/2.hot.json; echo $pid", check=True), 60)
        pid = int(r.stdout.strip())
        try:
            hot = await w.until(lambda: w.opened("card:node2:2:hot"), "node2 card 2 hot")
            assert hot[0].message.startswith("node2 card 2 at 93°C (hot >= 85°C)") and hot[0].level == "warning"
            mem = await w.until(lambda: w.opened("card:node2:2:mem"), "node2 card 2 memory near full")
            assert "near full >= 95%" in mem[0].message
        finally:
            await asyncio.wait_for(sess.run(f"kill {pid}; rm -f $RLCONSOLE_SIM_NODE_DIR/gpu-load/2.hot.json"), 60)
        await w.until(lambda: w.ended("card:node2:2:hot") and w.ended("card:node2:2:mem"), "the card episodes to end")
        assert w.ended("card:node2:2:hot")[0].message == "node2 card 2 cooled down"
        assert len(w.opened("card:node2:2:hot")) == 1  # once per episode, however many refreshes

        # -- a card drops out of its node's report (the sim's tool leaves it out)
        sess = w.backend.pool.session("node2")
        r = await asyncio.wait_for(sess.run(
            "sleep 600 >/dev/null 2>&1 & pid=$!; printf '{\"pid\": %s, \"absent\": true}' $pid "
            "> $RLCONSOLE_SIM_NODE_DIR/gpu-load/3.gone.json; echo $pid", check=True), 60)
        pid = int(r.stdout.strip())
        try:
            gone = await w.until(lambda: w.opened("card:node2:missing"), "node2 card 3 missing")
            assert gone[0].message == "node2 reports 3 of 4 cards (missing: 3)" and gone[0].level == "error"
        finally:
            await asyncio.wait_for(sess.run(f"kill {pid}; rm -f $RLCONSOLE_SIM_NODE_DIR/gpu-load/3.gone.json"), 60)
        back = await w.until(lambda: w.ended("card:node2:missing"), "node2's card 3 back")
        assert back[0].message == "node2 reports all its cards again"

        # -- the trainer stops making steps (SIGSTOP), then resumes
        pids = trainer_pids(sim)
        assert pids, "no trainer process of this sim found"
        mark = len(w.alerts)
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        try:
            await w.until(lambda: w.opened("stall", mark) or "stall" in w.backend.rules.open, "the stall alert")
            assert w.backend.rules.open["stall"].message.startswith("no new step for ")
        finally:
            for p in pids:
                os.kill(p, signal.SIGCONT)
        end = await w.until(lambda: w.ended("stall", mark), "steps to resume")
        assert end[0].message.startswith("steps resumed at step ")
        assert len(w.opened("stall", mark)) <= 1

        # -- a node's sshd stops: down once, then back, and nothing stays open for it
        from tui.sim.cluster import sim_node

        mark = len(w.alerts)
        await asyncio.to_thread(sim_node, "stop", "node2", sim)
        try:
            down = await w.until(lambda: w.opened("node:node2", mark), "node2 down")
            assert down[0].message.startswith("node node2 is down") and down[0].level == "error"
        finally:
            await asyncio.to_thread(sim_node, "start", "node2", sim)
        back = await w.until(lambda: w.ended("node:node2", mark), "node2 back")
        assert back[0].message == "node node2 is back"
        assert len(w.opened("node:node2", mark)) == 1
        assert "node:node2" not in w.backend.rules.open


async def test_driver_killed_then_ray_node_lost_on_the_live_path(live_job) -> None:
    sim, prof = live_job
    async with Watch(prof) as w:
        job_id = await w.until(lambda: w.backend.watcher is not None and w.backend.watcher.job_id, "the job")
        await w.until(lambda: w.backend.rules.job_status.get(job_id) == "RUNNING", "the job seen RUNNING")

        # -- the driver dies: RUNNING -> FAILED (or STOPPED), once, with what the log says
        pids = sim_processes(sim, None, lambda a: Path(a[0].decode(errors="replace")).name.startswith("python")
                             and b"verl.trainer.main_ppo" in a)
        assert pids, "no driver process of this sim found"
        for p in pids:
            os.kill(p, signal.SIGKILL)
        ended = await w.until(lambda: w.opened("job-end"), "the job's end")
        a = ended[0]
        assert a.message.startswith(f"job {job_id} RUNNING -> "), a.message
        status = a.message.split(" -> ")[1].split()[0].rstrip(":")
        assert status in ("FAILED", "STOPPED")
        assert a.level == ("error" if status == "FAILED" else "warning")
        if status == "FAILED":
            assert ": " in a.message.split(" -> ")[1]  # a diagnosis, or that the log names none
        await asyncio.sleep(3 * w.backend.profile.monitoring.refresh_s)
        assert len(w.opened("job-end")) == 1

        # -- a raylet dies: Ray lists its node as dead
        raylets = sim_processes(sim, "node2", lambda a: Path(a[0].decode(errors="replace")).name == "raylet")
        assert raylets, "no raylet of this sim's node2 found"
        for p in raylets:
            os.kill(p, signal.SIGKILL)
        lost = await w.until(lambda: [x for x in w.alerts if x.key and x.key.startswith("ray-node:") and not x.ends],
                             "Ray to lose node2")
        assert lost[0].message == "Ray lost node node2 (127.0.0.3)" and lost[0].level == "error"
