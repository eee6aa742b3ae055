"""The simulated cluster: the fake card tool's formats and honesty, `sim up/status/down`,
per-node PID namespaces, per-node Docker names, replay, scale."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import require_dockerd
from tests.samples import samples_dir
from tui.core.parsers.gmi import parse_gmi_json, parse_gmi_plain
from tui.sim import gmi
from tui.sim.cluster import SimError, sim_down, sim_node, sim_status, sim_up, short_dir



def _sample(pattern: str) -> Path:
    hits = sorted(samples_dir().glob(pattern))
    assert hits, f"sample {pattern} is missing from tests/data/samples"
    return hits[0]


# --------------------------------------------------------------------------- fake gmi


def _mask(text: str) -> str:
    """Drop what legitimately differs between two idle S5000 nodes: time, temps."""
    text = re.sub(r"^\w{3} \w{3} +\d+ [\d:]+ \d{4}$", "TIME", text, flags=re.M)
    return re.sub(r"\|\d+C ", "|NNC ", text)


def test_plain_layout_matches_the_real_s5000_table():
    real = _sample("mthreads-gmi/01_*").read_text().split("\n", 1)[1]  # drop the SOURCE line
    ours = gmi.render_plain(gmi.cards(0, 8, {}))
    assert _mask(ours) == _mask(real)
    rep = parse_gmi_plain(ours)
    assert rep.parsed and len(rep.cards) == 8
    assert all(c.util_pct == 0 and c.mem_used_mib == 0 and c.mem_total_mib == 81920 for c in rep.cards)


def test_json_has_the_real_keys_and_units():
    ours = gmi.render_json(gmi.cards(1, 8, {}))
    doc = json.loads(ours)
    real = json.loads("\n".join(l for l in _sample("mthreads-gmi/09_*").read_text().splitlines()
                                if not l.startswith("//")))
    assert set(real) <= set(doc)
    for key, value in real["GPU"][0].items():  # every key of the real excerpt, same nesting
        assert key in doc["GPU"][0]
        if isinstance(value, dict):
            assert set(value) <= set(doc["GPU"][0][key])
    assert "Power Draw " in doc["GPU"][0]["Power Readings"]  # the trailing space
    assert doc["GPU"][0]["FB Memory Usage"]["Total"] == "81920MiB"
    rep = parse_gmi_json(ours)
    assert rep.parsed and len(rep.cards) == 8
    c = rep.cards[0]
    assert (c.util_pct, c.mem_used_mib) == (0, 0) and 45 <= c.temp_c <= 52 and 95 <= c.power_w <= 99


def test_cards_are_idle_unless_a_live_process_loads_them(tmp_path):
    load = tmp_path / "gpu-load"
    load.mkdir()
    (load / "2.json").write_text(json.dumps({"pid": os.getpid(), "util": 91, "mem_mib": 52000, "name": "python3"}))
    dead = subprocess.Popen(["true"])
    dead.wait()
    (load / "5.json").write_text(json.dumps({"pid": dead.pid, "util": 80, "mem_mib": 1000}))
    (load / "6.json").write_text("{not json")
    cs = gmi.cards(0, 8, gmi.read_loads(str(tmp_path), 8))
    assert (cs[2].util, cs[2].mem_used) == (91, 52000) and cs[2].temp > 70 and cs[2].power > 500
    assert cs[5].util == 0 and cs[5].mem_used == 0  # its writer is gone
    assert all(c.util == 0 for i, c in enumerate(cs) if i != 2)
    plain = gmi.render_plain(cs)
    assert f"2    {os.getpid():<14}python3" in plain
    rep = parse_gmi_plain(plain)
    assert rep.cards[2].util_pct == 91 and rep.cards[2].mem_used_mib == 52000
    assert [p.pid for p in rep.cards[2].processes] == [os.getpid()]


def test_a_load_file_can_hold_a_card_hot(tmp_path):
    load = tmp_path / "gpu-load"
    load.mkdir()
    (load / "3.json").write_text(json.dumps({"pid": os.getpid(), "util": 10, "mem_mib": 70000}))
    (load / "3.fault.json").write_text(json.dumps({"pid": os.getpid(), "mem_mib": 10000, "temp_c": 91}))
    cs = gmi.cards(0, 8, gmi.read_loads(str(tmp_path), 8))
    assert cs[3].temp == 91 and cs[3].mem_used == 80000 and cs[3].util == 10
    assert all(c.temp < 60 for i, c in enumerate(cs) if i != 3)
    assert parse_gmi_plain(gmi.render_plain(cs)).cards[3].temp_c == 91
    (load / "5.gone.json").write_text(json.dumps({"pid": os.getpid(), "absent": True}))
    cs = gmi.cards(0, 8, gmi.read_loads(str(tmp_path), 8))
    assert [c.index for c in cs] == [0, 1, 2, 3, 4, 6, 7]
    assert [c.index for c in parse_gmi_plain(gmi.render_plain(cs)).cards] == [0, 1, 2, 3, 4, 6, 7]


def test_tool_script_answers_only_real_invocations(tmp_path):
    (tmp_path / "gmi.json").write_text(json.dumps({"gpus": 2, "node_index": 0}))
    gmi.render_node(str(tmp_path))
    script = tmp_path / "mthreads-gmi"
    script.write_text(gmi.tool_script(str(tmp_path)))
    script.chmod(0o755)

    def run(*args):
        p = subprocess.run([str(script), *args], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    rc, out, _ = run()
    assert rc == 0 and parse_gmi_plain(out).parsed and len(parse_gmi_plain(out).cards) == 2
    for args in (["-q", "--json"], ["-q", "-j"], ["--query", "--json"]):
        rc, out, _ = run(*args)
        assert rc == 0 and json.loads(out)["Attached GPUs"] == "2"
    rc, out, err = run("-r")  # top-level -r resets a GPU on the real tool: never pretend
    assert rc != 0 and "Invalid option: -r" in out and err == ""
    rc, out, _ = run("-q")
    assert rc != 0 and "mthreads-gmi -h" in out
    assert run("--help")[0] == 0


# --------------------------------------------------------------------------- sim up/down


def _ssh(sim, node_index: int, cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run a command on a sim node with the OpenSSH client (proves the sim is a real
    SSH peer and its known_hosts works with strict checking)."""
    if not shutil.which("ssh"):
        pytest.skip("no OpenSSH client")
    n = sim.profile.nodes[node_index]
    return subprocess.run(
        ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
         "-o", f"UserKnownHostsFile={sim.profile.ssh.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
         "-F", "/dev/null", "-i", n.ssh.identity[0], "-p", str(n.ssh.port), f"{n.ssh.user}@{n.ssh.host}", cmd],
        capture_output=True, text=True, timeout=timeout)


