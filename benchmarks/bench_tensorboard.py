"""Benchmark: reading TensorBoard scalars, tbparse vs rlconsole's incremental reader.

The reference run's shape: 2710 steps x 120 tags = 325,200 scalars, written by
tensorboard's own writer (tui.sim.tbwrite) in both layouts - one event per scalar (what
VeRL's torch `SummaryWriter.add_scalar` loop writes) and one event per step.

Measured, for each layout:
  - `tbparse.SummaryReader(dir).scalars` - a full read (what a naive console re-runs);
  - `ScalarReader(dir).update()` - the first load;
  - `ScalarReader.update()` after the writer appended 10 more steps (what the console
    does every refresh).

    python benchmarks/bench_tensorboard.py [--steps 2710] [--tags 120] [--write]

`--write` replaces this benchmark's section of BENCHMARKS.md (between
`<!-- bench:tensorboard -->` markers), keeping the other sections.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.mdsection import write_section  # noqa: E402

from tui.core.job.tbreader import ScalarReader  # noqa: E402
from tui.sim.tbwrite import ScalarWriter  # noqa: E402

HEADING = "TensorBoard scalars: incremental reader vs tbparse"
NAME = "tensorboard"


def make_tags(n: int) -> list[str]:
    groups = ["actor", "critic/score", "critic/rewards", "perf", "timing_s",
              "response_length", "val-core/aime_2024/reward", "global_seqlen"]
    return [f"{groups[i % len(groups)]}/metric_{i}" for i in range(n)]


class Timer:
    """CPU and wall time of a block. CPU time is the figure to read: the benchmark
    machine is shared, and wall time there includes waiting for a core."""

    def __enter__(self) -> Timer:
        self.c = time.process_time()
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu = time.process_time() - self.c
        self.wall = time.perf_counter() - self.t


def bench_layout(per_scalar: bool, steps: int, n_tags: int, repeat: int) -> dict[str, float]:
    tags = make_tags(n_tags)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory(prefix="rlconsole-bench-tb-") as d:
        w = ScalarWriter(d, per_scalar=per_scalar, sync=True)
        t = time.perf_counter()
        for s in range(1, steps + 1):
            w.add_scalars(s, {k: rng.random() for k in tags})
        w.flush()
        t_write = time.perf_counter() - t
        size = sum(p.stat().st_size for p in Path(d).glob("events.out.tfevents.*"))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Timer() as imp:
                import tbparse
            tb = []
            for _ in range(max(1, repeat - 1)):
                with Timer() as tm:
                    df = tbparse.SummaryReader(d).scalars
                tb.append(tm)
        assert len(df) == steps * n_tags

        first = []
        reader = None
        for _ in range(repeat):
            reader = ScalarReader(d)
            with Timer() as tm:
                n = reader.update()
            first.append(tm)
            assert n == steps * n_tags, n
        assert reader is not None
        with Timer() as rows_t:
            rows = reader.rows()
        assert len(rows) == steps

        upd = []
        step = steps
        for _ in range(max(repeat, 5)):
            for s in range(step + 1, step + 11):
                w.add_scalars(s, {k: rng.random() for k in tags})
            step += 10
            w.flush()
            with Timer() as tm:
                n = reader.update()
            upd.append(tm)
            assert n == 10 * n_tags, n
        with Timer() as noop:
            reader.update()
        w.close()
    return {
        "size_mb": size / 1e6,
        "write_s": t_write,
        "tbparse_import_s": imp.wall,
        "tbparse_cpu": min(t.cpu for t in tb),
        "tbparse_wall": min(t.wall for t in tb),
        "first_cpu": min(t.cpu for t in first),
        "first_wall": min(t.wall for t in first),
        "rows_cpu": rows_t.cpu,
        "update_cpu": statistics.median(t.cpu for t in upd),
        "update_wall": statistics.median(t.wall for t in upd),
        "update_max_wall": max(t.wall for t in upd),
        "noop_wall": noop.wall,
    }


def fmt_s(x: float) -> str:
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


SUMMARY: list[dict[str, str]] = []


def run(steps: int, n_tags: int, repeat: int) -> str:
    res = {
        "one event per scalar (VeRL/torch)": bench_layout(True, steps, n_tags, repeat),
        "one event per step": bench_layout(False, steps, n_tags, repeat),
    }
    cols = list(res)
    r0 = res[cols[0]]
    SUMMARY[:] = [
        {"figure": f"TensorBoard first load, {steps} x {n_tags} (bench_tensorboard)",
         "baseline": f"{fmt_s(r0['tbparse_cpu'])} (tbparse)", "rlconsole": fmt_s(r0["first_cpu"]),
         "ratio": f"{r0['tbparse_cpu'] / r0['first_cpu']:.0f}x", "target": "<= 1 s",
         "met": "yes" if r0["first_cpu"] <= 1 else "no"},
        {"figure": "TensorBoard update after +10 steps (bench_tensorboard)",
         "baseline": f"{fmt_s(r0['tbparse_cpu'])} (tbparse re-read)", "rlconsole": fmt_s(r0["update_cpu"]),
         "ratio": f"{r0['tbparse_cpu'] / max(r0['update_cpu'], 1e-6):,.0f}x", "target": "<= 10 ms",
         "met": "yes" if r0["update_cpu"] <= 0.01 else "no"},
    ]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    def cells(fn) -> str:  # type: ignore[no-untyped-def]
        return " | ".join(fn(res[c]) for c in cols)

    out = [
        "| | " + " | ".join(cols) + " |",
        "|---|" + "---:|" * len(cols),
        "| event file size | " + cells(lambda r: f"{r['size_mb']:.1f} MB") + " |",
        "| `tbparse.SummaryReader(dir).scalars`, full read | "
        + cells(lambda r: f"{fmt_s(r['tbparse_cpu'])} ({fmt_s(r['tbparse_wall'])} wall)") + " |",
        "| `ScalarReader.update()`, first load | "
        + cells(lambda r: f"**{fmt_s(r['first_cpu'])}** ({fmt_s(r['first_wall'])} wall); "
                          f"{r['tbparse_cpu'] / r['first_cpu']:.0f}x less than tbparse") + " |",
        "| `ScalarReader.update()` after +10 steps (median) | "
        + cells(lambda r: f"**{fmt_s(r['update_cpu'])}** ({fmt_s(r['update_wall'])} wall, "
                          f"worst {fmt_s(r['update_max_wall'])}); "
                          f"{r['tbparse_cpu'] / max(r['update_cpu'], 1e-6):,.0f}x less than a "
                          "tbparse re-read") + " |",
        "| `ScalarReader.update()`, nothing new (wall) | "
        + cells(lambda r: fmt_s(r["noop_wall"])) + " |",
        "| `ScalarReader.rows()`, all steps | " + cells(lambda r: fmt_s(r["rows_cpu"])) + " |",
        "",
        f"- {steps} steps x {n_tags} tags = {steps * n_tags:,} scalars"
        + (" (the reference run)" if (steps, n_tags) == (2710, 120) else "") + ", "
        "written with tensorboard's `RecordWriter` (`ScalarWriter(sync=True)`); "
        f"CPU time, best of {repeat} (tbparse: of {max(1, repeat - 1)}); updates: median of "
        f"{max(repeat, 5)} rounds of +10 steps. Wall time in brackets.",
        "- Targets: first load <= 1 s, update after +10 steps <= 10 ms. tbparse gives the "
        "same values (the tests use it as the oracle).",
        f"- Not counted above: `import tbparse` {fmt_s(res[cols[0]]['tbparse_import_s'])} "
        f"(wall); writing the per-scalar file {res[cols[0]]['write_s']:.1f} s.",
        f"- Machine: Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
        f"{load:.1f} during the run, {time.strftime('%Y-%m-%d')}.",
    ]
    return "\n".join(out)



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2710)
    ap.add_argument("--tags", type=int, default=120)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = ap.parse_args(argv)
    body = run(args.steps, args.tags, args.repeat)
    print(body)
    if args.write:
        from benchmarks.mdsection import record_summary

        write_section(NAME, body, HEADING)
        record_summary(NAME, SUMMARY)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
