"""The probes' view of a real multi-node Ray on the simulated nodes: the dashboard's API read
through the head's SSH forward (`source == "api"`), nodes and GPUs as Ray counts them.

On the worker's sim with Ray kept up (`ray_sim`, first in its unit: a Ray just brought up
by setup-ray, with the `ray start` commands LAB.md shows), so it costs no bring-up of its
own (it had its own in test_probes: a 4-node Ray started and stopped for one look)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import ray_logs
from tui.core.probes import probe_ray, snapshot
from tui.core.profile import load_profile
from tui.core.ssh import SessionPool
from tui.core.state import ACTIVE_JOB_STATUSES

pytestmark = pytest.mark.integration


async def test_ray_on_the_sim_nodes_through_the_dashboard_api(ray_sim: Any) -> None:
    p = load_profile(ray_sim.profile_path)
    st = await asyncio.wait_for(snapshot(p), 120)
    assert st.ray.available and st.ray.source == "api", st.ray.error
    assert (st.ray.nodes_alive, st.ray.nodes_dead, st.ray.gpus_total) == (ray_sim.nodes, 0, ray_sim.gpus), st.ray
    assert sorted(n.address for n in st.ray.nodes if n.alive) == sorted(n.address for n in p.nodes)
    if not any(j.status in ACTIVE_JOB_STATUSES for j in st.ray.jobs):
        assert st.ray.gpus_used == 0, st.ray
    # the API alone (no `ray status` fallback allowed) gives the same answer
    async with SessionPool(p) as pool:
        await asyncio.wait_for(pool.open(60), 90)
        api = await asyncio.wait_for(probe_ray(pool.head, p, allow_cli=False), 60)
    assert api.available and api.source == "api" and (api.nodes_alive, api.gpus_total) == (ray_sim.nodes, ray_sim.gpus), api
    # the failure messages of a bring-up quote each node's Ray logs: they are where the helper looks
    logs = ray_logs(ray_sim.state_dir)
    assert all(f"{n.name}/session_latest/logs/raylet.out" in logs for n in p.nodes), logs[:2000]
