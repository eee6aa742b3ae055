"""`rlconsole sim up --sshd openssh`: the simulated nodes served by OpenSSH's own sshd,
and the console against it: the node's login environment, the channel limit
(MaxSessions 10), streams the console ends (OpenSSH neither ends a command without a
terminal when its channel closes nor takes a signal for root), the node's SSH server
stopped and started, `sim down`, a clear error without sshd; and on one 2 x 2 OpenSSH
sim, the headless chain, then the backend contract on the Ray it left up.

Every await has a timeout; the limits are generous (the machine is shared).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.conftest import require_dockerd, require_sshd
from tui.cli import main
from tui.core.profile import load_profile

pytestmark = pytest.mark.integration

T = 120.0  # one await: generous


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


@pytest.fixture(scope="module")
def ossh_sim(tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 2 x 2 sim on OpenSSH's sshd with dockerd (the chain needs containers)."""
    require_sshd()
    require_dockerd()
    from tui.sim.cluster import sim_down, sim_up

    state = tmp_path_factory.mktemp("ossh-state")
    monkeypatch_module.setenv("RLCONSOLE_STATE_DIR", str(state / "console"))
    sim = tmp_path_factory.mktemp("ossh-sim")
    path = Path(sim_up(2, 2, state_dir=sim, sshd="openssh"))
    try:
        yield path
    finally:
        sim_down(state_dir=sim)


def _state(profile_path: Path) -> dict[str, Any]:
    return json.loads((profile_path.parent / "state.json").read_text())


async def _run(profile_path: Path, coro_fn: Any, **pool_kw: Any) -> Any:
    from tui.core.ssh import SessionPool

    prof = load_profile(profile_path)
    async with SessionPool(prof, **pool_kw) as pool:
        opened = await asyncio.wait_for(pool.open(T), T)
        assert all(opened.values()), opened
        return await asyncio.wait_for(coro_fn(pool, prof), 600)


def _count(arg: str) -> str:
    """A node command that counts `sleep ARG` processes (ARG unique to one test)."""
    return f"ps -e -o pid=,args= | awk '$2 == \"sleep\" && $3 == \"{arg}\" {{n++}} END {{print n+0}}'"


def test_nodes_are_openssh_in_their_namespace(ossh_sim: Path) -> None:
    """Each node's SSH server is an `sshd` process (recorded by PID), its banner is
    OpenSSH's, and a command there sees only its own node's processes."""
    st = _state(ossh_sim)
    assert st["ssh_server"] == "openssh"
    pids = st["sshd_pids"]
    assert set(pids) == {"node1", "node2"}
    for pid in pids.values():
        assert b"sshd" in Path(f"/proc/{pid}/cmdline").read_bytes()
    n1 = st["nodes"][0]
    with socket.create_connection((n1["address"], n1["port"]), 10) as s:
        s.settimeout(10)
        assert s.recv(64).startswith(b"SSH-2.0-OpenSSH_")

    async def go(pool: Any, prof: Any) -> list[str]:
        return [(await pool.session(nd.name).run("ps -e -o comm=", check=True)).stdout for nd in prof.nodes]

    ps1, ps2 = asyncio.run(_run(ossh_sim, go))
    assert "sshd" in ps1.split() and "sshd" in ps2.split()
    if st.get("namespaces_enabled"):  # the node's own PID space, not the machine's
        assert "dockerd" not in ps1.split() and len(ps1.split()) < 30 and len(ps2.split()) < 30, (ps1, ps2)


def test_login_environment_is_the_nodes(ossh_sim: Path) -> None:
    """A command on an OpenSSH node gets the node's environment, as on the built-in
    server: its PATH (the card tool, the docker wrapper), HOME, the sim's variables,
    and starts in HOME; not the machine's root ~/.bashrc (pyenv there costs 120+ ms)."""
    async def go(pool: Any, prof: Any) -> str:
        r = await pool.session("node2").run("env; echo CWD=$(pwd); command -v mthreads-gmi docker", check=True)
        return r.stdout

    out = asyncio.run(_run(ossh_sim, go))
    env = dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln and not ln.startswith("CWD="))
    nd = ossh_sim.parent / "nodes" / "node2"
    assert env["HOME"] == str(nd / "home")
    assert env["PATH"].split(os.pathsep)[0] == str(nd / "bin")
    assert env["RLCONSOLE_SIM_NODE"] == "node2" and env["RLCONSOLE_SIM_NODE_DIR"] == str(nd)
    assert env["RAY_USAGE_STATS_ENABLED"] == "0" and env["LANG"] == "C.UTF-8"
    assert "PYENV_ROOT" not in env
    assert f"CWD={nd / 'home'}" in out.splitlines()
    assert str(nd / "bin" / "mthreads-gmi") in out and str(nd / "bin" / "docker") in out


def test_more_commands_than_maxsessions_on_one_connection(ossh_sim: Path) -> None:
    """30 concurrent commands on one node: the console's channel cap (max_channels 4,
    below OpenSSH's MaxSessions 10) queues them; none is refused."""
    async def go(pool: Any, prof: Any) -> list[str]:
        assert prof.ssh.max_channels < 10
        sess = pool.session("node1")
        rs = await asyncio.gather(*(sess.run(f"sleep 0.2; echo {i}") for i in range(30)))
        return [r.stdout.strip() for r in rs]

    assert asyncio.run(_run(ossh_sim, go)) == [str(i) for i in range(30)]


