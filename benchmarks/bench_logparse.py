"""Benchmark: VeRL log parsing speed, rlconsole's parser vs a naive regex-per-line one.

A synthetic but realistic driver log: Ray-prefixed step lines with ~120 metrics (a mix
of plain and `np.float64(...)` values, as pformat prints them), tqdm redraws joined by
`\\r`, ANSI-coloured prefixes, and worker noise (SGLang, Megatron, warnings). Two mixes:
about 1% step lines (what a real run looks like: a step every 15-20 minutes and chatty
workers) and 10% (a worst case).

The baseline is what one writes first: strip ANSI with a regex, then a regex search for
the step and a `findall` of key:value pairs on every line.

    python benchmarks/bench_logparse.py [--lines 200000] [--write]

`--write` replaces this benchmark's section of BENCHMARKS.md (between
`<!-- bench:logparse -->` markers), keeping the other sections.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.mdsection import write_section  # noqa: E402

from tui.core.job.verl_log import LogMetricsParser  # noqa: E402

HEADING = "VeRL log parsing"
NAME = "logparse"

KEYS = (
    [f"actor/{k}" for k in ("entropy", "kl_loss", "kl_coef", "pg_clipfrac", "ppo_kl",
                            "pg_clipfrac_lower", "pg_loss", "grad_norm", "lr")]
    + ["perf/mfu/actor", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb",
       "perf/cpu_memory_used_gb", "perf/throughput", "perf/total_num_tokens",
       "perf/time_per_step", "training/global_step", "training/epoch"]
    + [f"critic/{a}/{b}" for a in ("score", "rewards", "advantages", "returns")
       for b in ("mean", "max", "min")]
    + [f"{a}/{b}" for a in ("response_length", "response_length_non_aborted", "prompt_length")
       for b in ("mean", "max", "min", "clip_ratio")]
    + [f"timing_s/{k}" for k in ("gen", "reward", "old_log_prob", "ref", "adv",
                                 "update_actor", "step", "save_checkpoint", "testing")]
    + [f"timing_per_token_ms/{k}" for k in ("gen", "ref", "adv", "update_actor")]
    + [f"global_seqlen/{k}" for k in ("min", "max", "minmax_diff", "balanced_min",
                                      "balanced_max", "mean")]
    + [f"val-core/{src}/reward/mean@{n}" for src in ("aime_2024", "aime_2025") for n in (1, 8)]
    + [f"val-aux/{src}/{m}" for src in ("aime_2024", "aime_2025")
       for m in ("reward/std@8", "reward/best@8/mean", "reward/worst@8/mean",
                 "reward/maj@8/mean", "acc/mean@8")]
    + [f"actor/extra_{i}" for i in range(30)]
)

NOISE = [
    "\x1b[36m(WorkerDict pid=812341, ip=10.10.142.71)\x1b[0m [2025-07-01 10:11:12] Decode batch. "
    "#running-req: 64, #token: 123456, token usage: 0.41, gen throughput (token/s): 2893.11",
    "\x1b[36m(WorkerDict pid=812342, ip=10.10.142.116)\x1b[0m  [Rank 3] (after 20 iterations) "
    "memory (MB) | allocated: 40123.5 | max allocated: 52111.0 | reserved: 60000.0",
    "(WorkerDict pid=812343, ip=10.10.142.119) /usr/local/lib/python3.10/site-packages/torch/"
    "utils/checkpoint.py:90: UserWarning: None of the inputs have requires_grad=True.",
    "(TaskRunner pid=2016251) ",
    "(raylet, ip=10.10.142.71) [2025-07-01 10:11:13,000 E 12 34] worker_pool.cc:551: "
    "Some workers of the worker process(1234) have not registered within the timeout.",
    "(WorkerDict pid=812344, ip=10.10.142.125) INFO 07-01 10:11:14 sglang: Prefill batch. "
    "#new-seq: 8, #new-token: 8192, #cached-token: 0, cache hit rate: 0.00%",
    "(WorkerDict pid=812345) 2025-07-01 10:11:15 - megatron.core - INFO - step timing: 12.3s",
]


def step_line(step: int, rng: random.Random) -> str:
    parts = []
    for i, k in enumerate(KEYS):
        v = rng.random() * 10 ** rng.randint(-4, 6)
        parts.append(f"{k}:np.float64({v!r})" if i % 4 == 0 else f"{k}:{v!r}")
    return f"\x1b[36m(TaskRunner pid=2016251)\x1b[0m step:{step} - " + " - ".join(parts)


def tqdm_line(step: int, total: int) -> str:
    bars = [f"Training Progress:   {100 * s // total}%|          | {s}/{total} "
            f"[{s * 17}:00<{(total - s) * 17}:00, 1012.25s/it]" for s in (step - 1, step)]
    return "(TaskRunner pid=2016251) " + "\r".join(bars)


def make_log(n_lines: int, step_every: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = ["(TaskRunner pid=2016251) Total training steps: 2710"]
    step = 0
    while len(lines) < n_lines:
        step += 1
        lines.append(step_line(step, rng))
        lines.append(tqdm_line(step, 2710))
        for _ in range(step_every - 2):
            lines.append(rng.choice(NOISE))
    return lines[:n_lines]


_NAIVE_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NAIVE_STEP = re.compile(r"step:(\d+) - (.*)$")
_NAIVE_KV = re.compile(r"([\w/@.\-]+):(np\.\w+\()?([-+\w.]+)\)?")
_NAIVE_TQDM = re.compile(r"Training Progress:.*?(\d+)/(\d+)")
_NAIVE_TOTAL = re.compile(r"Total training steps: (\d+)")


def naive_parse(lines: list[str]) -> dict[int, dict[str, float]]:
    """The baseline: several regexes on every line."""
    steps: dict[int, dict[str, float]] = {}
    for line in lines:
        line = _NAIVE_ANSI.sub("", line)
        m = _NAIVE_STEP.search(line)
        if m:
            metrics = {}
            for k, _, v in _NAIVE_KV.findall(m.group(2)):
                try:
                    metrics[k] = float(v)
                except ValueError:
                    pass
            steps[int(m.group(1))] = metrics
            continue
        _NAIVE_TQDM.findall(line)
        _NAIVE_TOTAL.search(line)
    return steps


def ours(lines: list[str]) -> dict[int, dict[str, float]]:
    p = LogMetricsParser(clock=None)
    p.feed_many(lines)
    return p.steps


def best_of(fn, arg, repeat: int) -> tuple[float, float, object]:
    """Best CPU time and best wall time of `repeat` runs. CPU time is the figure to
    read: the benchmark machine is shared, and wall time there includes waiting."""
    best_cpu = best_wall = float("inf")
    out = None
    for _ in range(repeat):
        c = time.process_time()
        t = time.perf_counter()
        out = fn(arg)
        best_wall = min(best_wall, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
    return best_cpu, best_wall, out


SUMMARY: list[dict[str, str]] = []


def run(n_lines: int, repeat: int) -> str:
    rows = []
    mixes = (("worker chatter only (1 step line)", n_lines + 1),
             ("realistic (1% step lines)", 100), ("step-heavy (10% step lines)", 10))
    for label, every in mixes:
        lines = make_log(n_lines, every)
        c_ours, w_ours, got = best_of(ours, lines, repeat)
        c_naive, w_naive, ref = best_of(naive_parse, lines, repeat)
        assert set(got) == set(ref), "parsers disagree on steps"  # type: ignore[arg-type]
        for some in list(got)[:: max(1, len(got) // 50)]:  # type: ignore[arg-type]
            assert got[some] == ref[some], "parsers disagree on values"  # type: ignore[index]
        rows.append((label, len(got), c_ours, w_ours, c_naive, w_naive))  # type: ignore[arg-type]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    for label, n_steps, c_o, w_o, c_n, w_n in rows:
        if label.startswith("realistic"):
            SUMMARY[:] = [{"figure": "VeRL log parsing, realistic mix (bench_logparse)",
                           "baseline": f"{n_lines / c_n / 1000:,.0f}k lines/s (naive regex)",
                           "rlconsole": f"{n_lines / c_o / 1000:,.0f}k lines/s", "ratio": f"{c_n / c_o:.1f}x",
                           "target": ">= 200k lines/s", "met": "yes" if n_lines / c_o >= 200_000 else "no"}]
    out = [
        "| log mix | steps | `LogMetricsParser` | naive regex per line | speed-up |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, n_steps, c_o, w_o, c_n, w_n in rows:
        out.append(
            f"| {label} | {n_steps:,} "
            f"| **{n_lines / c_o / 1000:,.0f}k lines/s** ({c_o:.2f} CPU s; {w_o:.2f} s wall) "
            f"| {n_lines / c_n / 1000:,.0f}k lines/s ({c_n:.2f} CPU s; {w_n:.2f} s wall) "
            f"| {c_n / c_o:.1f}x |")
    out += [
        "",
        f"- {n_lines:,} synthetic driver-log lines: Ray-prefixed step lines with {len(KEYS)} "
        "metrics (25% printed as `np.float64(...)`), tqdm redraws joined by `\\r`, "
        "ANSI-coloured worker noise. Best of "
        f"{repeat} runs each, by CPU time (lines per CPU second); wall time in brackets.",
        "- Target: >= 200k lines/s on a realistic log. Both parsers find the same steps and "
        "values (checked); only `LogMetricsParser` also handles cut lines, wrapped lines, "
        "`[repeated Nx across cluster]`, malformed-line counts and tqdm/total/checkpoint state.",
        "- Where the time goes: worker chatter is dismissed by substring tests before any "
        "regex (the first row); a step line costs about what splitting it and `float()` on "
        "each of its ~100 values cost in pure Python, which both parsers pay, so the more "
        "step lines, the closer the two.",
        f"- Machine: Python {platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"average {load:.1f} during the run, {time.strftime('%Y-%m-%d')}.",
    ]
    return "\n".join(out)



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = ap.parse_args(argv)
    body = run(args.lines, args.repeat)
    print(body)
    if args.write:
        from benchmarks.mdsection import record_summary

        write_section(NAME, body, HEADING)
        record_summary(NAME, SUMMARY)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
