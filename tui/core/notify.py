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
* A target is a credential as often as not (a webhook's token in its path or query, a
  `user:password@` URL, an `Authorization:` header in a curl command): every line said
  about a target (retries, give-ups, the debug log) shows it masked (`secrets.py`), and
  what a failure's text quotes of the target's secret parts is masked too. A URL's
  `user:password@` is sent as HTTP basic auth (urllib would take `password@host` for a
  port, fail, and quote the password in its error).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
import signal
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

from tui.core.alerts import LEVEL_ORDER, Alert
from tui.core.procs import end_process
from tui.core.secrets import MASK, mask_secrets

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


def split_userinfo(url: str) -> tuple[str, str | None]:
    """`url` without its `user:password@`, and the HTTP basic `Authorization` value that
    carries them instead (None when the URL has none). Percent-escapes in the user and
    password are decoded (`p%40ss` is the password `p@ss`), as a browser does."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    cred = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    clean = urllib.parse.urlunsplit(parts._replace(netloc=hostport))
    return clean, "Basic " + base64.b64encode(cred.encode()).decode("ascii")


def _post(url: str, body: bytes, timeout: float) -> int:
    clean, auth = split_userinfo(url)
    headers = {"Content-Type": "application/json", "User-Agent": "rlconsole"}
    if auth is not None:
        headers["Authorization"] = auth
    req = urllib.request.Request(clean, data=body, method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return int(resp.status)


_PIECES = re.compile(r"[^\s/:@?&=#'\"]+")


def secret_pieces(spec: str) -> list[str]:
    """The parts of a target that its masked form hides (a password, a query token, a
    webhook path's secret, a header's credential), decoded too: a failure's text may
    quote them out of context (`nonnumeric port: 'pass@host'`), where the text rule
    cannot tell them for secrets."""
    shown = set(_PIECES.findall(mask_secrets(spec)))
    out: set[str] = set()
    for piece in _PIECES.findall(spec):
        if piece not in shown and len(piece) >= 3:
            out.add(piece)
            out.add(urllib.parse.unquote(piece))
    return sorted(out, key=len, reverse=True)


async def _run_command(cmd: str, body: bytes, timeout: float) -> None:
    proc = await asyncio.create_subprocess_shell(cmd, stdin=asyncio.subprocess.PIPE,
                                                 stdout=asyncio.subprocess.DEVNULL,
                                                 stderr=asyncio.subprocess.PIPE)
    try:
        _, err = await asyncio.wait_for(proc.communicate(body), timeout)
    except asyncio.TimeoutError:
        await end_process(proc, sig=signal.SIGKILL)
        raise RuntimeError(f"command did not finish within {timeout:g}s") from None
    except BaseException:
        await end_process(proc, sig=signal.SIGKILL)  # cancelled: reaped, not left to the GC
        raise
    if proc.returncode != 0:
        tail = " ".join(err.decode(errors="replace").split())[-200:]
        raise RuntimeError(f"command exited {proc.returncode}" + (f": {tail}" if tail else ""))


@dataclass
class _Target:
    spec: str
    shown: str = ""
    """`spec` as every line shows it: masked."""
    secrets: list[str] = field(default_factory=list)
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
        self.targets = [_Target(t, mask_secrets(t), secret_pieces(t)) for t in targets]

    def start(self) -> None:
        for t in self.targets:
            if t.task is None:
                t.task = asyncio.get_running_loop().create_task(self._worker(t), name=f"notify-{t.shown[:30]}")

    def offer(self, alert: Alert, profile: str, job_id: str | None, step: int | None) -> bool:
        """Queue `alert` for every target if it is one to send; True when queued."""
        if not should_notify(alert, self.level):
            return False
        body = payload(alert, profile, job_id, step)
        for t in self.targets:
            if t.queue.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    t.queue.get_nowait()
                log.warning("notify %s: queue full, oldest notification dropped", t.shown)
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

    async def _attempt(self, t: _Target, body: bytes) -> str | None:
        """One delivery: None when it went out, else why not, already scrubbed. The
        exception ends here: the lines about it are said outside its handler, so a
        logging failure's traceback cannot chain the raw error text (the secret it
        quotes) onto stderr."""
        try:
            await self._send(t, body)
            return None
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a failed delivery never stops the watch
            return self._scrub(t, str(e.reason if isinstance(e, urllib.error.URLError) else e))

    async def _worker(self, t: _Target) -> None:
        while True:
            item = await t.queue.get()
            try:
                body = json.dumps(item).encode()
                for attempt in range(self.retries + 1):
                    why = await self._attempt(t, body)
                    if why is None:
                        t.sent += 1
                        break
                    t.failures += 1
                    if attempt == self.retries:
                        self._say(t, f"notify {t.shown}: giving up after {attempt + 1} attempts: {why}")
                        break
                    delay = min(self.backoff_initial_s * 2 ** attempt, self.backoff_max_s)
                    self._say(t, f"notify {t.shown}: attempt {attempt + 1} failed ({why}); "
                                 f"retrying in {delay:g}s")
                    await asyncio.sleep(delay)
            finally:
                t.queue.task_done()

    @staticmethod
    def _scrub(t: _Target, line: str) -> str:
        """`line` as it may be printed: the text rule, then the target's own secret parts
        wherever the failure's text quoted them."""
        line = mask_secrets(line)
        for piece in t.secrets:
            line = line.replace(piece, MASK)
        return line

    def _say(self, t: _Target, line: str) -> None:
        line = self._scrub(t, line)
        log.warning("%s", line)
        with contextlib.suppress(Exception):
            self.report(line)
