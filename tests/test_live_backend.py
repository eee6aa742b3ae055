"""LiveBackend and the job pane, without a cluster: what the pane may claim about a job
(a run from the history, a stopped job, a running one), the ETA's clock, and the attach
race that once left a second watcher running (its log follower held one of the head's
few SSH channel slots for good; a few of those and every command on the head waited).
The same paths on the sim: tests/test_backend_contract.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tui.backend.static import demo_profile
from tui.core.job.watcher import JobWatcher
from tui.core.state import JobStatus
from tui.core.job.metrics import RunMetrics
from tui.backend.live import LiveBackend
from tui.core.job.metrics import summarize
from widgets.metrics_pane import compact_markup, fmt_step_time, summary_markup


def _rm(n: int = 20, wall_s: float = 1.1, timing_s: float = 12.0, total: int = 160,
        tqdm: float | None = None, live: bool = True) -> RunMetrics:
    rows = {s: {"timing_s/step": timing_s, "critic/rewards/mean": 0.3 + s / 1000,
                "perf/throughput": 90.0} for s in range(1, n + 1)}
    wall = {s: 1_000.0 + s * wall_s for s in rows} if live else {}
    return RunMetrics(rows, total_steps=total, last_checkpoint=10, wall_times=wall, tqdm_s_per_step=tqdm)


def test_eta_from_the_wall_clock_cadence_not_timing_s_per_step() -> None:
    """The issue's case: the pane said "ETA 22m, 0.2 min/step" while tqdm said 02:40 at
    1.1 s/it. The ETA is the wall cadence of the recent steps times the steps left."""
    rm = _rm(n=20, wall_s=1.1, timing_s=12.0, total=160)
    assert rm.wall_step_time_s() == pytest.approx(1.1)
    assert rm.eta_s() == pytest.approx(140 * 1.1)
    assert rm.step_time_s() == pytest.approx(12.0)  # the trainer's own figure, kept as an indicator
    s = summarize(rm, demo_profile().monitoring, "RUNNING", True, "raysubmit_x")
    assert s.step_time_s == pytest.approx(1.1) and s.eta_s == pytest.approx(154.0)


def test_eta_without_arrival_times_uses_tqdms_rate() -> None:
    """Lines read in one go (a one-shot status, a re-attach) say nothing about when the
    steps happened: tqdm's own rate is the wall clock then."""
    rm = _rm(live=False, tqdm=1.3, timing_s=12.0)
    assert rm.eta_s() == pytest.approx(140 * 1.3)
    # arrival times all within one read: not a cadence
    rows = {s: {"timing_s/step": 12.0} for s in range(1, 21)}
    rm = RunMetrics(rows, total_steps=160, wall_times={s: 5_000.0 + s * 1e-4 for s in rows}, tqdm_s_per_step=1.3)
    assert rm.eta_s() == pytest.approx(140 * 1.3)


def test_no_step_time_or_eta_unless_running() -> None:
    rm = _rm()
    for status in ("STOPPED", "FAILED", "SUCCEEDED", "PENDING", "UNKNOWN"):
        s = summarize(rm, demo_profile().monitoring, status, True, "raysubmit_x")
        assert s.eta_s is None and s.step_time_s is None, status
        assert s.step == 20 and s.last_checkpoint == 10
        mon = demo_profile().monitoring
        for fn in (summary_markup, compact_markup):
            text = fn(s, mon).plain
            assert "ETA" not in text and "/step" not in text and status in text, text


def test_a_run_from_the_history_is_the_last_run_not_a_current_one() -> None:
    rm = _rm()
    s = summarize(rm, demo_profile().monitoring, JobStatus.NOT_ON_CLUSTER, False, "raysubmit_old")
    assert s.on_cluster is False and s.step == 20 and s.last_checkpoint == 10
    assert not {"eta_s", "step_time_s", "reward", "throughput_per_node"} & {k for k, v in s.figures().items() if v is not None}
    mon = demo_profile().monitoring
    for fn in (summary_markup, compact_markup):
        text = fn(s, mon).plain
        assert "not on this cluster" in text and "raysubmit_old" in text and "checkpoint step 10" in text
        assert "ETA" not in text and "RUNNING" not in text and "reward" not in text


