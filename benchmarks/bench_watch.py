"""The console's own cost while it watches: CPU (share of one core) and RSS.

The console runs on the head node next to the Ray head and the trainer's driver for
20 hours, so its steady-state cost per node is what matters. This starts the simulated
cluster (4 x 8 and 64 x 8; real SSH servers, one sampler per node at the profile's 2 s
refresh), then runs the whole console headless (`RlconsoleApp` on `LiveBackend`, the
path users watch) for a fixed time in a child process, once on the code as first landed
(commit `BASELINE_REV`, extracted with `git archive`: every sample read line by line,
ANSI-stripped and parsed) and once on this checkout (samples read in chunks, an
unchanged sample costs a comparison, stripping only where an escape or CR is present),
alternately, and reports the child's CPU seconds per wall second and its peak RSS. The sim's own processes (its SSH servers, the fake card
tool) are not counted: they stand in for the nodes.

    python benchmarks/bench_watch.py [--seconds 30] [--sizes 4,64] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SECTION = "watch"
BASELINE_REV = "b436d23eb72f7295acf65d4a64d1a2097e627b0f"  # main as first landed (issues 2-7)
TARGETS = {4: 1.0, 64: 5.0}  # % of one core (issue 16)
REFRESH_S = 2.0


def child(tree: str, profile_path: str, seconds: float) -> None:
    """Run the console from source tree `tree` headless for `seconds` after it has
    settled; print JSON."""
    import asyncio

    sys.path.insert(0, tree)
    import tui

    assert Path(tui.__file__).resolve().is_relative_to(Path(tree).resolve()), tui.__file__
    from tui.app import RlconsoleApp
    from tui.core.profile import load_profile
    from tui.live import LiveBackend

    async def go() -> dict[str, float]:
        profile = load_profile(profile_path)
        profile.monitoring.refresh_s = REFRESH_S
        backend = LiveBackend(profile)
        app = RlconsoleApp(backend)
        async with app.run_test(size=(160, 50)) as pilot:
            mon = backend.monitor
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and sum(1 for n in mon.state.nodes if n.gpu) < len(mon.state.nodes):
                await asyncio.sleep(0.2)
            await asyncio.sleep(3.0)  # first samples of every node parsed, screen settled
            await pilot.pause()
            s0, p0 = mon.samples, getattr(mon, "parsed", None)
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.monotonic()
            await asyncio.sleep(seconds)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            wall = time.monotonic() - t0
            res = {
                "cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
                "wall_s": wall,
                "samples": mon.samples - s0,
                "parsed": (mon.parsed - p0) if p0 is not None else mon.samples - s0,
                "nodes_up": sum(1 for n in mon.state.nodes if n.reachable),
            }
        res["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return res

    print(json.dumps(asyncio.run(go())))


def measure(tree: Path, profile: Path, seconds: float, env: dict[str, str]) -> dict[str, float]:
    r = subprocess.run([sys.executable, __file__, "--child", str(tree), str(profile), str(seconds)],
                       capture_output=True, text=True, env=env, cwd=tree, timeout=seconds + 240)
    if r.returncode != 0:
        raise SystemExit(f"child on {tree} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--sizes", default="4,64")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--child", nargs=3, metavar=("TREE", "PROFILE", "SECONDS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], float(a.child[2]))
        return

    from tui.core.sim.cluster import sim_down, sim_up

    base = Path(tempfile.mkdtemp(prefix="rlc-bench-watch-"))
    old_tree = base / "baseline-tree"
    old_tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASELINE_REV], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive, check=True)
    trees = {"baseline": old_tree, "rlconsole": ROOT}
    env = {**os.environ, "XDG_STATE_HOME": str(base / "state"), "XDG_CONFIG_HOME": str(base / "config"),
           "XDG_CACHE_HOME": str(base / "cache")}
    for v in ("RLCONSOLE_PROFILE", "RLCONSOLE_STATE_DIR", "RLCONSOLE_SIM_DIR"):
        env.pop(v, None)
    os.environ.update({k: env[k] for k in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")})
    rows = []
    for nodes in [int(x) for x in a.sizes.split(",")]:
        sim = base / f"sim{nodes}"
        t = time.monotonic()
        profile = sim_up(nodes, 8, state_dir=sim, docker=False)
        up_s = time.monotonic() - t
        try:
            got: dict[str, list[dict[str, float]]] = {"baseline": [], "rlconsole": []}
            for _ in range(a.rounds):
                for mode in ("baseline", "rlconsole"):
                    got[mode].append(measure(trees[mode], profile, a.seconds, env))
                    r = got[mode][-1]
                    print(f"{nodes}x8 {mode}: {100 * r['cpu_s'] / r['wall_s']:.2f}% of a core, "
                          f"RSS {r['rss_mb']:.0f} MB, {r['samples']} samples, {r['parsed']} parsed", flush=True)
            rows.append((nodes, up_s, got))
        finally:
            sim_down(state_dir=sim)

    lines = [f"The whole console (`RlconsoleApp` on `LiveBackend`, headless, 160x50) watching an idle "
             f"simulated cluster (no job; sampler every 2 s per node), {a.seconds:g} s per run after it "
             f"settled, {a.rounds} run(s) per way, alternating, each in its own process. CPU is the console "
             "process's user+system seconds per wall second (the sim's SSH servers and fake card tool, "
             "which stand in for the nodes, are not counted).",
             "",
             "| cluster | baseline CPU (as landed) | rlconsole CPU | ratio | target | met | RSS (baseline / now) | samples parsed (now) |",
             "|---|---:|---:|---:|---:|---|---:|---:|"]
    for nodes, _up, got in rows:
        def pct(rs: list[dict[str, float]]) -> float:
            return 100 * sum(r["cpu_s"] for r in rs) / sum(r["wall_s"] for r in rs)
        b, n = pct(got["baseline"]), pct(got["rlconsole"])
        rss_b = max(r["rss_mb"] for r in got["baseline"])
        rss_n = max(r["rss_mb"] for r in got["rlconsole"])
        parsed = sum(r["parsed"] for r in got["rlconsole"])
        samples = sum(r["samples"] for r in got["rlconsole"])
        target = TARGETS.get(nodes)
        lines.append(f"| {nodes} x 8 | {b:.2f}% | **{n:.2f}%** | {b / n if n else float('inf'):.1f}x | "
                     f"{'<= %g%%' % target if target else '-'} | {'yes' if target and n <= target else 'no' if target else '-'} | "
                     f"{rss_b:.0f} / {rss_n:.0f} MB | {parsed} of {samples} |")
    lines += ["", f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
              "shared with other work while measured."]
    body = "\n".join(lines)
    print(body)
    if a.write:
        from benchmarks.mdsection import write_section

        write_section(SECTION, body, heading="The console's own cost while watching (CPU, RSS)")


if __name__ == "__main__":
    main()
