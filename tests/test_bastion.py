"""Jump chains against real in-process SSH servers: nodes that accept SSH only from the
bastion's address (a firewall, checked on the peer address), a bastion that connects out
from its own loopback address, one hop and two hops, and the clear error when a hop
refuses or its host key is unknown.
"""

from __future__ import annotations

import asyncio
import getpass
import socket

from tests.conftest import make_node
from tui.core.profile import SshSettings
from tui.core.ssh import NodeSession

WAIT_S = 60.0


def settings(kit) -> SshSettings:
    return SshSettings(known_hosts=str(kit.known_hosts), connect_timeout_s=10)


def hop(srv) -> str:
    return f"{getpass.getuser()}@{srv.address}:{srv.port}"


async def connect(node, kit) -> NodeSession:
    s = NodeSession(node, settings(kit), backoff_initial_s=30, backoff_max_s=30)
    await asyncio.wait_for(s.wait_first_attempt(), WAIT_S)
    return s


async def test_node_behind_a_bastion_only_through_the_jump(node_server, ssh_kit) -> None:
    bastion = await node_server(address="127.0.0.10", forward_from="127.0.0.10")
    node_srv = await node_server(address="127.0.0.11", allowed_peers={"127.0.0.10"})

    direct = make_node("node1", node_srv.address, node_srv.port, ssh_kit.client_key)
    s = await connect(direct, ssh_kit)
    try:
        assert not s.connected
        assert "accepts SSH only from the bastion (127.0.0.10), not from 127.0.0.1" in (s.reason or ""), s.reason
    finally:
        await asyncio.wait_for(s.close(), WAIT_S)

    via = make_node("node1", node_srv.address, node_srv.port, ssh_kit.client_key)
    via.ssh.jump = [hop(bastion)]
    s = await connect(via, ssh_kit)
    try:
        assert s.connected, s.reason
        r = await asyncio.wait_for(s.run("echo through"), WAIT_S)
        assert r.stdout.strip() == "through"
        # the dashboard forward goes through the same chain
        lsock = socket.socket()
        lsock.bind(("127.0.0.11", 0))
        lsock.listen(1)
        port = await asyncio.wait_for(s.forward_local_port("127.0.0.11", lsock.getsockname()[1]), WAIT_S)
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), WAIT_S)
        conn, _ = await asyncio.wait_for(asyncio.to_thread(lsock.accept), WAIT_S)
        writer.write(b"ping")
        await asyncio.wait_for(writer.drain(), WAIT_S)
        assert await asyncio.wait_for(asyncio.to_thread(conn.recv, 4), WAIT_S) == b"ping"
        conn.close()
        writer.close()
        lsock.close()
    finally:
        await asyncio.wait_for(s.close(), WAIT_S)


async def test_two_hops(node_server, ssh_kit) -> None:
    outer = await node_server(address="127.0.0.20", forward_from="127.0.0.20")
    inner = await node_server(address="127.0.0.21", forward_from="127.0.0.21", allowed_peers={"127.0.0.20"})
    node_srv = await node_server(address="127.0.0.22", allowed_peers={"127.0.0.21"})
    node = make_node("node1", node_srv.address, node_srv.port, ssh_kit.client_key)
    node.ssh.jump = [hop(outer), hop(inner)]
    s = await connect(node, ssh_kit)
    try:
        assert s.connected, s.reason
        assert (await asyncio.wait_for(s.run("echo two"), WAIT_S)).stdout.strip() == "two"
    finally:
        await asyncio.wait_for(s.close(), WAIT_S)
    # one hop short: the inner bastion refuses the direct peer, and says so
    node.ssh.jump = [hop(inner)]
    s = await connect(node, ssh_kit)
    try:
        assert not s.connected
        assert (s.reason or "").startswith(f"jump host {inner.address}:{inner.port} (for node1): "), s.reason
        assert "accepts SSH only from the bastion (127.0.0.20)" in s.reason
    finally:
        await asyncio.wait_for(s.close(), WAIT_S)


