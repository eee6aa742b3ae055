"""Issue 31: the demo tells the truth.

- the sim profile's `monitoring:` ranges come from the stand-in trainer's own performance
  model (tui/sim/tree/verl/utils/sim_perf.py): its healthy figures are inside them, the
  figures of a planted `slow-steps` / `low-throughput` fault far outside;
- a range is shown in the unit of the value beside it (the pane, `status`);
- each subcommand's `--help` lists only the global flags that apply to it.

The run itself (a healthy chain under tmux with no ✗ and no alert; one planted fault and
its one alert) is tests/test_demo_tmux.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from tui.cli.main import build_parser
from tui.cli.status import render_table
from tui.core.alerts import Thresholds
from tui.core.job.metrics import MetricsSummary, fmt_range, monitoring_ranges
from tui.core.profile import Monitoring
from tui.core.state import ClusterState, JobState, RayState
from tui.sim.sim_ranges import perf_model, sim_monitoring
from widgets.metrics_pane import compact_markup, summary_markup

SIZES = dict(nnodes=4, batch=8, n=2, max_prompt=256, max_resp=512, test_freq=5, save_freq=5, refresh_s=1.0)


def _mon(step_s: float = 1.0) -> Monitoring:
    m = sim_monitoring(step_s=step_s, **SIZES)
    return Monitoring(mfu_pct=tuple(m["mfu_pct"]),
                      throughput_tokens_per_s_per_node=tuple(m["throughput_tokens_per_s_per_node"]),
                      step_time_min=tuple(m["step_time_min"]), mem_gib_per_card=tuple(m["mem_gib_per_card"]),
                      stall_factor=m["stall_factor"])


@pytest.mark.parametrize("step_s", [0.3, 1.0, 5.0])
def test_sim_ranges_hold_the_trainers_healthy_figures_and_not_its_faults(step_s: float) -> None:
    P = perf_model()
    mon = _mon(step_s)
    k = sum(P.PHASES.values())  # the modelled step, in core times
    tput = mon.throughput_tokens_per_s_per_node
    assert tput is not None and mon.step_time_min is not None and mon.mfu_pct and mon.mem_gib_per_card
    # healthy: the extremes of every draw (clipped tokens/s, jitter, validation + save steps)
    clip = P.TOKENS_PER_S_CLIP_SD * P.TOKENS_PER_S_SD
    slowest_k = k + (P.PHASES["gen"] + P.PHASES["update_actor"]) * P.JITTER + P.TESTING + P.SAVE_CHECKPOINT
    for tps, kk in ((P.TOKENS_PER_S_PER_NODE - clip, slowest_k), (P.TOKENS_PER_S_PER_NODE + clip, k * 0.97)):
        assert tput[0] <= tps / kk <= tput[1]
    assert mon.mfu_pct[0] <= P.MFU_CLIP[0] * 100 and P.MFU_CLIP[1] * 100 <= mon.mfu_pct[1]
    mem_clip = P.MEM_ALLOC_CLIP_SD * P.MEM_ALLOC_SD
    assert mon.mem_gib_per_card[0] <= P.MEM_ALLOC_GIB - mem_clip + P.MEM_RESERVED_EXTRA_GIB[0]
    assert P.MEM_ALLOC_GIB + mem_clip + P.MEM_RESERVED_EXTRA_GIB[1] <= mon.mem_gib_per_card[1]
    wall = P.WALL_GEN + P.WALL_LOGPROB + sum(P.WALL_UPDATE)
    lo_s, hi_s = mon.step_time_min[0] * 60, mon.step_time_min[1] * 60
    # a wall step twice as slow as planned (a loaded 2-core machine), a validation + save step too
    assert lo_s <= step_s * wall and 2 * step_s * (wall + P.WALL_VAL + P.WALL_SAVE) <= hi_s
    # faults: clearly outside
    fast_low = (P.TOKENS_PER_S_PER_NODE + clip) / P.LOW_THROUGHPUT_FACTOR / (k * 0.97)
    assert fast_low < tput[0] / 2
    assert (P.TOKENS_PER_S_PER_NODE + clip) / P.SLOW_STEPS_FACTOR / (k * 0.97) < tput[0] / 2
    assert step_s * wall * P.SLOW_STEPS_FACTOR > hi_s
    # low-throughput slows the cards, not the run to a halt: its MFU (the draw / the factor)
    # is below the range, its steps inside the stall factor
    assert P.MFU_CLIP[1] * 100 / P.LOW_THROUGHPUT_FACTOR < mon.mfu_pct[0] / 2
    assert P.LOW_THROUGHPUT_FACTOR < mon.stall_factor
    # a stall: the rule's limit (stall_factor x the cadence) holds a doubled step, not a slow one
    assert 2 * (wall + P.WALL_VAL + P.WALL_SAVE) / wall < mon.stall_factor < P.SLOW_STEPS_FACTOR


def test_sim_profile_carries_the_derived_ranges_not_the_seeds(tmp_path, monkeypatch) -> None:
    from tui.sim.cluster import build_profile

    monkeypatch.setenv("RLCONSOLE_SIM_STEP_S", "0.5")
    nodes = [{"name": f"node{i + 1}", "address": f"127.0.0.{i + 2}", "port": 2222, "ray": {}} for i in range(4)]
    ports = {k: 0 for k in ("agent_listen", "agent_grpc", "metrics", "runtime_env", "node_manager", "object_manager")}
    ray_ports = {"head_port": 1, "dashboard_port": 2, "client_port": 3, "nodes": {n["name"]: ports for n in nodes}}
    p = build_profile(nodes=nodes, gpus=8, shared=tmp_path, known_hosts=tmp_path / "kh", key=tmp_path / "k",
                      user="u", image="img", ray_ports=ray_ports, ray_tmp=tmp_path, refresh_s=1.0)
    mon = p["monitoring"]
    want = sim_monitoring(step_s=0.5, **SIZES)
    for key, value in want.items():
        assert mon[key] == value, key
    assert mon["throughput_tokens_per_s_per_node"] != [600, 900]


def test_step_time_range_is_shown_in_seconds_beside_seconds() -> None:
    """`1.0 s/step ✗ 0.05-2` (a range in minutes beside seconds) becomes `✗ 3 s-2 min`."""
    mon = Monitoring(step_time_min=(0.05, 2), throughput_tokens_per_s_per_node=(600, 900), mfu_pct=(25, 40))
    s = MetricsSummary.judge(monitoring_ranges(mon), job_id="j", status="RUNNING", step=5, total_steps=10,
                             step_time_s=1.0, eta_s=5.0, throughput_per_node=700.0, mfu_pct=30.0)
    j = s.judged["step_time"]
    assert (j.value, j.low, j.high, j.ok) == (1.0, 3.0, 120.0, False)
    for markup in (compact_markup(s, mon), summary_markup(s, mon)):
        text = markup.plain
        assert "1.0 s/step ✗ 3 s-2 min" in text, text
        assert "700 tok/s/node ✓ 600-900" in text and "30.0% ✓ 25-40" in text
    ok = MetricsSummary.judge(monitoring_ranges(mon), status="RUNNING", step=5, step_time_s=42.0)
    assert "42 s/step ✓ 3 s-2 min" in summary_markup(ok, mon).plain
    assert fmt_range("step_time", 900, 1200) == "15-20 min"
    assert fmt_range("throughput", 600, 900) == "600-900"


def test_status_shows_each_figure_with_its_range_in_its_unit() -> None:
    summary = {"wall_step_time_s": 1.0, "throughput_tokens_per_s_per_node": 650.0, "mfu_pct": 31.0,
               "expected": {"step_time_s": [3.0, 120.0], "throughput_tokens_per_s_per_node": [380, 1300],
                            "mfu_pct": [20, 42]}}
    st = ClusterState(profile="sim", simulated=True, taken_at=0.0, nodes=[], ray=RayState(available=False),
                      job=JobState(id="raysubmit_1", status="RUNNING", step=7, total_steps=10, summary=summary))
    text = render_table(st)
    assert "1.0 s/step ✗ 3 s-2 min" in text, text
    assert "650 tok/s/node ✓ 380-1300" in text and "MFU 31.0% ✓ 20-42" in text


def test_alert_thresholds_read_the_sim_profiles_stall_factor() -> None:
    mon = _mon(1.0)
    t = Thresholds.from_monitoring(mon)
    assert t.stall_factor == mon.stall_factor and t.step_time_s == (mon.step_time_min[0] * 60,  # type: ignore[index]
                                                                     mon.step_time_min[1] * 60)  # type: ignore[index]
    assert dataclasses.asdict(t)["throughput_per_node"] == mon.throughput_tokens_per_s_per_node


GLOBAL = {"--no-bell", "--read-only", "--profile", "--verbose"}


def _flags(cmd: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and cmd in a.choices).choices[cmd]  # type: ignore[union-attr]
    return {o for a in sub._actions for o in a.option_strings if o in GLOBAL}


@pytest.mark.parametrize("cmd,want", [
    ("sim", {"--verbose"}),
    ("metrics", {"--verbose"}),
    ("import", {"--verbose"}),
    ("completion", {"--verbose"}),
    ("profiles", {"--verbose"}),
    ("demo", {"--verbose", "--no-bell"}),
    ("status", {"--verbose", "--profile"}),
    ("watch", {"--verbose", "--profile"}),
    ("submit", {"--verbose", "--profile", "--read-only"}),
    ("serve", {"--verbose", "--profile", "--read-only"}),
])
def test_subcommand_help_lists_only_flags_that_apply(cmd: str, want: set[str], capsys) -> None:
    assert _flags(cmd) == want
    with pytest.raises(SystemExit):
        build_parser().parse_args([cmd, "--help"])
    out = capsys.readouterr().out
    options = [line.strip() for line in out.splitlines() if line.strip().startswith("-")]
    for flag in GLOBAL - want:
        assert not any(o.startswith(flag) or f", {flag}" in o.split("  ")[0] for o in options), (cmd, flag)
    for flag in want:
        assert any(flag in o.split("  ")[0] for o in options), (cmd, flag)


def test_global_flags_still_work_before_any_subcommand() -> None:
    a = build_parser().parse_args(["--read-only", "--no-bell", "-P", "x", "status"])
    assert a.read_only and a.no_bell and a.profile == "x"
    assert build_parser().parse_args(["demo", "--no-bell"]).no_bell
    assert build_parser().parse_args(["submit", "--read-only", "-P", "x"]).read_only


def test_submit_plan_gives_the_step_time_range_in_a_readable_unit() -> None:
    """The submit question's duration: `0.1-8 s a step`, not `0.00166667-0.133333 min`."""
    from types import SimpleNamespace

    from tui.core.actions.plan import _duration

    sim = SimpleNamespace(monitoring=_mon(1.0))
    text = _duration(sim, 160)  # type: ignore[arg-type]
    assert text is not None and "at 0.1-8 s a step" in text and "min a step" not in text, text
    seed = SimpleNamespace(monitoring=Monitoring(step_time_min=(15, 20)))
    assert "at 15-20 min a step" in (_duration(seed, 2710) or "")  # type: ignore[arg-type]