def test_step_times_under_a_minute_in_seconds() -> None:
    assert fmt_step_time(42.0) == "42 s/step"
    assert fmt_step_time(1.1) == "1.1 s/step"
    assert fmt_step_time(1032.0) == "17.2 min/step"
    s = summarize(_rm(wall_s=42.0), demo_profile().monitoring, "RUNNING", True, "j")
    text = summary_markup(s, demo_profile().monitoring).plain
    assert "42 s/step" in text and "0.0 min/step" not in text and "0.7 min/step" not in text


def test_job_state_of_a_job_not_on_this_cluster(tmp_path) -> None:
    prof = demo_profile()
    w = JobWatcher(prof, pool=None, job_id="raysubmit_old", root=tmp_path)
    w.parser.feed_many(["(TaskRunner pid=1) Total training steps: 160",
                        "(TaskRunner pid=1) step:4 - critic/rewards/mean:0.5 - timing_s/step:10.0",
                        "(TaskRunner pid=1) step:5 - critic/rewards/mean:0.6 - timing_s/step:10.0"])
    w.status = "RUNNING"
    w.on_cluster = True
    js = w.job_state()
    assert js.status == "RUNNING" and js.metrics and js.on_cluster is True
    w.status, w.on_cluster = JobStatus.NOT_ON_CLUSTER, False
    js = w.job_state()
    assert js.status == JobStatus.NOT_ON_CLUSTER and js.on_cluster is False
    assert js.step == 5 and js.total_steps == 160 and js.metrics == {}
    assert js.summary.get("eta_s") is None
    w.status, w.on_cluster = "STOPPED", True
    js = w.job_state()
    assert js.summary["eta_s"] is None and js.summary["wall_step_time_s"] is None and js.metrics


