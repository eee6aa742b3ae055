"""Waiting for a kick or a timeout, cancellably.

The console's loops (the job loop, the samplers' watchdog, Ray's poll, the SSH
reconnect, Slurm's poll) sleep until their period passes or something kicks them. They
did it with `asyncio.wait_for(event.wait(), period)`, and before Python 3.12 that swallows
a cancellation that arrives while the event is being set: `wait_for` sees the inner wait
done and returns its result, and the loop runs on (measured on 3.11: still running 3 s
after its cancel, with a 0.5 s period; a test's pilot hung on it), so the backend's
`stop()` gave up on it after its bound and left the loop running. `asyncio.wait` never
swallows a cancellation.
"""

from __future__ import annotations

import asyncio

__all__ = ["kicked_or_timeout"]


async def kicked_or_timeout(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until `event` is set or `timeout` seconds pass (None: no limit); True when it
    was set. A cancellation of the caller always propagates."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        if not waiter.done():
            waiter.cancel()
    return event.is_set()
