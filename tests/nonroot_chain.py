"""The headless chain as a user without root or Docker meets it (issue 36).

Not collected by itself (not a `test_*.py` file): tests/test_sim_nonroot.py runs this file
with pytest as an unprivileged user whose PATH has no dockerd, docker or sshd. `sim up`
with its defaults must then choose the sim's own container runtime and no PID namespaces,
say so, and carry the whole chain (tests/test_chain.py's `whole_chain`: containers, model,
convert, setup-ray, submit, steps, logs, stop; its failure cases, the actions' own
logic, run once in tests/test_chain.py), then, on what the chain left up, the console's
keys u c r s x (u c r find their work done: the same actions brought it up from nothing
just before; s starts a new run), then `stop --cluster`.

Before that last step, with Ray up, one node's own `ray stop --force` (the
product's command, run in the node's container) stops that node's Ray only. Without PID
namespaces every simulated node shares the machine's process table, and Ray's `ray stop
--force` on a real machine stops every Ray it finds there (LAB.md): the sim's `ray` must
keep to its node.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.test_chain import stop_the_cluster, whole_chain
from tui.core.profile import load_profile
from tui.sim.cluster import sim_down, sim_status, sim_up
from tui.sim.simdocker import RUNTIME, _alive  # _alive: alive and not a zombie, the sim's own reading

pytestmark = pytest.mark.integration


def test_chain_without_root_or_docker(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert os.geteuid() != 0, "this file is run as an unprivileged user (tests/test_sim_nonroot.py)"
    assert not [x for x in ("dockerd", "docker", "sshd") if shutil.which(x)], os.environ.get("PATH")
    sim = Path(os.environ.get("RLCONSOLE_TEST_SIM_DIR") or tmp_path / "sim")
    monkeypatch.setenv("RLCONSOLE_STATE_DIR", str(tmp_path / "console"))
    profile = sim_up(2, 2, state_dir=sim)  # the defaults: what `rlconsole demo` does
    try:
        st = sim_status(sim)
        assert st.running and st.docker == RUNTIME and st.namespaces is False, st
        assert st.docker_why and st.docker_why.startswith("no dockerd"), st.docker_why
        assert f"docker:     {RUNTIME}" in st.to_text()
        assert load_profile(profile).sim_containers == RUNTIME  # the console's header says it
        # the chain from nothing, its job stopped at the end and Ray left up
        whole_chain(profile, tmp_path, capsys, failures=False, stop_cluster=False)
        # then the console, as `rlconsole demo` opens it on this sim: u c r s (the first
        # three find their work done; s submits a new run), and steps arrive
        asyncio.run(asyncio.wait_for(_console_u_c_r_s(profile), 600))
        asyncio.run(asyncio.wait_for(_ray_stop_stays_on_its_node(profile), 300))
        stop_the_cluster(profile, capsys)
    finally:
        sim_down(sim)


async def _console_u_c_r_s(profile: Path) -> None:
    from tests.pilot_helpers import SIZE, key_runs, settle, until
    from tui.app import RlconsoleApp
    from tui.backend.live import LiveBackend

    app = RlconsoleApp(LiveBackend(load_profile(profile)), bell=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        b = app.backend
        await until(pilot, lambda: b.state is not None and any(n.reachable for n in b.state.nodes), 120)
        assert f"containers: {RUNTIME}" in app.sub_title  # the header says its containers are the sim's
        prev = b.state.job.id if b.state.job else None  # the headless chain's run, stopped
        for key, action in (("u", "containers"), ("c", "convert"), ("r", "setup-ray"), ("s", "submit")):
            await key_runs(pilot, key, action)
        await until(pilot, lambda: b.state.job is not None and b.state.job.id != prev
                    and b.state.job.status == "RUNNING" and (b.state.job.step or 0) >= 1, 240)
        await key_runs(pilot, "x", "stop")


def _raylets(ray_tmp: Path, names: list[str]) -> dict[str, list[int]]:
    """Each node's raylet PIDs (its command line names the node's Ray temp dir)."""
    found: dict[str, list[int]] = {n: [] for n in names}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not cmd or not cmd[0].endswith(b"/raylet"):
            continue
        for n in names:
            if f"--temp_dir={ray_tmp / n}".encode() in cmd:
                found[n].append(int(entry))
    return found


async def _ray_stop_stays_on_its_node(profile: Path) -> None:
    from tui.core.actions.ray_setup import stop_argv
    from tui.core.ssh import SessionPool

    p = load_profile(profile)
    names = [n.name for n in p.nodes]
    ray_tmp = Path(next(a for a in p.nodes[0].ray_args if a.startswith("--temp-dir=")).split("=", 1)[1]).parent
    before = _raylets(ray_tmp, names)
    assert all(before.values()), f"a node without its raylet after the console's r: {before}"
    head, worker = names[0], names[-1]
    async with SessionPool(p) as pool:
        r = await asyncio.wait_for(pool.session(worker).run(stop_argv(p), container=True), 120)
    assert r.rc == 0 and "Stopped all" in r.stdout + r.stderr, r.stdout + r.stderr
    deadline = time.monotonic() + 30
    while any(_alive(x) for x in before[worker]) and time.monotonic() < deadline:  # noqa: ASYNC110 - polls /proc
        await asyncio.sleep(0.1)
    assert not any(_alive(x) for x in before[worker]), f"{worker}'s raylet survived its own ray stop"
    assert all(_alive(x) for n in names if n != worker for x in before[n]), \
        f"{worker}'s `ray stop --force` stopped {head}'s Ray"