async def test_concurrent_attaches_leave_one_watcher(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The job loop (finding a job) and run_action (after a submit) attach at the same
    time: exactly one watcher may be left running, the last one asked for."""
    monkeypatch.setenv("RLCONSOLE_STATE_DIR", str(tmp_path / "state"))
    started: list[JobWatcher] = []
    stopped: list[JobWatcher] = []

    running: set[str] = set()

    def start(self: JobWatcher) -> None:
        started.append(self)
        running.add(self.job_id)

    async def stop(self: JobWatcher) -> None:
        await asyncio.sleep(0.05)  # a real stop awaits its cancelled streams
        stopped.append(self)
        running.discard(self.job_id)

    def slow_reattach(self: JobWatcher, *a: Any, **k: Any) -> None:
        import time
        time.sleep(0.2)  # a big spool: the attach is in a thread for a while
        self.reattached = True

    monkeypatch.setattr(JobWatcher, "start", start)
    monkeypatch.setattr(JobWatcher, "stop", stop)
    monkeypatch.setattr(JobWatcher, "reattach", slow_reattach)
    b = LiveBackend(demo_profile())
    await asyncio.wait_for(asyncio.gather(b._attach("raysubmit_old", "UNKNOWN"),
                                          b._attach("raysubmit_new", "PENDING")), 30)
    # started after being stopped (or never stopped) = still running
    assert running == {"raysubmit_new"}, ([w.job_id for w in started], [w.job_id for w in stopped])
    assert b.watcher is not None and b.watcher.job_id == "raysubmit_new"
    await asyncio.wait_for(b._attach("raysubmit_new", "RUNNING"), 10)  # the same job: nothing new
    assert len(started) == 2
    await asyncio.wait_for(b.stop(), 60)


def test_parse_cache_leaves_only_new_lines_to_parse(tmp_path) -> None:
    """What `status` relies on to stay fast on a whole run's spool: the parser's state
    saved with the line it reached; a new watcher parses only the lines after it and
    ends with the same steps as a full parse."""
    prof = demo_profile()
    lines = ["(TaskRunner pid=1) Total training steps: 100"] + [
        f"(TaskRunner pid=1) step:{s} - critic/rewards/mean:{s / 100} - timing_s/step:10.0" for s in range(1, 41)]
    w = JobWatcher(prof, pool=None, job_id="j", root=tmp_path)
    w._consume(w.spool.append(("\n".join(lines[:30]) + "\n").encode()), notify=False)
    w.write_cache(w.cache_snapshot())
    w._consume(w.spool.append(("\n".join(lines[30:]) + "\n").encode()), notify=False)
    w.spool.close()

    fed: list[int] = []
    w2 = JobWatcher(prof, pool=None, job_id="j", root=tmp_path, wall_clock=False)
    orig = w2.parser.feed_many
    w2.parser.feed_many = lambda ls: (fed.append(len(ls)), orig(ls))[1]  # type: ignore[method-assign]
    w2.reattach(0)
    assert sum(fed) == len(lines) - 30  # only what came after the cache
    assert w2.parser.steps == {s: {"critic/rewards/mean": s / 100, "timing_s/step": 10.0} for s in range(1, 41)}
    assert w2.parser.total_steps == 100 and w2.parser.seen_at == {}
    # a cache that claims more than the spool holds is ignored: a full parse
    w2.spool.close()
    (tmp_path / "j" / "driver.log").write_bytes(("\n".join(lines[:5]) + "\n").encode())
    (tmp_path / "j" / "driver.log.idx").unlink()
    w3 = JobWatcher(prof, pool=None, job_id="j", root=tmp_path)
    w3.reattach()
    assert sorted(w3.parser.steps) == [1, 2, 3, 4]


def test_a_down_node_keeps_its_last_known_values_marked_with_their_age() -> None:
    from dataclasses import replace

    from tui.backend.static import demo_state
    from tui.core.state import ContainerState
    from widgets.node_grid import NodeRow

    prof = demo_profile()
    b = LiveBackend(prof)
    seen = []
    b.subscribe_state(seen.append)
    up = demo_state(prof, step=5)
    for n in up.nodes:
        n.updated_at = 1_000.0
    b._on_state(up)
    down = demo_state(prof, step=6)
    n3 = down.nodes[2]
    down.nodes[2] = replace(n3, reachable=False, error="ssh: connection refused",
                            container=ContainerState(name="train-rl", status="unknown"), gpu=None,
                            updated_at=None)
    b._on_state(down)
    got = seen[-1].nodes[2]
    assert not got.reachable and got.stale_since == 1_000.0
    assert got.container is not None and got.container.status == "running"  # last known
    assert seen[-1].nodes[0].stale_since is None  # an up node is current
    row = NodeRow(got.name, 8)
    row.update(got, seen[-1].ray.nodes[2], True, 0)
    assert row.header is not None and row.header.stale_age.endswith(("min", "h"))
    assert row.header.container == "running"


def test_incremental_merge_equals_a_full_merge(tmp_path) -> None:
    """The per-refresh merge of log steps and TensorBoard scalars (only what is new)
    gives exactly what merging everything from scratch gives, through new steps, a log
    line completed late, TensorBoard catching up, and a resumed run rewriting old steps."""
    from tui.core.job.tbreader import ScalarReader
    from tui.sim.tbwrite import ScalarWriter

    prof = demo_profile()
    w = JobWatcher(prof, pool=None, job_id="j", root=tmp_path / "spool")
    tb_dir = tmp_path / "tb"
    writer = ScalarWriter(tb_dir, per_scalar=True, sync=True)
    w._reader = ScalarReader(tb_dir)

    def full() -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {s: dict(m) for s, m in w.parser.steps.items()}
        for row in w._reader.rows():
            out.setdefault(row["step"], {}).update(row["metrics"])
        return dict(sorted(out.items()))

    def check() -> None:
        w._reader.update()
        got = w.rows()
        assert got == full() and list(got) == sorted(got)
        rm = w.run_metrics()
        from tui.core.job.metrics import RunMetrics
        ref = RunMetrics(full(), total_steps=rm.total_steps, last_checkpoint=rm.last_checkpoint,
                         expected=dict(rm.expected), gpus_per_node=8, wall_times=w.parser.seen_at, now=rm.now)
        assert rm.summary() == ref.summary()
        for key in ("critic/rewards/mean", "x/tb_only"):
            assert rm.raw_series(key) == ref.raw_series(key)

    for s in range(1, 16):
        w.parser.feed(f"(TaskRunner pid=1) step:{s} - critic/rewards/mean:{s / 10} - timing_s/step:{10 + s % 3}")
        if s % 4 == 0:
            check()
        if s <= 12:
            writer.add_scalars(s, {"x/tb_only": s * 2.0, "critic/rewards/mean": s / 10})
            writer.flush()
    check()
    # TensorBoard catches up on steps the log already had
    for s in range(13, 16):
        writer.add_scalars(s, {"x/tb_only": s * 2.0})
    writer.flush()
    check()
    # a resumed run writes steps 5.. again with new values
    for s in range(5, 9):
        writer.add_scalars(s, {"x/tb_only": -1.0})
    writer.flush()
    check()
    assert w.rows()[6]["x/tb_only"] == -1.0


def test_log_pane_drops_what_it_would_not_keep_before_working_on_it() -> None:
    """A re-attach delivers a whole run's log (numbering is over the whole run): the pane
    keeps its window's worth of pending lines, counts the rest as delivered."""
    from widgets.log_pane import LogPane

    pane = LogPane(keep_lines=100)
    for a in range(0, 1000, 250):
        pane.add_lines([f"line {i}" for i in range(a, a + 250)])
    assert pane.total == 1000
    assert pane._pending == [f"line {i}" for i in range(900, 1000)]


def test_live_backend_shows_a_history_job_ray_does_not_know_as_the_last_run(tmp_path) -> None:
    """The issue's case: after `sim down` / `sim up` the console found the previous
    sim's job in the run history and showed it with a step and an ETA while Ray had no
    such job. Now the state's job and the pane say "not on this cluster", no ETA."""
    from tui.backend.static import demo_state

    prof = demo_profile()
    b = LiveBackend(prof)
    states: list = []
    summaries: list = []
    b.subscribe_state(states.append)
    b.subscribe_metrics(lambda s, ser: summaries.append(s))
    w = JobWatcher(prof, pool=None, job_id="raysubmit_previous_sim", root=tmp_path)
    w.parser.feed_many(["(TaskRunner pid=1) Total training steps: 160"] + [
        f"(TaskRunner pid=1) step:{s} - critic/rewards/mean:0.{s} - timing_s/step:1.0" for s in range(1, 5)])
    w.status = "UNKNOWN"  # what find_job says of a history job Ray does not list
    b.watcher = w
    b._on_state(demo_state(prof, step=0, job_status=None, busy=False))  # Ray up, other jobs only
    job = states[-1].job
    assert job.id == "raysubmit_previous_sim" and job.status == JobStatus.NOT_ON_CLUSTER and job.on_cluster is False
    assert job.step == 4 and job.metrics == {}
    b.refresh_metrics(w)
    s = summaries[-1]
    assert s.on_cluster is False and s.eta_s is None and s.step == 4
    assert "not on this cluster" in summary_markup(s, prof.monitoring).plain
    assert "no job is running" in b.describe_stop()


def test_a_refresh_merges_only_new_steps_while_tensorboard_lags(tmp_path, monkeypatch) -> None:
    """The steady state of a long run: the log streams ahead, TensorBoard is read once a
    refresh and lags by many steps. No refresh may fall back to a full rebuild (that is
    what made the refresh cost grow with the run), and the result stays exact."""
    from tui.core.job.tbreader import ScalarReader
    from tui.sim.tbwrite import ScalarWriter

    prof = demo_profile()
    w = JobWatcher(prof, pool=None, job_id="j", root=tmp_path / "spool")
    writer = ScalarWriter(tmp_path / "tb", per_scalar=False, sync=True)
    w._reader = ScalarReader(tmp_path / "tb")
    rebuilds = []
    orig = w.store.rebuild
    monkeypatch.setattr(w.store, "rebuild", lambda: (rebuilds.append(1), orig())[1])
    step = 0
    for _refresh in range(20):
        for _ in range(12):  # the log runs 12 steps ahead of what TensorBoard shows
            step += 1
            w.parser.feed(f"(TaskRunner pid=1) step:{step} - critic/rewards/mean:{step / 4}")
            writer.add_scalars(step, {"x/tb_only": float(step), "critic/rewards/mean": step / 4})
        w._reader.update()
        writer.flush()  # written after the read: TensorBoard is a refresh behind
        rm = w.run_metrics()
        assert rm.raw_series("critic/rewards/mean") == [(s, s / 4) for s in range(1, step + 1)]
        assert [s for s, _ in rm.raw_series("x/tb_only")] == list(range(1, len(w._reader.by_step) + 1))
        if _refresh == 2:
            rebuilds.clear()  # the one rebuild allowed: TensorBoard's first steps arriving
    assert rebuilds == []


def test_a_resumed_runs_curve_continues_its_parents(tmp_path) -> None:
    """The graph's series of a run resumed from step 3 of an earlier run (the history
    names the parent; its spool is local): the parent's steps before the resume, then the
    watched run's own, for a key both have and for one only the parent logged."""
    import time

    from tui.core.job.history import RunRecord, record_run
    from tui.core.locations import spool_root

    prof = demo_profile()
    parent_dir = spool_root() / "raysubmit_parent"
    parent_dir.mkdir(parents=True)
    (parent_dir / "driver.log").write_text("".join(
        f"(TaskRunner pid=1) step:{s} - critic/rewards/mean:0.{s} - old/only:{s}\n" for s in range(1, 6)))
    for jid, extra in (("raysubmit_parent", {}), ("raysubmit_child", {"parent": {"job_id": "raysubmit_parent", "step": 3}})):
        record_run(RunRecord(profile=prof.name, profile_path="", job_id=jid, submitted_at=time.time(),
                             entrypoint=["python3"], runtime_env={}, extra=extra))
    b = LiveBackend(prof)
    w = JobWatcher(prof, pool=None, job_id="raysubmit_child", root=tmp_path)
    w.parser.feed_many([f"(TaskRunner pid=1) step:{s} - critic/rewards/mean:0.{s + 5}" for s in range(4, 7)])
    b.watcher = w
    series = b.all_series()
    assert series["critic/rewards/mean"] == [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.9), (5, 0.10), (6, 0.11)]
    assert series["old/only"] == [(s, float(s)) for s in range(1, 6)]
    # a run that resumed nothing is its own curve
    b.watcher = JobWatcher(prof, pool=None, job_id="raysubmit_parent", root=tmp_path / "other")
    b.watcher.parser.feed_many(["(TaskRunner pid=1) step:1 - critic/rewards/mean:0.5"])
    assert b.all_series() == {"critic/rewards/mean": [(1, 0.5)]}


