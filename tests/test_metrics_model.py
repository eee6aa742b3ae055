"""RunMetrics: derived figures, range verdicts, downsampling, JSON-ability; and the
`metrics` command's loaders/writers on a log file and a TensorBoard directory."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from tui.cli.metrics import MetricsSourceError, detect_kind, load_metrics, write_csv, write_json
from tui.core.job.metrics import RunMetrics, downsample, json_safe, judge
from tui.sim.tbwrite import ScalarWriter

EXPECTED = {
    "mfu_pct": (25, 40),
    "throughput_tokens_per_s_per_node": (600, 900),
    "step_time_s": (900, 1200),
    "mem_gib_per_card": (50, 70),
}


def run_rows(n: int = 30, *, step_time: float = 1000.0) -> list[dict]:
    rows = []
    for s in range(1, n + 1):
        m = {
            "timing_s/step": step_time,
            "perf/throughput": 90.0,  # per GPU -> 720 per node with 8 GPUs
            "perf/mfu/actor": 0.30,
            "critic/rewards/mean": 0.1 + 0.01 * s,
            "critic/score/mean": 0.2 + 0.01 * s,
            "response_length/mean": 1000.0 + s,
            "perf/max_memory_allocated_gb": 55.0,
            "perf/max_memory_reserved_gb": 75.0,
        }
        if s % 5 == 0:
            m["val-core/aime_2024/reward/mean@1"] = 0.01 * s
            m["val/test_score/aime_2025"] = 0.02 * s
        rows.append({"step": s, "metrics": m})
    return rows


def test_headline_numbers_and_flags() -> None:
    rm = RunMetrics(run_rows(), total_steps=2710, last_checkpoint=20,
                    expected=EXPECTED, gpus_per_node=8)
    assert rm.last_step == 30
    assert rm.step_time_s() == 1000.0
    assert rm.elapsed_s() == 30 * 1000.0
    assert rm.eta_s() == (2710 - 30) * 1000.0
    assert rm.progress_pct() == pytest.approx(100 * 30 / 2710)
    inds = {i.name: i for i in rm.indicators()}
    assert inds["throughput_tokens_per_s_per_gpu"].value == 90.0
    assert inds["throughput_tokens_per_s_per_node"].value == 720.0
    assert inds["throughput_tokens_per_s_per_node"].flag == "ok"
    assert inds["mfu_pct"].value == pytest.approx(30.0)
    assert inds["mfu_pct"].flag == "ok" and inds["mfu_pct"].source == "perf/mfu/actor"
    assert inds["step_time_s"].flag == "ok"
    assert inds["mem_gib_per_card"].value == 75.0  # reserved is what the card shows
    assert inds["mem_gib_per_card"].flag == "high"
    assert inds["reward_mean"].value == pytest.approx(0.4) and inds["reward_mean"].flag is None
    assert inds["response_length_mean"].value == 1030.0
    assert rm.trend() == "rising"
    val = rm.validation()
    assert val == {"val-core/aime_2024/reward/mean@1": {"value": pytest.approx(0.3), "step": 30},
                   "val/test_score/aime_2025": {"value": pytest.approx(0.6), "step": 30}}


def test_low_flags_and_old_mfu_key() -> None:
    rows = [{"step": s, "metrics": {"mfu/actor": 0.083, "perf/throughput": 50.0,
                                    "timing_s/step": 600.0}} for s in range(1, 4)]
    rm = RunMetrics(rows, expected=EXPECTED, gpus_per_node=8)
    inds = {i.name: i for i in rm.indicators()}
    assert inds["mfu_pct"].value == pytest.approx(8.3) and inds["mfu_pct"].flag == "low"
    assert inds["mfu_pct"].source == "mfu/actor"
    assert inds["throughput_tokens_per_s_per_node"].flag == "low"
    assert inds["step_time_s"].flag == "low"
    assert inds["mem_gib_per_card"].value is None and inds["mem_gib_per_card"].flag is None
    assert rm.eta_s() is None  # total unknown


def test_judge() -> None:
    assert judge(10, (25, 40)) == "low"
    assert judge(25, (25, 40)) == "ok"
    assert judge(40, (25, 40)) == "ok"
    assert judge(41, [25, 40]) == "high"
    assert judge(None, (25, 40)) is None
    assert judge(float("nan"), (25, 40)) is None
    assert judge(30, None) is None
    assert judge(30, (None, 20)) == "high"


def test_wall_clock_fallback_without_timing() -> None:
    rows = [{"step": s, "metrics": {"critic/rewards/mean": 0.5}} for s in range(1, 11)]
    wall = {s: 1000.0 + 900.0 * s for s in range(1, 11)}
    rm = RunMetrics(rows, total_steps=20, wall_times=wall, expected=EXPECTED)
    assert rm.step_time_s() == pytest.approx(900.0)
    assert rm.eta_s() == pytest.approx(10 * 900.0)
    assert rm.elapsed_s() == pytest.approx(8100.0)
    rm2 = RunMetrics(rows, total_steps=20, wall_times=wall, started_at=0.0, now=10_000.0)
    assert rm2.elapsed_s() == 10_000.0
    assert {i.name: i for i in rm.indicators()}["step_time_s"].source == "wall clock"
    assert RunMetrics(rows).step_time_s() is None


def test_wall_cadence_counts_the_recurring_slow_steps_as_tqdm_does() -> None:
    """Every 5th step validates and saves (twice as long): the cadence is their mean, 1.2 s
    (as tqdm's rate counts them), not the median 1.0 s that made the ETA short by a sixth."""
    rows = [{"step": s, "metrics": {"critic/rewards/mean": 0.5}} for s in range(1, 22)]
    wall, t = {}, 100.0
    for s in range(1, 22):
        t += 2.0 if s % 5 == 0 else 1.0
        wall[s] = t
    rm = RunMetrics(rows, total_steps=100, wall_times=wall)
    assert rm.wall_step_time_s() == pytest.approx(1.2, rel=0.05)
    assert rm.eta_s() == pytest.approx(79 * 1.2, rel=0.05)


def test_wall_cadence_ignores_a_backlog_read_in_one_chunk() -> None:
    """A console that attaches at step 10 reads steps 1-10 in one chunk; only the steps
    it then sees arrive, 1.1 s apart, say how fast the run goes (as tqdm would)."""
    rows = [{"step": s, "metrics": {"critic/rewards/mean": 0.5}} for s in range(1, 16)]
    wall = {s: 500.0 + 0.001 * s for s in range(1, 11)}
    wall.update({s: 500.01 + 1.1 * (s - 10) for s in range(11, 16)})
    rm = RunMetrics(rows, total_steps=100, wall_times=wall, tqdm_s_per_step=1.1)
    assert rm.wall_step_time_s() == pytest.approx(1.1, rel=0.02)
    assert rm.eta_s() == pytest.approx(85 * 1.1, rel=0.02)
    # one long gap (the link was down for a minute) does not skew it
    wall[13] += 60.0
    wall[14] += 60.0
    wall[15] += 60.0
    assert RunMetrics(rows, total_steps=100, wall_times=wall).wall_step_time_s() == pytest.approx(1.1, rel=0.02)
    # only the backlog seen: tqdm's own rate
    only = {s: 500.0 + 0.001 * s for s in range(1, 16)}
    assert RunMetrics(rows, total_steps=100, wall_times=only, tqdm_s_per_step=1.3).wall_step_time_s() == 1.3


def test_recent_window_for_step_time() -> None:
    rows = run_rows(30, step_time=2000.0)
    for r in rows[-10:]:
        r["metrics"]["timing_s/step"] = 1100.0
    rm = RunMetrics(rows, total_steps=100, expected=EXPECTED)
    assert rm.step_time_s() == 1100.0  # the recent window, not the whole run
    assert rm.elapsed_s() == 20 * 2000.0 + 10 * 1100.0


def test_summary_is_json_with_numbers() -> None:
    rows = run_rows(12)
    rows[-1]["metrics"]["critic/score/mean"] = float("nan")
    rm = RunMetrics(rows, total_steps=2710, last_checkpoint=10, expected=EXPECTED)
    s = rm.summary()
    text = json.dumps(s, allow_nan=False)  # NaN would raise here
    back = json.loads(text)
    assert back["step"] == 12 and back["total_steps"] == 2710
    assert back["throughput_tokens_per_s_per_node"] == 720.0
    assert back["score_mean"] == pytest.approx(0.31)  # latest *finite* value
    assert back["flags"] == {"step_time_s": "ok", "throughput_tokens_per_s_per_node": "ok",
                             "mfu_pct": "ok", "mem_gib_per_card": "high"}
    assert back["expected"]["mfu_pct"] == [25.0, 40.0]
    assert back["validation"]["val-core/aime_2024/reward/mean@1"] == pytest.approx(0.1)
    assert back["last_checkpoint"] == 10
    assert isinstance(back["eta_s"], float)


def test_empty_run() -> None:
    rm = RunMetrics([], total_steps=2710, expected=EXPECTED)
    s = rm.summary()
    json.dumps(s, allow_nan=False)
    assert s["step"] is None and s["eta_s"] is None and s["progress_pct"] is None
    assert rm.series("critic/rewards/mean") == []
    assert rm.trend() is None


def test_rows_as_mapping_and_duplicates() -> None:
    rm = RunMetrics({3: {"a": 1.0}, 1: {"a": 2.0}})
    assert rm.steps == [1, 3]
    rm2 = RunMetrics([{"step": 2, "metrics": {"a": 1.0}}, {"step": 2, "metrics": {"b": 2.0}}])
    assert rm2.by_step == {2: {"a": 1.0, "b": 2.0}}


def test_downsample_keeps_last_and_means() -> None:
    pts = [(s, float(s)) for s in range(1, 2711)]
    out = downsample(pts, 500)
    assert len(out) == 500
    assert out[-1] == (2710, 2710.0)
    steps = [s for s, _ in out]
    assert steps == sorted(steps)
    # bucket means of a straight line stay on (about) the line
    assert all(abs(v - s) < 6 for s, v in out)
    assert downsample(pts[:10], 500) == pts[:10]
    assert downsample(pts, 1) == [pts[-1]]
    assert downsample([], 10) == []
    noisy = [(s, (-1.0) ** s) for s in range(1, 1001)]
    assert all(abs(v) < 0.6 for _, v in downsample(noisy, 100)[:-1])  # noise averaged out


def test_series_derived_and_raw() -> None:
    rm = RunMetrics(run_rows(50), gpus_per_node=8)
    assert rm.series("throughput_tokens_per_s_per_node")[-1] == (50, 720.0)
    assert rm.series("mfu_pct")[-1] == (50, pytest.approx(30.0))
    assert len(rm.series("critic/rewards/mean", max_points=10)) == 10
    assert rm.series("val-core/aime_2024/reward/mean@1") == [
        (s, pytest.approx(0.01 * s)) for s in range(5, 51, 5)]
    assert rm.series("nope") == []


def test_json_safe() -> None:
    assert json_safe({"a": [1, float("inf"), {"b": float("nan")}], "c": 2}) == {
        "a": [1, None, {"b": None}], "c": 2}


# ------------------------------------------------------------------------ metrics CLI

LOG = """(TaskRunner pid=5) Total training steps: 2710
(TaskRunner pid=5) step:1 - critic/rewards/mean:0.1 - perf/throughput:np.float64(88.5) - timing_s/step:1001.0
(TaskRunner pid=5) Training Progress:   0%|          | 1/2710 [16:41<753:00:00, 1001.00s/it]\r
(TaskRunner pid=5) step:2 - critic/rewards/mean:0.2 - val-core/x/reward/mean@1:nan - timing_s/step:999.0
"""


def test_load_metrics_from_log(tmp_path: Path) -> None:
    p = tmp_path / "driver.log"
    p.write_text(LOG)
    assert detect_kind(p) == "log"
    rows = load_metrics(str(p))
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["metrics"] == {"critic/rewards/mean": 0.1, "perf/throughput": 88.5,
                                  "timing_s/step": 1001.0}
    out = io.StringIO()
    write_json(rows, out)
    back = json.loads(out.getvalue())
    assert back[1]["metrics"]["val-core/x/reward/mean@1"] is None  # NaN is not JSON
    assert back[0] == {"step": 1, "metrics": rows[0]["metrics"]}
    out = io.StringIO()
    write_csv(rows, out)
    table = list(csv.reader(io.StringIO(out.getvalue())))
    assert table[0] == ["step", "critic/rewards/mean", "perf/throughput", "timing_s/step",
                        "val-core/x/reward/mean@1"]
    assert table[1] == ["1", "0.1", "88.5", "1001.0", ""]
    assert table[2][0] == "2" and table[2][2] == "" and table[2][4] == "nan"


def test_load_metrics_from_tensorboard(tmp_path: Path) -> None:
    with ScalarWriter(tmp_path / "tb", per_scalar=True, sync=True) as w:
        for s in range(1, 6):
            w.add_scalars(s, {"critic/rewards/mean": s / 4, "perf/throughput": 100.0 + s})
    rows = load_metrics(tmp_path / "tb")
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[1]["metrics"] == {"critic/rewards/mean": 0.5, "perf/throughput": 102.0}
    out = tmp_path / "m.json"
    write_json(rows, out)
    assert json.loads(out.read_text()) == rows
    write_csv(rows, tmp_path / "m.csv")
    assert (tmp_path / "m.csv").read_text().splitlines()[0] == \
        "step,critic/rewards/mean,perf/throughput"
    rm = RunMetrics(rows, total_steps=10)
    assert rm.last_step == 5


def test_load_metrics_jsonl_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 2, "data": {"a": 1, "b": "x"}}\n{"step": 1, "data": {"a": 0.5}}\n')
    assert load_metrics(p) == [{"step": 1, "metrics": {"a": 0.5}},
                               {"step": 2, "metrics": {"a": 1.0}}]
    p.write_text('{"step": 1, "data": {}}\n{"nope": 1}\n')
    with pytest.raises(MetricsSourceError, match=r"metrics.jsonl:2"):
        load_metrics(p)
    with pytest.raises(MetricsSourceError, match="no such file"):
        load_metrics(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):  # what tui/cli/main.py catches
        load_metrics(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MetricsSourceError, match="no TensorBoard event files"):
        load_metrics(tmp_path / "empty")
    out = io.StringIO()
    write_json([], out)
    assert json.loads(out.getvalue()) == []


