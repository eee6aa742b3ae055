"""Probes -> typed state: sample parsing, the Ray API mapping, and on the sim: one-shot
snapshots, the live monitor (a node going down and coming back, honest card load).
A real Ray on the sim nodes, read through the dashboard's API: test_probes_ray.py (on the
worker's sim with Ray kept up)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest


from tests.conftest import require_dockerd
from tui.core.probes import (
    ClusterMonitor,
    parse_sample,
    probe_ray,
    ray_state_from_api,
    sampler_script,
    snapshot,
)
from tui.sim import gmi
from tui.sim.cluster import sim_node
from tui.core.ssh import SessionPool

# --------------------------------------------------------------------------- units


def _profile(sim_as_up):
    return sim_as_up.profile


def test_sampler_script_is_one_shell_loop(sim_as_up):
    p = _profile(sim_as_up)
    loop = sampler_script(p, 2.0)
    assert loop.count("while :; do") == 1 and "sleep 2 " in loop
    assert sampler_script(p, 2.0, deltas=False).startswith("while :; do")  # every sample in full
    assert "mthreads-gmi -q --json" in loop and "docker inspect --type container train-rl" in loop
    assert "-r" not in loop.split()  # never a guessed flag
    assert not sampler_script(p, 0).startswith("while")


def test_parse_sample_cards_and_container(sim_as_up):
    p = _profile(sim_as_up)
    cs = gmi.cards(0, 8, {})
    lines = ["@@sample-begin", "@@tool=mthreads-gmi", "@@cmd=mthreads-gmi -q --json",
             *gmi.render_json(cs).splitlines(), "@@rc=0", "@@cmd=mthreads-gmi",
             *gmi.render_plain(cs).splitlines(), "@@rc=0", "@@end",
             "@@docker-begin", "Error: No such object: train-rl", "@@docker-rc=1"]
    g, c = parse_sample(lines, p)
    assert g.parsed and len(g.cards) == 8 and g.simulated
    assert c.status == "absent"
    g, c = parse_sample(["@@sample-begin", "@@tool=mthreads-gmi", "@@cmd=mthreads-gmi -q --json",
                         "Failed to initialize MTML: Driver Not Loaded", "@@rc=0", "@@end",
                         "@@docker-begin", "sh: 1: docker: not found", "@@docker-rc=127"], p)
    assert not g.parsed and g.error
    assert c.status == "unavailable"
    g, c = parse_sample(["@@sample-begin", "@@tool=mthreads-gmi"], p)  # cut off
    assert not g.parsed and c.status == "unknown"


NODES_DOC = {"result": True, "data": {"result": {"result": [
    {"node_id": "aa", "node_ip": "127.0.0.3", "is_head_node": False, "state": "ALIVE",
     "resources_total": {"GPU": 8.0, "CPU": 2.0}},
    {"node_id": "bb", "node_ip": "127.0.0.2", "is_head_node": True, "state": "ALIVE",
     "resources_total": {"GPU": 8.0, "CPU": 2.0}},
    {"node_id": "cc", "node_ip": "127.0.0.4", "is_head_node": False, "state": "DEAD",
     "resources_total": {"GPU": 8.0}},
]}}}
STATUS_DOC = {"result": True, "data": {"clusterStatus": {"loadMetricsReport": {
    "usage": {"GPU": [4.0, 16.0], "CPU": [0.0, 4.0]},
    "usageByNode": {"aa": {"GPU": [4.0, 8.0]}, "bb": {"GPU": [0.0, 8.0]}}}}}}
JOBS_DOC = [
    {"submission_id": "raysubmit_1", "status": "SUCCEEDED", "entrypoint": "echo", "start_time": 1000,
     "end_time": 2000, "message": "ok"},
    {"submission_id": "raysubmit_2", "status": "RUNNING", "entrypoint": "python3 -m verl", "start_time": 3000},
]


def test_ray_state_from_api():
    from tui.core.probes import current_job

    st = ray_state_from_api(NODES_DOC, STATUS_DOC, JOBS_DOC)
    assert st.available and st.source == "api"
    assert (st.nodes_alive, st.nodes_dead, st.gpus_total, st.gpus_used) == (2, 1, 16.0, 4.0)
    head = next(n for n in st.nodes if n.is_head)
    assert head.address == "127.0.0.2"
    assert [j.id for j in st.jobs] == ["raysubmit_1", "raysubmit_2"]
    job = current_job(st)
    assert job.id == "raysubmit_2" and job.status == "RUNNING"
    empty = ray_state_from_api({}, {}, [])
    assert empty.available and empty.nodes_alive == 0


@pytest.mark.parametrize("old_first", [True, False])
def test_a_worker_that_rejoined_is_one_node_alive_not_one_dead(old_first: bool) -> None:
    """A worker that rejoined Ray has a new node id at its address; Ray lists the old one
    DEAD for the cluster's life, in either order. `status` ("N dead"), the Ray pane and
    the node's row said dead for a node that is up."""
    import copy

    doc = copy.deepcopy(NODES_DOC)
    rows = doc["data"]["result"]["result"]
    old = {"node_id": "dd", "node_ip": "127.0.0.3", "is_head_node": False, "state": "DEAD",
           "resources_total": {"GPU": 8.0}, "state_message": "raylet died"}
    rows.insert(0 if old_first else len(rows), old)
    st = ray_state_from_api(doc, STATUS_DOC, JOBS_DOC)
    assert (st.nodes_alive, st.nodes_dead) == (2, 1)  # the one dead is 127.0.0.4, which has no new record
    assert st.node_at("127.0.0.3").alive and st.node_at("127.0.0.3").node_id == "aa"
    assert not st.node_at("127.0.0.4").alive and st.node_at("127.0.0.9") is None
    assert st.by_address()["127.0.0.3"].node_id == "aa"