def _verl_step_line(s: int, tags: int = 130) -> str:
    """A VeRL step line of `tags` metrics (the reference run's count), values moving."""
    import math

    vals = {"critic/rewards/mean": 0.3 + 0.1 * math.tanh(s / 600), "critic/score/mean": 0.5 + s * 1e-5,
            "perf/throughput": 742 + 40 * math.sin(s / 9), "perf/mfu/actor": 0.31,
            "timing_s/step": 1032.0 + (s % 11) * 3, "response_length/mean": 4800 + (s * 37) % 700,
            "perf/max_memory_reserved_gb": 61.5}
    for j in range(tags - len(vals)):
        vals[f"actor/m{j:03d}/mean"] = 0.01 * j + 1e-4 * (s % 97)
    if s % 10 == 0:
        vals["val-core/gsm8k/reward/mean@1"] = 0.4 + s * 1e-5
    return f"(TaskRunner pid=1) step:{s} - " + " - ".join(f"{k}:{v:.6g}" for k, v in vals.items())


def _refresh_cost(b: LiveBackend, w: JobWatcher, step: int) -> tuple[int, int, int]:
    """(Python lines run, peak bytes allocated, steps) of one console refresh after one
    new step line: work counted, not timed. The least of three refreshes (a list or dict
    growing its storage now and then is the container's amortised cost, not the refresh's)."""
    import sys
    import tracemalloc

    costs = []
    for _ in range(3):
        step += 1
        w._consume(w.spool.append((_verl_step_line(step) + "\n").encode()), notify=False)
        lines = 0

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            nonlocal lines
            if event == "line":
                lines += 1
            return tracer

        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        old = sys.gettrace()
        sys.settrace(tracer)
        try:
            b.refresh_metrics(w)
        finally:
            sys.settrace(old)
            peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
        costs.append((lines, peak))
    return min(c[0] for c in costs), min(c[1] for c in costs), step


