"""Notifications: alerts sent to whoever is not looking at a terminal.

A target is a webhook URL (`http://` / `https://`: a JSON POST) or a command (anything
else: run through the local shell with the same JSON on stdin). The JSON names the
profile, job id, step, alert level/kind/message and time, so one receiver can serve
several runs.

Why this shape:
* Only episode *openings* and one-off events at or above the level are sent: an
  episode's end closes what the receiver already knows, and one notification per
  episode is what a phone can bear over a 20-hour run (the rule set already raises one
  alert per episode, not one per refresh).
* A delivery that fails is retried with capped exponential backoff and logged; it never
  raises into the caller and never blocks it: each target has its own queue and task,
  so a dead webhook cannot delay the watch nor another target.
* Every await has a timeout (the HTTP request, the command), so a hung receiver costs
  one attempt, not the watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

from .alerts import LEVEL_ORDER, Alert

log = logging.getLogger("rlconsole.notify")

SEND_TIMEOUT_S = 15.0
"""One delivery attempt (HTTP request or command) gets this long."""

QUEUE_MAX = 1000
"""Notifications waiting for one target; beyond this the oldest are dropped (logged)."""


def is_webhook(target: str) -> bool:
    return target.startswith(("http://", "https://"))


def payload(alert: Alert, profile: str, job_id: str | None, step: int | None) -> dict[str, Any]:
    """What a receiver gets: flat JSON, `kind` the alert's source ("probe", "job", ...)
    and `key` its episode (None for a one-off event)."""
    return {"profile": profile, "job_id": job_id, "step": step, "level": alert.level,
            "kind": alert.source, "key": alert.key, "message": alert.message, "time": alert.at}


def should_notify(alert: Alert, level: str) -> bool:
    """Openings and events at or above `level`; never an episode's end."""
    return not alert.ends and LEVEL_ORDER.get(alert.level, 0) >= LEVEL_ORDER.get(level, 1)


def _post(url: str, body: bytes, timeout: float) -> int:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "rlconsole"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's own URL
        return int(resp.status)


async def _run_command(cmd: str, body: bytes, timeout: float) -> None:
    proc = await asyncio.create_subprocess_shell(cmd, stdin=asyncio.subprocess.PIPE,
                                                 stdout=asyncio.subprocess.DEVNULL,
                                                 stderr=asyncio.subprocess.PIPE)
    try:
        _, err = await asyncio.wait_for(proc.communicate(body), timeout)
    except asyncio.TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), 5)
        raise RuntimeError(f"command did not finish within {timeout:g}s") from None
    if proc.returncode != 0:
        tail = " ".join(err.decode(errors="replace").split())[-200:]
        raise RuntimeError(f"command exited {proc.returncode}" + (f": {tail}" if tail else ""))


@dataclass
class _Target:
    spec: str
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=lambda: asyncio.Queue(QUEUE_MAX))
    task: asyncio.Task[None] | None = None
    sent: int = 0
    failures: int = 0


class Notifier:
    """Sends alerts to every target, in the background. `report(line)` is told about
    each failed attempt and each give-up (the watch prints it); it must not raise."""

    def __init__(self, targets: list[str], level: str = "warning", *, retries: int = 5,
                 backoff_initial_s: float = 2.0, backoff_max_s: float = 60.0,
                 timeout_s: float = SEND_TIMEOUT_S, report: Callable[[str], None] | None = None) -> None:
        self.level = level
        self.retries = retries
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.timeout_s = timeout_s
        self.report = report or (lambda line: None)
        self.targets = [_Target(t) for t in targets]

    def start(self) -> None:
        for t in self.targets:
            if t.task is None:
                t.task = asyncio.get_running_loop().create_task(self._worker(t), name=f"notify-{t.spec[:30]}")

    def offer(self, alert: Alert, profile: str, job_id: str | None, step: int | None) -> bool:
        """Queue `alert` for every target if it is one to send; True when queued."""
        if not should_notify(alert, self.level):
            return False
        body = payload(alert, profile, job_id, step)
        for t in self.targets:
            if t.queue.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    t.queue.get_nowait()
                log.warning("notify %s: queue full, oldest notification dropped", t.spec)
            t.queue.put_nowait(body)
        return True

    async def drain(self, timeout: float) -> None:
        """Wait (up to `timeout`) for the queues to empty: at the end of a watch."""
        async def _all() -> None:
            for t in self.targets:
                await t.queue.join()

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(_all(), timeout)

    async def close(self) -> None:
        for t in self.targets:
            if t.task is not None:
                t.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(t.task, 5)
                t.task = None

    async def _send(self, t: _Target, body: bytes) -> None:
        if is_webhook(t.spec):
            status = await asyncio.wait_for(asyncio.to_thread(_post, t.spec, body, self.timeout_s),
                                            self.timeout_s + 5)
            if not 200 <= status < 300:
                raise RuntimeError(f"HTTP {status}")
        else:
            await _run_command(t.spec, body, self.timeout_s)

    async def _worker(self, t: _Target) -> None:
        while True:
            item = await t.queue.get()
            try:
                body = json.dumps(item).encode()
                for attempt in range(self.retries + 1):
                    try:
                        await self._send(t, body)
                        t.sent += 1
                        break
                    except asyncio.CancelledError:
                        raise
                    except Exception as e:  # noqa: BLE001 - a failed delivery never stops the watch
                        t.failures += 1
                        why = e.reason if isinstance(e, urllib.error.URLError) else e
                        if attempt == self.retries:
                            self._say(f"notify {t.spec}: giving up after {attempt + 1} attempts: {why}")
                            break
                        delay = min(self.backoff_initial_s * 2 ** attempt, self.backoff_max_s)
                        self._say(f"notify {t.spec}: attempt {attempt + 1} failed ({why}); retrying in {delay:g}s")
                        await asyncio.sleep(delay)
            finally:
                t.queue.task_done()

    def _say(self, line: str) -> None:
        log.warning("%s", line)
        with contextlib.suppress(Exception):
            self.report(line)