def test_ended_streams_give_their_sessions_back(ossh_sim: Path) -> None:
    """The console ends 12 streams early (a follower or sampler it stops). OpenSSH ends
    none of them by itself (no terminal; signals refused for root); without the guard
    the command ran on and held its session, and the 10th such made sshd refuse every
    new channel on the connection ("open failed"). Now: no leftover, and the connection
    still runs commands."""
    mark = f"1000.{os.getpid()}"  # `sleep 1000.PID`: this test's own processes

    async def go(pool: Any, prof: Any) -> tuple[str, str]:
        sess = pool.session("node1")
        for _ in range(12):
            async with contextlib.aclosing(sess.stream(f"echo started; sleep {mark}; echo never")) as it:
                async for _line in it:
                    break
        alive = (await sess.run("echo alive", check=True)).stdout.strip()
        left = "?"
        for _ in range(100):  # the guard's TERM lands right after the channel closes
            left = (await sess.run(_count(mark))).stdout.strip()
            if left == "0":
                break
            await asyncio.sleep(0.2)
        return alive, left

    assert asyncio.run(_run(ossh_sim, go)) == ("alive", "0")


def test_timed_out_commands_give_their_sessions_back(ossh_sim: Path) -> None:
    """12 commands that time out on one connection (a hung tool on a node): the console
    ends each; on OpenSSH each used to run on and hold its session until MaxSessions
    refused every channel. Now: ended, and the connection still runs commands."""
    from tui.core.ssh import CommandTimeout

    mark = f"1001.{os.getpid()}"

    async def go(pool: Any, prof: Any) -> tuple[int, str, str]:
        sess = pool.session("node1")
        timeouts = 0
        for _ in range(12):
            try:
                await sess.run(f"sleep {mark}", timeout=0.5)
            except CommandTimeout:
                timeouts += 1
        alive = (await sess.run("echo alive", check=True)).stdout.strip()
        left = "?"
        for _ in range(100):
            left = (await sess.run(_count(mark))).stdout.strip()
            if left == "0":
                break
            await asyncio.sleep(0.2)
        return timeouts, alive, left

    assert asyncio.run(_run(ossh_sim, go)) == (12, "alive", "0")


def test_finished_stream_keeps_what_it_started(ossh_sim: Path) -> None:
    """A stream that ends on its own keeps its exit code and leaves what it started in
    the background running (a `ray start` stream leaves the raylet): the guard ends the
    command only when the channel goes first."""
    from tui.core.ssh import StreamStatus

    mark = f"999.{os.getpid()}"

    async def go(pool: Any, prof: Any) -> tuple[list[str], int | None, str]:
        sess = pool.session("node1")
        st = StreamStatus()
        lines = [ln async for ln in sess.stream(
            f"seq 3; (sleep {mark} >/dev/null 2>&1 &); exit 4", status=st)]
        await asyncio.sleep(1.0)
        left = (await sess.run(_count(mark))).stdout.strip()
        await sess.run(_count(mark).replace("END {print n}", "{system(\"kill \" $1)}"))
        return lines, st.rc, left

    lines, rc, left = asyncio.run(_run(ossh_sim, go))
    assert lines == ["1", "2", "3"] and rc == 4
    assert left == "1"


