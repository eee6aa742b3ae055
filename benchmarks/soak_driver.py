"""SIMULATION: the soak benchmark's Ray job, a whole GRPO run at accelerated pace.

Submitted to the simulated cluster's real Ray by `bench_soak.py`; Ray writes its stdout
and stderr to the head's `job-driver-<id>.log`, which the console follows over SSH as
it would a real run's. Per step it prints what a real VeRL driver log holds, at a real
run's volume: Ray-prefixed worker chatter (rollout and training workers; most of the
bytes), one `(TaskRunner pid=N) step:S - k:v - ...` line with `--tags` scalars, a tqdm
`Training Progress` redraw; it writes the same scalars to a TensorBoard event file and a
checkpoint marker (`latest_checkpointed_iteration.txt`, `global_step_S`) every
`--ckpt-every` steps. Only the numbers are made up.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

GROUPS = ("actor", "critic", "timing_s", "timing_per_token_ms", "perf", "response_length",
          "prompt_length", "val-core/gsm8k/reward", "rollout", "training")


def tag_names(n: int) -> list[str]:
    """`n` metric keys shaped like VeRL's; the ones the console reads come first."""
    fixed = ["critic/rewards/mean", "critic/score/mean", "perf/throughput", "perf/mfu/actor",
             "timing_s/step", "response_length/mean", "actor/pg_loss", "actor/entropy",
             "actor/grad_norm", "actor/lr", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb"]
    out = fixed[:n]
    i = 0
    while len(out) < n:
        g = GROUPS[i % len(GROUPS)]
        out.append(f"{g}/m{i:03d}/mean")
        i += 1
    return out


def fmt_interval(t: float) -> str:
    m, s = divmod(int(t), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2710)
    ap.add_argument("--tags", type=int, default=130)
    ap.add_argument("--bytes-per-step", type=int, default=120_000)
    ap.add_argument("--step-s", type=float, default=0.1)
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--tb", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--pause-file", default=None,
                    help="while this file exists the driver makes no step (alive, silent: a hang); "
                         "bench_chaos plants it for a stall and to hold the log still while it rotates it")
    a = ap.parse_args()

    from tui.sim.tbwrite import ScalarWriter

    os.makedirs(a.tb, exist_ok=True)
    os.makedirs(a.ckpt, exist_ok=True)
    tb = ScalarWriter(a.tb, per_scalar=False, sync=True)
    pid = os.getpid()
    tags = tag_names(a.tags)
    out = sys.stdout
    out.write(f"(TaskRunner pid={pid}) Total training steps: {a.steps}\n")
    chatter = ("(WorkerDict pid={w}77, ip=127.0.0.{ip}) [rollout] sglang: generated 512 sequences, "
               "batch {b}, max len {ml}, kv cache usage 0.{k:02d}, prefix hit rate 0.{h:02d} ..........\n")
    t0 = time.time()
    for s in range(1, a.steps + 1):
        n = 0
        b = 0
        lines = []
        while n < a.bytes_per_step:
            line = chatter.format(w=b % 10, ip=3 + b % 3, b=b, ml=15000 + (s * 91 + b) % 1300,
                                  k=(s + b) % 100, h=(s * 7 + b) % 100)
            lines.append(line)
            n += len(line)
            b += 1
        out.write("".join(lines))
        vals = {}
        for j, k in enumerate(tags):
            vals[k] = 0.3 + 0.12 * math.tanh(s / 600) + 0.001 * j if "reward" in k or "score" in k else \
                742 + 40 * math.sin(s / 9) if k == "perf/throughput" else \
                0.31 if k == "perf/mfu/actor" else \
                1032.0 + (s % 11) * 3 if k == "timing_s/step" else \
                4800 + (s * 37) % 700 if k.startswith("response_length") else \
                0.01 * j + 1e-4 * (s % 97)
        out.write(f"(TaskRunner pid={pid}) step:{s} - "
                  + " - ".join(f"{k}:{v:.6g}" for k, v in vals.items()) + "\n")
        tb.add_scalars(s, vals)
        tb.flush()
        if s % a.ckpt_every == 0:
            with open(os.path.join(a.ckpt, "latest_checkpointed_iteration.txt"), "w") as f:
                f.write(str(s))
            out.write(f"(TaskRunner pid={pid}) local_global_step_folder: {a.ckpt}/global_step_{s}\n")
        el = time.time() - t0
        rate = s / el if el > 0 else 0.0
        rem = fmt_interval((a.steps - s) / rate) if rate else "?"
        rs = f"{1 / rate:.2f}s/it" if 0 < rate < 1 else f"{rate:.2f}it/s"
        out.write(f"(TaskRunner pid={pid}) Training Progress: {100 * s // a.steps:3d}%|#         | "
                  f"{s}/{a.steps} [{fmt_interval(el)}<{rem}, {rs}]\n")
        out.flush()
        delay = t0 + s * a.step_s - time.time()
        if delay > 0:
            time.sleep(delay)
        if a.pause_file:
            paused = time.time()
            while os.path.exists(a.pause_file):
                time.sleep(0.05)
            t0 += time.time() - paused  # the pace resumes; no burst of steps to catch up
    tb.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