def test_end_to_end_log_to_summary(tmp_path: Path) -> None:
    from tui.core.job.verl_log import LogMetricsParser

    p = LogMetricsParser(clock=None)
    p.feed_text(LOG)
    rm = RunMetrics(p.rows(), total_steps=p.total_steps, expected=EXPECTED, gpus_per_node=8)
    s = rm.summary()
    assert s["total_steps"] == 2710 and s["step"] == 2
    assert s["step_time_s"] == 1000.0
    assert s["eta_s"] == 2708 * 1000.0
    assert s["throughput_tokens_per_s_per_node"] == 88.5 * 8
    assert math.isclose(s["reward_mean"], 0.2)


def test_series_index_holds_a_point_in_c_doubles() -> None:
    """A 20-hour run's series stay in memory for the console's life: the index holds a
    point as two C numbers (and a sparkline's prefix sums as C doubles), not as a tuple of
    Python objects in a list (~80 bytes a point, and 64 more for each prefix sum). Its
    reads are what a plain list of the same points gives."""
    import random
    import tracemalloc

    from tui.core.job.metrics import SeriesIndex

    rng = random.Random(7)
    keys = [f"actor/k{i}" for i in range(20)]
    by_step = {s: {k: rng.random() for k in keys} for s in range(1, 3001)}
    by_step[17]["actor/k3"] = float("nan")  # not finite: not a point
    plain = {k: [(s, m[k]) for s, m in by_step.items() if math.isfinite(m[k])] for k in keys}
    idx = SeriesIndex(by_step)
    idx.sync()
    idx.settled_step = 2990
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in keys:
            idx.points(k)
            idx.downsample(k, 60)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    points = sum(len(v) for v in plain.values())
    assert held / points < 48, held / points  # 16 for the point, 16 for its prefix sums
    for k in keys:
        assert list(idx.points(k)) == plain[k]
        assert idx.points(k)[5:9] == plain[k][5:9] and idx.points(k)[-1] == plain[k][-1]
        got, want = idx.downsample(k, 60), downsample(plain[k], 60)
        assert [s for s, _ in got] == [s for s, _ in want]
        assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-12)