# --------------------------------------------------------------------------- sim


@pytest.mark.integration
async def test_snapshot_of_the_sim(sim_as_up):
    st = await snapshot(_profile(sim_as_up))
    assert st.simulated
    assert [n.reachable for n in st.nodes] == [True] * 4
    cards = [c for n in st.nodes for c in n.gpus]
    assert len(cards) == 32
    bad = [c for c in cards if not (c.name == "MTT S5000" and c.util_pct == 0 and c.mem_total_mib == 81920
                                    and c.temp_c and c.power_w)]
    assert not bad, bad
    statuses = [n.container.status if n.container else None for n in st.nodes]
    assert all(s in ("absent", "created", "running", "exited", "unavailable") for s in statuses), \
        [n.container for n in st.nodes]
    assert not st.ray.available and "not running" in st.ray.error
    assert st.job is None
    doc = st.to_json()
    assert doc["nodes"][0]["gpus"][0].keys() >= {"index", "name", "util_pct", "mem_used_mib", "mem_total_mib",
                                                 "temp_c", "power_w"}


@pytest.mark.integration
async def test_container_state_follows_docker(sim_as_up):
    require_dockerd()
    p = _profile(sim_as_up)
    async with SessionPool(p) as pool:
        s = pool.session("node4")
        r = await s.run(["docker", "create", "--name", "train-rl", "--network", "host", p.container.image,
                         "sleep", "infinity"])
        assert r.rc == 0, r.stderr
        try:
            st = await snapshot(p, pool)
            assert st.nodes[3].container.status == "created"
            await s.run("docker start train-rl", check=True)
            st = await snapshot(p, pool)
            assert st.nodes[3].container.status == "running" and st.nodes[3].container.image
            assert st.nodes[2].container.status == "absent"
            # through the container, as the profile says (docker exec)
            r = await s.run("echo $RLCONSOLE_SIM_NODE", container=True)
            assert r.stdout.strip() == "node4"
        finally:
            await s.run("docker rm -f train-rl")


