"""VeRL console log parsing, on the real excerpts in tests/data/samples/verl-logs and on the
ugly forms a live Ray log stream produces (prefixes, ANSI colour, de-dup suffixes, numpy
reprs, wrapped and cut lines, tqdm redraws)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.core.job.verl_log import (
    LogMetricsParser,
    parse_step_line,
    parse_tqdm,
    parse_value,
    strip_ansi,
)
from tests.samples import DATA, samples_dir


def verl_samples() -> list[Path]:
    d = _samples_root() / "verl-logs"
    return sorted(d.glob("*.txt")) if d.is_dir() else []


def _samples_root() -> Path:
    env = os.environ.get("RLCONSOLE_SAMPLES")
    return Path(env) if env else DATA / "samples"


def parse_file(path: Path) -> LogMetricsParser:
    p = LogMetricsParser(clock=None)
    with path.open(encoding="utf-8", newline="") as f:
        p.feed_many(f)
    return p


# ------------------------------------------------------------------------ real samples

EXPECTED = {
    "verl_issue_4303_megatron_step19.txt": {
        "steps": [19],
        "count": 37,
        "values": {
            "actor/entropy": 0.09676892310380936,
            "actor/ppo_kl": -0.00018109444295077992,
            "actor/lr": 3e-06,
            "perf/mfu/actor": 0.042605288606521394,
            "perf/max_memory_allocated_gb": 39.73102807998657,
            "perf/max_memory_reserved_gb": 41.048828125,
            "training/global_step": 19.0,
            "critic/score/mean": 0.880859375,
            "critic/advantages/min": -1.4999970197677612,
            # wrapped mid-number in the excerpt ("235.7" / "8125"): joined, not 235.7
            "response_length/mean": 235.78125,
            "response_length/max": 1024.0,
            "response/aborted_ratio": 0.0,
            "prompt_length/mean": 81.46,
        },
        "first_key": "actor/entropy",
        "malformed": 0,
        "progress": None,
    },
    "verl_issue_316_step5_old_format.txt": {
        "steps": [5],
        "count": 42,
        "values": {
            "global_seqlen/min": 992132.0,
            "global_seqlen/mean": 996861.25,
            "actor/kl_loss": 0.071,
            "actor/pg_loss": 0.0,
            "mfu/actor": 0.083,
            "val/test_score/openai/gsm8k": 0.171,
            "critic/advantages/mean": -0.002,
            "response_length/mean": 684.393,
            "prompt_length/max": 201.0,
            # wrapped inside the key ("prom" / "pt_length/min"): joined
            "prompt_length/min": 52.0,
            "prompt_length/clip_ratio": 0.0,
            "timing_s/testing": 78.133,
        },
        "absent": ["timing_s/s", "prom", "timing_s/step"],  # cut: dropped, not guessed
        "first_key": "global_seqlen/min",
        "malformed": 1,  # the excerpt ends mid-key
        "progress": None,
    },
    "verl_issue_2566_training_progress_tqdm.txt": {
        "steps": [],
        "count": 0,
        "values": {},
        "malformed": 1,  # a fragment of a step line with no `step:` to attach it to
        "progress": {"n": 2, "total": 624, "percent": 0, "elapsed_s": 21 * 60 + 47,
                     "remaining_s": 114 * 3600 + 32 * 60 + 27, "s_per_it": 662.94},
    },
}


def test_samples_present() -> None:
    d = samples_dir() / "verl-logs"
    assert d.is_dir(), f"{d} is missing"
    names = {p.name for p in d.glob("*.txt")}
    assert set(EXPECTED) <= names, f"samples renamed or removed: {set(EXPECTED) - names}"


@pytest.mark.parametrize("path", verl_samples() or [None], ids=lambda p: p.name if p else "none")
def test_real_sample(path: Path | None) -> None:
    samples_dir()  # skip / fail when the directory is missing
    assert path is not None, "no VeRL log samples found"
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# source:"), "every sample names its source"
    p = parse_file(path)
    exp = EXPECTED.get(path.name)
    if exp is None:  # a sample added later: at least it parses into something
        assert p.steps or p.progress is not None or p.total_steps is not None
        return
    assert list(p.steps) == exp["steps"]
    if exp["steps"]:
        m = p.steps[exp["steps"][0]]
        assert len(m) == exp["count"]
        assert next(iter(m)) == exp["first_key"]
        for k, v in exp["values"].items():
            assert m[k] == pytest.approx(v, rel=0, abs=0), k
        for k in exp.get("absent", []):
            assert k not in m
        assert all(isinstance(v, float) for v in m.values())
    assert p.malformed == exp["malformed"]
    if exp["progress"] is None:
        assert p.progress is None
    else:
        assert p.progress is not None and p.progress.to_dict() == exp["progress"]


def test_real_samples_line_by_line_parse_step_line() -> None:
    """The standalone function on the (unjoined) first physical line of a wrapped
    sample: complete metrics kept, the cut `prom` dropped."""
    path = samples_dir() / "verl-logs" / "verl_issue_316_step5_old_format.txt"
    line = path.read_text(encoding="utf-8").splitlines()[1]
    got = parse_step_line(line)
    assert got is not None
    step, m = got
    assert step == 5
    assert m["prompt_length/max"] == 201.0
    assert list(m)[-1] == "prompt_length/max"
    assert "prom" not in m


# ------------------------------------------------------------------------ ugly forms

STEP19 = ("(TaskRunner pid=2016251) step:19 - actor/pg_loss:0.01952332048676908 - "
          "perf/mfu/actor:0.042605288606521394 - perf/throughput:812.5 - "
          "timing_s/step:1012.25 - val-core/openai/gsm8k/reward/mean@1:0.5 - "
          "critic/score/mean:0.880859375")


def test_basic_new_format() -> None:
    step, m = parse_step_line(STEP19)  # type: ignore[misc]
    assert step == 19
    assert m == {
        "actor/pg_loss": 0.01952332048676908,
        "perf/mfu/actor": 0.042605288606521394,
        "perf/throughput": 812.5,
        "timing_s/step": 1012.25,
        "val-core/openai/gsm8k/reward/mean@1": 0.5,
        "critic/score/mean": 0.880859375,
    }


def test_old_format_main_task_three_decimals() -> None:
    line = ("(main_task pid=51520) step:5 - actor/kl_loss:0.071 - actor/lr:0.000 - "
            "mfu/actor:0.083 - val/test_score/openai/gsm8k:0.171")
    assert parse_step_line(line) == (5, {"actor/kl_loss": 0.071, "actor/lr": 0.0,
                                         "mfu/actor": 0.083,
                                         "val/test_score/openai/gsm8k": 0.171})


def test_numpy_reprs() -> None:
    line = ("(TaskRunner pid=7) step:3 - a/x:np.float64(0.12) - a/n:np.int64(3) - "
            "a/f:np.float32(-1.5e-05) - a/nan:np.float64(nan) - a/t:tensor(2.5)")
    step, m = parse_step_line(line)  # type: ignore[misc]
    assert step == 3
    assert m["a/x"] == 0.12 and m["a/n"] == 3.0 and m["a/f"] == -1.5e-05
    assert math.isnan(m["a/nan"]) and m["a/t"] == 2.5


def test_nan_inf_and_exponents() -> None:
    step, m = parse_step_line("step:1 - a:nan - b:inf - c:-inf - d:3e-06 - e:1E+3")  # type: ignore[misc]
    assert step == 1
    assert math.isnan(m["a"]) and m["b"] == math.inf and m["c"] == -math.inf
    assert m["d"] == 3e-06 and m["e"] == 1000.0


def test_ansi_and_repeated_suffix_and_ip_prefix() -> None:
    line = ("\x1b[36m(TaskRunner pid=99, ip=10.10.142.125)\x1b[0m step:7 - "
            "critic/rewards/mean:\x1b[1m0.25\x1b[0m - perf/throughput:700.0 "
            "[repeated 3x across cluster]")
    assert parse_step_line(line) == (7, {"critic/rewards/mean": 0.25,
                                         "perf/throughput": 700.0})
    assert strip_ansi("\x1b[31mred\x1b[0m") == "red"


def test_not_a_step_line() -> None:
    assert parse_step_line("") is None
    assert parse_step_line("(TaskRunner pid=1) Saving checkpoint") is None
    # `step:` inside a longer key is not the step field
    assert parse_step_line("training/global_step:19 - timing_s/step:3.0") is None
    assert parse_step_line("timing_s/step:12.5 - a:1") is None


def test_cut_last_value_dropped_not_misparsed() -> None:
    base = "(TaskRunner pid=1) step:8 - a/b:1.5 - c/d:2.5"
    for cut in (" - e/f:np.float64(0.12", " - e/f:", " - e/f", " - e/", " - ", " -",
                " - e/f:np.float64(", " - e/f:1.5e"):
        got = parse_step_line(base + cut)
        assert got == (8, {"a/b": 1.5, "c/d": 2.5}), cut


def test_cut_after_step_field() -> None:
    assert parse_step_line("(TaskRunner pid=1) step:8 - ") == (8, {})
    assert parse_step_line("(TaskRunner pid=1) step:8") == (8, {})


def test_parse_value() -> None:
    assert parse_value("np.float64(0.5)") == 0.5
    assert parse_value("np.float64(0.5") is None
    assert parse_value("os.system(1)") is None
    assert parse_value("abc") is None
    assert parse_value("7") == 7.0


def test_parser_accumulates_total_progress_and_checkpoint() -> None:
    p = LogMetricsParser(clock=None)
    lines = [
        "(TaskRunner pid=5) Total training steps: 2710",
        "(TaskRunner pid=5) Training Progress:   0%|          | 0/2710 [00:00<?, ?it/s]",
        STEP19.replace("step:19", "step:1"),
        "(TaskRunner pid=5) Training Progress:   0%|          | 1/2710 [16:52<761:00:00, 1012.25s/it]"
        "\rTraining Progress:   0%|          | 2/2710 [33:44<760:00:00, 1.01s/it]",
        "(TaskRunner pid=5) local_global_step_folder: /data/ckpt/global_step_100",
        STEP19.replace("step:19", "step:2"),
        "some noise - from a worker",
    ]
    assert p.feed_many(lines) == 2
    assert p.total_steps == 2710
    assert p.progress is not None
    assert (p.progress.n, p.progress.total) == (2, 2710)
    assert p.progress.elapsed_s == 33 * 60 + 44
    assert p.progress.s_per_it == 1.01
    assert p.last_checkpoint == 100
    assert list(p.steps) == [1, 2]
    assert p.rows()[0] == {"step": 1, "metrics": parse_step_line(STEP19)[1]}  # type: ignore[index]
    assert p.malformed == 0
    assert p.lines == len(lines)


def test_tqdm_variants() -> None:
    assert parse_tqdm("no bar here") is None
    t = parse_tqdm("Training Progress:  45%|####5     | 45/100 [1:02:03<1d 2:00:00, 1.50it/s]")
    assert t is not None and (t.n, t.total, t.percent) == (45, 100, 45)
    assert t.elapsed_s == 3723 and t.remaining_s == 86400 + 7200
    assert t.s_per_it == pytest.approx(1 / 1.5)
    bare = parse_tqdm("\x1b[36m(TaskRunner pid=1)\x1b[0m Training Progress: 100%|##| 3/3")
    assert bare is not None and bare.n == 3 and bare.elapsed_s is None


def test_malformed_lines_counted() -> None:
    p = LogMetricsParser(clock=None)
    p.feed("(TaskRunner pid=1) step:1 - a:1.0 - b:oops - c:2.0")  # bad value inside
    p.feed("(TaskRunner pid=1) noise")
    p.feed("(TaskRunner pid=1) step:2 - a:1.0 - b:np.float64(")  # cut
    p.feed("(TaskRunner pid=1) noise")
    p.feed("x/y:1.0 - z/w:2.0")  # orphan fragment, previous line was not a step line
    p.feed("(TaskRunner pid=1) step:3 - a:1.0")  # clean
    p.feed("2024-01-01 12:00:00 - INFO - not a metric")
    assert p.malformed == 3
    assert p.steps[1] == {"a": 1.0, "c": 2.0}
    assert p.steps[2] == {"a": 1.0}


def test_wrapped_line_joined_across_feed_text_chunks() -> None:
    p = LogMetricsParser(clock=None)
    text = ("(TaskRunner pid=1) step:4 - a/b:235.7\n8125 - c/d:np.float64(1.5)\n"
            "(TaskRunner pid=1) step:5 - a/b:1.0 - c/d:2")
    for i in range(0, len(text), 7):  # arbitrary chunk boundaries
        p.feed_text(text[i:i + 7])
    assert 5 not in p.steps  # the last line has no newline yet: it may be incomplete
    p.flush()
    assert p.steps[4] == {"a/b": 235.78125, "c/d": 1.5}
    assert p.steps[5] == {"a/b": 1.0, "c/d": 2.0}
    assert p.malformed == 0


def test_noise_after_step_line_is_not_joined() -> None:
    p = LogMetricsParser(clock=None)
    p.feed("(TaskRunner pid=1) step:4 - a/b:1.5")
    p.feed("INFO:root:hello")
    p.feed("2024-01-01 12:00:00 - INFO - x")
    p.feed("(WorkerDict pid=2) a - b")
    assert p.steps[4] == {"a/b": 1.5}
    assert p.malformed == 0


def test_repeated_step_updates_and_seen_at() -> None:
    clock = iter([100.0, 200.0, 300.0])
    p = LogMetricsParser(clock=lambda: next(clock))
    p.feed("step:1 - a:1")
    p.feed("step:2 - a:2")
    p.feed("step:1 - a:3 - b:4")
    assert p.steps == {1: {"a": 3.0, "b": 4.0}, 2: {"a": 2.0}}
    assert p.seen_at == {1: 100.0, 2: 200.0}
    assert p.last_step == 2


def test_crlf_and_cr_joined_lines() -> None:
    p = LogMetricsParser(clock=None)
    p.feed("(TaskRunner pid=1) step:1 - a:1.0\r\n")
    p.feed("Training Progress:   0%|  | 1/9 [00:01<00:08, 1.00s/it]\rTraining Progress:"
           "  11%|# | 2/9 [00:02<00:07, 1.00s/it]\r")
    assert p.steps == {1: {"a": 1.0}}
    assert p.progress is not None and p.progress.n == 2


def test_throughput_of_parser_is_reasonable() -> None:
    """Not a benchmark (see benchmarks/bench_logparse.py): a guard against an
    accidental quadratic or per-line regex on noise lines."""
    import time

    noise = "(WorkerDict pid=123, ip=10.0.0.1) INFO 12:00:00 sglang: decode batch, #running-req: 3"
    lines = ([noise] * 99 + [STEP19]) * 500
    p = LogMetricsParser(clock=None)
    t = time.perf_counter()
    p.feed_many(lines)
    dt = time.perf_counter() - t
    assert len(p.steps) == 1
    assert len(lines) / dt > 50_000


# ------------------------------------------------------------------------ never raises

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_parse_step_line_never_raises(text: str) -> None:
    got = parse_step_line(text)
    if got is not None:
        step, m = got
        assert isinstance(step, int)
        assert all(isinstance(k, str) and isinstance(v, float) for k, v in m.items())


_pieces = st.sampled_from([
    "step:", "1", "12", " - ", "a/b", ":", "np.float64(", ")", "0.5", "nan", "\r", "\n",
    "(TaskRunner pid=3) ", "Training Progress:", " 10%|#| 1/10 [00:01<00:09, 1.0s/it]",
    "Total training steps: ", "\x1b[36m", "[repeated 2x across cluster]", "e", "-", " ",
    "global_step_", "checkpoint",
])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_pieces, st.text(max_size=5)), max_size=40))
def test_parser_never_raises_on_arbitrary_streams(parts: list[str]) -> None:
    p = LogMetricsParser(clock=None)
    text = "".join(parts)
    p.feed_text(text[: len(text) // 2])
    p.feed_text(text[len(text) // 2:])
    p.flush()
    for line in text.split("\n"):
        p.feed(line)
    assert p.malformed >= 0
    for step, m in p.steps.items():
        assert isinstance(step, int)
        assert all(isinstance(v, float) for v in m.values())


_keys = st.sampled_from(["a/b", "val-core/x/reward/mean@1", "k", "a b", "", "x)", "(y", "c:d"])
_vals = st.sampled_from(["0.5", "-1e-3", "nan", "inf", "12", "np.float64(0.25)", "np.int64(3)",
                         "np.float64(0.5", "0.5)", "tensor(1)", "float(2)", "os.x(1)", "abc",
                         "", "1:2", " 1.5", "np.float64(nan)", "(1)"])
_seps = st.sampled_from([" - ", " - ", " - ", "-", " -  ", " "])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_keys, _vals, _seps), min_size=1, max_size=12))
def test_fast_path_agrees_with_careful_path(parts: list[tuple[str, str, str]]) -> None:
    """The whole-line fast path may decline a line, but never disagrees with the
    segment-by-segment parser on one it accepts."""
    from tui.core.job.verl_log import _careful_metrics, _fast_metrics

    rest = "".join(f"{k}:{v}{sep}" for k, v, sep in parts)[: -len(parts[-1][2])].strip()
    if not rest:
        return
    fast = _fast_metrics(rest)
    if fast is None:
        return
    careful, bad, _ = _careful_metrics(rest)
    assert bad == 0
    assert fast.keys() == careful.keys()
    for k, v in fast.items():
        assert (math.isnan(v) and math.isnan(careful[k])) or v == careful[k]


# ---------------------------------------------------------------- driver-only step lines

# Worker output forwarded by Ray into the driver log that happens to hold `step:` and a
# number at the end (what the step-line pattern looks for). Counted as steps, they made
# the step count and the ETA jump (issue 10).
WORKER_STEP_LINES = [
    # a rollout engine's scheduler (SGLang inside VeRL's rollout worker)
    "(WorkerDict pid=51877, ip=127.0.0.3) [2026-12-02 10:14:03 TP0] Decode batch. "
    "#running-req: 64, #token: 90112, token usage: 0.41, gen throughput (token/s): 5123.44, step: 9021",
    # vLLM's async server actor
    "(AsyncvLLMServer pid=61022, ip=127.0.0.4) INFO 12-02 10:14:05 [core.py:221] engine step: 4410",
    # a Megatron worker's own training log
    "\x1b[36m(WorkerDict pid=52011, ip=127.0.0.5)\x1b[0m [Rank 3] megatron optimizer step: 977 - "
    "grad_norm:0.412 - lr:1e-06",
    # an unnamed Ray task
    "(pid=7001, ip=127.0.0.2) step: 55",
]


def test_only_the_drivers_step_lines_are_steps() -> None:
    lines = [
        "(TaskRunner pid=5) Total training steps: 2710",
        "(TaskRunner pid=5) step:1 - actor/pg_loss:0.01 - critic/score/mean:0.3",
        *WORKER_STEP_LINES,
        "(TaskRunner pid=5, ip=127.0.0.2) step:2 - actor/pg_loss:0.02 - critic/score/mean:0.31",
        "(main_task pid=9) step:3 - actor/pg_loss:0.03",
        "step:4 - actor/pg_loss:0.04",  # the driver's own output, no prefix
        *WORKER_STEP_LINES,
    ]
    p = LogMetricsParser(clock=None)
    assert p.feed_many(lines) == 4
    assert sorted(p.steps) == [1, 2, 3, 4]
    assert p.last_step == 4
    assert p.steps[2] == {"actor/pg_loss": 0.02, "critic/score/mean": 0.31}
    for line in WORKER_STEP_LINES:
        assert parse_step_line(line) is None, line
    # one at a time, the same
    q = LogMetricsParser(clock=None)
    got = [q.feed(ln) for ln in lines]
    assert [g for g in got if g is not None] == [1, 2, 3, 4]


def test_worker_line_after_a_step_line_does_not_continue_it() -> None:
    p = LogMetricsParser(clock=None)
    p.feed_many(["(TaskRunner pid=5) step:7 - a/b:1.5",
                 "(WorkerDict pid=51877, ip=127.0.0.3) [Rank 0] step: 8 - a/b:9.0"])
    assert p.steps == {7: {"a/b": 1.5}}


# ---------------------------------------------------------------- hostile input (issue 15, M7)


def test_many_fragment_lines_after_a_step_line_invent_no_metrics() -> None:
    """8000 `k:v - k:v` lines after one step line: each was joined onto the step line
    and re-parsed whole (quadratic), inventing keys such as `actor/pg_loss:0.1k0/a`.
    A key never holds a colon, and a join that breaks a segment is no continuation."""
    from tui.core.job.verl_log import LogMetricsParser

    p = LogMetricsParser(clock=None)
    lines = ["(TaskRunner pid=1) step:1 - actor/pg_loss:0.1"]
    lines += [f"k{i}/a:0.5 - k{i}/b:0.6" for i in range(8000)]
    p.feed_many(lines)
    assert p.steps == {1: {"actor/pg_loss": 0.1}}
    assert not any(":" in k for m in p.steps.values() for k in m)


def test_continuation_work_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of lines that each end in a cut segment (every join looks legitimate):
    the characters re-parsed stay proportional to the input, not to its square.
    Counted, not timed: the parser's segment parser is wrapped to sum its input."""
    from tui.core.job import verl_log

    seen = {"chars": 0}
    careful = verl_log._careful_metrics

    def counting(rest: str):  # type: ignore[no-untyped-def]
        seen["chars"] += len(rest)
        return careful(rest)

    monkeypatch.setattr(verl_log, "_careful_metrics", counting)
    p = verl_log.LogMetricsParser(clock=None)
    lines = ["(TaskRunner pid=1) step:1 - a:1 - cut"] + [f"x{i}:1 - cut" for i in range(3000)]
    p.feed_many(lines)
    size = sum(len(line) for line in lines)
    assert seen["chars"] <= 4 * size
    assert len(p.steps[1]) == 3001  # "a" and "cutx0".."cutx2999": each join a real wrap