def test_a_refresh_costs_the_same_at_step_500_and_at_step_3000(tmp_path) -> None:
    """A 20-hour run's console refresh (RunMetrics, the job's state, the pane's summary,
    the sparklines' series) must cost what is new, not what the run has done: its
    whole-series copies and walks made it ~10x dearer at step 2710 than at step 26.
    Counted on a real store fed real step lines (130 metrics each): the Python lines a
    refresh runs and the memory it allocates, at step ~500 and at step ~3000; and what
    the pane is handed is the whole run's curve, as before."""
    from tui.core.job.metrics import RunMetrics, downsample

    prof = demo_profile()
    b = LiveBackend(prof)
    pushed: list[Any] = []
    b.subscribe_metrics(lambda s, ser: pushed.append((s, ser)))
    w = JobWatcher(prof, pool=None, job_id="j", root=tmp_path, wall_clock=False)
    w.observe("RUNNING", True)
    b.watcher = w
    w._consume(w.spool.append(b"(TaskRunner pid=1) Total training steps: 5000\n"), notify=False)

    def feed_to(n: int) -> None:
        for a in range(len(w.parser.steps) + 1, n + 1, 200):
            text = "".join(_verl_step_line(s) + "\n" for s in range(a, min(n, a + 199) + 1))
            w._consume(w.spool.append(text.encode()), notify=False)
        b.refresh_metrics(w)  # the catch-up refresh after a batch is not the one counted

    # from step 500 on (the sparklines' 300 points are full: below that a refresh hands
    # the pane every point) to step 3000, six times the run, the same work
    feed_to(500)
    lines_500, mem_500, step = _refresh_cost(b, w, 500)
    feed_to(3000)
    lines_3000, mem_3000, step = _refresh_cost(b, w, 3000)
    assert lines_3000 < 1.3 * lines_500, (lines_500, lines_3000)
    assert mem_3000 < 1.3 * mem_500 + 20_000, (mem_500, mem_3000)

    # what was shown is what a full computation over every step shows
    summary, series = pushed[-1]
    rm = w.run_metrics()
    ref = RunMetrics(dict(w.parser.steps), total_steps=rm.total_steps, last_checkpoint=rm.last_checkpoint,
                     expected=dict(rm.expected), gpus_per_node=rm.gpus_per_node, wall_times=w.parser.seen_at,
                     now=rm.now, tqdm_s_per_step=rm.tqdm_s_per_step)
    assert summary.step == step and rm.summary() == ref.summary()
    assert rm.summary()["validation"] == {"val-core/gsm8k/reward/mean@1": 0.43}  # step 3000, 6 digits
    for name, key, scale in (("reward", "critic/rewards/mean", 1), ("throughput", "perf/throughput", 8),
                             ("response_length", "response_length/mean", 1)):
        want = downsample([(s, v * scale) for s, v in ref.raw_series(key)], 300)
        got = series[name]
        assert [s for s, _ in got] == [s for s, _ in want]
        assert len(got) == 300 and [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-12)


