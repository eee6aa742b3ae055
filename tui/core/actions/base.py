"""What actions need from the SSH layer, and the helpers every action shares.

Actions are written against the small `Remote` protocol rather than against asyncssh, so
they read as the seed's procedure (what runs where) and so the SSH layer can change
without touching them. Commands are built as argv lists and quoted with `shlex`, never
by pasting profile values into a shell string.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable, Protocol, Sequence

from tui.core.actions.events import ActionEvent
from tui.core.profile import Node, Profile

log = logging.getLogger("rlconsole.actions")

Command = str | Sequence[str]


@dataclass
class CmdResult:
    rc: int
    stdout: str
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def output(self) -> str:
        return (self.stdout + ("\n" + self.stderr if self.stderr else "")).strip()

    def tail(self, n: int = 5) -> str:
        """The last `n` non-empty lines of output, on one line: failure messages are
        one line (the CLI's contract), and this is what goes into them."""
        lines = [ln.strip() for ln in self.output.splitlines() if ln.strip()]
        return " / ".join(lines[-n:])


class Remote(Protocol):
    """Run commands on the profile's nodes (on the host, or in the container)."""

    async def run(self, node: str, cmd: Command, *, container: bool = False,
                  timeout: float | None = None) -> CmdResult: ...

    def stream(self, node: str, cmd: Command, *, container: bool = False,
               timeout: float | None = None) -> StreamHandle: ...

    def reachable(self, node: str) -> tuple[bool, str | None]: ...

    async def dashboard_url(self) -> str:
        """The head's dashboard as `http://127.0.0.1:<port>`, through the SSH connection
        (a local port forward): the job API client (`rayapi`) talks to this."""
        ...


class StreamHandle(Protocol):
    """Lines as they come; `rc` once the iteration has ended."""

    rc: int | None

    def __aiter__(self) -> AsyncIterator[str]: ...


def docker_argv(profile: Profile, *args: str) -> list[str]:
    return [*profile.container.docker, *args]


async def gather_nodes(nodes: Sequence[Node], fn: Callable[[Node], Awaitable[None]]) -> None:
    """Run `fn` on every node at once; one node's failure does not cancel the others."""
    results = await asyncio.gather(*(fn(n) for n in nodes), return_exceptions=True)
    for n, r in zip(nodes, results):
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            log.error("node %s: %r", n.name, r)


class EventQueue:
    """Lets parallel per-node tasks emit events into one ordered stream."""

    def __init__(self) -> None:
        self._q: asyncio.Queue[ActionEvent | None] = asyncio.Queue()

    def put(self, ev: ActionEvent) -> None:
        self._q.put_nowait(ev)

    async def drain_while(self, task: Awaitable[object]) -> AsyncIterator[ActionEvent]:
        fut = asyncio.ensure_future(task)
        fut.add_done_callback(lambda _f: self._q.put_nowait(None))
        try:
            while True:
                ev = await self._q.get()
                if ev is None:
                    break
                yield ev
            while not self._q.empty():
                ev = self._q.get_nowait()
                if ev is not None:
                    yield ev
            fut.result()
        finally:
            if not fut.done():
                fut.cancel()
