"""`rlconsole watch`: the console without a screen, for a run nobody is looking at.

It follows the job exactly as the console does, through the same `LiveBackend` (one
SSH pool, the core's ClusterMonitor and JobWatcher, the one AlertRules rule set), so a
notification can never disagree with what the console would have shown. It prints one
line per alert and per job state change and hands each alert to the Notifier, which
delivers in the background and never stops the watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from typing import Any, Callable, TextIO

from tui.core.alerts import Alert
from tui.core.job.metrics import MetricsSummary
from tui.core.notify import Notifier
from tui.core.profile import Profile
from tui.core.safetext import shown
from tui.core.secrets import mask_secrets
from tui.core.state import ClusterState

DRAIN_S = 10.0
"""At the end, queued notifications get this long to go out."""


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


class Watch:
    """Lines and notifications from a backend's callbacks. Separate from the loop so a
    test can drive it with any backend."""

    def __init__(self, profile: Profile, notifier: Notifier, out: TextIO) -> None:
        self.profile = profile
        self.notifier = notifier
        self.out = out
        self.job_id: str | None = None
        self.step: int | None = None
        self.job_status: str | None = None
        self.allocation: tuple[str, str, tuple[str, ...], str | None] | None = None
        self.lines = 0

    def say(self, text: str, at: float | None = None) -> None:
        # one line each; what a node sent is plain text here, its control characters made
        # visible (the one rule for outside text, tui/core/safetext.py); credentials (a
        # target's token, one quoted by a log line) masked
        clean = shown(mask_secrets(text))
        print(f"{_stamp(at if at is not None else time.time())} {clean}", file=self.out, flush=True)
        self.lines += 1

    def on_state(self, st: ClusterState) -> None:
        a = st.allocation
        if a is not None:  # a Slurm profile: its allocation's changes (not its clock ticking)
            key = (a.job_id, a.state, tuple(a.nodes), a.reason)
            if key != self.allocation:
                self.allocation = key
                self.say(f"ALLOCATION {a.summary()}", st.taken_at)
        job = st.job
        if job is None:
            return
        self.job_id, self.step = job.id, job.step if job.step is not None else self.step
        if job.status != self.job_status:
            was = self.job_status
            self.job_status = job.status
            step = f" at step {job.step}" if job.step is not None else ""
            self.say(f"JOB {job.id} {was + ' -> ' if was else ''}{job.status}{step}", st.taken_at)

    def on_metrics(self, summary: MetricsSummary, _series: Any) -> None:
        if summary.step is not None:
            self.step = summary.step
        if summary.job_id:
            self.job_id = summary.job_id

    def on_alert(self, a: Alert) -> None:
        self.say(a.one_line() + (" [ended]" if a.ends else ""), a.at)
        self.notifier.offer(a, self.profile.name, self.job_id, self.step)


async def watch(profile: Profile, targets: list[str], level: str, out: TextIO,
                stop: asyncio.Event, backend: Any = None,
                on_ready: Callable[[Any], None] | None = None) -> int:
    """Watch until `stop` is set. `backend` defaults to the live one."""
    if backend is None:
        from tui.backend.live import LiveBackend

        backend = LiveBackend(profile, who="watch")
    # a delivery's error may quote the receiver's answer: outside text too
    notifier = Notifier(targets, level, report=lambda line: print(f"{_stamp(time.time())} {shown(mask_secrets(line))}",
                                                                   file=out, flush=True))
    w = Watch(profile, notifier, out)
    backend.subscribe_state(w.on_state)
    backend.subscribe_metrics(w.on_metrics)
    backend.subscribe_alerts(w.on_alert)
    notifier.start()
    w.say(f"watching {profile.name} ({len(profile.nodes)} nodes); notifying "
          f"{', '.join(targets) if targets else 'nobody'} at {level} and above")
    try:
        await asyncio.wait_for(backend.start(), 120)
        if on_ready is not None:
            on_ready(backend)
        await stop.wait()
    finally:
        await notifier.drain(DRAIN_S)
        await notifier.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(backend.stop(), 60)
    return 0


def run_watch(profile: Profile, notify: list[str] | None, level: str | None) -> int:
    """`rlconsole watch`: targets from --notify, else the profile's `notify.to`."""
    targets = list(notify) if notify else list(profile.notify.to)
    lvl = level or profile.notify.level

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        return await watch(profile, targets, lvl, sys.stdout, stop)

    return asyncio.run(main())
