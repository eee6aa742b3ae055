"""The simulated run fails as a real one does, and the console names it: end to end.

For a start-up refusal of the real stack at each stage (Hydra, VeRL's config check, the
dataset, Megatron in the workers; the others are in test_sim_tree.py) and every fault
`rlconsole sim fault` plants, on the worker's one simulated cluster with Ray up
(`ray_sim`; real SSH, real dockerd, real Ray, the stand-in trainer): the job's state turns as a
real one would (FAILED, or RUNNING without steps), the live console's alert opens once and
carries the diagnosis catalog's id, and `status --json` shows the job's state and the same
diagnosis. The live path (`LiveBackend`) runs once for the module, in a thread of its own,
so each case costs only its job.

Refusals are submitted with `--skip-checks` (`rlconsole check` would refuse most of them
first, as it should). Every wait has a timeout that names what it waited for.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from tui.cli import main
from tui.core.alerts import Alert
from tui.core.profile import load_profile

pytestmark = pytest.mark.integration

RAY_LEFT_WHOLE = False
"""The last test loses node2 (its raylet killed): Ray may list it alive a while yet, so
`ray_sim` puts the sim back rather than pass this Ray on."""

WAIT_S = 180.0
"""Per wait: generous, the machine may be shared; a hang still fails with a message."""

REFRESH_S = 1.0
"""The watch's refresh: the sim's own (1 s). Each refresh samples every node (cards and
`docker inspect`: ~35 ms of CPU a node on the sim, measured); at 0.5 s this module's
watch alone took ~30% of a core for its four minutes, CPU its jobs waited for."""


class BgWatch:
    """One LiveBackend for the module, on an event loop in its own thread; the tests (plain
    functions) read the alerts it delivered."""

    def __init__(self, profile_path: Path) -> None:
        self.alerts: list[Alert] = []
        self.ended_jobs: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="bg-watch", daemon=True)
        self.thread.start()
        self.backend: Any = self.run(self._make(profile_path), 60)
        self.run(self.backend.start(), WAIT_S)

    async def _make(self, profile_path: Path) -> Any:
        from tui.backend.live import LiveBackend

        b = LiveBackend(load_profile(profile_path))
        b.subscribe_alerts(self.alerts.append)
        return b

    def run(self, coro: Any, timeout: float) -> Any:
        fut = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), self.loop)
        return fut.result(timeout + 10)

    def close(self) -> None:
        try:
            self.run(self.backend.stop(), 60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(15)

    def until(self, cond: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        end = time.monotonic() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() > end:
                seen = "\n  ".join(a.one_line() + (" [ends]" if a.ends else "") for a in self.alerts[-15:])
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last alerts:\n  {seen}")
            time.sleep(0.2)

    def ends_stayed_one(self) -> None:
        """Each job seen to end so far has one end alert still (none raised again since)."""
        for job_id in self.ended_jobs:
            ends = [a.one_line() for a in self.opened("job-end") if job_id in a.message]
            assert len(ends) == 1, f"job {job_id}'s end alerted {len(ends)} times: {ends}"

    def opened(self, key: str, since: int = 0) -> list[Alert]:
        return [a for a in list(self.alerts)[since:] if a.key == key and not a.ends]

    def ended(self, key: str, since: int = 0) -> list[Alert]:
        return [a for a in list(self.alerts)[since:] if a.key == key and a.ends]


def _set(d: dict[str, Any], dotted: str, value: Any) -> None:
    """Set one override; `a.+b` appends b with `+` in place of the plain a.b (a profile
    refuses the same key twice)."""
    keys = dotted.split(".")
    for k in keys[:-1]:
        d = d.setdefault(k, {})
    d.pop(keys[-1].lstrip("+"), None)
    d[keys[-1]] = value


@pytest.fixture(scope="module")
def sim(ray_sim: Any) -> Iterator[dict[str, Any]]:
    """The worker's shared sim with Ray up (`ray_sim`: RLCONSOLE_SIM_DIR points at it, so
    `rlconsole sim fault` acts on it); a profile whose jobs run long, a step every 0.5 s,
    and checkpoint every 2 steps."""
    d = Path(ray_sim.state_dir)
    data = yaml.safe_load(Path(ray_sim.profile_path).read_text())
    o = data["training"]["overrides"]
    _set(o, "trainer.total_epochs", 1000)
    _set(o, "trainer.save_freq", 2)
    data.setdefault("env", {})["RLCONSOLE_SIM_STEP_S"] = "0.5"
    data["monitoring"].update(stall_factor=4, refresh_s=REFRESH_S)
    # in the sim's state dir (beside, never over, the sim's own profile): there `submit`
    # finds the sim's faults to clear
    prof = d / "faults-profile.yaml"
    prof.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        yield {"sim": d, "profile": prof, "data": data}
    finally:
        for p in (prof, *d.glob("refusal-*.yaml")):  # the refusals' variants sit beside it
            p.unlink(missing_ok=True)


@pytest.fixture(scope="module", name="w")
def watch(sim: dict[str, Any]) -> Iterator[BgWatch]:
    """The live path watching the sim for the module's remaining tests. (Not for the console
    test, which runs first with its own: two watchers in one state dir would share a spool.)"""
    w = BgWatch(sim["profile"])
    try:
        yield w
        w.ends_stayed_one()  # the last job's too, the module's remaining refreshes later
    finally:
        w.close()


def _submit(profile: Path) -> str:
    from tui.core.job.history import last_run

    prof = load_profile(profile)
    before = last_run(prof.name)
    rc = main(["submit", "--profile", str(profile), "--yes", "--skip-checks"])
    if rc != 0:  # an earlier case that failed may have left its job running: stop it, once
        assert main(["stop", "--profile", str(profile), "--yes"]) == 0
        rc = main(["submit", "--profile", str(profile), "--yes", "--skip-checks"])
    assert rc == 0, "submit failed on the sim"
    rec = last_run(prof.name)
    assert rec is not None and (before is None or rec.job_id != before.job_id)
    return rec.job_id


def _status(profile: Path) -> dict[str, Any]:
    from tui.cli.status import run_status

    out = io.StringIO()
    assert run_status(load_profile(profile), json=True, out=out) == 0
    return json.loads(out.getvalue())


def _job_end(w: BgWatch, job_id: str, since: int) -> Alert:
    """The job's end alert. That it stays one is checked later, when many refreshes have
    passed (`BgWatch.ends_stayed_one`: at each later end and when the module's watch
    stops), rather than by waiting here for a few refreshes after each end."""
    ends = w.until(lambda: [a for a in w.opened("job-end", since) if job_id in a.message], f"job {job_id} to end")
    w.ends_stayed_one()
    w.ended_jobs.append(job_id)
    return ends[0]


def _failed_as(sim: dict[str, Any], w: BgWatch, job_id: str, since: int, sig_id: str | tuple[str, ...]) -> Alert:
    """The job ended FAILED, named `sig_id` in the live alert and in `status --json` (a
    tuple: any of these ids, the wordings of one class that Ray prints in either order)."""
    ids = sig_id if isinstance(sig_id, tuple) else (sig_id,)
    a = _job_end(w, job_id, since)
    assert " -> FAILED" in a.message and a.level == "error", a.message
    assert a.diagnosis in ids, a.message
    doc = _status(sim["profile"])
    assert doc["job"]["id"] == job_id and doc["job"]["status"] == "FAILED"
    assert doc["job"]["diagnosis"]["id"] == a.diagnosis, doc["job"]["diagnosis"]
    assert doc["job"]["diagnosis"]["fix"]
    return a


# --------------------------------------------------------------------------- the console's "Inject a fault" (first)
async def test_console_palette_injects_a_fault_and_shows_its_diagnosis(sim: dict[str, Any]) -> None:
    """`rlconsole demo`'s way to see a failure: the palette's "Inject a fault" on the running
    job; the banner then names the failure and its fix."""
    from textual.command import CommandList, CommandPalette

    from tui.app import RlconsoleApp
    from tui.backend.live import LiveBackend
    from widgets.alerts_bar import AlertsBar

    from tui.cli.console import sim_faults_for

    job_id = await asyncio.to_thread(_submit, sim["profile"])
    profile = load_profile(sim["profile"])
    # as `rlconsole` builds it (tui/cli/console.py run_app): the injector comes from the CLI
    app = RlconsoleApp(LiveBackend(profile), bell=False, faults=sim_faults_for(profile))
    loop = asyncio.get_running_loop()

    async def until(pilot: Any, cond: Callable[[], Any], what: str) -> None:
        end = loop.time() + WAIT_S
        while not cond():
            if loop.time() > end:
                raise AssertionError(f"timed out waiting for {what}")
            await pilot.pause(0.1)

    async with app.run_test(size=(120, 40)) as pilot:
        b = app.backend
        await until(pilot, lambda: b.rules.job_status.get(job_id) == "RUNNING", "the job seen RUNNING")
        assert "oom" in app.fault_kinds()
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the command palette")
        await pilot.press(*[("space" if c == " " else c) for c in "Inject a fault"])
        # the palette searches in a worker: wait for its hit before pressing Enter
        await until(pilot, lambda: any("Inject a fault" in str(o.prompt)
                                       for o in app.screen.query_one(CommandList).options), "the palette's hit")
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, CommandPalette), "the palette to close")
        await until(pilot, lambda: (sim["sim"] / "fault.json").exists(), "the fault planted")
        assert json.loads((sim["sim"] / "fault.json").read_text())["kind"] == "oom"
        await until(pilot, lambda: [a for a in app.main_screen.alerts if a.key == "job-end"],
                    "the job's end")
        end = next(a for a in app.main_screen.alerts if a.key == "job-end")
        assert end.diagnosis == "musa-oom", end.message
        assert f"job {job_id} RUNNING -> FAILED" in end.message and "Lower actor_rollout_ref" in end.message
        await until(pilot, lambda: "MUSA out of memory" in str(app.main_screen.query_one(AlertsBar).render()),
                    "the banner to show it")


# --------------------------------------------------------------------------- refusals
# One refusal from each stage of a real start-up, end to end: Hydra composing the config (the
# driver, before Ray), VeRL's validate_config (the TaskRunner, before anything loads), the
# dataset load, and Megatron building the model in the GPU workers. Every other refusal fails
# at one of these stages and reaches the console the same way (the log's last known failure);
# tests/test_sim_tree.py::test_trainer_refuses runs each of them on the same stand-in with a
# real Ray and checks its text and catalog id, at a fraction of the cost.
# name, overrides (dotted path -> value; `+` on the last part appends), the catalog id.
REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("hydra-no-such-key", {"trainer.no_such_key": 1}, "hydra-override-missing-key"),
    # 13: odd, so no data-parallel size divides it (2 on the 2 x 4 sim: tp 1 x pp 4 on 8 cards)
    ("batch-divide", {"actor_rollout_ref.actor.use_dynamic_bsz": False, "data.train_batch_size": 13,
                      "actor_rollout_ref.rollout.n": 1}, "batch-size-divisible"),
    ("dataset-missing", {"data.train_files": "/nonexistent/train.parquet"}, "dataset-missing"),
    # pp 8 with tp 1 fills the 2 x 4 sim (8 cards: no world-size refusal first) and does not divide 36 layers
    ("pp-layers", {"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size": 8,
                   "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": 1}, "megatron-pp-layers"),
]


@pytest.mark.parametrize(("overrides", "sig_id"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusal_fails_the_job_and_is_named(sim: dict[str, Any], w: BgWatch, overrides: dict[str, Any],
                                            sig_id: str) -> None:
    data = json.loads(json.dumps(sim["data"]))
    o = data["training"]["overrides"]
    for k, v in overrides.items():
        _set(o, k, v)
    prof = sim["profile"].with_name(f"refusal-{sig_id}.yaml")  # next to the sim's own profile
    prof.write_text(yaml.safe_dump(data, sort_keys=False))
    mark = len(w.alerts)
    job_id = _submit(prof)
    _failed_as(sim, w, job_id, mark, sig_id)
    assert not w.opened("stall", mark)
    # Ray's own message for the job (its driver's last output, kept by the console's tail)
    # names the refusal alone: a console that never read the job's log still can
    from tui.core.alerts import diagnose_failure

    message = next(j["message"] for j in _status(sim["profile"])["ray"]["jobs"] if j["id"] == job_id)
    v = diagnose_failure([], 0, message)
    assert v.finding is not None and v.finding.signature.id == sig_id, message[-2000:]


# --------------------------------------------------------------------------- faults that end the job
# actor-death: Ray's "A worker died or was killed" (relayed from the raylet) and the
# driver's ActorDiedError race to the log; one class, the first printed names it
FATAL: list[tuple[str, str | tuple[str, ...]]] = [
    ("oom", "musa-oom"), ("collective-timeout", "collective-timeout"),
    ("actor-death", ("ray-worker-died", "ray-actor-died")), ("driver-killed", "driver-killed"),
    ("disk-full", "no-space-left")]


@pytest.mark.parametrize(("kind", "sig_id"), FATAL, ids=[k for k, _ in FATAL])
def test_fault_fails_the_job_and_is_named(sim: dict[str, Any], w: BgWatch, kind: str,
                                          sig_id: str | tuple[str, ...]) -> None:
    mark = len(w.alerts)
    job_id = _submit(sim["profile"])  # also clears the previous case's fault
    args = ["sim", "fault", kind, "--at-step", "1"]
    if kind not in ("driver-killed",):
        args += ["--node", "node2"]
    assert main(args) == 0
    _failed_as(sim, w, job_id, mark, sig_id)


def test_fault_list_and_usage(sim: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from tui.sim.faults import FAULTS

    planted = sim["sim"] / "fault.json"
    before = planted.read_text() if planted.exists() else None
    assert main(["sim", "fault", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(k in out for k in FAULTS)
    assert main(["sim", "fault", "no-such-fault"]) == 1
    assert "sim fault --list" in capsys.readouterr().err
    assert main(["sim", "fault", "oom", "--node", "node9"]) == 1
    assert main(["sim", "fault", "stall", "--node", "node2"]) == 1  # the driver's, not a node's
    assert (planted.read_text() if planted.exists() else None) == before  # refused: nothing planted


# --------------------------------------------------------------------------- faults the job survives
def test_stall_and_card_faults_keep_the_job_running(sim: dict[str, Any], w: BgWatch) -> None:
    mark = len(w.alerts)
    job_id = _submit(sim["profile"])
    w.until(lambda: w.backend.watcher is not None and w.backend.watcher.job_id == job_id
            and w.backend.rules.job_status.get(job_id) == "RUNNING", "the job seen RUNNING")

    def step() -> int:
        return getattr(getattr(w.backend, "_job", None), "step", None) or 0

    s0 = w.until(step, "a first step")
    # a few steps seen one at a time: the stall rule learns the cadence from them (before
    # that it expects the profile's step time, minutes)
    w.until(lambda: step() >= s0 + 4, "four more steps")

    # -- the trainer stalls: alive, RUNNING, no steps; the stall alert opens once
    assert main(["sim", "fault", "stall"]) == 0
    stall = w.until(lambda: w.opened("stall", mark), "the stall alert")
    assert stall[0].message.startswith("no new step for ")
    doc = _status(sim["profile"])
    assert doc["job"]["status"] == "RUNNING" and doc["job"]["diagnosis"] is None
    step = doc["job"]["step"]
    time.sleep(1.5)
    assert _status(sim["profile"])["job"]["step"] == step  # three steps' time, no step
    assert len(w.opened("stall", mark)) == 1
    assert main(["sim", "fault", "clear"]) == 0
    w.until(lambda: w.ended("stall", mark), "steps to resume")

    # -- a card runs hot with its memory nearly full
    assert main(["sim", "fault", "card-hot", "--node", "node2", "--card", "3"]) == 0
    hot = w.until(lambda: w.opened("card:node2:3:hot", mark), "node2 card 3 hot")
    assert hot[0].message.startswith("node2 card 3 at 93°C")
    w.until(lambda: w.opened("card:node2:3:mem", mark), "node2 card 3 memory near full")
    cards = {c["index"]: c for n in _status(sim["profile"])["nodes"] if n["name"] == "node2" for c in n["gpus"]}
    assert cards[3]["temp_c"] >= 93

    # -- a card drops out of its node's report (its memory report lost)
    assert main(["sim", "fault", "card-mem-lost", "--node", "node1", "--card", "1"]) == 0
    gone = w.until(lambda: w.opened("card:node1:missing", mark), "node1 card 1 missing")
    assert gone[0].message == "node1 reports 3 of 4 cards (missing: 1)"
    node1 = next(n for n in _status(sim["profile"])["nodes"] if n["name"] == "node1")
    assert sorted(c["index"] for c in node1["gpus"]) == [0, 2, 3]
    assert main(["sim", "fault", "clear"]) == 0
    w.until(lambda: w.ended("card:node2:3:hot", mark) and w.ended("card:node1:missing", mark), "the cards back")
    for key in ("card:node2:3:hot", "card:node2:3:mem", "card:node1:missing"):
        assert len(w.opened(key, mark)) == 1, key
    assert _status(sim["profile"])["job"]["status"] == "RUNNING"
    assert not w.opened("job-end", mark)
    # a healthy simulated run (start-up, steps, checkpoints) names no failure in its log
    assert not [a.one_line() for a in w.alerts[mark:] if a.source == "log" or a.diagnosis]


# --------------------------------------------------------------------------- the node lost (last: Ray loses it)
def test_node_lost_fails_the_job_and_is_named(sim: dict[str, Any], w: BgWatch) -> None:
    """On the job the test above left running (a new submit would wait for it to end)."""
    mark = len(w.alerts)
    job_id = w.backend.watcher.job_id
    assert w.backend.rules.job_status.get(job_id) == "RUNNING"
    assert main(["sim", "fault", "node-lost", "--node", "node2"]) == 0
    down = w.until(lambda: w.opened("node:node2", mark), "node2 down")
    assert down[0].message.startswith("node node2 is down") and down[0].level == "error"
    _failed_as(sim, w, job_id, mark, "raylet-died")
    doc = _status(sim["profile"])
    assert [n["reachable"] for n in doc["nodes"]] == [True, False]
    assert len(w.opened("node:node2", mark)) == 1
    assert main(["sim", "fault", "clear"]) == 0  # its sshd comes back
    w.until(lambda: w.ended("node:node2", mark), "node2 back")
