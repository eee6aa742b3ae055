"""The job side of the soak's two targets, this checkout against a baseline commit, in one run.

1. CPU per console refresh (`LiveBackend.refresh_metrics`: RunMetrics, job state, the
   pane's summary, the sparklines' series) at steps 26, 1363 and 2710 of a run of
   `--steps` steps x `--tags` metrics, fed to a real store as VeRL step lines; one new
   step before each refresh, the median and the least of `--refreshes`.
2. The job part of `rlconsole status --json` on a full-run spool: a fresh process
   importing the job package, opening the watcher (the spool and its saved line index),
   re-attaching from the parse cache the console left (`reattach(0)`) and computing the
   job's state; and a fresh interpreter importing what `status` imports. The spool is
   the soak driver's output (`--log-scale` x 120 KB of log a step), written to the spool
   and its caches as a console does (a cache every 200k lines, one at the end); both
   trees read the same spool (the baseline reads `parsed.json`, this tree the summary
   beside it) and must report the same job state.

No cluster: SSH and Ray's API (the rest of `status`) are bench_soak's and bench_status's.

    python benchmarks/bench_jobcost.py [--baseline ba96aa3] [--log-scale 1.0] [--spool DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

REFRESH = r"""
import gc, json, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, TREE)
sys.path.insert(1, ROOT)
import tui
assert tui.__file__.startswith(TREE), tui.__file__
from benchmarks.soak_driver import tag_names
from tui.backend.live import LiveBackend
from tui.backend.static import demo_profile
from tui.core.job.watcher import JobWatcher
import math
tags = tag_names(TAGS)
def line(s):
    vals = {}
    for j, k in enumerate(tags):
        vals[k] = 0.3 + 0.12 * math.tanh(s / 600) + 0.001 * j if "reward" in k or "score" in k else \
            742 + 40 * math.sin(s / 9) if k == "perf/throughput" else 0.31 if k == "perf/mfu/actor" else \
            1032.0 + (s % 11) * 3 if k == "timing_s/step" else \
            4800 + (s * 37) % 700 if k.startswith("response_length") else 0.01 * j + 1e-4 * (s % 97)
    return "(TaskRunner pid=1) step:%d - " % s + " - ".join(f"{k}:{v:.6g}" for k, v in vals.items()) + "\n"
prof = demo_profile()
b = LiveBackend(prof)
b.subscribe_metrics(lambda s, ser: None)
w = JobWatcher(prof, pool=None, job_id="j", root=Path(tempfile.mkdtemp(dir=TMP)))
w.observe("RUNNING", True)
b.watcher = w
w._consume(w.spool.append(f"(TaskRunner pid=1) Total training steps: {STEPS}\n".encode()), notify=False)
out = {}
step = 0
for at in AT:
    while step < at - REFRESHES:
        n = min(200, at - REFRESHES - step)
        w._consume(w.spool.append("".join(line(s) for s in range(step + 1, step + n + 1)).encode()), notify=False)
        step += n
    b.refresh_metrics(w)
    ts = []
    for _ in range(REFRESHES):
        step += 1
        w._consume(w.spool.append(line(step).encode()), notify=False)
        gc.collect()
        t = time.process_time()
        b.refresh_metrics(w)
        ts.append(time.process_time() - t)
    out[at] = [statistics.median(ts) * 1e3, min(ts) * 1e3]
w.spool.close()
print(json.dumps(out))
"""

STATUS_JOB = r"""
import time
t0 = time.perf_counter()
import json, sys
sys.path.insert(0, TREE)
from pathlib import Path
import tui
assert tui.__file__.startswith(TREE), tui.__file__
from tui.backend.static import demo_profile
from tui.core.job.watcher import JobWatcher
t1 = time.perf_counter()
prof = demo_profile()
try:
    w = JobWatcher(prof, pool=None, job_id=JOB, root=Path(SPOOL), wall_clock=False, diagnose=False, summary=True)
except TypeError:  # the baseline: what its status made
    w = JobWatcher(prof, pool=None, job_id=JOB, root=Path(SPOOL), wall_clock=False)
w.observe("RUNNING", True)
t2 = time.perf_counter()
w.reattach(0)
t3 = time.perf_counter()
js = w.job_state()
t4 = time.perf_counter()
w.spool.close()
from dataclasses import asdict
state = json.dumps(asdict(js), sort_keys=True, default=str)
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "reattach": t3 - t2, "job_state": t4 - t3,
                  "job": t4 - t1, "state": state}))
