"""The SSH layer against real in-process SSH servers (no mocks): host-key checks, the
channel cap, timeouts that end the remote command, reconnection, streams, forwards."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path

import asyncssh
import pytest

from tests.conftest import make_node
from tui.core.profile import Container, SshSettings
from tui.core.ssh import (
    CommandFailed,
    CommandTimeout,
    NodeDown,
    NodeSession,
    mask_secrets,
    wrap_command,
)


def settings(kit, **kw) -> SshSettings:
    base = dict(known_hosts=str(kit.known_hosts), connect_timeout_s=3.0, keepalive_interval_s=1.0,
                command_timeout_s=10.0, max_channels=4)
    base.update(kw)
    return SshSettings(**base)


async def session_for(srv, kit, **kw) -> NodeSession:
    s = NodeSession(make_node("n", srv.address, srv.port, kit.client_key), settings(kit, **kw.pop("ssh", {})), **kw)
    await s.wait_first_attempt(5)
    return s


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_run_basic(node_server, ssh_kit):
    srv = await node_server()
    s = await session_for(srv, ssh_kit)
    try:
        assert s.connected and s.state == "connected"
        r = await s.run("echo out; echo err >&2; exit 3")
        assert (r.rc, r.stdout, r.stderr) == (3, "out\n", "err\n")
        r = await s.run(["printf", "%s|", "a b", "c'd"])
        assert r.stdout == "a b|c'd|"
        with pytest.raises(CommandFailed):
            await s.run("false", check=True)
        r = await s.run("cat", input="piped\n")
        assert r.stdout == "piped\n"
    finally:
        await s.close()


async def test_unknown_host_key_refused(node_server, ssh_kit):
    srv = await node_server(trusted=False)
    s = await session_for(srv, ssh_kit)
    try:
        assert not s.connected
        assert s.state == "down"
        assert "not in known_hosts" in s.reason and "ssh-keyscan -p" in s.reason
        assert str(ssh_kit.known_hosts) in s.reason
        with pytest.raises(NodeDown):
            await s.run("true")
    finally:
        await s.close()


async def test_changed_host_key_refused(node_server, ssh_kit):
    srv = await node_server(trusted=False)
    other = asyncssh.generate_private_key("ssh-ed25519")
    p = ssh_kit.dir / "other"
    p.write_bytes(other.export_private_key())
    ssh_kit.trust(srv.address, srv.port, p)  # known_hosts holds a different key
    s = await session_for(srv, ssh_kit)
    try:
        assert s.state == "down"
        assert "does NOT match" in s.reason and "ssh-keygen -f" in s.reason
    finally:
        await s.close()


async def test_missing_known_hosts_refuses(node_server, ssh_kit, tmp_path):
    srv = await node_server()
    s = await session_for(srv, ssh_kit, ssh={"known_hosts": str(tmp_path / "nonexistent")})
    try:
        assert s.state == "down" and "known_hosts" in s.reason
    finally:
        await s.close()


async def test_channel_cap(node_server, ssh_kit):
    srv = await node_server()
    s = await session_for(srv, ssh_kit, ssh={"max_channels": 2})
    try:
        t0 = time.monotonic()
        rs = await asyncio.gather(*(s.run("sleep 0.3; echo ok") for _ in range(6)))
        dt = time.monotonic() - t0
        assert all(r.stdout == "ok\n" for r in rs)
        assert srv.max_active <= 2
        assert dt >= 0.85  # 3 waves of 2
    finally:
        await s.close()


async def test_timeout_ends_remote_process(node_server, ssh_kit, tmp_path):
    srv = await node_server()
    s = await session_for(srv, ssh_kit)
    pidfile = tmp_path / "pid"
    try:
        with pytest.raises(CommandTimeout) as ei:
            await s.run(f"echo started; echo $$ > {pidfile}; sleep 30; echo never", timeout=0.5)
        assert "started" in ei.value.result.stdout
        pid = int(pidfile.read_text())
        for _ in range(40):
            if not _alive(pid):
                break
            await asyncio.sleep(0.05)
        assert not _alive(pid)
        # The session still works afterwards.
        assert (await s.run("echo again")).stdout == "again\n"
    finally:
        await s.close()


async def test_cancel_ends_remote_process(node_server, ssh_kit, tmp_path):
    srv = await node_server()
    s = await session_for(srv, ssh_kit)
    pidfile = tmp_path / "pid"
    try:
        task = asyncio.ensure_future(s.run(f"echo $$ > {pidfile}; sleep 30", timeout=0))
        for _ in range(100):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            await asyncio.sleep(0.02)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        pid = int(pidfile.read_text())
        for _ in range(40):
            if not _alive(pid):
                break
            await asyncio.sleep(0.05)
        assert not _alive(pid)
    finally:
        await s.close()


async def test_stream_and_early_close(node_server, ssh_kit, tmp_path):
    srv = await node_server()
    s = await session_for(srv, ssh_kit)
    try:
        lines = [line async for line in s.stream("for i in 1 2 3; do echo line$i; done; echo e >&2")]
        assert lines == ["line1", "line2", "line3", "e"]
        pidfile = tmp_path / "p"
        async with contextlib.aclosing(s.stream(f"echo $$ > {pidfile}; while :; do echo tick; sleep 0.05; done")) as it:
            n = 0
            async for line in it:
                n += 1
                if n == 3:
                    break
        pid = int(pidfile.read_text())
        for _ in range(40):
            if not _alive(pid):
                break
            await asyncio.sleep(0.05)
        assert not _alive(pid)
    finally:
        await s.close()


async def test_reconnect_after_server_restart(node_server, ssh_kit):
    srv = await node_server()
    states: list[str] = []
    s = NodeSession(make_node("n", srv.address, srv.port, ssh_kit.client_key), settings(ssh_kit),
                    backoff_initial_s=0.1, backoff_max_s=0.5)
    s.on_state_change(lambda sess: states.append(sess.state))
    try:
        assert await s.wait_connected(5)
        await srv.stop()
        for _ in range(50):
            if s.state == "down":
                break
            await asyncio.sleep(0.02)
        assert s.state == "down" and s.reason
        with pytest.raises(NodeDown):
            await s.run("true")
        await srv.start()
        t0 = time.monotonic()
        assert await s.wait_connected(5)
        assert time.monotonic() - t0 < 2
        assert (await s.run("echo back")).stdout == "back\n"
        assert s.connects == 2
        assert states[:3] == ["connected", "down", "connected"] or "down" in states
    finally:
        await s.close()


async def test_connection_refused_reason(ssh_kit):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    s = NodeSession(make_node("n", "127.0.0.1", port, ssh_kit.client_key), settings(ssh_kit))
    try:
        assert not await s.wait_first_attempt(2)
        assert "refused" in s.reason
    finally:
        await s.close()


async def test_forward_local_port(node_server, ssh_kit):
    async def handle(reader, writer):
        await reader.readline()
        writer.write(b"hello from the node\n")
        await writer.drain()
        writer.close()

    target = await asyncio.start_server(handle, "127.0.0.1", 0)
    tport = target.sockets[0].getsockname()[1]
    srv = await node_server()
    s = await session_for(srv, ssh_kit)
    try:
        lport = await s.forward_local_port("127.0.0.1", tport)
        assert lport != tport
        assert await s.forward_local_port("127.0.0.1", tport) == lport
        r, w = await asyncio.open_connection("127.0.0.1", lport)
        w.write(b"hi\n")
        await w.drain()
        assert await r.readline() == b"hello from the node\n"
        w.close()
    finally:
        await s.close()
        target.close()


def test_wrap_command_container():
    c = Container(name="train-rl", image="img", access="docker-exec", docker=["sudo", "docker"])
    assert wrap_command("ray status", c, in_container=True) == "sudo docker exec train-rl sh -c 'ray status'"
    assert wrap_command(["echo", "a b"], c, in_container=False) == "echo 'a b'"
    assert wrap_command("x", c, True, env={"A": "1"}) == "sudo docker exec -e A=1 train-rl sh -c x"
    d = Container(name="train-rl", image="img", access="direct")
    assert wrap_command("ray status", d, in_container=True) == "ray status"
    assert wrap_command("x", d, True, env={"A": "b c"}) == "env 'A=b c' sh -c x"


def test_mask_secrets():
    assert mask_secrets("HF_TOKEN=abc python x") == "HF_TOKEN=*** python x"
    assert mask_secrets("-e WANDB_API_KEY='s e' -e PATH=/bin") == "-e WANDB_API_KEY=*** -e PATH=/bin"
    assert mask_secrets("MY_PASSWORD=\"x y\" ok") == "MY_PASSWORD=*** ok"


async def test_audit_log_masks(node_server, ssh_kit, caplog):
    srv = await node_server()
    s = await session_for(srv, ssh_kit)
    try:
        with caplog.at_level(logging.INFO, logger="rlconsole.ssh"):
            await s.run("true", env={"HF_TOKEN": "hunter2", "X": "1"}, container=False)
        text = "\n".join(r.getMessage() for r in caplog.records if r.name == "rlconsole.ssh")
        assert "hunter2" not in text and "HF_TOKEN=***" in text and "X=1" in text
    finally:
        await s.close()


async def test_pool_concurrent_open(node_server, ssh_kit):
    from tui.core.ssh import SessionPool

    a = await node_server(address="127.0.0.2")
    b = await node_server(address="127.0.0.3")

    class P:  # the parts of a Profile the pool reads
        ssh = settings(ssh_kit)
        container = Container(name="c", image="i")
        nodes = [make_node("a", a.address, a.port, ssh_kit.client_key),
                 make_node("b", b.address, b.port, ssh_kit.client_key, role="worker")]
        name = "t"
        head = nodes[0]

    pool = SessionPool(P)  # type: ignore[arg-type]
    try:
        res = await pool.open()
        assert res == {"a": True, "b": True}
        outs = await asyncio.gather(pool.session("a").run("echo a"), pool.session("b").run("echo b"))
        assert [o.stdout for o in outs] == ["a\n", "b\n"]
    finally:
        await pool.close()


async def test_jump_host(node_server, ssh_kit):
    import getpass

    jump = await node_server(address="127.0.0.2")
    target = await node_server(address="127.0.0.3")
    node = make_node("n", target.address, target.port, ssh_kit.client_key)
    node.ssh.jump_host = f"{getpass.getuser()}@{jump.address}:{jump.port}"
    s = NodeSession(node, settings(ssh_kit))
    try:
        assert await s.wait_first_attempt(5), s.reason
        r = await s.run("echo through")
        assert r.stdout == "through\n"
        assert jump.commands == 0 and target.commands == 1  # the jump host only forwarded
    finally:
        await s.close()


async def test_silent_peer_times_out(ssh_kit):
    """A peer that accepts TCP and never speaks (a hung host) is down after the connect
    timeout, not hung forever."""
    held = []

    async def mute(reader, writer):
        held.append(writer)

    srv = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    s = NodeSession(make_node("n", "127.0.0.1", port, ssh_kit.client_key), settings(ssh_kit, connect_timeout_s=1.0))
    try:
        t0 = time.monotonic()
        assert not await s.wait_first_attempt(5)
        assert time.monotonic() - t0 < 3
        assert s.state == "down" and "no answer" in s.reason
    finally:
        await s.close()
        for w in held:
            w.close()
        srv.close()
