"""SSH hardening against real in-process asyncssh servers (issue 15: item 5 and Low).

* `ForwardAgent yes` in the SSH config must not forward the user's agent to nodes: a
  server that accepts agent forwarding sees no request from the console.
* An unknown jump-host key is blamed on the jump host, not on the node (whose correct
  known_hosts entry the old advice said to delete).
* An identity file readable by others is refused, as OpenSSH refuses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, AsyncIterator

import asyncssh
import pytest

from tests.conftest import make_node
from tui.core.profile import SshSettings
from tui.core.ssh import NodeSession


def _settings(kit: Any, **kw: Any) -> SshSettings:
    base = dict(known_hosts=str(kit.known_hosts), connect_timeout_s=3.0, keepalive_interval_s=1.0,
                command_timeout_s=10.0, max_channels=4)
    base.update(kw)
    return SshSettings(**base)


@pytest.fixture
def ssh_agent(tmp_path: Path) -> Any:
    """A real ssh-agent on a private socket, SSH_AUTH_SOCK pointing at it; stopped by PID."""
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if sock.exists():
                break
            if proc.poll() is not None:
                raise RuntimeError("ssh-agent exited")
            import time
            time.sleep(0.01)
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


class _Recorder:
    """What the server saw: per command, the agent path the client's request created."""

    def __init__(self) -> None:
        self.agent_paths: list[str | None] = []


@contextlib.asynccontextmanager
async def agent_accepting_server(kit: Any) -> AsyncIterator[tuple[int, _Recorder]]:
    """An asyncssh server that accepts agent forwarding (unlike the sim's nodes), so a
    client that asks for it gets it and the server can tell."""
    rec = _Recorder()

    async def handle(process: asyncssh.SSHServerProcess) -> None:
        rec.agent_paths.append(process.channel.get_agent_path())
        process.stdout.write("ok\n")
        process.exit(0)

    acceptor = await asyncssh.listen(host="127.0.0.1", port=0, server_host_keys=[str(kit.host_key)],
                                     authorized_client_keys=str(kit.client_pub), process_factory=handle,
                                     agent_forwarding=True, keepalive_interval=0)
    port = acceptor.get_port()
    kit.trust("127.0.0.1", port)
    try:
        yield port, rec
    finally:
        acceptor.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(acceptor.wait_closed(), 2)


async def test_forward_agent_yes_in_ssh_config_is_not_obeyed(ssh_kit, ssh_agent, tmp_path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", str(ssh_agent))
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    ForwardAgent yes\n")
    async with agent_accepting_server(ssh_kit) as (port, rec):
        # the control: a plain asyncssh client with this config does forward the agent,
        # so the server below would see it if the console let the config through
        async with asyncssh.connect("127.0.0.1", port, config=[str(cfg)], known_hosts=str(ssh_kit.known_hosts),
                                    client_keys=[str(ssh_kit.client_key)], username=getpass.getuser()) as c:
            await asyncio.wait_for(c.run("x"), 10)
        assert rec.agent_paths and rec.agent_paths[-1] is not None

        node = make_node("n", "127.0.0.1", port, ssh_kit.client_key)
        s = NodeSession(node, _settings(ssh_kit, config=str(cfg)))
        try:
            assert await s.wait_first_attempt(5), s.reason
            r = await s.run("anything")
            assert r.stdout == "ok\n"
            assert rec.agent_paths[-1] is None, "the console forwarded the user's agent"
        finally:
            await s.close()


async def test_unknown_jump_host_key_names_the_jump_host(node_server, ssh_kit) -> None:
    jump = await node_server(address="127.0.0.2", trusted=False)
    target = await node_server(address="127.0.0.3")  # its key is known and correct
    node = make_node("n", target.address, target.port, ssh_kit.client_key)
    node.ssh.jump_host = f"{getpass.getuser()}@{jump.address}:{jump.port}"
    s = NodeSession(node, _settings(ssh_kit))
    try:
        assert not await s.wait_first_attempt(5)
        reason = s.reason or ""
        assert f"jump host {jump.address}:{jump.port}" in reason, reason
        assert f"host key for {jump.address}:{jump.port} not in known_hosts" in reason, reason
        assert target.address not in reason.split("(for")[0]
        assert f"ssh-keyscan -p {jump.port} {jump.address}" in reason
    finally:
        await s.close()


async def test_identity_readable_by_others_is_refused(node_server, ssh_kit) -> None:
    srv = await node_server()
    os.chmod(ssh_kit.client_key, 0o644)
    s = NodeSession(make_node("n", srv.address, srv.port, ssh_kit.client_key), _settings(ssh_kit))
    try:
        assert not await s.wait_first_attempt(5)
        assert "0644" in (s.reason or "") and f"chmod 600 {ssh_kit.client_key}" in (s.reason or "")
        assert srv.commands == 0
    finally:
        await s.close()
    os.chmod(ssh_kit.client_key, 0o600)
    s = NodeSession(make_node("n", srv.address, srv.port, ssh_kit.client_key), _settings(ssh_kit))
    try:
        assert await s.wait_first_attempt(5), s.reason
    finally:
        await s.close()