async def test_bastion_refusing_or_unknown_is_named(node_server, ssh_kit) -> None:
    bastion = await node_server(address="127.0.0.30", forward_from="127.0.0.30", trusted=False)
    node_srv = await node_server(address="127.0.0.31", allowed_peers={"127.0.0.30"})
    node = make_node("node1", node_srv.address, node_srv.port, ssh_kit.client_key)
    node.ssh.jump = [hop(bastion)]
    s = await connect(node, ssh_kit)
    try:
        assert not s.connected
        assert s.reason.startswith(f"jump host 127.0.0.30:{bastion.port} (for node1): host key for "
                                   f"127.0.0.30:{bastion.port} not in known_hosts"), s.reason
    finally:
        await asyncio.wait_for(s.close(), WAIT_S)

    ssh_kit.trust(bastion.address, bastion.port)
    await bastion.stop()
    s = await connect(node, ssh_kit)
    try:
        assert not s.connected
        assert s.reason == (f"jump host 127.0.0.30:{bastion.port} (for node1): connection refused by "
                            f"127.0.0.30:{bastion.port} (no SSH server listening?)")
    finally:
        await asyncio.wait_for(s.close(), WAIT_S)


async def test_proxyjump_hostname_user_port_identity_from_ssh_config(node_server, ssh_kit, tmp_path) -> None:
    """No jump in the profile: ~/.ssh/config-style settings (the profile's `ssh.config`
    here) give the node's ProxyJump, and the bastion's HostName/Port/User/IdentityFile."""
    bastion = await node_server(address="127.0.0.40", forward_from="127.0.0.40")
    node_srv = await node_server(address="127.0.0.41", allowed_peers={"127.0.0.40"})
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host gate\n  HostName 127.0.0.40\n  Port {bastion.port}\n  User {getpass.getuser()}\n"
        f"  IdentityFile {ssh_kit.client_key}\n  UserKnownHostsFile {ssh_kit.known_hosts}\n"
        f"Host 127.0.0.41\n  ProxyJump gate\n")
    node = make_node("node1", node_srv.address, node_srv.port, ssh_kit.client_key)
    st = settings(ssh_kit)
    st.config = str(cfg)
    s = NodeSession(node, st, backoff_initial_s=30, backoff_max_s=30)
    try:
        await asyncio.wait_for(s.wait_first_attempt(), WAIT_S)
        assert s.connected, s.reason
        assert (await asyncio.wait_for(s.run("echo cfg"), WAIT_S)).stdout.strip() == "cfg"
    finally:
        await asyncio.wait_for(s.close(), WAIT_S)


async def test_ssh_config_port_applies_when_the_profile_names_none(node_server, ssh_kit, tmp_path) -> None:
    """A node whose profile gives no port is reached on ssh_config's `Port` for its host
    (as `ssh` would), not on 22; a port in the profile wins over the config."""
    srv = await node_server(address="127.0.0.51")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host 127.0.0.51\n  Port {srv.port}\n")
    st = settings(ssh_kit)
    st.config = str(cfg)

    node = make_node("node1", srv.address, srv.port, ssh_kit.client_key)
    node.ssh.port, node.ssh.port_given = 22, False
    s = NodeSession(node, st, backoff_initial_s=30, backoff_max_s=30)
    try:
        await asyncio.wait_for(s.wait_first_attempt(), WAIT_S)
        assert s.connected, s.reason
        assert (await asyncio.wait_for(s.run("echo port"), WAIT_S)).stdout.strip() == "port"
    finally:
        await asyncio.wait_for(s.close(), WAIT_S)

    # the profile's own port wins: a port nobody listens on makes the node down
    with socket.socket() as free:
        free.bind(("127.0.0.51", 0))
        unused = free.getsockname()[1]
    node.ssh.port, node.ssh.port_given = unused, True
    s = NodeSession(node, st, backoff_initial_s=30, backoff_max_s=30)
    try:
        await asyncio.wait_for(s.wait_first_attempt(), WAIT_S)
        assert not s.connected
        assert f"127.0.0.51:{unused}" in (s.reason or ""), s.reason
    finally:
        await asyncio.wait_for(s.close(), WAIT_S)


def test_profile_marks_whether_a_port_was_given(tmp_path) -> None:
    """Only a port the profile names is forced on the connection (it never connects here)."""
    from pathlib import Path

    from tui.core.profile import load_profile

    seed = (Path(__file__).parent.parent / "profiles" / "qwen3-8b-grpo-32gpu.yaml").read_text()
    assert "\n  port: 22\n" in seed
    p = tmp_path / "p.yaml"
    p.write_text(seed)
    assert {(n.ssh.port, n.ssh.port_given) for n in load_profile(p).nodes} == {(22, True)}
    p.write_text(seed.replace("\n  port: 22\n", "\n").replace(
        "gpus: 8, role: worker}", "gpus: 8, role: worker, ssh: {port: 2201}}", 1))
    assert [(n.ssh.port, n.ssh.port_given) for n in load_profile(p).nodes] == [
        (22, False), (2201, True), (22, False), (22, False)]
