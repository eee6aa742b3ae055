"""One backend contract, two backends: the same tests run against `StaticBackend` (the
demo data every Pilot test, snapshot and screenshot uses) and `LiveBackend` (the real
core on the simulated cluster: real SSH, real dockerd, real Ray, the stand-in trainer).

What the console relies on, in the order a user meets it: start; the state arrives
(every node reachable, every card); log lines arrive, numbered in delivery order
(log_search agrees); the action chain runs through `run_action` (containers, convert,
setup-ray, submit); steps and metrics arrive; `stop()` returns and leaves the job and Ray
alone (a second backend re-attaches to the running job); the stop action stops the job
and the job shows STOPPED.

Every await runs under `asyncio.wait_for` and each test under an overall limit, so a
hang fails with a message naming the phase instead of stalling CI. Here: the static
backend. The live one runs where a simulated cluster already has Ray up, so that the
contract costs no sim and no Ray bring-up of its own (issue 37), its containers, convert
and setup-ray finding their work done (the contract takes done or skipped): on the
built-in SSH servers with dockerd, tests/test_backend_contract_live.py (`ray_sim`); on
OpenSSH's sshd, tests/test_sim_openssh.py after its headless chain; over Slurm's srun,
tests/test_slurm.py inside its chain's allocation.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import pytest

from tui.backend.static import StaticBackend, demo_backend
from tui.core.job.metrics import MetricsSummary
from tui.core.state import ClusterState

T = TypeVar("T")

PHASE_S = 420.0  # one action or one wait: generous, the machine is shared
OVERALL_S = 1500.0  # the whole contract on one backend


async def within(what: str, aw: Awaitable[T], timeout: float = PHASE_S) -> T:
    """`aw` or a failure that names the phase that hung."""
    try:
        return await asyncio.wait_for(aw, timeout)
    except asyncio.TimeoutError:
        pytest.fail(f"timed out after {timeout:.0f}s: {what}")


async def until(what: str, cond: Callable[[], Any], timeout: float = PHASE_S, every: float = 0.2) -> Any:
    """Poll `cond()` until it is truthy; fail naming `what` after `timeout`."""
    async def poll() -> Any:
        while True:
            v = cond()
            if v:
                return v
            await asyncio.sleep(every)
    return await within(f"waiting for {what}", poll(), timeout)


@dataclass
class Recorder:
    """Everything a backend delivered, as the app would see it."""

    states: list[ClusterState] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    summaries: list[MetricsSummary] = field(default_factory=list)
    series: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[Any] = field(default_factory=list)

    def attach(self, b: Any) -> None:
        b.subscribe_state(self.states.append)
        b.subscribe_log(self.lines.extend)
        # another job watched (on a sim with earlier jobs, the console opens on the last
        # one): its lines are numbered from 0 again, so the record starts again too
        b.subscribe_log_restart(lambda _job: self.lines.clear())
        b.subscribe_metrics(lambda s, ser: (self.summaries.append(s), self.series.append(ser)))
        b.subscribe_alerts(self.alerts.append)

    @property
    def last_job(self) -> Any:
        return self.states[-1].job if self.states else None


@dataclass
class Kit:
    """How one backend kind is made, and how the world is looked at *without* it (to
    prove that `stop()` leaves the job and Ray alone)."""

    name: str
    make: Callable[[], Any]
    world_job: Callable[[Any], Awaitable[tuple[bool, str | None]]]  # (ray up, status of the job)
    nodes: int = 4
    cards: int = 32


async def _static_world(b: StaticBackend) -> tuple[bool, str | None]:
    return b.state.ray.available, b.state.job.status if b.state.job else None


@pytest.fixture(scope="module")
def kit() -> Kit:
    def make_static() -> StaticBackend:
        b = demo_backend()
        # a fresh console before anything ran: no job yet
        from tui.backend.static import demo_state
        b.state = demo_state(b.profile, step=0, job_status=None, busy=False)
        b.warmup, b.log_lines, b.summary, b.series, b.alerts = [], [], None, {}, []
        return b
    return Kit("static", make_static, _static_world)


def live_kit(name: str, prof: Any, n_nodes: int, n_cards: int) -> Kit:
    """LiveBackend on a simulated cluster's profile; the world looked at with a snapshot of
    its own (the probes' one-shot path, no backend)."""
    from tui.backend.live import LiveBackend
    from tui.core.probes import snapshot

    async def live_world(b: Any) -> tuple[bool, str | None]:
        st = await snapshot(prof)
        job_id = b.contract_job_id
        job = next((j for j in st.ray.jobs if j.id == job_id), None)
        return st.ray.available and st.ray.nodes_alive == n_nodes, job.status if job else None

    return Kit(name, lambda: LiveBackend(prof), live_world, n_nodes, n_nodes * n_cards)


async def live_contract(name: str, prof: Any, sim_dir: Path, n_nodes: int, n_cards: int) -> None:
    """The whole contract on LiveBackend, on a sim whose Ray an earlier test brought up
    (the OpenSSH and the Slurm chain): that run's checkpoints and TensorBoard files
    cleared first, so the contract's job starts a run of its own instead of resuming it."""
    from tests.conftest import clear_run_outputs

    clear_run_outputs(prof, sim_dir)
    await within(f"the whole contract on the {name} backend", _contract(live_kit(name, prof, n_nodes, n_cards)),
                 OVERALL_S)


def _events_ok(name: str, evs: list[Any]) -> None:
    assert evs, f"{name}: no events"
    assert evs[-1].kind in ("done", "skip"), f"{name} ended {evs[-1].kind}: " + \
        " | ".join(e.one_line() for e in evs[-8:])


async def _drain(b: Any, name: str, **opts: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [ev async for ev in b.run_action(name, **opts)]
    return await within(f"run_action({name!r})", go())


async def _eta_agrees_with_tqdm(rec: Recorder) -> None:
    """The pane's ETA (wall-clock cadence of the recent steps) agrees with tqdm's own
    estimate in the log within a third (both are wall-clock rates, so the bound tolerates
    load): the median over several refreshes, each compared with the tqdm bar of the same
    step (the sim's trainer draws a tqdm-style bar)."""
    from tui.core.job.verl_log import parse_tqdm

    ratios: list[float] = []
    seen: set[tuple[int, float]] = set()

    def sample() -> bool:
        s = rec.summaries[-1] if rec.summaries else MetricsSummary()
        step, total, eta = s.step, s.total_steps, s.eta_s
        if not (step and total and eta and step >= 12 and s.status == "RUNNING"):
            return False
        bars = [p for p in (parse_tqdm(ln) for ln in rec.lines[-400:] if "Training Progress" in ln)
                if p is not None and p.n == step and p.s_per_it]
        if bars and (step, eta) not in seen:
            seen.add((step, eta))
            ratios.append(eta / (bars[-1].s_per_it * (total - step)))
        return len(ratios) >= 5
    await until("five refreshes with an ETA and the tqdm bar of the same step", sample, 300, every=0.5)
    ratios.sort()
    median = ratios[len(ratios) // 2]
    # within a third, as said above: two wall-clock rates over different windows drift
    # apart on a loaded machine (0.89-0.91 seen); a wrong unit or total is 60x or 2x off
    assert 2 / 3 <= median <= 1.5, f"pane ETA / tqdm ETA: {ratios}"


async def _contract(kit: Kit) -> None:
    b = kit.make()
    rec = Recorder()
    rec.attach(b)
    await within("start()", b.start(), 60)

    # -- the state arrives: 4 nodes, 32 cards (the OpenSSH sim: 2 x 2)
    def full_state() -> bool:
        st = rec.states[-1] if rec.states else None
        return bool(st and len(st.nodes) == kit.nodes and all(n.reachable for n in st.nodes)
                    and sum(len(n.gpu.cards) for n in st.nodes if n.gpu) == kit.cards)
    await until(f"a state with {kit.nodes} reachable nodes and {kit.cards} cards", full_state, 120)

    # -- the chain, through run_action
    for name, opts in (("containers", {}), ("convert", {}), ("setup-ray", {}), ("submit", {"skip_checks": True})):
        evs = await _drain(b, name, **opts)
        if name == "setup-ray" and evs and evs[-1].kind == "fail" and \
                any("timed out during startup" in e.message for e in evs):
            # Ray's own deadline for a raylet to register (30 s, fixed in ray/_private/node.py)
            # can pass on two shared cores under the whole suite: setup-ray starts such a
            # worker again twice itself, after the other starts, and once in CI (three
            # workers) the same node missed it all three times. A person then presses `r`
            # again and confirms stopping the half-up Ray; so does the contract (as
            # test_demo_tmux does). The bring-up's retries are their own test (test_rayapi).
            evs = await _drain(b, name, stop_confirmed=True)
        _events_ok(name, evs)
    job_id = evs[-1].data.get("job_id")
    assert job_id, "submit's done event names the job"
    b.contract_job_id = job_id

    # -- steps and metrics arrive, for the submitted job (not the job the console found
    # when it started: on a Ray that ran one before, its metrics come first)
    await until("metrics of the submitted job with step >= 3, reward and throughput",
                lambda: rec.summaries and rec.summaries[-1].job_id == job_id and (rec.summaries[-1].step or 0) >= 3
                and rec.summaries[-1].reward is not None
                and rec.summaries[-1].throughput_per_node)
    await until("the state's job is the submitted one, RUNNING",
                lambda: rec.last_job is not None and rec.last_job.id == job_id and rec.last_job.status == "RUNNING")
    s = rec.summaries[-1]
    assert s.total_steps and s.total_steps > s.step
    assert set(rec.series[-1]) >= {"reward", "throughput", "response_length"}
    assert job_id in b.describe_stop()

    if kit.name != "static":
        await _eta_agrees_with_tqdm(rec)
    if kit.name == "live-slurm":  # the allocation is published with the state, as the transport reads it
        a = rec.states[-1].allocation
        assert a is not None and a.state == "RUNNING" and a.nodes == ["node1", "node2"] and a.time_left_now() > 0

    # -- log lines arrive numbered: log_search agrees with the delivery order
    await until("the driver's 'Total training steps' line", lambda: any("Total training steps:" in ln for ln in rec.lines))
    first = next(i for i, ln in enumerate(rec.lines) if "Total training steps:" in ln)
    assert await within("log_search", b.log_search("total training steps", -1, False)) == first
    # from a hit, exclusive: the next hit, never the same line
    steps_at = [i for i, ln in enumerate(rec.lines) if " step:" in ln]
    assert len(steps_at) >= 2
    got = await within("log_search from a hit", b.log_search(" step:", steps_at[0], False))
    assert got == steps_at[1], (got, steps_at[:3])
    got = await within("log_search backwards", b.log_search(" step:", steps_at[1], True))
    assert got == steps_at[0], (got, steps_at[:3])

    # -- stop() returns and leaves the job and Ray alone
    await within("backend.stop() with a job running", b.stop(), 60)
    ray_up, status = await within("looking at the world", kit.world_job(b), 60)
    assert ray_up and status == "RUNNING", (ray_up, status)

    # -- a new console re-attaches to the running job
    b2 = b if kit.name == "static" else kit.make()
    b2.contract_job_id = job_id
    rec2 = Recorder()
    rec2.attach(b2)
    await within("start() of a second backend", b2.start(), 60)
    await until("the re-attached job, RUNNING",
                lambda: rec2.last_job is not None and rec2.last_job.id == job_id and rec2.last_job.status == "RUNNING")
    await until("re-attached metrics", lambda: rec2.summaries and rec2.summaries[-1].job_id == job_id
                and (rec2.summaries[-1].step or 0) >= 3)

    # -- stop the job: it shows STOPPED, with no step time or ETA
    evs = await _drain(b2, "stop")
    _events_ok("stop", evs)
    await until("the job shows STOPPED",
                lambda: rec2.last_job is not None and rec2.last_job.id == job_id and rec2.last_job.status == "STOPPED")
    await until("no ETA once stopped", lambda: rec2.summaries and rec2.summaries[-1].eta_s is None, 60)
    assert "no job is running" in b2.describe_stop()
    t0 = time.monotonic()
    await within("backend.stop() after the job stopped", b2.stop(), 60)
    assert time.monotonic() - t0 < 60
    ray_up, status = await within("looking at the world", kit.world_job(b2), 60)
    assert ray_up and status == "STOPPED", (ray_up, status)


async def test_backend_contract(kit: Kit) -> None:
    await within(f"the whole contract on the {kit.name} backend", _contract(kit), OVERALL_S)
