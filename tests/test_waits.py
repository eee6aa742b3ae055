"""`kicked_or_timeout`: the console's loops sleep on it until kicked or their period
passes, and a cancellation (the backend stopping) must end them whenever it comes. With
`asyncio.wait_for(event.wait(), period)` on Python 3.11, a cancellation arriving as the
event was set was swallowed and the loop ran on (measured: still running 3 s after its
cancel, with a period of 0.5 s)."""

from __future__ import annotations

import asyncio

from tui.core.waits import kicked_or_timeout


async def test_kicked_and_timed_out() -> None:
    ev = asyncio.Event()
    assert await asyncio.wait_for(kicked_or_timeout(ev, 0.01), 10) is False
    asyncio.get_running_loop().call_later(0.01, ev.set)
    assert await asyncio.wait_for(kicked_or_timeout(ev, 30), 10) is True
    assert await asyncio.wait_for(kicked_or_timeout(ev, 30), 10) is True  # still set: at once


async def test_a_cancel_that_comes_with_a_kick_ends_the_loop() -> None:
    """The race, over many interleavings: the loop is kicked, and cancelled 0-3 loop
    turns later; every time it must end promptly, leaving no waiter behind."""
    rounds = 0

    async def loop(kick: asyncio.Event) -> None:
        nonlocal rounds
        while True:
            rounds += 1
            await kicked_or_timeout(kick, 0.5)
            kick.clear()

    for trial in range(120):
        kick = asyncio.Event()
        task = asyncio.create_task(loop(kick))
        for _ in range(3):
            kick.set()
            await asyncio.sleep(0.001)
        kick.set()
        for _ in range(trial % 4):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
        assert done and task.cancelled(), f"trial {trial}: the loop outlived its cancel: {task}"
    assert rounds >= 120
    left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not left, left