@pytest.mark.integration
def test_sim_status_and_profile(sim_as_up):
    st = sim_status(sim_as_up.state_dir)
    assert st.running and len(st.nodes) == 4 and st.gpus == 8
    assert all(n.sshd == "running" for n in st.nodes)
    assert [n.address for n in st.nodes] == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    assert "4 nodes x 8 cards" in st.to_text()
    p = sim_as_up.profile
    assert p.simulated and p.total_gpus == 32 and p.head.address == "127.0.0.2"
    assert p.ssh.known_hosts and Path(p.ssh.known_hosts).is_file()
    assert p.ray.dashboard_host == "127.0.0.2"
    temp_dirs = {a for n in p.nodes for a in n.ray_args if a.startswith("--temp-dir=")}
    agent_ports = {a for n in p.nodes for a in n.ray_args if a.startswith("--dashboard-agent-listen-port=")}
    assert len(temp_dirs) == 4 and len(agent_ports) == 4
    assert "--object-store-memory=100000000" in p.ray.start_args
    # the seed's overrides, small sizes
    assert p.override_value("algorithm.adv_estimator") == "grpo"
    assert p.override_value("trainer.nnodes") == 4 and p.override_value("trainer.n_gpus_per_node") == 8
    assert p.override_value("data.max_response_length") < 16384
    assert str(sim_as_up.state_dir) in p.paths.verl
    # idempotent: same shape returns the same profile, another shape is refused
    assert sim_up(4, 8, state_dir=sim_as_up.state_dir) == sim_as_up.profile_path
    with pytest.raises(SimError, match="already running"):
        sim_up(2, 8, state_dir=sim_as_up.state_dir)


@pytest.mark.integration
def test_openssh_client_and_node_environment(sim_as_up):
    r = _ssh(sim_as_up, 1, 'echo $RLCONSOLE_SIM_NODE; command -v mthreads-gmi; mthreads-gmi | head -3')
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "node2" and lines[1].endswith("/nodes/node2/bin/mthreads-gmi")
    assert "mthreads-gmi:2.4.1" in r.stdout