def test_stop_node_and_start_node(ossh_sim: Path) -> None:
    """`sim stop-node` kills the node's sshd (connections refused, its PID gone);
    `start-node` brings it back on the same port with the same host key (known_hosts
    still verifies it)."""
    from tui.sim.cluster import sim_node

    d = ossh_sim.parent
    st = _state(ossh_sim)
    n2 = st["nodes"][1]
    old_pid = st["sshd_pids"]["node2"]
    sim_node("stop", "node2", state_dir=d)
    assert "node2" not in _state(ossh_sim)["sshd_pids"]
    with pytest.raises(OSError):
        socket.create_connection((n2["address"], n2["port"]), 5).close()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{old_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{old_pid}").exists() or b"sshd" not in Path(f"/proc/{old_pid}/cmdline").read_bytes()
    sim_node("start", "node2", state_dir=d)
    assert _state(ossh_sim)["sshd_pids"]["node2"] != old_pid

    async def go(pool: Any, prof: Any) -> str:
        return (await pool.session("node2").run("echo back", check=True)).stdout.strip()

    assert asyncio.run(_run(ossh_sim, go)) == "back"


def test_a_hung_sshd_is_noticed_by_keepalive(ossh_sim: Path) -> None:
    """node2's sshd and its sessions stop answering (SIGSTOP: the TCP connection stays
    open, as with a hung host): the console's keepalive (profile ssh.keepalive_interval_s)
    turns the node "down"; without it a read would wait for ever. After SIGCONT the
    session reconnects."""
    import signal

    from tui.sim.opensshd import descendants

    listener = _state(ossh_sim)["sshd_pids"]["node2"]

    async def go(pool: Any, prof: Any) -> tuple[str, str | None, str]:
        sess = pool.session("node2")
        assert prof.ssh.keepalive_interval_s <= 5
        await sess.run("true", check=True)
        tree = [listener, *descendants(listener)]
        for p in tree:
            os.kill(p, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 120
            while sess.state == "connected" and time.monotonic() < deadline:  # noqa: ASYNC110 - a poll, bounded
                await asyncio.sleep(0.2)
            state, reason = sess.state, sess.reason
        finally:
            for p in tree:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGCONT)
        ok = await sess.wait_connected(T)
        back = (await sess.run("echo back", check=True)).stdout.strip() if ok else "not reconnected"
        return state, reason, back

    state, reason, back = asyncio.run(_run(ossh_sim, go))
    assert state == "down", (state, reason)
    assert back == "back"


def test_the_whole_chain_on_openssh(ossh_sim: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The headless chain (containers .. stop) on OpenSSH nodes; its failure cases run on
    the in-process sshd (tests/test_chain.py), being the actions' own logic. Ray is left
    up for the contract below, which ends with the chain's `stop --cluster`."""
    from tests.test_chain import whole_chain

    whole_chain(ossh_sim, tmp_path, capsys, failures=False, stop_cluster=False)


async def test_backend_contract_on_openssh(ossh_sim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The backend contract (tests/test_backend_contract.py) on OpenSSH nodes (MaxSessions,
    the login shell, no signals for root), on the Ray the chain above left up: its
    containers, convert and setup-ray find their work done and say so (the contract takes
    done or skipped; the chain above did each from nothing on these nodes, and does it here
    when it failed before). One OpenSSH sim and one Ray bring-up for both (issue 37).
    Then the chain's last step, `stop --cluster`."""
    from tests.test_backend_contract import live_contract
    from tests.test_chain import stop_the_cluster

    await live_contract("live-openssh", load_profile(ossh_sim), ossh_sim.parent, 2, 2)
    await asyncio.to_thread(stop_the_cluster, ossh_sim, capsys)


def test_sim_down_stops_every_sshd(tmp_path: Path) -> None:
    """`sim down` stops each node's sshd by its recorded PID, even when the daemon that
    started them was killed without cleaning up."""
    require_sshd()
    import signal

    from tui.sim.cluster import sim_down, sim_up

    d = tmp_path / "sim"
    sim_up(1, 1, state_dir=d, docker=False, sshd="openssh")
    st = json.loads((d / "state.json").read_text())
    pids = list(st["sshd_pids"].values())
    assert pids
    from tui.sim.dockerd import pid_alive

    os.kill(st["pid"], signal.SIGKILL)  # the daemon dies: its children stay
    time.sleep(0.5)
    assert all(pid_alive(p) for p in pids)
    sim_down(state_dir=d)
    deadline = time.monotonic() + 30
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(p) for p in pids)


def test_without_sshd_one_line_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`sim up --sshd openssh` where no sshd is installed: one line naming the package,
    exit 2, nothing started."""
    import tui.sim.opensshd as ossh

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(ossh, "SBIN_DIRS", (str(empty),))
    monkeypatch.setenv("RLCONSOLE_SIM_DIR", str(tmp_path / "sim"))
    rc = main(["sim", "up", "--nodes", "1", "--gpus", "1", "--sshd", "openssh"])
    out = capsys.readouterr()
    assert rc == 2 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "sshd" in lines[0] and "openssh-server" in lines[0], out.err
    assert not (tmp_path / "sim" / "state.json").exists()


def test_behind_a_bastion(tmp_path: Path) -> None:
    """`sim up --bastion --sshd openssh`: the nodes' sshd admit only the jump host's
    address (AllowUsers user@bastion); through `ssh.jump` the console reaches them,
    directly it is refused."""
    require_sshd()
    import asyncssh

    from tui.sim.cluster import sim_down, sim_up

    d = tmp_path / "sim"
    p = sim_up(2, 1, state_dir=d, docker=False, bastion=True, sshd="openssh")
    try:
        async def via(pool: Any, prof: Any) -> str:
            assert all(nd.ssh.hops for nd in prof.nodes)
            return (await pool.session("node2").run("echo $RLCONSOLE_SIM_NODE $SSH_CONNECTION", check=True)).stdout

        out = asyncio.run(_run(p, via)).split()
        assert out[0] == "node2" and out[1] == "127.0.0.254"  # the peer sshd saw: the bastion

        async def direct() -> str:
            n = json.loads((d / "state.json").read_text())["nodes"][0]
            try:
                async with asyncssh.connect(n["address"], n["port"], username=_user(), config=None,
                                            client_keys=[str(d / "keys" / "id_ed25519")],
                                            known_hosts=str(d / "known_hosts"), connect_timeout=T) as c:
                    return (await c.run("echo in")).stdout or ""
            except asyncssh.PermissionDenied:
                return "refused"

        assert asyncio.run(asyncio.wait_for(direct(), T)) == "refused"
    finally:
        sim_down(state_dir=d)


def _user() -> str:
    import getpass

    return getpass.getuser()
