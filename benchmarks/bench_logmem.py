"""Benchmark: console memory over a 1 GB driver log, LogSpool vs keeping every line.

A 15-20 hour VeRL run writes up to a GB of driver log. rlconsole spools it to a local
file and keeps only an index of line offsets (8 bytes a line); the naive console keeps
every line as a Python string in a list. Both are fed the same bytes in 1 MB chunks, as
the log follower receives them, each in a fresh child process so that its peak RSS
(`VmHWM`, benchmarks/peak.py) is its own. tracemalloc peaks are measured in a second run of each child
(tracemalloc slows allocation, so throughput comes from the untraced run).

The naive approach is measured on a 100 MB slice and extrapolated linearly to 1 GB
(the list grows with every line, so memory is proportional to the log); running it on
the whole GB would need ~3-4 GB of RAM and say nothing more.

    python benchmarks/bench_logmem.py [--size-mb 1024] [--naive-mb 100] [--write]

`--write` replaces this benchmark's section of BENCHMARKS.md (between
`<!-- bench:logmem -->` markers), keeping the other sections. The generated log and the
spool live in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.mdsection import write_section  # noqa: E402
from benchmarks.peak import own_peak_bytes  # noqa: E402

NAME = "logmem"
SUMMARY: list[dict[str, str]] = []
MB = 1024 * 1024
FEED_CHUNK = MB

METRICS = (
    [f"actor/{k}" for k in ("entropy", "kl_loss", "kl_coef", "pg_clipfrac", "ppo_kl", "pg_loss",
                            "grad_norm", "lr")]
    + ["perf/mfu/actor", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb",
       "perf/cpu_memory_used_gb", "perf/throughput", "perf/total_num_tokens", "training/global_step"]
    + [f"critic/{a}/{b}" for a in ("score", "rewards", "advantages", "returns") for b in ("mean", "max", "min")]
    + [f"response_length/{b}" for b in ("mean", "max", "min", "clip_ratio")]
    + [f"timing_s/{k}" for k in ("gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "step")]
    + [f"val-core/aime_2024/reward/mean@{n}" for n in (1, 8)]
)

NOISE = [
    "\x1b[36m(WorkerDict pid=812341, ip=10.10.142.71)\x1b[0m [2025-07-01 10:11:12] Decode batch. "
    "#running-req: 64, #token: 123456, token usage: 0.41, gen throughput (token/s): 2893.11",
    "(WorkerDict pid=812342, ip=10.10.142.116) [2025-07-01 10:11:13] Prefill batch. #new-seq: 8, "
    "#new-token: 8192, #cached-token: 0, token usage: 0.37, #running-req: 56, #queue-req: 0",
    "(WorkerDict pid=812343, ip=10.10.142.119) INFO:megatron.core.timers:(min, max) time across ranks "
    "(ms): forward-backward ...: (4123.55, 4201.07)",
    "(TaskRunner pid=2716) Training Progress:  12%|█▏        | 325/2710 [95:12:44<698:33:10, 1054.42s/it]",
    "(WorkerDict pid=812344, ip=10.10.142.125) /usr/local/lib/python3.10/site-packages/torch_musa/core/"
    "_utils.py:12: UserWarning: 训练中 MUSA 设备上的某些算子回退到 CPU 执行",
    "(WorkerDict pid=812345, ip=10.10.142.71) [repeated 31x across cluster] "
    "WARNING 07-01 10:11:14 sglang weight sync finished in 3.21 s",
]


def step_line(step: int, rng: random.Random) -> str:
    vals = " - ".join(f"{k}:np.float64({rng.random():.17g})" for k in METRICS)
    return f"(TaskRunner pid=2716) step:{step} - {vals}"


def make_block(rng: random.Random, start_step: int, n_lines: int = 20000) -> bytes:
    """~3-4 MB of log: chatty workers and a step line now and then."""
    out = []
    step = start_step
    for i in range(n_lines):
        if i % 200 == 0:
            out.append(step_line(step, rng))
            step += 1
        else:
            out.append(rng.choice(NOISE))
    return ("\n".join(out) + "\n").encode()


def build_log(path: Path, size: int) -> int:
    """Stream-write `size` bytes of log (a few distinct blocks reused; never all in memory)."""
    rng = random.Random(0)
    blocks = [make_block(rng, 1 + k * 100) for k in range(4)]
    written = 0
    with open(path, "wb") as f:
        k = 0
        while written < size:
            b = blocks[k % len(blocks)]
            f.write(b)
            written += len(b)
            k += 1
    return written


# --------------------------------------------------------------------- children


def child_spool(log: Path, spool_path: Path, limit: int, trace: bool) -> dict[str, float]:
    from tui.core.job.spool import LogSpool

    if trace:
        tracemalloc.start()
    lines = 0
    t0, c0 = time.perf_counter(), time.process_time()
    with open(log, "rb") as f, LogSpool(spool_path) as spool:
        fed = 0
        while fed < limit:
            chunk = f.read(min(FEED_CHUNK, limit - fed))
            if not chunk:
                break
            lines += len(spool.append(chunk))  # the follower hands these to the parser
            fed += len(chunk)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        index = spool.index_bytes()
    res: dict[str, float] = {"bytes": fed, "lines": lines, "seconds": elapsed, "cpu_seconds": cpu,
                             "index_bytes": index}
    res["maxrss"] = own_peak_bytes()
    del spool  # its index goes before the reopened one is built
    if trace:
        res["tracemalloc_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    else:
        # reopen (index rebuild from the file) and a whole-spool search, as on re-attach
        t1, c1 = time.perf_counter(), time.process_time()
        with LogSpool(spool_path) as again:
            res["reopen_seconds"] = time.perf_counter() - t1
            res["reopen_cpu"] = time.process_time() - c1
            assert again.line_count == lines
            t2, c2 = time.perf_counter(), time.process_time()
            assert again.search("no such text anywhere") is None
            res["search_seconds"] = time.perf_counter() - t2
            res["search_cpu"] = time.process_time() - c2
            t3 = time.perf_counter()
            again.lines(again.line_count // 2, again.line_count // 2 + 60)
            res["page_read_ms"] = (time.perf_counter() - t3) * 1000
        res["maxrss_after_reopen"] = own_peak_bytes()
    return res


def child_naive(log: Path, limit: int, trace: bool) -> dict[str, float]:
    """What a console without a spool does: decode and keep every line in a list."""
    import tui.core.job.spool  # noqa: F401  (same imports as the others: same RSS floor)

    if trace:
        tracemalloc.start()
    kept: list[str] = []
    pending = b""
    t0, c0 = time.perf_counter(), time.process_time()
    with open(log, "rb") as f:
        fed = 0
        while fed < limit:
            chunk = f.read(min(FEED_CHUNK, limit - fed))
            if not chunk:
                break
            fed += len(chunk)
            buf = pending + chunk
            cut = buf.rfind(b"\n") + 1
            pending = buf[cut:]
            kept.extend(ln.rstrip("\r") for ln in buf[:cut].decode("utf-8", "replace").split("\n")[:-1])
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    res: dict[str, float] = {"bytes": fed, "lines": len(kept), "seconds": elapsed, "cpu_seconds": cpu}
    if trace:
        res["tracemalloc_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    res["maxrss"] = own_peak_bytes()
    return res


def child_baseline() -> dict[str, float]:
    """The interpreter with LogSpool imported and nothing fed: the floor under both."""
    import tui.core.job.spool  # noqa: F401

    return {"maxrss": own_peak_bytes()}


def run_child(*args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", *args], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------- report


def run(size_mb: int, naive_mb: int) -> str:
    tmp = Path(tempfile.mkdtemp(prefix="rlconsole-logmem-"))
    try:
        log = tmp / "driver.log"
        t0 = time.perf_counter()
        total = build_log(log, size_mb * MB)
        gen_s = time.perf_counter() - t0
        print(f"generated {total / MB:.0f} MB in {gen_s:.1f} s", file=sys.stderr)
        naive_limit = min(total, naive_mb * MB)

        base = run_child("baseline")
        sp = run_child("spool", str(log), str(tmp / "spool.log"), str(total), "0")
        (tmp / "spool.log").unlink()
        sp_t = run_child("spool", str(log), str(tmp / "spool.log"), str(total), "1")
        (tmp / "spool.log").unlink()
        nv = run_child("naive", str(log), str(naive_limit), "0")
        nv_t = run_child("naive", str(log), str(naive_limit), "1")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    scale = sp["bytes"] / nv["bytes"]
    base_mb = base["maxrss"] / MB

    def mb(x: float) -> str:
        return f"{x / MB:,.0f}"

    def mbps(r: dict[str, float]) -> str:
        return f"{r['bytes'] / MB / r['cpu_seconds']:,.0f} ({r['bytes'] / MB / r['seconds']:,.0f})"

    nv_rss_1g = base["maxrss"] + (nv["maxrss"] - base["maxrss"]) * scale
    nv_tm_1g = nv_t["tracemalloc_peak"] * scale
    SUMMARY[:] = [{"figure": f"console memory for a {mb(sp['bytes'])} MB job log (bench_logmem)",
                   "baseline": f"~{mb(nv_rss_1g)} MB (every line in a list, extrapolated)",
                   "rlconsole": f"{mb(sp['maxrss'])} MB", "ratio": f"{nv_rss_1g / sp['maxrss']:.0f}x",
                   "target": "-", "met": "-"}]
    rows = [
        "| approach | log fed | lines | throughput, MB per CPU s (wall) | peak RSS (MB) | tracemalloc peak (MB) |",
        "|---|---:|---:|---:|---:|---:|",
        f"| interpreter + imports, nothing fed | 0 | 0 | | {base_mb:,.0f} | |",
        f"| **LogSpool** (spool file + `array('Q')` index) | {mb(sp['bytes'])} MB | {sp['lines']:,.0f} | "
        f"{mbps(sp)} | **{mb(sp['maxrss'])}** | **{mb(sp_t['tracemalloc_peak'])}** |",
        f"| naive: every line kept in a `list[str]`, measured | {mb(nv['bytes'])} MB | {nv['lines']:,.0f} | "
        f"{mbps(nv)} | {mb(nv['maxrss'])} | {mb(nv_t['tracemalloc_peak'])} |",
        f"| naive, *extrapolated* x{scale:.1f} to {mb(sp['bytes'])} MB (not run) | {mb(sp['bytes'])} MB | "
        f"~{nv['lines'] * scale:,.0f} | | ~{mb(nv_rss_1g)} | ~{mb(nv_tm_1g)} |",
    ]
    notes = [
        "",
        f"- LogSpool memory is the line index, {sp['index_bytes'] / MB:.0f} MB for {sp['lines']:,.0f} lines "
        f"(8 bytes a line plus `array` over-allocation); the RSS above the interpreter floor is "
        f"{(sp['maxrss'] - base['maxrss']) / MB:,.0f} MB, i.e. "
        f"{(nv_rss_1g - base['maxrss']) / max(sp['maxrss'] - base['maxrss'], 1):,.0f}x less than the naive list "
        "would need for the same log. The log itself lives in the spool file (and the OS page cache, which "
        "the kernel reclaims and which does not count against the console).",
        "- Throughput includes writing every byte to the spool and decoding every complete line "
        "(the lines `append` returns are what the parser and the diagnoser consume). It is given per CPU "
        "second because the benchmark machine is shared; wall-clock figures in brackets.",
        f"- Reopening the {mb(sp['bytes'])} MB spool (index rebuilt from the file in 4 MB reads, as after a "
        f"console restart): {sp['reopen_cpu']:.2f} CPU s ({sp['reopen_seconds']:.2f} s wall); peak RSS after "
        f"reopening {mb(sp['maxrss_after_reopen'])} MB. A case-insensitive substring search through the whole "
        f"spool with no hit: {sp['search_cpu']:.2f} CPU s ({sp['search_seconds']:.2f} s wall). Reading one "
        f"60-line page from the middle: {sp['page_read_ms']:.2f} ms.",
        f"- The naive row is measured on the first {mb(nv['bytes'])} MB and scaled linearly by {scale:.1f} "
        "(memory grows with every kept line); it was not run on the whole log.",
        f"- Log: {mb(total)} MB of synthetic VeRL driver output (Ray-prefixed worker noise, tqdm, Chinese "
        "text, a step line with np.float64 values every 200 lines), fed in 1 MB chunks. Each approach ran in "
        "its own child process (peak RSS = `VmHWM` of that process); tracemalloc peaks come from a "
        "second, traced run.",
        f"- Machine: {platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs. Generated the log in {gen_s:.1f} s.",
    ]
    return "\n".join(rows + notes)



def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        kind, *rest = argv[1:]
        if kind == "spool":
            res = child_spool(Path(rest[0]), Path(rest[1]), int(rest[2]), rest[3] == "1")
        elif kind == "naive":
            res = child_naive(Path(rest[0]), int(rest[1]), rest[2] == "1")
        else:
            res = child_baseline()
        print(json.dumps(res))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated log (default 1024)")
    ap.add_argument("--naive-mb", type=int, default=100, help="slice the naive list is measured on")
    ap.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = ap.parse_args(argv)
    body = run(args.size_mb, args.naive_mb)
    print(body)
    if args.write:
        from benchmarks.mdsection import record_summary

        write_section(NAME, body)
        record_summary(NAME, SUMMARY)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
