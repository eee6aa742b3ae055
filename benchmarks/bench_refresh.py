"""One full telemetry refresh of the 4-node sim: persistent SSH (SessionPool + probes)
vs. a loop that runs each probe command through a fresh `ssh` process.

Not a test. Starts its own sim (private state dir), times both ways side by side on the
same nodes, prints a markdown table, and with `--write` replaces the section between
`<!-- bench:refresh -->` and `<!-- /bench:refresh -->` in BENCHMARKS.md (only that
section: other scripts own the others).

What "one full refresh" is: for every node, the card tool's JSON query and plain table
and `docker inspect` of the training container; for the head, Ray's state. The
persistent way sends one sampler script per node over already-open connections, all
nodes at once, and reads Ray through a port forward (or a direct-tcpip check of the
GCS port when Ray is down). The per-command way is what a shell loop does:
`ssh -i KEY -p PORT user@node CMD` for each command, one after another, plus `ray
status` over ssh on the head.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tui.core.parsers.detect import GMI_JSON_ARGS, GMI_PLAIN_ARGS  # noqa: E402
from tui.core.probes import container_probe_command, probe_node, probe_ray  # noqa: E402
from tui.core.profile import Profile, load_profile  # noqa: E402
from tui.sim.cluster import sim_down, sim_up  # noqa: E402
from tui.core.ssh import SessionPool  # noqa: E402
from benchmarks.mdsection import write_section  # noqa: E402

BEGIN, END = "<!-- bench:refresh -->", "<!-- /bench:refresh -->"


def node_commands(p: Profile) -> list[str]:
    cmds = [shlex.join(GMI_JSON_ARGS), shlex.join(GMI_PLAIN_ARGS)]
    docker = container_probe_command(p)
    if docker:
        cmds.append(docker)
    return cmds


def ssh_argv(p: Profile, node, cmd: str) -> list[str]:
    return ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={p.ssh.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-i", node.ssh.identity[0], "-p", str(node.ssh.port), f"{node.ssh.user}@{node.ssh.host}", cmd]


def refresh_ssh_per_command(p: Profile, with_ray: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = 0
    for node in p.nodes:
        for cmd in node_commands(p):
            subprocess.run(ssh_argv(p, node, cmd), capture_output=True, timeout=120)
            n += 1
    if with_ray:
        gcs = f"{p.head.address}:{p.ray.head_port}"
        subprocess.run(ssh_argv(p, p.head, f"{p.ray.binary} status --address={gcs}"), capture_output=True, timeout=120)
        n += 1
    return time.perf_counter() - t0, n


async def refresh_pool(p: Profile, pool: SessionPool, with_ray: bool) -> float:
    t0 = time.perf_counter()
    jobs = [probe_node(pool.session(n.name), p) for n in p.nodes]
    if with_ray:
        jobs.append(probe_ray(pool.head, p))
    res = await asyncio.gather(*jobs)
    dt = time.perf_counter() - t0
    assert all(r.reachable for r in res[: len(p.nodes)]), "a node was unreachable during the benchmark"
    return dt


async def start_ray(p: Profile, pool: SessionPool) -> bool:
    """Ray on the sim nodes by hand, as LAB.md shows (the profile carries the per-node
    temp dirs and ports). Returns True when all nodes joined."""
    r, h = p.ray, p.head
    head = ["ray", "start", "--head", f"--node-ip-address={h.address}", f"--port={r.head_port}",
            f"--num-gpus={h.gpus}", f"--dashboard-host={r.dashboard_host}", f"--dashboard-port={r.dashboard_port}",
            *r.start_args, *r.head_args, *h.ray_args]
    await pool.session(h.name).run(head, timeout=180)
    await asyncio.gather(*(pool.session(n.name).run(
        ["ray", "start", f"--address={h.address}:{r.head_port}", f"--node-ip-address={n.address}",
         f"--num-gpus={n.gpus}", *r.start_args, *n.ray_args], timeout=180) for n in p.workers))
    for _ in range(60):
        st = await probe_ray(pool.head, p)
        if st.available and st.nodes_alive == len(p.nodes):
            return True
        await asyncio.sleep(1)
    return False


async def stop_ray(p: Profile, pool: SessionPool) -> None:
    await asyncio.gather(*(pool.session(n.name).run("ray stop --force", timeout=120) for n in p.nodes),
                         return_exceptions=True)


async def run(p: Profile, rounds: int, with_ray: bool) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in ("cold", "pool", "pool_ray", "ssh", "ssh_ray")}
    ray_up = False
    if with_ray:
        async with SessionPool(p) as pool:
            ray_up = await start_ray(p, pool)
    try:
        await _rounds(p, rounds, out)
    finally:
        if with_ray:
            async with SessionPool(p) as pool:
                await stop_ray(p, pool)
    out["ray_up"] = [1.0 if ray_up else 0.0]
    return out


async def _rounds(p: Profile, rounds: int, out: dict[str, list[float]]) -> None:
    for _ in range(rounds):
        t0 = time.perf_counter()
        pool = SessionPool(p)
        await pool.open()
        await refresh_pool(p, pool, True)
        out["cold"].append(time.perf_counter() - t0)
        await pool.close()
    async with SessionPool(p) as pool:
        await refresh_pool(p, pool, True)  # warm-up (port forward, caches)
        for _ in range(rounds):
            out["pool"].append(await refresh_pool(p, pool, False))
            out["pool_ray"].append(await refresh_pool(p, pool, True))
            out["ssh"].append(refresh_ssh_per_command(p, False)[0])
            out["ssh_ray"].append(refresh_ssh_per_command(p, True)[0])


def table(res: dict[str, list[float]], p: Profile, rounds: int, n_cmds: int) -> str:
    med = {k: statistics.median(v) for k, v in res.items()}
    ray_up = med.get("ray_up") == 1.0
    ray_note = ("Ray was running on the 4 nodes (started by hand as LAB.md shows): the persistent way reads the "
                "dashboard API (nodes, cluster status, jobs) through a port forward on the head's connection; the "
                "loop runs `ray status` over ssh (a Python start on the head)." if ray_up else
                "Ray was NOT running: the persistent way learns that from a direct-tcpip check of the GCS port "
                "through the head's connection; the loop's `ray status` waits for the GCS until it gives up, "
                "which dominates its time.")
    rows = [
        ("cards + container, 4 nodes",
         f"{med['pool'] * 1000:.0f} ms", f"{med['ssh'] * 1000:.0f} ms ({n_cmds} ssh)", med["ssh"] / med["pool"]),
        ("... + Ray state from the head",
         f"{med['pool_ray'] * 1000:.0f} ms", f"{med['ssh_ray'] * 1000:.0f} ms ({n_cmds + 1} ssh)",
         med["ssh_ray"] / med["pool_ray"]),
    ]
    lines = ["| one full refresh | persistent SSH (SessionPool + probes) | fresh `ssh` per command | ratio |",
             "|---|---:|---:|---:|"]
    for name, a, b, r in rows:
        lines.append(f"| {name} | {a} | {b} | **{r:.1f}x** |")
    lines += [
        "",
        f"- Median of {rounds} rounds, run alternately on the same running sim ({len(p.nodes)} nodes x "
        f"{p.nodes[0].gpus} cards, real SSH servers on 127.0.0.2-5, one PID namespace per node, the sim's private "
        "dockerd). " + ray_note,
        f"- Persistent: connections already open; each node gets one sampler script (card JSON + plain table + "
        f"`docker inspect`) and all nodes run at once. Opening the 4 connections and doing one refresh, cold: "
        f"{med['cold'] * 1000:.0f} ms. In the console the sampler is one long-lived `sh` loop per node, so a "
        f"steady-state refresh costs no connection, no login shell and no channel set-up at all.",
        "- Per command: `ssh -F /dev/null -i KEY -p PORT user@127.0.0.x CMD` with the sim's known_hosts, one "
        "after another (a key exchange, authentication and a channel per command), as a shell loop does.",
        f"- Machine: {platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, shared with other work (absolute times vary; the ratio is the point).",
    ]
    return "\n".join(lines)



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    ap.add_argument("--docker", choices=("auto", "off"), default="auto")
    ap.add_argument("--no-ray", action="store_true", help="do not start Ray on the sim first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-refresh-") as tmp:
        state = Path(tmp) / "sim"
        prof = sim_up(4, 8, state_dir=state, docker=None if args.docker == "auto" else False)
        try:
            p = load_profile(prof)
            res = asyncio.run(run(p, args.rounds, not args.no_ray))
            body = table(res, p, args.rounds, len(p.nodes) * len(node_commands(p)))
        finally:
            sim_down(state_dir=state)
    print(body)
    if args.write:
        from benchmarks.mdsection import record_summary

        write_section("refresh", body)
        med = {k: statistics.median(v) for k, v in res.items()}
        record_summary("refresh", [{"figure": "one telemetry refresh, 4 nodes (bench_refresh)",
                                    "baseline": f"{med['ssh'] * 1000:.0f} ms (`ssh` per command)",
                                    "rlconsole": f"{med['pool'] * 1000:.0f} ms", "ratio": f"{med['ssh'] / med['pool']:.1f}x",
                                    "target": "-", "met": "-"}])
        print(f"\nwrote {ROOT / 'BENCHMARKS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