"""

IMPORTS = ("import sys, time; t = time.perf_counter(); sys.path.insert(0, TREE); "
           "import tui.cli, tui.cli.status, tui.core.probes, tui.core.ssh, tui.core.job.watcher; "
           "print(time.perf_counter() - t)")


def run_py(code: str, env: dict[str, str], **subs: object) -> str:
    head = "".join(f"{k} = {v!r}\n" for k, v in subs.items())
    r = subprocess.run([sys.executable, "-c", head + code], capture_output=True, text=True, env=env,
                       timeout=1800, cwd="/")
    if r.returncode != 0:
        raise SystemExit(r.stderr[-3000:])
    return r.stdout.strip().splitlines()[-1]


def build_spool(root: Path, tmp: Path, steps: int, tags: int, scale: float, env: dict[str, str]) -> None:
    """The soak driver's log for a whole run, spooled and cached as a console does."""
    src = tmp / "driver-src.log"
    with open(src, "wb") as f:
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "soak_driver.py"), "--steps", str(steps),
                        "--tags", str(tags), "--bytes-per-step", str(int(120_000 * scale)), "--step-s", "0",
                        "--tb", str(tmp / "tb"), "--ckpt", str(tmp / "ckpt")], stdout=f, check=True, env=env)
    code = r"""
import sys
sys.path.insert(0, TREE)
from pathlib import Path
from tui.backend.static import demo_profile
from tui.core.job.watcher import JobWatcher
w = JobWatcher(demo_profile(), pool=None, job_id="raysubmit_soak", root=Path(SPOOL), wall_clock=False, diagnose=False)
with open(SRC, "rb") as f:
    while data := f.read(1 << 20):
        w._consume(w.spool.append(data), notify=False)
        if w.spool.line_count - w.cache.cached_lines >= w.CACHE_EVERY_LINES:
            w.write_cache(w.cache_snapshot())
w.write_cache(w.cache_snapshot())
w.spool.close()
print(w.spool.line_count)
"""
    run_py(code, env, TREE=str(ROOT), SPOOL=str(root), SRC=str(src))
    src.unlink()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default="ba96aa3", help="the commit to compare with")
    ap.add_argument("--steps", type=int, default=2710)
    ap.add_argument("--tags", type=int, default=130)
    ap.add_argument("--log-scale", type=float, default=1.0)
    ap.add_argument("--refreshes", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--spool", type=Path, help="a spool root already built by this script (reused)")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-jobcost-"))
    try:
        return run(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the baseline tree, a built spool (~370 MB)


def run(a: argparse.Namespace, tmp: Path) -> int:
    base = tmp / "baseline"
    base.mkdir()
    subprocess.run(f"git -C {ROOT} archive {a.baseline} | tar -x -C {base}", shell=True, check=True)
    env = {**os.environ, **{k: str(tmp / k) for k in (
        "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")}}
    trees = {"baseline": str(base), "this": str(ROOT)}
    at = [26, (a.steps + 16) // 2, a.steps]

    print(f"# refresh CPU at steps {at} ({a.tags} tags, median / least of {a.refreshes}), ms")
    refresh = {}
    for name, tree in trees.items():
        refresh[name] = json.loads(run_py(REFRESH, env, TREE=tree, ROOT=str(ROOT), TMP=str(tmp), TAGS=a.tags,
                                          STEPS=a.steps, AT=at, REFRESHES=a.refreshes))
        r = refresh[name]
        print(f"{name:9s} " + "  ".join(f"{s}: {r[str(s)][0]:.2f} / {r[str(s)][1]:.2f}" for s in at)
              + f"   end/start {r[str(at[-1])][0] / r[str(at[0])][0]:.1f}x, end/middle "
              f"{r[str(at[-1])][0] / r[str(at[1])][0]:.2f}x")

    spool = a.spool
    if spool is None:
        spool = tmp / "spool"
        t = time.perf_counter()
        build_spool(spool, tmp, a.steps, a.tags, a.log_scale, env)
        print(f"# spool built in {time.perf_counter() - t:.0f} s")
    job = spool / "raysubmit_soak"
    sizes = {p.name: p.stat().st_size for p in job.iterdir() if p.is_file()}
    print("# spool: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sorted(sizes.items())))
    print(f"# status job part, fresh process each, {a.rounds} rounds (median s)")
    states = {}
    for name, tree in trees.items():
        runs = [json.loads(run_py(STATUS_JOB, env, TREE=tree, SPOOL=str(spool), JOB="raysubmit_soak"))
                for _ in range(a.rounds)]
        imports = [float(run_py(IMPORTS, env, TREE=tree)) for _ in range(a.rounds)]
        states[name] = {r["state"] for r in runs}
        med = {k: statistics.median(r[k] for r in runs) for k in ("open", "reattach", "job_state", "job")}
        print(f"{name:9s} open {med['open']:.3f}  reattach {med['reattach']:.3f}  job_state "
              f"{med['job_state']:.3f}  = job part {med['job']:.3f}   status's imports "
              f"{statistics.median(imports):.3f}")
    same = states["baseline"] == states["this"] and len(states["this"]) == 1
    print(f"# same job state from both: {same}")
    la = os.getloadavg()
    print(f"# Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {la[0]:.1f} "
          f"{la[1]:.1f} {la[2]:.1f}, {time.strftime('%Y-%m-%d')}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
