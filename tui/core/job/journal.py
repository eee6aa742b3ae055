"""The run journal: what happened to one run, as JSON lines in its spool directory.

Why: a run outlives the console that started it, and "what happened at 03:12?" must
be answerable after the fact, from any console. Every action started and finished
(and by whom: the console, the CLI, `watch`), every alert episode opened and ended, the
job's state changes, nodes going down and coming back, checkpoints written: one line
each in `<spool>/<job id>/journal.jsonl`, appended as it happens by whichever process
saw it.

Several processes may watch one job (two consoles and a `watch`): each sees the same
node go down, at a slightly different moment. Entries carry a stable `key` and the
journal is de-duplicated on append under an exclusive `flock` of `journal.jsonl.lock`:
the appender reads what others wrote since it last looked, then writes only what is
new. Two kinds of sameness:
- an event (a checkpoint, an action, a one-off alert) is the same when its `key` is;
- an episode (an alert key, the job's status) is a state: "opened" is a duplicate
  while the journal already has it open, "ended" while it is already ended; a status is
  a duplicate of the last status written.

The journal is opened without blocking and only as a regular file (a FIFO or a device
in its place is refused, read or written), and the lock is waited for at most
`LOCK_WAIT_S`: a peer that holds it longer (hung, stopped) costs this process nothing but
a delay; what it could not write is kept (at most `MAX_PENDING` entries) and written with
the next append.

Crash safety as in `history.py`: one `os.write` per line on an O_APPEND descriptor; a
torn last line (a crash mid-write) gets a newline before the next entry, and a line
that does not parse is skipped on read, so it costs only itself. Text is masked
(`secrets.py`) before it is written: the journal is a plain file that outlives the run.
No Textual here: the core never imports it.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from tui.core.secrets import mask_data, mask_secrets

JOURNAL = "journal.jsonl"
MAX_TEXT = 500
"""A journal message is cut here (alerts are already; action messages quote nodes)."""

KINDS = ("action", "alert", "node", "state", "checkpoint", "note")

LOCK_WAIT_S = 0.5
"""How long an append waits for a peer's lock (polled): it runs on the console's loop."""
MAX_PENDING = 1000
"""Entries kept for the next append while the lock is held elsewhere; the oldest go first."""
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)


def _open_regular(path: Path, flags: int, mode: int = 0o600) -> int:
    """A descriptor of `path` only if it is a regular file: a FIFO is not waited on (the
    open does not block) and neither it nor a device is used. Raises OSError otherwise."""
    fd = os.open(path, flags | _OPEN_FLAGS, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lock_bounded(fd: int, wait_s: float = LOCK_WAIT_S) -> bool:
    """An exclusive flock, waited for at most about `wait_s` seconds; False if a peer keeps it."""
    delay, waited = 0.005, 0.0
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if waited >= wait_s:
                return False
        time.sleep(delay)
        waited += delay
        delay = min(delay * 2, 0.05)


@dataclass
class Entry:
    """One line of the journal.

    `kind`: action (an action finished: `action`, `result` done/fail/skip, `started_at`),
    alert (an alert episode opened or ended, or a one-off alert: `level`, `source`,
    `alert_key`, `ends`, `line` the log line it points at, `diagnosis`), node (a node
    down or back: an alert episode of the node rules), state (the job's status:
    `status`, `step`), checkpoint (`step`), note. `who`: console, cli or watch.
    `key`: what makes two entries the same (see the module's docstring).
    """

    kind: str
    message: str
    key: str
    at: float = field(default_factory=time.time)
    who: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Any) -> Entry | None:
        if not isinstance(d, dict):
            return None
        data = d.get("data")
        try:
            e = cls(kind=str(d["kind"]), message=str(d.get("message", "")), key=str(d["key"]),
                    at=float(d["at"]), who=str(d.get("who", "")),
                    data=data if isinstance(data, dict) else {})
        except (KeyError, TypeError, ValueError):
            return None
        return e

    def one_line(self) -> str:
        who = f" ({self.who})" if self.who else ""
        return f"{_stamp(self.at)} {self.kind.upper():<10} {self.message}{who}"


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _clip(text: str) -> str:
    text = mask_secrets(" ".join(str(text).split()))
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


class Journal:
    """The journal of one run, in its spool directory `base`."""

    def __init__(self, base: Path) -> None:
        self.base = Path(base)
        self.path = self.base / JOURNAL
        self._read_to = 0
        self._keys: set[str] = set()
        self._state: dict[str, str] = {}  # episode key -> "open"/"end"; "status" -> last status
        self._pending: list[Entry] = []  # not written yet: a peer held the lock too long

    @classmethod
    def for_job(cls, job_id: str, root: Path | None = None) -> Journal:
        """The journal of `job_id` under the spool root (the id confined to one name)."""
        from tui.core.locations import spool_root
        from tui.core.safepath import confined, safe_job_id

        return cls(confined(root or spool_root(), safe_job_id(job_id)))

    # ------------------------------------------------------------------ reading

    def entries(self) -> list[Entry]:
        """Every whole, well-formed entry, in the order written (a torn or foreign line
        is skipped: it must not hide the others)."""
        try:
            fd = _open_regular(self.path, os.O_RDONLY)
        except OSError:
            return []
        try:
            with os.fdopen(fd, "rb") as f:
                raw = f.read()
        except OSError:
            return []
        return list(_parse(raw))

    def _catch_up(self, fd: int) -> None:
        """Fold what was written since we last looked into the dedupe state (under the lock)."""
        size = os.fstat(fd).st_size
        if size < self._read_to:  # replaced or cut: read it all again
            self._read_to, self._keys, self._state = 0, set(), {}
        if size == self._read_to:
            return
        raw = os.pread(fd, size - self._read_to, self._read_to)
        end = raw.rfind(b"\n") + 1  # a torn tail is not folded (the next write fixes it)
        for e in _parse(raw[:end]):
            self._fold(e)
        self._read_to += end

    def _fold(self, e: Entry) -> None:
        self._keys.add(e.key)
        ep = e.data.get("episode")
        if isinstance(ep, str):
            self._state[ep] = "end" if e.data.get("ends") else "open"
        if e.kind == "state" and isinstance(e.data.get("status"), str):
            self._state["status"] = e.data["status"]

    def _duplicate(self, e: Entry) -> bool:
        ep = e.data.get("episode")
        if isinstance(ep, str):
            now = self._state.get(ep, "end")
            return now == ("end" if e.data.get("ends") else "open")
        if e.kind == "state":
            return self._state.get("status") == e.data.get("status")
        return e.key in self._keys

    # ------------------------------------------------------------------ writing

    def append(self, entries: Entry | Iterable[Entry]) -> list[Entry]:
        """Append what is not already in the journal; returns what was written. Never
        raises for a full disk or an unwritable dir: the journal is a record, the watch
        must go on (the error is returned as nothing written)."""
        batch = [*self._pending, *([entries] if isinstance(entries, Entry) else list(entries))]
        self._pending = []
        if not batch:
            return []
        try:
            self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
            lock = _open_regular(self.base / (JOURNAL + ".lock"), os.O_RDWR | os.O_CREAT)
        except OSError:
            return []
        try:
            if not _lock_bounded(lock):
                self._pending = batch[-MAX_PENDING:]  # written by the next append that gets the lock
                return []
            fd = _open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            try:
                self._catch_up(fd)
                out: list[Entry] = []
                for e in batch:
                    e.message = _clip(e.message)
                    e.data = mask_data(e.data)
                    if self._duplicate(e):
                        continue
                    data = (json.dumps(e.to_json(), sort_keys=True) + "\n").encode()
                    size = os.fstat(fd).st_size
                    if size and os.pread(fd, 1, size - 1) != b"\n":
                        data = b"\n" + data  # a torn line before costs only itself
                    if os.write(fd, data) != len(data):
                        break  # disk full: the rest is not written either
                    self._read_to = os.fstat(fd).st_size
                    self._fold(e)
                    out.append(e)
                return out
            finally:
                os.close(fd)
        except OSError:
            return []
        finally:
            os.close(lock)  # drops the flock


def _parse(raw: bytes) -> Iterable[Entry]:
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            e = Entry.from_json(json.loads(line))
        except ValueError:
            continue
        if e is not None:
            yield e


# ---------------------------------------------------------------------- entry makers


def action_entry(name: str, who: str, started_at: float, result: str, message: str,
                 data: dict[str, Any] | None = None) -> Entry:
    """An action that ran (one entry when it ends: what, by whom, from when, how)."""
    verb = {"done": "finished", "fail": "failed", "skip": "had nothing to do"}.get(result, result)
    d = {"action": name, "result": result, "started_at": started_at, **(data or {})}
    return Entry("action", f"{name} {verb}: {message}", key=f"action:{who}:{name}:{started_at:.6f}",
                 who=who, data=d)


def alert_entry(a: Any, who: str) -> Entry:
    """An alert (`tui.core.alert.Alert`): an episode opened or ended, or a one-off. The
    node rules' episodes ("node:<name>") are `node` entries: down, then back."""
    d: dict[str, Any] = {"level": a.level, "source": a.source, "line": a.line, "diagnosis": a.diagnosis}
    if a.key is not None:
        d.update(episode=a.key, ends=bool(a.ends))
        kind = "node" if a.key.startswith("node:") else "alert"
        key = f"{a.key}:{'end' if a.ends else 'open'}:{a.at:.3f}"
    else:
        kind = "alert"
        where = a.line if a.line is not None else int(a.at // 60)
        key = f"once:{a.source}:{where}:{a.message}"
    text = f"{a.level.upper()} {a.source}: {a.message}" if not a.ends else f"ended: {a.message}"
    return Entry(kind, text, key=key, at=a.at, who=who, data=d)


def state_entry(status: str, step: int | None, who: str, at: float | None = None) -> Entry:
    at = time.time() if at is None else at
    text = f"job {status}" + (f" at step {step}" if step is not None else "")
    return Entry("state", text, key=f"state:{status}:{at:.3f}", at=at, who=who,
                 data={"status": status, "step": step})


def checkpoint_entry(step: int, who: str, at: float | None = None) -> Entry:
    return Entry("checkpoint", f"checkpoint at step {step}", key=f"checkpoint:{step}",
                 at=time.time() if at is None else at, who=who, data={"step": step})


def job_state_entry(status: str, step: int | None, who: str, profile: Any, at: float | None = None) -> Entry:
    """A state entry that also says whose run it is and on how many cards (what `runs`
    needs for a run the history of this machine does not name, and for GPU-hours)."""
    e = state_entry(status, step, who, at)
    e.data.update(profile=profile.name, cards=profile.total_gpus)
    return e


def record_action(job_id: str | None, name: str, who: str, started_at: float, result: str,
                  message: str, data: dict[str, Any] | None = None,
                  also: Iterable[Entry] = ()) -> None:
    """Journal an action in the run it concerns (nothing when there is no run), and
    `also` (the state it left the job in)."""
    if not job_id:
        return
    try:
        j = Journal.for_job(job_id)
    except (ValueError, OSError):  # an unsafe id names no spool
        return
    j.append([action_entry(name, who, started_at, result, message, data), *also])