async def test_a_job_loop_that_keeps_failing_is_a_warning_told_once(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path) -> None:
    """A bug building the watcher (once: a run record read by a field it does not have)
    left the console never watching the job, with only an INFO log line each refresh. It
    is a warning episode now: opened once however many rounds fail, ended when a round
    succeeds; the head's link failing stays quiet (it is shown as the node down)."""
    import tui.core.job.watcher as watcher_mod
    from tui.core.ssh import NodeDown

    monkeypatch.setenv("RLCONSOLE_STATE_DIR", str(tmp_path / "state"))
    failures = {"left": 3}
    real_init = JobWatcher.__init__

    def init(self: JobWatcher, *a: Any, **k: Any) -> None:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise AttributeError("'RunRecord' object has no attribute 'parent'")
        real_init(self, *a, **k)

    async def found(*a: Any, **k: Any) -> tuple[str, str]:
        if failures["left"] == 3 and not rounds:
            rounds.append("down")
            raise NodeDown("head", "connection lost")
        rounds.append("up")
        return "raysubmit_x", "RUNNING"

    rounds: list[str] = []
    monkeypatch.setattr(JobWatcher, "__init__", init)
    monkeypatch.setattr(JobWatcher, "start", lambda self: None)
    monkeypatch.setattr(JobWatcher, "reattach", lambda self, *a, **k: None)
    monkeypatch.setattr(watcher_mod, "find_job", found)
    b = LiveBackend(demo_profile())
    monkeypatch.setattr(b, "head_up", lambda: True)
    monkeypatch.setattr(b, "refresh_metrics", lambda w: None)
    alerts: list[Any] = []
    b.subscribe_alerts(alerts.append)
    loop_task = asyncio.create_task(b._job_loop())
    try:
        async def watching() -> None:
            while b.watcher is None:
                b._kick.set()
                await asyncio.sleep(0.01)
        await asyncio.wait_for(watching(), 30)
    finally:
        loop_task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop_task
    mine = [a for a in alerts if a.source == "console"]
    assert rounds[0] == "down" and rounds.count("up") >= 4, rounds
    assert [(a.level, a.ends) for a in mine] == [("warning", False), ("info", True)], [a.message for a in mine]
    assert "no attribute 'parent'" in mine[0].message and mine[0].key == mine[1].key
    await asyncio.wait_for(b.stop(), 60)


