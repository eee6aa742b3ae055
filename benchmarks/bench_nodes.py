"""What being watched costs the nodes: the sampler loop's CPU on each node.

The console's own cost is bench_watch's; this is the other side, the `sh` loop each node
runs for the console (the card tool, the container's state, the comparison with the
last sample), which on the sim (and in the demo, on a laptop) shares the machine with
everything else, and on a real node runs beside the training job. It starts the
simulated cluster (4 x 8, its real dockerd when the machine has one, each node's
container created and running), then, alternately, in one run:

* `idle`: nothing watches (the sim's own cost, the floor);
* `before`: the monitor of the tree at BEFORE_REV (`docker inspect` every sample);
* `rlconsole`: this checkout's (the container inspected on Docker's events).

Each watching way is a child process running `ClusterMonitor` from its tree at the
sim profile's refresh. The figure is the machine's busy CPU (`/proc/stat`) over the
window, less the idle way's in the same round and less the child's own CPU: what the
nodes' loops, the processes they start and the sim's SSH servers and dockerd cost.

    python benchmarks/bench_nodes.py [--seconds 30] [--rounds 2] [--write]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.baseline import extract_baseline  # noqa: E402
from benchmarks.mdsection import record_summary, write_section  # noqa: E402

SECTION = "nodes"
BEFORE_REV = "38d6b5f"
"""main before the container was inspected on Docker's events (every sample inspected it)."""
TARGET_RATIO = 2.0
"""The nodes' cost of an idle watch at least halved (issue 37: quiet when nothing changes)."""

CHILD = r"""
import asyncio, sys, time
sys.path.insert(0, sys.argv[1])
from tui.core.profile import load_profile
from tui.core.probes import ClusterMonitor

async def main(profile_path: str, seconds: float) -> None:
    p = load_profile(profile_path)
    mon = ClusterMonitor(p)
    await mon.start()
    try:
        deadline = time.monotonic() + 120
        while not all(n.reachable and n.container is not None for n in mon.state.nodes):
            assert time.monotonic() < deadline, "the nodes never answered"
            await asyncio.sleep(0.2)
        await asyncio.sleep(3 * mon.refresh_s)  # every watcher started, its first inspections done
        print("READY", flush=True)
        cpu0 = time.process_time()
        await asyncio.sleep(seconds)
        print(f"DONE {time.process_time() - cpu0:.4f} {mon.refresh_s}", flush=True)
    finally:
        await mon.stop()

asyncio.run(main(sys.argv[2], float(sys.argv[3])))
"""