@pytest.mark.integration
async def test_monitor_node_down_and_back(sim_as_up):
    p = _profile(sim_as_up)
    refresh = 1.0
    mon = ClusterMonitor(p, refresh_s=refresh)
    told: list = []
    mon.subscribe(told.append)
    await mon.start()
    try:
        async def until(pred, timeout):
            t0 = time.monotonic()
            while time.monotonic() - t0 < timeout:
                if pred(mon.state):
                    return time.monotonic() - t0
                await asyncio.sleep(0.05)
            raise AssertionError(f"condition not met within {timeout}s: {mon.state.nodes}")

        await until(lambda s: all(n.reachable and n.gpu is not None for n in s.nodes), 10)
        assert told  # subscribers were told
        assert sum(len(n.gpus) for n in mon.state.nodes) == 32
        before = {n.name: n.updated_at for n in mon.state.nodes}
        await asyncio.to_thread(sim_node, "stop", "node3", sim_as_up.state_dir)
        t_down = await until(lambda s: not s.nodes[2].reachable, 2 * refresh)
        assert mon.state.nodes[2].error
        # the others keep updating (an idle node says so with a heartbeat, at most every
        # stale_after/2), and none of them is called down meanwhile
        await until(lambda s: all(s.nodes[i].updated_at > before[s.nodes[i].name] for i in (0, 1, 3)),
                    mon.stale_after_s + 2 * refresh)
        for i in (0, 1, 3):
            assert mon.state.nodes[i].reachable
        await asyncio.to_thread(sim_node, "start", "node3", sim_as_up.state_dir)
        t_up = await until(lambda s: s.nodes[2].reachable and s.nodes[2].updated_at > time.time() - refresh
                           and s.nodes[2].gpu is not None, 4 * refresh + 2)
        print(f"down seen after {t_down:.2f}s, back after {t_up:.2f}s")
    finally:
        await mon.stop()
        await asyncio.to_thread(sim_node, "start", "node3", sim_as_up.state_dir)


@pytest.mark.integration
async def test_monitor_shows_simulated_load_honestly(sim_as_up):
    p = _profile(sim_as_up)
    mon = ClusterMonitor(p, refresh_s=1.0)
    async with SessionPool(p) as pool:
        s = pool.session("node2")
        # a stand-in job: a live process that declares it uses card 5
        r = await s.run("sleep 60 >/dev/null 2>&1 & pid=$!; "
                        "printf '{\"pid\": %s, \"util\": 93, \"mem_mib\": 61440, \"name\": \"python3\"}' $pid "
                        "> $RLCONSOLE_SIM_NODE_DIR/gpu-load/5.json; echo $pid", check=True)
        pid = int(r.stdout.strip())
        await mon.start()
        try:
            async def card5():
                t0 = time.monotonic()
                while time.monotonic() - t0 < 6:
                    n = mon.state.nodes[1]
                    if n.gpu and len(n.gpus) == 8:
                        yield n.gpus[5]
                    await asyncio.sleep(0.1)

            async for c in card5():
                if c.util_pct == 93:
                    break
            assert c.util_pct == 93 and c.mem_used_mib == 61440 and c.processes
            assert all(x.util_pct == 0 for i, x in enumerate(mon.state.nodes[1].gpus) if i != 5)
            await s.run(f"kill {pid}")
            async for c in card5():
                if c.util_pct == 0:
                    break
            assert c.util_pct == 0 and c.mem_used_mib == 0  # the job died: the card is idle
        finally:
            await mon.stop()
            await s.run("rm -f $RLCONSOLE_SIM_NODE_DIR/gpu-load/5.json")


