"""Ending a local child process (srun, squeue, a notify command) so that it is reaped while
the event loop still runs.

The console cancels the task waiting on a child when it quits mid-action, and asyncio
cancels every task left when its loop ends. A cancellation that lands during the wait for
the child to exit leaves it unreaped by the loop: its subprocess transport outlives the
loop, and the garbage collector finalises it later, where asyncio raises "Event loop is
closed". On CPython 3.11.7 that finaliser can run inside `ast.parse` (pytest formatting a
failure) and turn it into `SystemError: AST constructor recursion depth mismatch`, which
took down a test worker in CI. So the wait here holds a cancellation until the child is
gone, then re-raises it: a killed process exits in milliseconds, and a child that
ignores SIGKILL (stuck in the kernel) is waited for a bounded time only.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Callable

KILL_WAIT_S = 5.0
"""How long a SIGKILLed child is waited for before it is given up (a process in
uninterruptible sleep)."""


async def end_process(proc: asyncio.subprocess.Process, grace: float = 3.0,
                      sig: int = signal.SIGTERM, send: Callable[[int], None] | None = None) -> None:
    """Send `sig`, SIGKILL after `grace` seconds, and wait until `proc` is reaped. A
    cancellation meanwhile (or several: the console's, then the loop's own at its end)
    kills at once and is re-raised once the process is gone or KILL_WAIT_S after the kill.
    `send` signals something wider than the process (the sim's sshd: its whole group)."""

    def signal_it(s: int) -> None:
        if send is not None:
            send(s)
        else:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(s)

    loop = asyncio.get_running_loop()
    cancelled = False
    kill_at: float | None = loop.time() if sig == signal.SIGKILL else None
    if proc.returncode is None:
        signal_it(sig)
    while proc.returncode is None:
        if kill_at is None:
            wait = grace
        else:
            wait = kill_at + KILL_WAIT_S - loop.time()
            if wait <= 0:
                break  # killed and still there: stuck in the kernel; not worth hanging on
        try:
            await asyncio.wait_for(proc.wait(), wait)
        except asyncio.TimeoutError:
            pass
        except asyncio.CancelledError:
            cancelled = True
        if proc.returncode is None and kill_at is None:  # the grace is over, or cancelled
            kill_at = loop.time()
            signal_it(signal.SIGKILL)
    if cancelled:
        raise asyncio.CancelledError
