"""The `Remote` that actions use, over the SSH layer's `SessionPool`.

It turns the SSH layer's exceptions (node down, timeout) into results with an exit code
and a message, because for an action a node that cannot be reached is one more way for a
step to fail on that node, reported in the same one line.
"""

from __future__ import annotations

from typing import AsyncIterator

from tui.core.actions.base import CmdResult, Command
from tui.core.profile import Profile
from tui.core.rayapi import dashboard_connect_host
from tui.core.ssh import CommandTimeout, NodeDown, SessionPool, SshError, StreamStatus


class PoolStream:
    def __init__(self, pool: SessionPool, node: str, cmd: Command, container: bool) -> None:
        self._pool, self._node, self._cmd, self._container = pool, node, cmd, container
        self.rc: int | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        st = StreamStatus()
        try:
            async for line in self._pool.session(self._node).stream(self._cmd, container=self._container, status=st):
                yield line
        except NodeDown as e:
            st.rc = 255
            yield f"[{self._node} went down: {e}]"
        self.rc = st.rc if st.rc is not None else -1


class PoolRemote:
    def __init__(self, pool: SessionPool, profile: Profile) -> None:
        self.pool = pool
        self.profile = profile

    def reachable(self, node: str) -> tuple[bool, str | None]:
        s = self.pool.session(node)
        return s.connected, s.reason

    async def run(self, node: str, cmd: Command, *, container: bool = False,
                  timeout: float | None = None) -> CmdResult:
        sess = self.pool.session(node)
        try:
            r = await sess.run(cmd, timeout=timeout if timeout is not None else None, container=container)
        except CommandTimeout as e:
            return CmdResult(124, e.result.stdout, (e.result.stderr + f"\n(timed out after {timeout}s)").strip())
        except NodeDown as e:
            return CmdResult(255, "", f"node down: {e}")
        except SshError as e:
            return CmdResult(255, "", str(e))
        return CmdResult(r.rc, r.stdout, r.stderr)

    def stream(self, node: str, cmd: Command, *, container: bool = False,
               timeout: float | None = None) -> PoolStream:
        return PoolStream(self.pool, node, cmd, container)

    async def tcp_reachable(self, node: str, host: str, port: int) -> bool:
        """Whether something listens on host:port as seen from `node` (no process runs)."""
        return await self.tcp_probe(node, host, port) is True

    async def tcp_probe(self, node: str, host: str, port: int) -> bool | None:
        """`SshSession.tcp_probe` from `node`: True listens, False refused, None cannot
        tell (the node's sshd does not forward, no answer, the node not reachable)."""
        try:
            return await self.pool.session(node).tcp_probe(host, port)
        except SshError:
            return None

    async def dashboard_url(self) -> str:
        """The head's dashboard, through the SSH connection: http://127.0.0.1:<forwarded>."""
        host = dashboard_connect_host(self.profile.ray.dashboard_host)
        port = await self.pool.head.forward_local_port(host, self.profile.ray.dashboard_port)
        return f"http://127.0.0.1:{port}"