@pytest.mark.integration
async def test_monitor_parses_only_changed_samples(sim_as_up):
    """An idle node's sample repeats (but for the tool's timestamp): it costs a comparison,
    not a parse, and the node keeps the very same report object (so a view can tell "no
    change" by identity); a card that changes is parsed at once."""
    p = _profile(sim_as_up)
    mon = ClusterMonitor(p, refresh_s=0.5)
    async with SessionPool(p) as pool:
        s = pool.session("node3")
        await mon.start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and mon.samples < 4 * len(p.nodes):
                await asyncio.sleep(0.1)
            assert mon.samples >= 4 * len(p.nodes), mon.samples
            assert mon.parsed < mon.samples, (mon.parsed, mon.samples)
            settled_parsed = mon.parsed
            reports = [id(n.gpu) for n in mon.state.nodes]
            samples_then = mon.samples
            while time.monotonic() < deadline and mon.samples < samples_then + 2 * len(p.nodes):
                await asyncio.sleep(0.1)
            assert mon.parsed == settled_parsed, "an unchanged idle sample was parsed again"
            assert [id(n.gpu) for n in mon.state.nodes] == reports
            r = await s.run("sleep 60 >/dev/null 2>&1 & pid=$!; "
                            "printf '{\"pid\": %s, \"util\": 71, \"mem_mib\": 1024, \"name\": \"python3\"}' $pid "
                            "> $RLCONSOLE_SIM_NODE_DIR/gpu-load/2.json; echo $pid", check=True)
            pid = int(r.stdout.strip())
            try:
                while time.monotonic() < deadline and not (mon.state.nodes[2].gpu and
                                                           mon.state.nodes[2].gpus[2].util_pct == 71):
                    await asyncio.sleep(0.1)
                assert mon.state.nodes[2].gpus[2].util_pct == 71
                assert mon.parsed > settled_parsed and id(mon.state.nodes[2].gpu) != reports[2]
            finally:
                await s.run(f"kill {pid}; rm -f $RLCONSOLE_SIM_NODE_DIR/gpu-load/2.json")
        finally:
            await mon.stop()