async def test_a_failed_end_is_told_once_the_log_had_its_grace(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A job that fails at once (Hydra refusing an override) was seen FAILED by Ray's
    poll before the log follower had read a line, and its end was told "unrecognised"
    (a clean-clone CI run, test_sim_faults). The end of a FAILED job is told
    END_LOG_GRACE_S after it was first seen, once, with the cause from the lines that
    arrived meanwhile; a STOPPED one at once."""
    from tui.core.state import JobState

    monkeypatch.setattr(LiveBackend, "END_LOG_GRACE_S", 0.3)
    prof = demo_profile()
    b = LiveBackend(prof)
    alerts: list[Any] = []
    b.subscribe_alerts(alerts.append)

    def ends() -> list[Any]:
        return [a for a in alerts if a.key == "job-end" and not a.ends]

    def watched(job_id: str, seen: str, then: str) -> JobWatcher:
        """A job the backend watched while `seen`, then Ray says `then`."""
        w = JobWatcher(prof, pool=None, job_id=job_id, root=tmp_path)
        b.watcher = w
        w.observe(seen, True)
        b.refresh_metrics(w)
        w.observe(then, True)
        b._job_changed(w)
        return w

    w = watched("raysubmit_refused", "PENDING", "FAILED")
    b.refresh_metrics(w)  # the job loop's turn, within the grace
    assert ends() == []
    lines = w.spool.append(b"Could not override 'trainer.no_such_key'.\n"
                           b"To append to your config use +trainer.no_such_key=1\n")
    w._consume(lines)
    await asyncio.sleep(0.5)  # the grace's timer tells it
    told = ends()
    assert len(told) == 1 and told[0].diagnosis == "hydra-override-missing-key", [a.message for a in told]
    assert "PENDING -> FAILED" in told[0].message
    b.refresh_metrics(w)
    assert len(ends()) == 1  # once

    # a stop needs no cause: told at once
    watched("raysubmit_stopped", "RUNNING", "STOPPED")
    assert any("raysubmit_stopped RUNNING -> STOPPED" in a.message for a in ends())