def test_wrapped_value_still_joined() -> None:
    """The fix keeps the legitimate wrap: `response_length/mean:235.7` / `8125 - ...`."""
    from tui.core.job.verl_log import LogMetricsParser

    p = LogMetricsParser(clock=None)
    p.feed_many(["(TaskRunner pid=1) step:3 - a:1 - response_length/mean:235.7",
                 "8125 - response_length/max:512 - b:np.float64(0.",
                 "5) [repeated 2x across cluster]", "other text"])
    assert p.steps[3] == {"a": 1.0, "response_length/mean": 235.78125,
                          "response_length/max": 512.0, "b": 0.5}
    assert p.malformed == 0


def test_huge_numbers_do_not_raise_and_the_chunk_goes_on() -> None:
    """A step number over 4300 digits raised ValueError (Python's int-string limit) out
    of the parser; the rest of the chunk was lost."""
    from tui.core.job.verl_log import LogMetricsParser

    big = "9" * 5000
    p = LogMetricsParser(clock=None)
    p.feed_many([f"(TaskRunner pid=1) step:{big} - a:1",
                 f"Total training steps: {big}",
                 f"saved checkpoint to /ckpt/global_step_{big}",
                 f"Training Progress:  1%|#| {big}/{big} [00:01<{big}:00, 1.0s/it]",
                 "(TaskRunner pid=1) step:2 - a:2"])
    p.feed_text(f"step:{big} - b:1\nstep:4 - b:4\n")
    assert sorted(p.steps) == [2, 4]