@pytest.mark.integration
def test_each_node_has_its_own_pid_namespace(sim_as_up):
    st = sim_status(sim_as_up.state_dir)
    if not st.namespaces:
        pytest.skip("PID namespaces need root and unshare")
    r2 = _ssh(sim_as_up, 1, "sleep 300 >/dev/null 2>&1 & echo $!")
    pid = int(r2.stdout.strip())
    try:
        seen_here = _ssh(sim_as_up, 1, f"kill -0 {pid} && ps -o comm= -p {pid}").stdout.strip()
        assert seen_here == "sleep"
        others = _ssh(sim_as_up, 2, "ps -e -o args=").stdout
        assert "sleep 300" not in others  # node3 cannot see (or kill) node2's processes
        assert len(others.splitlines()) < 10
    finally:
        _ssh(sim_as_up, 1, f"kill {pid}")


@pytest.mark.integration
def test_docker_names_are_per_node(sim_as_up):
    require_dockerd()
    st = sim_status(sim_as_up.state_dir)
    assert st.docker == "running"
    image = sim_as_up.profile.container.image
    try:
        r = _ssh(sim_as_up, 1, f"docker create --privileged --network host --name train-rl {image} sleep infinity"
                                 " >/dev/null && docker start train-rl && docker inspect --type container train-rl")
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout.split("\n", 1)[1])
        assert info[0]["State"]["Status"] == "running" and info[0]["Name"] == "/train-rl"
        other = _ssh(sim_as_up, 2, "docker inspect --type container train-rl")
        assert other.returncode != 0 and "No such" in other.stdout + other.stderr
        ex = _ssh(sim_as_up, 1, "docker exec train-rl sh -c 'echo in $RLCONSOLE_SIM_NODE'")
        assert ex.stdout.strip() == "in node2"
        nx = _ssh(sim_as_up, 2, "docker exec train-rl true")
        assert nx.returncode != 0 and "No such container: train-rl" in nx.stderr
        ps = _ssh(sim_as_up, 1, "docker ps --format '{{.Names}}'")
        assert ps.stdout.split() == ["train-rl"]
        # what docker exec started goes with the container, as in a real one (Ray did not)
        count = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null | grep -c '^sleep 4321'"
        started = _ssh(sim_as_up, 1, f"docker exec -d train-rl sleep 4321 && sleep 1 && {count}")
        assert started.stdout.strip() == "1", started
        stop = _ssh(sim_as_up, 1, "docker stop -t 0 train-rl >/dev/null; docker exec train-rl true")
        assert "is not running" in stop.stderr
        assert _ssh(sim_as_up, 1, count).stdout.strip() == "0"
        # `rm -f NAME`: -f forces here (it takes a value only in `inspect -f FORMAT`)
        rm = _ssh(sim_as_up, 1, "docker rm -f train-rl && docker inspect --type container train-rl")
        assert rm.returncode != 0 and "No such" in rm.stdout + rm.stderr, rm
    finally:
        _ssh(sim_as_up, 1, "docker rm -f train-rl")


@pytest.mark.integration
def test_sim_down_leaves_no_process_and_no_state(tmp_path):
    state = tmp_path / "simdown"
    prof = sim_up(2, 2, state_dir=state)
    from tui.core.profile import load_profile

    p = load_profile(prof)
    n = p.nodes[1]
    # something long-lived on a node, detached from its SSH command (like a raylet)
    subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={p.ssh.known_hosts}", "-F", "/dev/null",
                    "-i", n.ssh.identity[0], "-p", str(n.ssh.port), f"{n.ssh.user}@{n.ssh.host}",
                    "nohup sleep 600 >/dev/null 2>&1 &"], capture_output=True, timeout=30) if shutil.which("ssh") else None
    st = json.loads((state / "state.json").read_text())
    pids = [st["pid"]] + [v for ns in st["namespaces"].values() for v in ns.values()]
    if st.get("dockerd_pid"):
        pids.append(st["dockerd_pid"])
    sd = short_dir(state.resolve())
    # its Ray ports' slots are held while it lives (no other sim draws them), and let go after
    from tui.sim.ports import LISTEN_PORTS_FROM, SLOT, SLOT_NAME, abstract_sockets

    slot = SLOT_NAME.format(start=p.ray.head_port - (p.ray.head_port - LISTEN_PORTS_FROM) % SLOT)
    if abstract_sockets():
        assert f"@{slot}" in Path("/proc/net/unix").read_text(), slot
    assert sim_down(state_dir=state)
    time.sleep(0.2)
    from tui.sim.dockerd import pid_alive

    assert not [p for p in pids if pid_alive(p)]
    if abstract_sockets():
        assert f"@{slot}" not in Path("/proc/net/unix").read_text(), slot
    assert not state.exists() and not sd.exists()
    left = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                if str(sd).encode() in Path(f"/proc/{e}/cmdline").read_bytes() or \
                        f"RLCONSOLE_SIM_NODE_DIR={state.resolve()}".encode() in Path(f"/proc/{e}/environ").read_bytes():
                    left.append(e)
            except OSError:
                pass
    assert not left
    assert not sim_status(state).running
    assert sim_down(state_dir=state) is False  # nothing left to do


