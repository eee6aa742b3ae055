"""setup-ray on a real multi-node Ray when a worker's raylet cannot listen on its port.

`ray start` reports only Ray's start-up deadline ("The current node timed out during
startup") when a raylet died at start, and a raylet whose node-manager port another
process holds dies at once, on every retry: reproduced on the sim (three starts of ~35 s,
then "timed out"), and behind a CI flake (two simulated clusters that drew the same port;
ports.py now keeps live sims apart). setup-ray reads the node's newest raylet log, names
the cause with its fix, and does not start the node again. Here on the real Ray of the
worker's sim (`ray_sim`), through the CLI as the user sees it; the node is then started
alone once the port is free, and Ray is left whole for the next module.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ray_logs
from tui.cli import main
from tui.core.actions.ray_setup import stop_argv
from tui.core.profile import load_profile
from tui.core.ssh import SessionPool

pytestmark = pytest.mark.integration


def _node_manager_port(ray_args: list[str]) -> int:
    return int(next(a for a in ray_args if a.startswith("--node-manager-port=")).split("=", 1)[1])


async def _stop_ray_on(profile: Any, node: Any) -> None:
    """`ray stop` on one node (graceful: its raylet unregisters, where `--force` leaves
    the GCS listing it alive until its health checks lapse, tens of seconds), then wait
    until the GCS lists it dead (2 s here): setup-ray would rightly find Ray whole before."""
    from tui.core.actions.ray_setup import alive_addresses
    from tui.core.actions.remote import PoolRemote

    async with SessionPool(profile) as pool:
        argv = [a for a in stop_argv(profile) if a != "--force"]
        r = await asyncio.wait_for(pool.session(node.name).run(argv, container=True), 120)
        assert r.rc == 0, r.stdout + r.stderr
        remote = PoolRemote(pool, profile)
        alive: set[str] | None = {node.address}
        for _ in range(120):
            alive = await asyncio.wait_for(alive_addresses(profile, remote), 90)
            if alive is not None and node.address not in alive:
                return
            await asyncio.sleep(1)
    raise AssertionError(f"the GCS still lists {node.name} alive after its ray stop: {alive}")


def test_a_whole_ray_is_read_through_the_dashboard_not_the_ray_cli(ray_sim: Any,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """setup-ray and the preflight's Ray check read the GCS's node table through the
    head's dashboard: on a whole Ray neither runs `ray status` or `ray list` on the head
    (each a Python start importing Ray: about a CPU-second, once a second while workers
    join). The sim's `ray` records every call made on the node (`ray-calls`)."""
    from tui.core.actions.ray_setup import api_look
    from tui.core.actions.remote import PoolRemote
    from tui.sim.raywrap import ray_calls

    p = load_profile(ray_sim.profile_path)
    head_dir = Path(ray_sim.state_dir) / "nodes" / p.head.name
    before = len(ray_calls(head_dir))
    rc = main(["setup-ray", "--profile", str(ray_sim.profile_path), "--yes"])
    out = capsys.readouterr().out
    assert rc == 0 and f"Ray already up: {ray_sim.nodes} nodes, {ray_sim.gpus} GPUs; nothing changed" in out, out[-3000:]

    async def look() -> Any:
        async with SessionPool(p) as pool:
            return await asyncio.wait_for(api_look(p, PoolRemote(pool, p)), 60)

    seen = asyncio.run(look())
    assert seen is not None, "the dashboard did not answer"
    st, alive = seen
    assert (st.nodes_alive, int(st.gpus_total)) == (ray_sim.nodes, ray_sim.gpus) and alive == {n.address for n in p.nodes}, (st, alive)
    asked = [c for c in ray_calls(head_dir)[before:] if c.split()[:1] in (["status"], ["list"])]
    assert not asked, f"the ray CLI was run on {p.head.name}: {asked}"
    assert ray_calls(head_dir)[:1], "the sim recorded no ray call at all (its setup-ray's start)"


def test_a_worker_whose_port_is_held_is_named_not_retried(ray_sim: Any, capsys: pytest.CaptureFixture[str]) -> None:
    p = load_profile(ray_sim.profile_path)
    worker = p.nodes[-1]
    port = _node_manager_port(worker.ray_args)
    asyncio.run(_stop_ray_on(p, worker))
    holder = socket.socket()
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("0.0.0.0", port))
        holder.listen()
        rc = main(["setup-ray", "--profile", str(ray_sim.profile_path), "--yes"])
        out = capsys.readouterr().out
    finally:
        holder.close()
    said = out + "\n" + ray_logs(Path(ray_sim.state_dir))
    assert rc == 1, said[-4000:]
    assert f"starting only {worker.name}" in out, said[-4000:]
    assert f"could not listen on port {port}" in out and "not started again" in out, said[-4000:]
    assert "starting again" not in out, said[-4000:]  # one start, not three
    last = out.strip().splitlines()[-1]
    assert f"did not join: {worker.name}" in last and f"port {port}" in last, last
    # the port free again: the worker alone is started, and Ray is whole
    rc = main(["setup-ray", "--profile", str(ray_sim.profile_path), "--yes"])
    out = capsys.readouterr().out
    assert rc == 0 and f"starting only {worker.name}" in out, out[-3000:] + "\n" + ray_logs(Path(ray_sim.state_dir))
