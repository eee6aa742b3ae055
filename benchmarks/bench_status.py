"""Cold `rlconsole status --json` at 64 nodes, and what part of it is the nodes' own time.

Each run is a new process (what a script or a user pays): interpreter start, imports,
64 SSH handshakes, one sample per node (the card tool's JSON query and table, `docker
inspect`), the Ray probe, the JSON. It runs alternately on this checkout and on the code
as first landed (benchmarks/baseline.py), against the same simulated cluster.

The card tool's own run time is measured apart: the probe script alone, timed on each
node (`date +%s%N` around it), all nodes at once over already-open connections. On this
one machine the sim's 64 fake card tools (a Python start each) run on the same 2 cores as
rlconsole; on a real cluster each runs on its own node, in parallel.

    python benchmarks/bench_status.py [--nodes 64] [--rounds 3] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SECTION = "status"
TARGET_S = 1.5


def run_status(tree: Path, profile: Path, env: dict[str, str]) -> tuple[float, float, dict]:
    """(wall s, the status process's CPU s, its JSON) for one cold run from `tree`."""
    code = (f"import sys; sys.path.insert(0, {str(tree)!r}); import tui; "
            f"assert tui.__file__.startswith({str(tree)!r}), tui.__file__; "
            "from tui.cli import main; sys.exit(main(sys.argv[1:]))")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, "status", "--profile", str(profile), "--json"],
                       capture_output=True, text=True, env=env, cwd=tree, timeout=300)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"status from {tree} failed:\n{r.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(r.stdout)


def import_cost(env: dict[str, str]) -> float:
    """A fresh interpreter importing what `status` imports (best of 3)."""
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import tui.cli, tui.cli.status, tui.core.probes, tui.core.ssh, "
                        "tui.core.job.watcher"], check=True, env=env, cwd=ROOT)
        best = min(best, time.perf_counter() - t)
    return best


async def node_side(profile_path: Path) -> tuple[float, float, float]:
    """(median, max) of the probe script's own run time on each node, all nodes at
    once, and the wall time of that round, over open connections."""
    from tui.core.probes import sampler_script
    from tui.core.profile import load_profile
    from tui.core.ssh import SessionPool

    profile = load_profile(profile_path)
    script = sampler_script(profile, 0)
    timed = f"s=$(date +%s%N)\n{{\n{script}}} >/dev/null 2>&1\ne=$(date +%s%N)\necho $(( (e - s) / 1000 ))\n"
    async with SessionPool(profile) as pool:
        t = time.perf_counter()
        res = await asyncio.gather(*(pool.session(n.name).run(timed, timeout=120) for n in profile.nodes))
        wall = time.perf_counter() - t
    us = [int(r.stdout.strip().splitlines()[-1]) for r in res]
    return statistics.median(us) / 1e6, max(us) / 1e6, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()

    from benchmarks.baseline import extract_baseline
    from tui.sim.cluster import sim_down, sim_up

    base = Path(tempfile.mkdtemp(prefix="rlc-bench-status-"))
    env = {**os.environ, "XDG_STATE_HOME": str(base / "state"), "XDG_CONFIG_HOME": str(base / "config"),
           "XDG_CACHE_HOME": str(base / "cache")}
    for v in ("RLCONSOLE_PROFILE", "RLCONSOLE_STATE_DIR", "RLCONSOLE_SIM_DIR"):
        env.pop(v, None)
    os.environ.update({k: env[k] for k in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")})
    trees = {"baseline": extract_baseline(base / "baseline-tree"), "rlconsole": ROOT}
    sim = base / "sim"
    profile = sim_up(a.nodes, 8, state_dir=sim)
    try:
        got: dict[str, list[tuple[float, float]]] = {"baseline": [], "rlconsole": []}
        cards: dict[str, int] = {}
        for i in range(a.rounds + 1):  # the first round warms the page cache, not counted
            for mode in ("baseline", "rlconsole"):
                wall, cpu, doc = run_status(trees[mode], profile, env)
                cards[mode] = sum(len(n.get("gpus") or []) for n in doc["nodes"])
                if i:
                    got[mode].append((wall, cpu))
                print(f"{mode}: {wall:.2f} s wall, {cpu:.2f} s CPU, {cards[mode]} cards", flush=True)
        tool_med, tool_max, tool_wall = asyncio.run(node_side(profile))
        imports = import_cost(env)
    finally:
        sim_down(state_dir=sim)

    def med(mode: str, k: int) -> float:
        return statistics.median(x[k] for x in got[mode])

    b, n = med("baseline", 0), med("rlconsole", 0)
    lines = [
        f"Cold `rlconsole status --json`, a new process per run, {a.nodes} simulated nodes x 8 cards "
        f"(real SSH servers on loopback, the sim's dockerd), median of {a.rounds} runs per way, alternating.",
        "",
        "| figure | baseline (as landed) | rlconsole | ratio | target | met |",
        "|---|---:|---:|---:|---:|---|",
        f"| wall time, {a.nodes} nodes | {b:.2f} s | **{n:.2f} s** | {b / n:.2f}x | <= {TARGET_S:g} s | "
        f"{'yes' if n <= TARGET_S else 'no'} |",
        f"| the status process's own CPU | {med('baseline', 1):.2f} s | {med('rlconsole', 1):.2f} s | "
        f"{med('baseline', 1) / med('rlconsole', 1):.2f}x | | |",
        f"| cards reported | {cards['baseline']} | {cards['rlconsole']} | | {a.nodes * 8} | |",
        "",
        "Where the time goes (this checkout):",
        f"- interpreter start + imports of the status path: {imports:.2f} s;",
        f"- the nodes' own time: the probe script alone (card tool JSON + table, `docker inspect`) takes "
        f"{tool_med:.2f} s median, {tool_max:.2f} s at worst, per node when all {a.nodes} run at once over open "
        f"connections ({tool_wall:.2f} s for the round). Here the {a.nodes} fake card tools are Python programs "
        "sharing this machine's 2 cores with rlconsole; on a cluster each runs on its own node;",
        f"- the rest, rlconsole's own: {max(0.0, n - imports - tool_wall):.2f} s of wall beyond the imports and "
        f"that round ({med('rlconsole', 1):.2f} s CPU in all: handshakes, parsing, JSON).",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs, shared.",
    ]
    body = "\n".join(lines)
    print(body)
    if a.write:
        from benchmarks.mdsection import write_section

        from benchmarks.mdsection import record_summary

        write_section(SECTION, body, heading="Cold `status --json` at 64 nodes")
        record_summary(SECTION, [{"figure": f"cold `status --json`, {a.nodes} nodes (bench_status)",
                                  "baseline": f"{b:.2f} s", "rlconsole": f"{n:.2f} s", "ratio": f"{b / n:.2f}x",
                                  "target": f"<= {TARGET_S:g} s", "met": "yes" if n <= TARGET_S else "no"}])


if __name__ == "__main__":
    main()