def test_metrics_cli_on_a_huge_step_number(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`rlconsole metrics LOG` printed a traceback on such a log."""
    from tui.cli import main

    log = tmp_path / "driver.log"
    log.write_text(f"step:{'1' * 5000} - a:1\nstep:5 - a:5\n")
    assert main(["metrics", str(log)]) == 0


def test_feed_text_without_newlines_stays_bounded() -> None:
    """A stream that never ends its line: the kept tail is bounded (each chunk used to
    copy the whole growing tail), and what follows still parses."""
    from tui.core.job.verl_log import MAX_LINE, LogMetricsParser

    p = LogMetricsParser(clock=None)
    for _ in range(3000):
        p.feed_text("x" * 1000)
        assert len(p._tail) <= MAX_LINE
    p.feed_text("\nstep:7 - a:1\n")
    assert p.steps == {7: {"a": 1.0}}


# ------------------------------------------- issue 39 S11: metric names from the log, bounded


def _named_log(steps: int, fresh: bool, per_step: int = 50) -> list[str]:
    """Step lines of `per_step` metrics: the same names every step, or new ones each step
    (a counter in the key, a hostile job)."""
    out = []
    for s in range(1, steps + 1):
        keys = [f"m/{s}_{i}_{'x' * 20}" if fresh else f"m/fixed_{i}_{'x' * 20}" for i in range(per_step)]
        out.append(f"(TaskRunner pid=1) step:{s} - " + " - ".join(f"{k}:{i}.5" for i, k in enumerate(keys)))
    return out


def test_distinct_metric_names_are_capped_and_said_once() -> None:
    """New names every step: past MAX_METRIC_NAMES their values are dropped (counted), and
    `take_names_note` says so once; a name longer than MAX_METRIC_NAME is dropped too. The
    steps themselves are kept, and the names already known keep their values."""
    from tui.core.job.verl_log import MAX_METRIC_NAME, MAX_METRIC_NAMES

    p = LogMetricsParser(clock=None)
    steps = 4 * MAX_METRIC_NAMES // 50
    p.feed_many(_named_log(steps, fresh=True))
    names = {k for m in p.steps.values() for k in m}
    assert len(names) == MAX_METRIC_NAMES and p.names_dropped == steps * 50 - MAX_METRIC_NAMES
    assert len(p.steps) == steps
    note = p.take_names_note()
    assert note is not None and str(MAX_METRIC_NAMES) in note and p.take_names_note() is None
    p.feed("(TaskRunner pid=1) step:9999 - m/1_0_xxxxxxxxxxxxxxxxxxxx:7.0 - " + "k" * (MAX_METRIC_NAME + 1) + ":1.0")
    assert p.steps[9999] == {"m/1_0_xxxxxxxxxxxxxxxxxxxx": 7.0}
    q = LogMetricsParser(clock=None)
    q.feed("step:1 - " + "k" * (MAX_METRIC_NAME + 1) + ":1.0 - ok:2.0")
    assert q.steps[1] == {"ok": 2.0} and q.take_names_note() is not None


def test_a_log_of_new_names_costs_no_more_than_one_of_fixed_names(tmp_path: Path) -> None:
    """The watcher's whole path (parser, store, run metrics): a log that names new metrics
    every step keeps far less than the same-size log with fixed names (the cap; before it
    kept more: every name's own series), and the console hears of it once, as a warning."""
    import tracemalloc

    from tui.backend.static import demo_profile
    from tui.core.job.watcher import JobWatcher

    kept: dict[bool, int] = {}
    noted: dict[bool, int] = {}
    last: dict[bool, int] = {}
    for fresh in (False, True):
        lines = _named_log(600, fresh)
        heard: list[object] = []
        tracemalloc.start()
        try:
            w = JobWatcher(demo_profile(), pool=None, job_id=f"j{fresh}", root=tmp_path, wall_clock=False)
            w.on_alert = heard.append
            w._consume(w.spool.append(("\n".join(lines) + "\n").encode()))
            rm = w.run_metrics()
            w.job_state(rm)
            kept[fresh] = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
            w.spool.close()
        noted[fresh] = sum(getattr(a, "source", None) == "log" and "distinct metrics" in a.message for a in heard)
        last[fresh] = len(rm.by_step[rm.last_step])
    assert kept[True] < kept[False] / 2, kept
    assert noted == {False: 0, True: 1} and last == {False: 50, True: 0}


@pytest.mark.parametrize("cut", ["after_separator", "inside_a_number"])
def test_a_step_line_ray_forwarded_in_two_is_joined_behind_its_own_prefix(cut: str) -> None:
    """Ray's log streaming, reading a long line while it was being written, forwards it
    as two lines, each behind the actor's prefix and one space (CI saw it under load:
    `... - timing_s/adv:15.11 -`, then `(TaskRunner pid=N)  response_length/...`). The
    real step-19 line of VeRL issue 4303, cut so; its metrics are those of the whole line,
    and the actor's next message is not taken for its rest."""
    path = _samples_root() / "verl-logs" / "verl_issue_4303_megatron_step19.txt"
    raw = path.read_text(encoding="utf-8").splitlines()
    i = next(n for n, line in enumerate(raw) if "step:19 - " in line)
    whole = raw[i] + raw[i + 1]  # the published excerpt's own wrap, undone
    reference = LogMetricsParser(clock=None)
    reference.feed_many([whole])
    assert len(reference.steps[19]) > 20 and reference.malformed == 0
    prefix = "(TaskRunner pid=2016251)"
    assert whole.startswith(prefix + " ")
    at = whole.index("response_length/mean") - 1 if cut == "after_separator" else whole.index("235.7") + 5
    head, rest = whole[:at], whole[at:]
    assert head.endswith(" -") if cut == "after_separator" else rest.startswith("8125 - ")
    p = LogMetricsParser(clock=None)
    p.feed_many([head, f"{prefix} {rest}", f"{prefix} Saving checkpoint - done", f"{prefix} step:20 - a:1"])
    assert p.steps[19] == reference.steps[19] and p.malformed == 0
    assert p.steps[20] == {"a": 1.0}
    other = LogMetricsParser(clock=None)  # another actor's line is never the rest
    other.feed_many([head, f"(WorkerDict pid=7) {rest}"])
    assert other.steps[19] != reference.steps[19]