def _busy_jiffies() -> int:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def _watch(tree: Path, profile: Path, seconds: float, env: dict[str, str]) -> tuple[float, float, float]:
    """(machine busy CPU-s, the console's own CPU-s, refresh) over `seconds` of watching."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tree), str(profile), str(seconds)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line.startswith("READY"), line
        j0 = _busy_jiffies()
        line = proc.stdout.readline()
        j1 = _busy_jiffies()
        assert line.startswith("DONE"), line
        _, own, refresh = line.split()
    finally:
        proc.wait(timeout=120)
    hz = os.sysconf("SC_CLK_TCK")
    return (j1 - j0) / hz, float(own), float(refresh)


def _idle(seconds: float) -> float:
    j0 = _busy_jiffies()
    time.sleep(seconds)
    return (_busy_jiffies() - j0) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--write", action="store_true", help="write the figures into BENCHMARKS.md")
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="rlc-bench-nodes-"))
    env = {**os.environ, "XDG_STATE_HOME": str(base / "state"), "XDG_CONFIG_HOME": str(base / "config"),
           "XDG_CACHE_HOME": str(base / "cache"), "XDG_DATA_HOME": str(base / "data")}
    for k in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        os.environ[k] = env[k]
    for k in ("RLCONSOLE_STATE_DIR", "RLCONSOLE_CONFIG_DIR", "RLCONSOLE_PROFILE"):
        os.environ.pop(k, None)
        env.pop(k, None)
    before = extract_baseline(base / "before", BEFORE_REV)
    from tui.sim.cluster import sim_down, sim_up

    sim = base / "sim"
    from tui.core.profile import load_profile

    profile = Path(sim_up(4, 8, state_dir=sim))
    profile_obj = load_profile(profile)
    env["RLCONSOLE_SIM_DIR"] = str(sim)
    rows: dict[str, list[float]] = {"idle": [], "before": [], "rlconsole": []}
    own: dict[str, list[float]] = {"before": [], "rlconsole": []}
    refresh = 1.0
    try:
        up = subprocess.run([sys.executable, "-m", "tui.cli", "--profile", str(profile), "containers", "--yes"],
                            env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stderr
        for r in range(args.rounds):
            rows["idle"].append(_idle(args.seconds))
            for way, tree in (("before", before), ("rlconsole", ROOT)) if r % 2 == 0 else \
                    (("rlconsole", ROOT), ("before", before)):
                busy, mine, refresh = _watch(tree, profile, args.seconds, env)
                rows[way].append(busy)
                own[way].append(mine)
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1] / args.seconds * 100:.1f}%" for k, v in rows.items()),
                  flush=True)
    finally:
        sim_down(sim)
    n = len(profile_obj.nodes)

    def nodes_pct(way: str) -> list[float]:
        return [(b - i - o) / args.seconds * 100 for b, i, o in zip(rows[way], rows["idle"], own[way])]

    def mean(v: list[float]) -> float:
        return sum(v) / len(v)

    b, t = nodes_pct("before"), nodes_pct("rlconsole")
    per_sample = {w: mean(v) / 100 * refresh / n * 1000 for w, v in (("before", b), ("rlconsole", t))}
    ratio = mean(b) / mean(t) if mean(t) > 0 else float("inf")
    docker = f"no dockerd: {profile_obj.sim_containers}" if profile_obj.sim_containers else "the sim's dockerd"
    body = "\n".join([
        f"The nodes' side of an idle watch (`python benchmarks/bench_nodes.py --seconds {args.seconds:g} "
        f"--rounds {args.rounds}`, {time.strftime('%Y-%m-%d')}): the simulated cluster, {n} x 8, containers "
        f"running ({docker}), watched by a headless `ClusterMonitor` at the sim profile's {refresh:g} s refresh; "
        "per round the machine idle, then each way, alternating. The figure is the machine's busy CPU less the "
        "idle way's and less the console's own: the nodes' sampler loops, what they start, and the sim's SSH "
        "servers and dockerd that answer them. `before` is main at "
        f"`{BEFORE_REV}` (`docker inspect` every sample); `rlconsole` inspects on Docker's events.",
        "",
        "| way | nodes' CPU, % of one core (each round) | mean | per node per sample |",
        "|---|---|---:|---:|",
        f"| before | {', '.join(f'{x:.1f}' for x in b)} | {mean(b):.1f}% | {per_sample['before']:.1f} ms |",
        f"| rlconsole | {', '.join(f'{x:.1f}' for x in t)} | {mean(t):.1f}% | {per_sample['rlconsole']:.1f} ms |",
        "",
        f"Ratio {ratio:.1f}x (target >= {TARGET_RATIO:g}x); the machine idle (the sim's own daemon, dockerd): "
        f"{', '.join(f'{x / args.seconds * 100:.1f}' for x in rows['idle'])}% of a core; the console's own: "
        f"before {mean(own['before']) / args.seconds * 100:.2f}%, rlconsole "
        f"{mean(own['rlconsole']) / args.seconds * 100:.2f}%.",
    ])
    print(body)
    if args.write:
        write_section(SECTION, body, heading="What being watched costs the nodes (the sampler loop)")
        record_summary(SECTION, [{
            "figure": f"the nodes' CPU while a console watches {n} x 8 idle, {refresh:g} s refresh (bench_nodes)",
            "baseline": f"{mean(b):.1f}%", "rlconsole": f"{mean(t):.1f}%", "ratio": f"{ratio:.1f}x",
            "target": f">= {TARGET_RATIO:g}x", "met": "yes" if ratio >= TARGET_RATIO else "no"}])


if __name__ == "__main__":
    main()
