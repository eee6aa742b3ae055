"""A one-shot delayed call on a Textual message pump that always happens.

Textual's `set_timer` is a `Timer(repeat=0, skip=True)`. Its task reads the clock twice in a
row, and when more than the delay passed between the two reads it "skips" the missed tick:
for a one-shot timer that is the only tick, so the callback is never called and nothing says
so. With a delay of a millisecond, the process being paused for a millisecond between those
two lines is enough, which a loaded machine does now and then. The console's frame pacing
armed such timers (down to 1 ms) and armed no other until one fired: a CI run's demo in tmux
lost one, and the cards, the Ray pane, the metrics and the log froze for good while keys and
alerts went on (tests/test_tui_small.py reproduces the skip).

asyncio's `call_later` has no such rule. The callback still runs on the pump's own queue
(`call_next`), as a timer's would, so it never races the pump's message handlers.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol


class _Pump(Protocol):
    def call_next(self, callback: Callable[..., Any], *args: Any) -> None: ...


def call_after(pump: _Pump, delay: float, callback: Callable[[], Any]) -> asyncio.TimerHandle:
    """Run `callback` on `pump`'s queue once `delay` seconds have passed; cancel with the
    returned handle's `cancel()`. A pump that has closed never runs it; one that is closing
    may (a widget's own Unmount runs what was queued meanwhile, after its children are
    gone), which a Textual timer, stopped first, would not: a callback that reaches other
    widgets checks that the app still runs (MainScreen._draw_paced)."""
    return asyncio.get_running_loop().call_later(max(0.0, delay), pump.call_next, callback)
