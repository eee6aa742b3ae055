"""The alert rule set (tui/core/alerts.py) on typed inputs: each rule raises once per
episode, ends when its cause ends, and the range rules need N steps in a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.core.alerts import Alert, AlertRules, OpenAlerts, Thresholds, diagnose_tail
from tui.core.errors import ProfileError
from tui.core.job.metrics import MetricsSummary
from tui.core.profile import load_profile
from tui.core.state import (
    ClusterState, GpuCard, GpuReport, JobState, NodeState, RayJobState, RayNodeState, RayState,
)


def card(i: int, temp: float = 50.0, mem: float = 1000.0) -> GpuCard:
    return GpuCard(index=i, temp_c=temp, mem_used_mib=mem, mem_total_mib=81920.0, util_pct=0.0)


def node(name: str, cards: list[GpuCard] | None = None, up: bool = True, error: str | None = None) -> NodeState:
    return NodeState(name=name, address=f"127.0.0.{name[-1]}", role="worker", reachable=up, error=error,
                     gpu=GpuReport(tool="mthreads-gmi", cards=cards if cards is not None else [card(i) for i in range(4)])
                     if up else None)


def state(*nodes: NodeState, ray: RayState | None = None) -> ClusterState:
    return ClusterState(profile="t", simulated=True, nodes=list(nodes), ray=ray or RayState())


def rules(**kw) -> AlertRules:
    return AlertRules(Thresholds(**kw), {"node1": 4, "node2": 4}, diagnose=diagnose_tail)


def msgs(alerts: list[Alert]) -> list[tuple[str, str, bool]]:
    return [(a.level, a.message, a.ends) for a in alerts]


def test_node_down_once_then_back_and_the_open_set_clears() -> None:
    r = rules()
    shown = OpenAlerts()
    assert r.observe_state(state(node("node1"), node("node2")), now=0) == []
    a = r.observe_state(state(node("node1"), node("node2", up=False, error="connection refused")), now=1)
    assert msgs(a) == [("error", "node node2 is down: connection refused", False)]
    for x in a:
        shown.add(x)
    assert [x.message for x in shown.current()] == ["node node2 is down: connection refused"]
    # still down: no repeat
    assert r.observe_state(state(node("node1"), node("node2", up=False, error="connection refused")), now=2) == []
    a = r.observe_state(state(node("node1"), node("node2")), now=3)
    assert msgs(a) == [("info", "node node2 is back", True)]
    for x in a:
        shown.add(x)
    assert shown.current() == []
    # a second episode raises again
    assert len(r.observe_state(state(node("node1"), node("node2", up=False, error="timeout")), now=4)) == 1


def test_connecting_is_not_down() -> None:
    r = rules()
    assert r.observe_state(state(node("node1", up=False, error="connecting")), now=0) == []


def test_hot_card_and_memory_near_full_and_their_end() -> None:
    r = rules(hot_c=85, mem_full_pct=95)
    hot = [card(0), card(1, temp=88), card(2, mem=80_000), card(3)]
    a = r.observe_state(state(node("node1", hot), node("node2")), now=0)
    assert sorted(m for _, m, _ in msgs(a)) == [
        "node1 card 1 at 88°C (hot >= 85°C)",
        "node1 card 2 memory 98% of 80 GiB (near full >= 95%)",
    ]
    assert r.observe_state(state(node("node1", hot), node("node2")), now=1) == []
    # the node goes down: its card episodes are not known, so they stay open (no end, no repeat)
    a = r.observe_state(state(node("node1", up=False, error="timeout"), node("node2")), now=2)
    assert msgs(a) == [("error", "node node1 is down: timeout", False)]
    a = r.observe_state(state(node("node1", hot), node("node2")), now=3)
    assert msgs(a) == [("info", "node node1 is back", True)]
    a = r.observe_state(state(node("node1"), node("node2")), now=4)
    assert sorted(m for _, m, _ in msgs(a)) == ["node1 card 1 cooled down", "node1 card 2 memory below the near-full mark"]
    assert all(x.ends for x in a)


def test_card_missing_from_its_nodes_report() -> None:
    r = rules()
    a = r.observe_state(state(node("node1", [card(0), card(1), card(3)]), node("node2")), now=0)
    assert msgs(a) == [("error", "node1 reports 3 of 4 cards (missing: 2)", False)]
    assert r.observe_state(state(node("node1", [card(0), card(1), card(3)]), node("node2")), now=1) == []
    a = r.observe_state(state(node("node1"), node("node2")), now=2)
    assert msgs(a) == [("info", "node1 reports all its cards again", True)]


def test_ray_node_lost_and_back() -> None:
    r = rules()

    def ray(alive2: bool) -> RayState:
        return RayState(available=True, nodes=[RayNodeState("a", "127.0.0.1", True, is_head=True),
                                               RayNodeState("b", "127.0.0.2", alive2)])
    assert r.observe_state(state(node("node1"), node("node2"), ray=ray(True)), now=0) == []
    a = r.observe_state(state(node("node1"), node("node2"), ray=ray(False)), now=1)
    assert msgs(a) == [("error", "Ray lost node node2 (127.0.0.2)", False)]
    assert r.observe_state(state(node("node1"), node("node2"), ray=ray(False)), now=2) == []
    # Ray does not answer: nothing is known, the episode stays
    assert r.observe_state(state(node("node1"), node("node2"), ray=RayState(available=False)), now=3) == []
    a = r.observe_state(state(node("node1"), node("node2"), ray=ray(True)), now=4)
    assert msgs(a) == [("info", "Ray node node2 is alive again", True)]


def test_a_node_that_rejoined_is_not_lost() -> None:
    """Ray keeps a restarted worker's old record (DEAD) beside its new one (ALIVE, a new
    node id at the same address): the node is alive. A console opened on such a cluster
    raises nothing; one that saw the loss ends it."""
    rejoined = RayState(available=True, nodes=[RayNodeState("a", "127.0.0.1", True, is_head=True),
                                               RayNodeState("b", "127.0.0.2", False),
                                               RayNodeState("c", "127.0.0.2", True)])
    assert rules().observe_state(state(node("node1"), node("node2"), ray=rejoined), now=0) == []
    r = rules()
    lost = RayState(available=True, nodes=rejoined.nodes[:2])
    assert msgs(r.observe_state(state(node("node1"), node("node2"), ray=lost), now=0)) == [
        ("error", "Ray lost node node2 (127.0.0.2)", False)]
    a = r.observe_state(state(node("node1"), node("node2"), ray=rejoined), now=1)
    assert msgs(a) == [("info", "Ray node node2 is alive again", True)]


def job(status: str, step: int | None = 5, id: str = "raysubmit_1") -> JobState:
    return JobState(id=id, status=status, step=step, total_steps=100)


def test_job_failed_with_the_diagnosis_of_the_last_lines() -> None:
    r = rules()
    assert r.observe_job(job("RUNNING"), MetricsSummary(step=5), now=0) == []
    tail = ["step:5 - actor/pg_loss:0.1", "Traceback (most recent call last):",
            "torch.OutOfMemoryError: MUSA out of memory. Tried to allocate 2.00 GiB"]
    a = r.observe_job(job("FAILED"), MetricsSummary(step=5), now=1, log_tail=tail, tail_start=100)
    assert len(a) == 1 and a[0].level == "error" and a[0].key == "job-end"
    assert a[0].message.startswith("job raysubmit_1 RUNNING -> FAILED at step 5: ")
    assert "memory" in a[0].message.lower() and a[0].line == 102
    assert r.observe_job(job("FAILED"), MetricsSummary(step=5), now=2, log_tail=tail) == []
    # a new job runs: the failure is over
    a = r.observe_job(job("RUNNING", 0, id="raysubmit_2"), MetricsSummary(), now=3)
    assert msgs(a) == [("info", "job raysubmit_2 is RUNNING", True)]


@pytest.mark.parametrize("status,level", [("SUCCEEDED", "info"), ("STOPPED", "warning")])
def test_job_succeeded_or_stopped(status: str, level: str) -> None:
    r = rules()
    r.observe_job(job("PENDING", None), MetricsSummary(), now=0)
    a = r.observe_job(job(status), MetricsSummary(), now=1)
    assert msgs(a) == [(level, f"job raysubmit_1 PENDING -> {status} at step 5", False)]


@pytest.mark.parametrize("gap", ["UNKNOWN", "NOT_ON_CLUSTER"])
def test_a_refresh_that_could_not_tell_does_not_swallow_the_end(gap: str) -> None:
    """A dashboard that did not answer for one refresh (the job then reads UNKNOWN or not
    in Ray's list) between RUNNING and FAILED: the end of the watched run is still news,
    once (seen on the live path under load: Ray said FAILED, no alert came)."""
    r = rules()
    r.observe_job(job("RUNNING"), MetricsSummary(step=5), now=0)
    assert r.observe_job(job(gap), MetricsSummary(step=5), now=1) == []
    a = r.observe_job(job("FAILED"), MetricsSummary(step=5), now=2, log_tail=["Traceback (most recent call last):"])
    assert [x.key for x in a] == ["job-end"] and a[0].message.startswith("job raysubmit_1 RUNNING -> FAILED")
    assert r.observe_job(job("FAILED"), MetricsSummary(step=5), now=3) == []


def test_an_old_jobs_end_is_not_news() -> None:
    """Attaching to a job that already ended is not a state change."""
    assert rules().observe_job(job("FAILED"), MetricsSummary(), now=0, log_tail=["Traceback"]) == []


def test_steps_stalled_after_k_times_the_observed_step_time_then_resumed() -> None:
    r = rules(stall_factor=3, step_time_s=(600.0, 1200.0))
    # attaching reads 40 steps at once, then steps arrive every 10 s (the log's own
    # timing_s/step says 1000 s: the wall clock is what counts)
    assert r.observe_job(job("RUNNING", 40), MetricsSummary(step=40, step_time_s=1000.0), now=0) == []
    for i in range(1, 5):
        assert r.observe_job(job("RUNNING", 40 + i), MetricsSummary(step=40 + i), now=10 * i) == []
    assert r.expected_step_s() == 10
    s = MetricsSummary(step=44)
    assert r.observe_job(job("RUNNING", 44), s, now=69) == []  # 2.9 x: not yet
    a = r.observe_job(job("RUNNING", 44), s, now=71)
    assert len(a) == 1 and a[0].key == "stall" and a[0].level == "warning"
    assert "no new step for 31 s (last step 44; expected one every 10 s" in a[0].message
    assert r.observe_job(job("RUNNING", 44), s, now=100) == []  # once per episode
    a = r.observe_job(job("RUNNING", 45), MetricsSummary(step=45), now=101)
    assert msgs(a) == [("info", "steps resumed at step 45", True)]


def test_stall_falls_back_to_the_profiles_step_time() -> None:
    r = rules(stall_factor=2, step_time_s=(60.0, 120.0))
    assert r.observe_job(job("RUNNING"), MetricsSummary(step=1), now=0) == []
    assert r.observe_job(job("RUNNING"), MetricsSummary(step=1), now=239) == []
    assert len(r.observe_job(job("RUNNING"), MetricsSummary(step=1), now=241)) == 1
    # the job stops: the stall ends with it
    a = r.observe_job(job("STOPPED", 1), MetricsSummary(step=1), now=242)
    assert ("info", "job raysubmit_1 is STOPPED: no longer waiting for steps", True) in msgs(a)


def test_throughput_out_of_range_needs_n_consecutive_steps() -> None:
    r = rules(out_of_range_steps=3, throughput_per_node=(600.0, 900.0))

    def feed(step: int, tput: float) -> list[Alert]:
        return r.observe_job(job("RUNNING", step), MetricsSummary(step=step, throughput_per_node=tput), now=step)

    assert feed(1, 700) == []
    assert feed(2, 100) == []  # one noisy step
    assert feed(3, 750) == []
    assert feed(4, 100) == [] and feed(5, 120) == []
    # the same step seen again does not count twice
    assert r.observe_job(job("RUNNING", 5), MetricsSummary(step=5, throughput_per_node=120), now=5.5) == []
    a = feed(6, 110)
    assert len(a) == 1 and a[0].key == "range:throughput"
    assert a[0].message == ("throughput 110 tokens/s per node outside the profile's 600-900 "
                            "for 3 steps in a row (step 6)")
    assert feed(7, 100) == []
    assert msgs(feed(8, 800)) == [("info", "throughput back in the profile's range", True)]


def test_mfu_out_of_range() -> None:
    r = rules(out_of_range_steps=2, mfu_pct=(25.0, 40.0))
    assert r.observe_job(job("RUNNING", 1), MetricsSummary(step=1, mfu_pct=55.0), now=1) == []
    a = r.observe_job(job("RUNNING", 2), MetricsSummary(step=2, mfu_pct=56.0), now=2)
    assert [x.key for x in a] == ["range:mfu"]


def test_open_alerts_keeps_an_event_until_seen() -> None:
    o = OpenAlerts()
    o.add(Alert("error", "log", "Traceback", at=1))
    o.add(Alert("warning", "probe", "hot", at=2, key="card:x"))
    assert [a.message for a in o.current()] == ["Traceback", "hot"]
    o.seen()
    assert [a.message for a in o.current()] == ["hot"]


def test_another_job_takes_the_old_logs_event_off_the_banner() -> None:
    """A new job watched: the previous job's log finding (its line is in that log) leaves
    the banner; an open episode and an event from elsewhere stay."""
    o = OpenAlerts()
    o.add(Alert("error", "log", "MUSA out of memory", at=1, line=53))
    o.add(Alert("warning", "probe", "hot", at=2, key="card:x"))
    o.another_job()
    assert [a.message for a in o.current()] == ["hot"]
    o.add(Alert("error", "ray", "node2 died", at=3))
    o.another_job()
    assert [a.message for a in o.current()] == ["node2 died", "hot"]


def test_profile_monitoring_thresholds_and_console_bell(tmp_path: Path) -> None:
    seed = Path(__file__).parent.parent / "profiles" / "qwen3-8b-grpo-32gpu.yaml"
    p = load_profile(seed)
    assert (p.monitoring.hot_c, p.monitoring.mem_full_pct, p.monitoring.stall_factor,
            p.monitoring.out_of_range_steps, p.console.bell) == (85.0, 95.0, 3.0, 3, True)
    text = seed.read_text()
    f = tmp_path / "p.yaml"
    f.write_text(text.replace("  refresh_s: 2.0\n", "  refresh_s: 2.0\n  stall_factor: 5\n  hot_c: 90\n")
                 + "console: {bell: false}\n")
    p = load_profile(f)
    assert p.monitoring.stall_factor == 5 and p.monitoring.hot_c == 90 and p.console.bell is False
    assert AlertRules.for_profile(p).t.step_time_s == (900.0, 1200.0)
    f.write_text(text.replace("  refresh_s: 2.0\n", "  refresh_s: 2.0\n  stall_factor: 0.5\n"))
    with pytest.raises(ProfileError) as e:
        load_profile(f)
    line = text.splitlines().index("  refresh_s: 2.0") + 2
    assert str(e.value) == f"{f}:{line}: monitoring.stall_factor: expected a factor >= 1, got 0.5"
    f.write_text(text + "console: {bell: maybe}\n")
    with pytest.raises(ProfileError) as e:
        load_profile(f)
    assert "console.bell: expected true or false" in str(e.value)


def test_demo_alerts_come_from_the_rules() -> None:
    """The demo's alerts are what the rules raise on the demo data: the hot card and the
    nearly full card the demo state plants, each once over eleven refreshes."""
    from tui.backend.static import demo_alerts

    got = demo_alerts()
    assert [a.key for a in got] == ["card:node71:3:hot", "card:node116:5:mem"]
    assert all(not a.ends for a in got)