@pytest.mark.integration
async def test_replay_gpu(tmp_path):
    from tui.core.probes import snapshot
    from tui.core.profile import load_profile

    sample = _sample("mthreads-gmi/04_*")
    state = tmp_path / "replay"
    prof = sim_up(1, 1, replay_gpu=sample, state_dir=state, docker=False)
    try:
        st = await snapshot(load_profile(prof))
        node = st.nodes[0]
        assert node.reachable and node.gpu.parsed
        assert [c.name for c in node.gpus] == ["MTT S80"]
        assert node.gpus[0].mem_used_mib == 1016 and len(node.gpus[0].processes) == 4
        assert node.container.status == "absent"  # docker=False: the sim's own runtime, no container yet
    finally:
        sim_down(state_dir=state)


@pytest.mark.integration
async def test_64_nodes(tmp_path):
    from tui.core.probes import snapshot
    from tui.core.profile import load_profile

    state = tmp_path / "big"
    t0 = time.monotonic()
    prof = sim_up(64, 8, state_dir=state, docker=False)
    try:
        up_s = time.monotonic() - t0
        p = load_profile(prof)
        assert p.nodes[-1].address == "127.0.0.65"
        t1 = time.monotonic()
        st = await snapshot(p)
        snap_s = time.monotonic() - t1
        assert sum(n.reachable for n in st.nodes) == 64
        assert sum(len(n.gpus) for n in st.nodes) == 512
        print(f"sim up 64x8: {up_s:.1f}s, snapshot: {snap_s:.1f}s")
    finally:
        sim_down(state_dir=state)


@pytest.mark.integration
def test_sim_node_control_errors(sim_as_up):
    with pytest.raises(SimError):
        sim_node("stop", "node99", sim_as_up.state_dir)
    with pytest.raises(SimError):
        sim_node("explode", "node1", sim_as_up.state_dir)


def test_bad_arguments(tmp_path):
    with pytest.raises(SimError):
        sim_up(0, 8, state_dir=tmp_path / "x")
    with pytest.raises(SimError):
        sim_up(1, 8, replay_gpu=tmp_path / "missing.txt", state_dir=tmp_path / "x")
    assert not sim_status(tmp_path / "nothing").running


def test_refuses_a_foreign_state_dir(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "precious.txt").write_text("keep me")
    with pytest.raises(SimError, match="not empty"):
        sim_up(1, 1, state_dir=d)
    assert sim_down(state_dir=d) is False  # not ours: nothing stopped, nothing removed
    assert (d / "precious.txt").read_text() == "keep me"


def test_sim_down_knows_a_daemon_started_before_the_layout_step() -> None:
    """A sim started by the version whose simulator lived in `tui/core/sim` must still be
    recognised (and stopped) by `sim down` after an upgrade; nothing else is a daemon."""
    from tui.sim.cluster import _is_daemon

    assert _is_daemon("/venv/bin/python -m tui.core.sim.cluster daemon /tmp/x/sim")
    assert _is_daemon("/venv/bin/python -m tui.sim.cluster daemon /tmp/x/sim")
    assert not _is_daemon("/venv/bin/python -m tui.cli sim up")
    assert not _is_daemon("")


def test_ray_ports_are_drawn_below_the_ephemeral_range() -> None:
    """The sim's Ray ports are chosen at `sim up` and bound only later (at every
    setup-ray): a port from the kernel's ephemeral range can meanwhile become some
    outgoing connection's local port, and did (CI: Ray's GCS "Address already in
    use"). They come from below that range, distinct, each free when drawn."""
    import socket

    from tui.sim.ports import LISTEN_PORTS_FROM, ephemeral_low, reserve_ports

    res = reserve_ports(27)
    try:
        ports = res.ports
        assert len(set(ports)) == 27
        assert all(LISTEN_PORTS_FROM <= p < ephemeral_low() for p in ports), ports
        for p in ports[:3]:
            with socket.socket() as s:
                s.bind(("0.0.0.0", p))  # free: nothing else holds it (the slot hold is no TCP port)
    finally:
        res.close()