@pytest.mark.integration
async def test_the_monitor_sees_a_container_change_on_dockers_events_not_by_inspecting_each_sample(
        sim_as_up, tmp_path):
    """The live path of tests/test_sampler_events.py: the sim's real dockerd, its `docker`
    on each node (names mapped, `events` filters too), the monitor over SSH. Every
    `docker` the sampler runs goes through a shim that counts it."""
    require_dockerd()
    import copy

    log = tmp_path / "docker-calls"
    shim = tmp_path / "docker-shim"
    shim.write_text(f'#!/bin/sh\necho "$RLCONSOLE_SIM_NODE $1" >>\'{log}\'\nexec docker "$@"\n')
    log.write_text("")
    p = copy.deepcopy(_profile(sim_as_up))
    p.container.docker = ["sh", str(shim)]
    refresh = 0.25

    def calls(sub: str) -> int:
        return log.read_text().splitlines().count(f"node4 {sub}")

    mon = ClusterMonitor(p, refresh_s=refresh)

    async def until(pred, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout  # a bound, not a measurement (a watch is 60 s)
        while not pred(mon.state):
            assert time.monotonic() < deadline, f"never happened: {what}: {mon.state.nodes[3].container}"
            await asyncio.sleep(0.05)

    async with SessionPool(p) as pool:
        s = pool.session("node4")
        await mon.start()
        try:
            await until(lambda st: all(n.container is not None and n.container.status == "absent" for n in st.nodes),
                        "every node's container absent")
            await asyncio.sleep(2 * refresh)  # the watcher's start owes two inspections
            before, t0 = calls("inspect"), time.monotonic()
            await asyncio.sleep(12 * refresh)
            quiet = calls("inspect") - before
            assert quiet <= 2, f"{quiet} inspections in {time.monotonic() - t0:.1f} s of nothing happening"
            assert calls("events") == 1
            r = await s.run(["docker", "run", "-d", "--name", "train-rl", "--network", "host", p.container.image,
                             "sleep", "infinity"])
            assert r.rc == 0, r.stderr
            await until(lambda st: st.nodes[3].container.status == "running", "node4's container running")
            assert [n.container.status for n in mon.state.nodes[:3]] == ["absent"] * 3
            await s.run("docker rm -f train-rl", check=True)
            await until(lambda st: st.nodes[3].container.status == "absent", "node4's container gone")
        finally:
            await mon.stop()
            await s.run("docker rm -f train-rl")
    print(f"node4: {calls('inspect')} inspections, {calls('events')} watcher(s)")


@pytest.mark.integration
async def test_probe_ray_head_down(sim_as_up):
    p = _profile(sim_as_up)
    pool = SessionPool(p)
    try:
        await asyncio.to_thread(sim_node, "stop", "node1", sim_as_up.state_dir)
        await pool.open(timeout=3)
        st = await probe_ray(pool.head, p)
        assert not st.available and "unreachable" in st.error
        snap = await snapshot(p, pool)
        assert not snap.nodes[0].reachable and all(n.reachable for n in snap.nodes[1:])
    finally:
        await asyncio.to_thread(sim_node, "start", "node1", sim_as_up.state_dir)
        await pool.close()


def test_split_samples_frames_by_marker_line_whatever_the_chunking() -> None:
    """The sampler's output arrives in arbitrary chunks: samples come out whole, the
    unfinished rest is kept, a marker inside a line is not a marker, CRLF becomes LF."""
    from tui.core.probes import SAMPLE_END, split_samples

    stream = (f"a\nb\n{SAMPLE_END}\nc x{SAMPLE_END}\nd\r\n{SAMPLE_END}\ne\n")
    for cut in range(len(stream) + 1):
        got, rest = split_samples(stream[:cut])
        got2, rest2 = split_samples(rest + stream[cut:])
        assert got + got2 == ["a\nb\n", f"c x{SAMPLE_END}\nd\n"], cut
        assert rest2 == "e\n"


SEED_PROFILE = Path(__file__).resolve().parent.parent / "profiles" / "qwen3-8b-grpo-32gpu.yaml"


async def test_monitor_notifications_are_bounded_per_interval() -> None:
    """Changes from nodes out of phase (here: one every 10 ms) reach subscribers at most
    once per `notify_every_s`, each carrying everything changed before it; the last change
    is never lost. Nothing here connects: the monitor is not started, only its clock."""
    from tui.core.probes import ClusterMonitor
    from tui.core.profile import load_profile

    mon = ClusterMonitor(load_profile(SEED_PROFILE), refresh_s=2.0)
    assert mon.notify_every_s == 1.0
    mon.notify_every_s = 0.3
    seen: list[float] = []
    mon.subscribe(lambda st: seen.append(asyncio.get_running_loop().time()))
    mon.running = True
    loop = asyncio.get_running_loop()
    start = loop.time()
    while loop.time() - start < 1.0:
        mon._changed()
        await asyncio.sleep(0.01)
    elapsed = loop.time() - start
    await asyncio.sleep(0.5)  # the pending one lands
    mon.running = False
    assert 2 <= len(seen) <= elapsed / 0.3 + 2, (len(seen), elapsed)
    assert all(b - a >= 0.3 - 0.02 for a, b in zip(seen, seen[1:])), seen
    assert seen[-1] >= start + elapsed - 0.05  # the changes at the end were told too


async def test_an_unchanged_sample_is_compared_on_the_loop_and_a_changed_one_parsed_off_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: at 64 nodes an idle console's CPU was mostly a thread hop per sample just
    to learn it was unchanged. An unchanged sample now costs a comparison on the loop (no
    worker thread); a changed one is still parsed in a worker thread and reaches the
    state. Nothing here connects: samples are handed to the monitor directly."""
    import threading
    from types import SimpleNamespace

    from tui.core import probes
    from tui.core.probes import ClusterMonitor
    from tui.core.profile import load_profile

    prof = load_profile(SEED_PROFILE)
    mon = ClusterMonitor(prof, refresh_s=2.0)
    sess = SimpleNamespace(name=prof.nodes[0].name, connected=True, node=prof.nodes[0])
    hops: list[int] = []
    real = asyncio.to_thread

    async def counting(fn, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        hops.append(1)
        return await real(fn, *a, **k)

    monkeypatch.setattr(probes.asyncio, "to_thread", counting)
    parsed_in: list[int] = []
    real_parse = probes.parse_sample
    monkeypatch.setattr(probes, "parse_sample",
                        lambda lines, p: (parsed_in.append(threading.get_ident()), real_parse(lines, p))[1])

    def sample(util: int) -> str:
        cs = gmi.cards(0, 8, {})
        for c in cs:
            c.util = util
        return "\n".join(["@@sample-begin", "@@tool=mthreads-gmi", "@@cmd=mthreads-gmi -q --json",
                          *gmi.render_json(cs).splitlines(), "@@rc=0", "@@end",
                          "@@docker-begin", "Error: No such object: train-rl", "@@docker-rc=1"]) + "\n"

    keyed: list[int] = []
    real_key = probes.sample_key
    monkeypatch.setattr(probes, "sample_key", lambda text: (keyed.append(1), real_key(text))[1])
    await mon._apply_sample(sess, sample(0))  # the first: parsed, in a thread
    node = mon.state.nodes[0]
    assert node.gpu is not None and node.gpu.parsed and len(hops) == 1 and len(parsed_in) == 1
    assert threading.get_ident() not in parsed_in
    for _ in range(3):  # unchanged: no hop, no parse
        await mon._apply_sample(sess, sample(0))
    assert len(hops) == 1 and len(parsed_in) == 1 and mon.samples == 4
    await mon._apply_sample(sess, sample(77))  # changed: parsed off the loop, and shown
    assert len(hops) == 2 and len(parsed_in) == 2 and threading.get_ident() not in parsed_in
    assert len(keyed) == 5  # one key per sample: the changed one's, made on the loop, not again in the thread
    assert mon.state.nodes[0].gpu is not None and mon.state.nodes[0].gpu.cards


def _gmi_sample(util: int, node: int = 0) -> str:
    cs = gmi.cards(node, 8, {})
    for c in cs:
        c.util = util
    return "\n".join(["@@sample-begin", "@@tool=mthreads-gmi", "@@cmd=mthreads-gmi -q --json",
                      *gmi.render_json(cs).splitlines(), "@@rc=0", "@@end",
                      "@@docker-begin", "Error: No such object: train-rl", "@@docker-rc=1"]) + "\n"


async def test_changed_samples_of_several_nodes_are_read_in_one_hop_each_to_its_node(monkeypatch) -> None:
    """Issue 37, every card busy: the nodes' changed samples that arrive within the batch
    window are read in one worker-thread hop, and each reaches its own node; a sample
    whose reading fails fails its own node's read only (its sampler restarts), the
    others in the batch are applied."""
    from types import SimpleNamespace

    from tui.core import probes
    from tui.core.probes import ClusterMonitor
    from tui.core.profile import load_profile

    prof = load_profile(SEED_PROFILE)
    mon = ClusterMonitor(prof, refresh_s=2.0)
    assert mon.batch_window_s == 0.25  # a quarter of the 1 s notification bound
    sessions = [SimpleNamespace(name=n.name, connected=True, node=n) for n in prof.nodes]
    await asyncio.wait_for(asyncio.gather(*(mon._apply_sample(s, _gmi_sample(10 + i, i))
                                            for i, s in enumerate(sessions))), 30)
    assert mon.hops == 1 and mon.parsed == len(sessions)
    assert [n.gpu.cards[0].util_pct for n in mon.state.nodes] == [10.0 + i for i in range(len(sessions))]

    real = probes.parse_sample

    def odd(sample, p):  # noqa: ANN001, ANN202
        if "@@sample-begin" in sample and '"Gpu": "66%"' in sample:
            raise RuntimeError("odd sample")
        return real(sample, p)

    monkeypatch.setattr(probes, "parse_sample", odd)
    results = await asyncio.wait_for(asyncio.gather(
        mon._apply_sample(sessions[0], _gmi_sample(66, 0)), mon._apply_sample(sessions[1], _gmi_sample(55, 1)),
        return_exceptions=True), 30)
    assert isinstance(results[0], RuntimeError) and results[1] is None, results
    assert mon.hops == 2
    assert mon.state.nodes[0].gpu.cards[0].util_pct == 10.0  # kept: its sample was not read
    assert mon.state.nodes[1].gpu.cards[0].util_pct == 55.0
