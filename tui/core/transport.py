"""How commands reach a node: one interface, two implementations.

`NodeTransport` is what the actions (through `PoolRemote`, tui/core/actions/remote.py)
and the probes (tui/core/probes.py) use of a node: run a command, stream one, probe a
port, forward one, be told when the node comes and goes. Two carry it:

* SSH (`tui/core/ssh.py`: `SessionPool` / `NodeSession`): one persistent connection a node;
* srun (`tui/core/srun.py`: `SrunPool` / `SrunSession`): a Slurm job step a command,
  `srun --overlap --jobid J --nodes=1 --ntasks=1 -w NODE`, for `cluster.scheduler: slurm`
  with `cluster.transport: srun` (the default there).

Into the container is composed over either (`wrap_command`: `docker exec`, or none with
`container.access: direct`). `open_pool` is the one place that chooses; nothing else
names SSH or Slurm to reach a node.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable, Protocol, Sequence

from tui.core.profile import Node, Profile


class NodeTransport(Protocol):
    """One node, as actions and probes reach it (see `NodeSession` for the full contract)."""

    name: str
    node: Node
    state: str  # "connecting", "connected", "down" (with `reason`), "closed"
    reason: str | None

    @property
    def connected(self) -> bool: ...

    def on_state_change(self, callback: Callable[[Any], None]) -> None: ...

    async def wait_first_attempt(self, timeout: float | None = None) -> bool: ...

    async def run(self, cmd: str | Sequence[str], timeout: float | None = None, check: bool = False,
                  container: bool = False, env: dict[str, str] | None = None,
                  input: str | None = None) -> Any: ...

    def stream(self, cmd: str | Sequence[str], container: bool = False, env: dict[str, str] | None = None,
               merge_stderr: bool = True, check: bool = False, status: Any = None) -> AsyncIterator[str]: ...

    def stream_text(self, cmd: str | Sequence[str], container: bool = False,
                    status: Any = None) -> AsyncIterator[str]: ...

    def stream_bytes(self, cmd: str | Sequence[str], container: bool = False,
                     status: Any = None) -> AsyncIterator[bytes]: ...

    async def tcp_probe(self, host: str, port: int, timeout: float = 3.0) -> bool | None: ...

    async def forward_local_port(self, remote_host: str, remote_port: int, local_port: int = 0) -> int: ...


def transport_name(profile: Profile) -> str:
    """"srun" or "ssh": what carries this profile's commands."""
    c = profile.cluster
    return "srun" if c.slurm and c.transport == "srun" else "ssh"


def open_pool(profile: Profile, **kwargs: Any) -> Any:
    """The profile's pool of node transports (not yet started): `SessionPool` or `SrunPool`.
    A Slurm profile's nodes are first those of its allocation when one runs (named by
    Slurm's host names); else they stay `slurm1`.. until `containers` gets one."""
    if profile.cluster.slurm:
        from tui.core import slurm

        if not slurm.has_nodes(profile):
            slurm.resolve_now(profile)
    if transport_name(profile) == "srun":
        from tui.core.srun import SrunPool

        return SrunPool(profile, **kwargs)
    if profile.cluster.slurm:
        return _slurm_ssh_pool(profile, **kwargs)
    from tui.core.ssh import SessionPool

    return SessionPool(profile, **kwargs)


def _slurm_ssh_pool(profile: Profile, **kwargs: Any) -> Any:
    """SSH to the nodes of a Slurm allocation (`transport: ssh`, pam_slurm_adopt): the SSH
    pool, plus the allocation read by squeue (`allocation`, as SrunPool has it); when it
    hands out nodes, the sessions learn their hosts in place and reconnect at once."""
    import asyncio
    import contextlib

    from tui.core import slurm
    from tui.core.ssh import SessionPool

    class SlurmSshPool(SessionPool):
        def __init__(self) -> None:
            super().__init__(profile, **kwargs)
            self.allocation: slurm.Allocation | None = None
            self._poll: asyncio.Task[None] | None = None

        async def look(self) -> None:
            before = [n.ssh.host for n in profile.nodes]
            try:
                self.allocation = await slurm.resolve(profile, rename=False)
            except Exception as e:  # noqa: BLE001 - a Slurm hiccup is a state
                self.allocation = slurm.Allocation(slurm.known_job(profile) or "?", "UNKNOWN", reason=str(e))
            if [n.ssh.host for n in profile.nodes] != before:
                for s in self.sessions.values():
                    s.reconnect_now()

        async def _loop(self) -> None:
            from tui.core.srun import POLL_S

            while True:
                await self.look()
                await asyncio.sleep(POLL_S)

        def start(self) -> None:
            super().start()
            if self._poll is None:
                self._poll = asyncio.get_running_loop().create_task(self._loop(), name="slurm-allocation")

        async def open(self, timeout: float | None = None) -> dict[str, bool]:
            await self.look()
            return await super().open(timeout)

        async def close(self) -> None:
            if self._poll is not None:
                self._poll.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._poll
                self._poll = None
            await super().close()

    return SlurmSshPool()