def test_two_live_sims_never_draw_the_same_port() -> None:
    """A sim binds its Ray ports only at setup-ray, long after it drew them: two sims up
    at once drew independently and shared one about once in sixteen pairs (a worker's
    raylet then never registers; CI). A draw holds its slots until closed, across
    processes and users: here another process holds every slot but three, and a
    hundred draws all land in those three (drawn at random, as before, nearly every draw
    would land in a held slot)."""
    import subprocess
    import sys

    from tui.sim.ports import LISTEN_PORTS_FROM, SLOT, abstract_sockets, ephemeral_low, reserve_ports

    if not abstract_sockets():
        pytest.skip("no abstract Unix sockets (not Linux): sims draw ports unreserved")
    slots = list(range(LISTEN_PORTS_FROM, ephemeral_low() - SLOT + 1, SLOT))
    free = set(slots[-3:])  # consecutive: one draw may span two of them
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import socket, sys\n"
         "from tui.sim.ports import SLOT_NAME\n"
         "held = []\n"
         "for start in map(int, sys.argv[1:]):\n"
         "    s = socket.socket(socket.AF_UNIX)\n"
         "    try:\n"
         "        s.bind('\\0' + SLOT_NAME.format(start=start))\n"
         "    except OSError:\n"
         "        print(start, flush=True)  # held by a sim of this machine: held all the same\n"
         "        continue\n"
         "    held.append(s)\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n",
         *[str(x) for x in slots if x not in free]],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        # The slots live sims of other xdist workers held when the holder bound the rest: a
        # sim that goes down frees its slot, and a draw may then rightly land in it (the
        # draw's own reservation proves the slot was free when drawn; seen with 4 workers)
        by_sims: set[int] = set()
        while (line := holder.stdout.readline().strip()) != "held":
            assert line.isdigit(), line
            by_sims.add(int(line))
        reserved = 0
        for _ in range(100):
            res = reserve_ports(SLOT // 2)
            try:
                if not res.reserved:  # the three slots are taken by live sims of this machine
                    continue
                reserved += 1
                assert {p - (p - LISTEN_PORTS_FROM) % SLOT for p in res.ports} <= free | by_sims, res.ports
                inner = reserve_ports(SLOT // 2)  # a second sim, while the first is up
                try:
                    if inner.reserved:
                        assert not set(inner.ports) & set(res.ports), (inner.ports, res.ports)
                finally:
                    inner.close()
            finally:
                res.close()
        # Another xdist worker's sim may hold one of the three now and then; not most draws.
        assert reserved >= 50, f"only {reserved} of 100 draws held their slots"
    finally:
        holder.communicate("", timeout=30)


def test_the_dockerd_wrapper_marks_exec_as_the_sim_runtime_does() -> None:
    """`docker exec` under the dockerd wrapper marks its processes with simdocker's entry,
    whose `container_members` finds them for stop/kill/rm (the constant is written out
    twice, so that the wrapper's exec does not import the runtime)."""
    from tui.sim import dockerwrap, simdocker

    assert dockerwrap.MARKER_ENV == simdocker.MARKER_ENV


def test_the_dockerd_wrapper_maps_an_events_watch_to_the_nodes_container(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler's `docker events --filter container=train-rl` watches node2's own
    `train-rl-node2` on the sim's one dockerd; an events call without a container filter
    sees this node's containers only, as `ps` does."""
    from tui.core.probes import CONTAINER_EVENTS, container_events_command
    from tui.core.profile import load_profile
    from tui.sim import dockerwrap

    ran: list[list[str]] = []
    monkeypatch.setattr(dockerwrap.Wrapper, "_run", lambda self, args, names=None, capture=True: ran.append(args) or 0)
    w = dockerwrap.Wrapper("node2", "/usr/bin/docker", "unix:///nowhere")
    argv = shlex.split(container_events_command(load_profile(Path(__file__).parent / "data" / "good_profile.yaml")))
    assert w.main([*argv[1:], "--until", "1796661919"]) == 0
    args = ran[-1]
    assert args[0] == "events" and "container=train-rl-node2" in args and "container=train-rl" not in args
    assert args[-2:] == ["--until", "1796661919"] and "event=die" in args and args.count("--filter") == 2 + len(CONTAINER_EVENTS)
    w.main(["events", "-f=container=train-rl", "--since", "1m"])
    assert ran[-1] == ["events", "--filter", "container=train-rl-node2", "--since", "1m"]
    w.main(["events"])
    assert ran[-1] == ["events", "--filter", f"label={dockerwrap.LABEL}=node2"]
