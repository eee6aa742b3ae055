"""A byte-exact local spool of the job's driver log, indexed by line and read lazily.

Why a spool and not a list of lines: a 15-20 hour VeRL run writes hundreds of MB to
a GB of driver log (every step line carries ~100 metrics, Ray repeats worker output).
Keeping it as Python strings costs 2-3x its size in RAM and grows without bound. Like
Toolong, we append the raw bytes to a local file, keep only an index of line start
offsets (an `array('Q')`: 8 bytes per line, nothing else grows with the log), and read
lines back from the file when the view scrolls or a search runs. The OS page cache makes
the recent part as fast as memory without it counting against the console.

Why byte-exact: the spool size *is* the resume offset. The remote follower runs
`tail -c +{size+1} -F FILE`, so after a dropped connection or a console restart the
stream continues at exactly the next byte: no line lost, none repeated, even when the
cut fell in the middle of a line or of a UTF-8 character (the partial bytes are already
in the file; the rest of the line completes them).

One writer per spool, across processes: the spool takes an exclusive `flock` on
`<spool>.lock` when it opens. The process that holds it is the *owner* and the only one
that appends; any other (a second console on the same job, a `status` while a console
follows) opens it as a *reader*: `append` refuses, `refresh()` picks up what the owner
wrote, and `try_lock()` lets it take over once the owner is gone. Without this, two
consoles doubled the spool and a `status` appended duplicates and skewed every later
offset. The lock is released by `release()`/`close()` or by the owner's death.

Not thread-safe: one owner (the log follower task) appends; readers run on the same
event loop. No Textual here: the core never imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from array import array
from bisect import bisect_right
from pathlib import Path
from types import TracebackType
from typing import Any

from tui.core.linecap import LINE_CAP, cap_line_bytes

_np: Any = False
"""numpy finds newlines ~10x faster than a Python loop; it is there via ray/tbparse.
Imported on the first buffer big enough to need it (False: not yet; None: not there),
not with this module: a one-shot `status` would pay ~0.2 s for it on every run."""


def _numpy() -> Any:
    global _np
    if _np is False:
        try:
            import numpy
        except ImportError:  # pragma: no cover - exercised by forcing the fallback in tests
            _np = None
        else:
            _np = numpy
    return _np

CHUNK = 4 * 1024 * 1024
"""Bytes read at a time when rebuilding the index or searching: big enough that the
per-chunk Python overhead vanishes, small enough that memory stays flat."""


def _newline_starts(buf: bytes, base: int) -> array:
    """Offsets (`base` + position + 1) just past every b"\\n" in `buf`: the starts of the
    lines that follow them. The hot path of both `append` and reopening a spool."""
    out = array("Q")
    np = _numpy() if len(buf) >= 4096 else None
    if np is not None:
        pos = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
        if len(pos):
            out.frombytes((pos.astype(np.uint64) + np.uint64(base + 1)).tobytes())
        return out
    find = buf.find
    i = find(b"\n")
    while i != -1:
        out.append(base + i + 1)
        i = find(b"\n", i + 1)
    return out


def _split_lines(raw: bytes) -> list[str]:
    """Decode complete lines (`raw` ends with b"\\n") and drop one trailing "\\r" per
    line, so `\\r\\n` logs read the same as `\\n` logs.

    Split first, then decode each line: for logs with non-ASCII text (Chinese warnings,
    tqdm bar glyphs) that is ~1.5x faster than decoding the chunk and splitting the str.
    A "\\n" byte never occurs inside a UTF-8 sequence, so both give the same lines.
    A line longer than LINE_CAP bytes is cut, with a mark (`linecap.cap_line_bytes`):
    the spool keeps every byte (its size is the resume offset); the lines handed on
    from it are bounded.
    """
    parts = raw.split(b"\n")
    parts.pop()  # the empty piece after the final "\n"
    if b"\r" in raw:
        parts = [p[:-1] if p.endswith(b"\r") else p for p in parts]
    if len(raw) > LINE_CAP and max(map(len, parts), default=0) > LINE_CAP:
        parts = [cap_line_bytes(p) for p in parts]
    try:
        return list(map(bytes.decode, parts))  # strict utf-8: the common, fast case
    except UnicodeDecodeError:
        return [p.decode("utf-8", errors="replace") for p in parts]


class SpoolNotOwned(RuntimeError):
    """An append to a spool whose lock another process holds."""


class LogSpool:
    """A local, append-only copy of a remote log, with a line index.

    `append(data)` stores raw bytes and returns the lines they completed. The index
    `_starts` holds the start offset of every complete line plus, last, the start of the
    pending partial line (== the offset just past the last "\\n"), so line `i` is
    `file[_starts[i] : _starts[i+1] - 1]`.
    """

    def __init__(self, path: Path | str, lock: bool = True) -> None:
        """`lock`: try to become the owner (the default); False opens it as a reader."""
        self.path = Path(path)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Raw fd, O_APPEND: every append is one write(2) at the end, visible to pread at
        # once; no Python buffer that a crash could lose after we reported the lines.
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)  # private
        self._lock_fd = -1
        self._starts = array("Q", [0])
        self._size = 0
        self._rebuild_index()
        if lock:
            self.try_lock()

    # ----------------------------------------------------------------- ownership

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @property
    def owner(self) -> bool:
        """Whether this process holds the spool's lock (and so may append)."""
        return self._lock_fd >= 0

    def try_lock(self) -> bool:
        """Become the owner if no other process (or other open spool) is; True if so.
        A reader that becomes owner should first `refresh()` (catch up with what the old
        owner wrote) before it appends."""
        if self._lock_fd >= 0:
            return True
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def release(self) -> None:
        """Give up ownership (another console may then take over); reading goes on."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = -1

    def refresh(self, max_bytes: int = 4 * CHUNK) -> list[str]:
        """Index what another process appended since we last looked (at most
        `max_bytes` of it per call: memory stays bounded however far behind); the lines
        that completed. A reader's way of following the owner's spool."""
        size = min(os.fstat(self._fd).st_size, self._size + max(1, max_bytes))
        if size <= self._size:
            return []
        old = self._size
        first = self.line_count  # the pending line's index: the first that may complete
        off = old
        while off < size:
            buf = os.pread(self._fd, min(CHUNK, size - off), off)
            if not buf:
                break
            self._starts.extend(_newline_starts(buf, off))
            off += len(buf)
        self._size = off
        return self._read_lines(first, self.line_count)

    # ----------------------------------------------------------------- lifecycle

    @property
    def index_path(self) -> Path:
        return self.path.with_name(self.path.name + ".idx")

    def save_index(self) -> None:
        """Save the line index next to the spool, so that a later open (a one-shot
        `status`, a console restart) scans only the bytes appended since, not the whole
        run's log. Written to a temporary name and renamed: never half-written."""
        tmp = self.index_path.with_name(self.index_path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(self._size.to_bytes(8, "little"))
            self._starts.tofile(f)
        os.replace(tmp, self.index_path)

    def _load_index(self, size: int) -> tuple[array, int] | None:
        """A saved index that still describes this file's first bytes, else None."""
        starts = array("Q")
        try:  # read straight into the array: a whole run's index is ~16 MB, copied once
            with open(self.index_path, "rb") as f:
                n = os.fstat(f.fileno()).st_size
                if n < 16 or (n - 8) % 8:
                    return None
                at = int.from_bytes(f.read(8), "little")
                starts.fromfile(f, (n - 8) // 8)
        except (OSError, EOFError):
            return None
        # sane: starts at 0, ends at or before the saved size, which the file still has,
        # and the byte before the pending line's start is a newline
        if not starts or starts[0] != 0 or at > size or starts[-1] > at:
            return None
        if starts[-1] > 0 and os.pread(self._fd, 1, starts[-1] - 1) != b"\n":
            return None
        return starts, at

    def _rebuild_index(self) -> None:
        """Scan an existing spool in CHUNK-sized reads (never the whole file at once),
        from where a saved index ends."""
        size = os.fstat(self._fd).st_size
        starts = array("Q", [0])
        off = 0
        saved = self._load_index(size) if size else None
        if saved is not None:
            starts, off = saved
        while off < size:
            buf = os.pread(self._fd, min(CHUNK, size - off), off)
            if not buf:  # file shrank under us: index what is there
                break
            starts.extend(_newline_starts(buf, off))
            off += len(buf)
        self._starts = starts
        self._size = off

    def close(self) -> None:
        """Close the file (and give up ownership). The spool stays on disk for the next
        session to reopen."""
        self.release()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        # os.open descriptors are not closed by garbage collection: a spool dropped
        # without close() would keep its lock (and the job's spool) for the process's life
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self) -> LogSpool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def clear(self) -> None:
        """Empty the spool (a new job's log starts from byte 0). Owner only."""
        self._require_owner()
        with contextlib.suppress(OSError):
            self.index_path.unlink()
        os.ftruncate(self._fd, 0)
        self._starts = array("Q", [0])
        self._size = 0

    # ----------------------------------------------------------------- writing

    def append(self, data: bytes) -> list[str]:
        """Append raw bytes; return the lines they completed (decoded, no "\\n"/"\\r").

        A partial last line is not returned: its bytes wait in the file for the "\\n"
        that completes it, in this session or the next one. Decoding happens only on
        whole lines, so a UTF-8 character cut between two chunks decodes intact.
        """
        self._require_owner()
        if not data:
            return []
        data = bytes(data)
        view = memoryview(data)
        old_size = self._size
        written = 0
        try:
            while written < len(data):  # write(2) may be short on some filesystems
                written += os.write(self._fd, view[written:])
        except BaseException:
            # All or nothing (disk full, interrupted): cut back to the last consistent size
            # so `size` still equals the bytes indexed and the stream resumes from there.
            os.ftruncate(self._fd, old_size)
            raise
        self._size = old_size + len(data)
        last_nl = data.rfind(b"\n")
        if last_nl == -1:
            return []
        pending_start = self._starts[-1]
        first = self.line_count
        self._starts.extend(_newline_starts(data, old_size))
        if old_size - pending_start > LINE_CAP:
            # a long line was waiting for this "\n": read no more of it than is kept
            return self._read_lines(first, self.line_count)
        head = b""
        if pending_start < old_size:  # the partial line that was waiting for this "\n"
            head = os.pread(self._fd, old_size - pending_start, pending_start)
        return _split_lines((head + data[: last_nl + 1]) if head else data[: last_nl + 1])

    def _require_owner(self) -> None:
        if self._lock_fd < 0:
            raise SpoolNotOwned(f"{self.path}: another process writes this spool; this one only reads it")

    # ----------------------------------------------------------------- reading

    @property
    def size(self) -> int:
        """Bytes in the spool == the byte offset to resume the remote stream from."""
        return self._size

    @property
    def line_count(self) -> int:
        """Complete lines (a pending partial line is not counted)."""
        return len(self._starts) - 1

    def __len__(self) -> int:
        return self.line_count

    def index_bytes(self) -> int:
        """Memory held by the line index: the only thing that grows with the log."""
        return self._starts.buffer_info()[1] * self._starts.itemsize

    def pending(self) -> str:
        """The incomplete last line, if any (e.g. a progress bar still being drawn); cut
        at LINE_CAP bytes, with a mark, like a complete line."""
        start = self._starts[-1]
        if start >= self._size:
            return ""
        length = self._size - start
        raw = os.pread(self._fd, min(length, LINE_CAP + 4), start)
        return cap_line_bytes(raw, total=length).decode("utf-8", errors="replace")

    def line(self, i: int) -> str:
        """Line `i` (0-based; negative counts from the end), read from the file."""
        n = self.line_count
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"line {i} out of range (0..{n - 1})")
        return self._read_lines(i, i + 1)[0]

    def lines(self, start: int, stop: int) -> list[str]:
        """Lines `start` <= i < `stop`, clamped to what exists, in one read."""
        n = self.line_count
        start = max(0, min(start, n))
        stop = max(start, min(stop, n))
        if start == stop:
            return []
        return self._read_lines(start, stop)

    def _read_lines(self, i: int, j: int) -> list[str]:
        """Complete lines `i` <= k < `j`, each cut at LINE_CAP bytes. One read when they
        span at most CHUNK bytes (the usual case); otherwise CHUNK-sized groups, and of a
        line longer than CHUNK only the part that is kept: memory stays bounded whatever
        a node wrote without a newline."""
        if j <= i:
            return []
        starts = self._starts
        lo, hi = starts[i], starts[j]
        if hi - lo <= CHUNK:
            return _split_lines(os.pread(self._fd, hi - lo, lo))
        out: list[str] = []
        k = i
        while k < j:
            m = self._chunk_end(k, j)
            lo, hi = starts[k], starts[m]
            if hi - lo > CHUNK:  # a single line longer than CHUNK: read only its start
                length = hi - lo - 1  # without its "\n"; a "\r" before it is dropped too
                if os.pread(self._fd, 1, hi - 2) == b"\r":
                    length -= 1
                raw = os.pread(self._fd, min(length, LINE_CAP + 4), lo)
                out.append(cap_line_bytes(raw, total=length).decode("utf-8", errors="replace"))
            else:
                out.extend(_split_lines(os.pread(self._fd, hi - lo, lo)))
            k = m
        return out

    def tail(self, n: int) -> list[str]:
        """The last `n` complete lines."""
        count = self.line_count
        return self.lines(max(0, count - n), count)

    # ----------------------------------------------------------------- search

    def _chunk_end(self, i: int, limit: int) -> int:
        """Largest j <= limit with lines i..j spanning about CHUNK bytes (at least one)."""
        j = bisect_right(self._starts, self._starts[i] + CHUNK, i + 1, limit + 1) - 1
        return max(i + 1, min(j, limit))

    def _chunk_start(self, j: int) -> int:
        """Smallest i < j with lines i..j spanning about CHUNK bytes (at least one)."""
        target = self._starts[j] - CHUNK
        i = bisect_right(self._starts, target, 0, j) if target > 0 else 0
        return min(i, j - 1)

    def _span(self, i: int, j: int) -> tuple[int, int]:
        """File offsets of lines i..j for a search read: a group of lines spans at most
        CHUNK bytes, and a single longer line is searched in its first CHUNK (at least
        LINE_CAP) bytes only, never read whole: a node may write one without a newline
        for ever."""
        lo, hi = self._starts[i], self._starts[j]
        return lo, min(hi, lo + max(CHUNK, LINE_CAP))

    def _read_text(self, i: int, j: int) -> str:
        lo, hi = self._span(i, j)
        text = os.pread(self._fd, hi - lo, lo).decode("utf-8", errors="replace")
        # "\r\n" -> "\n" keeps the count of "\n" (so line numbers) and lets `$` work.
        return text.replace("\r\n", "\n") if "\r" in text else text

    def search(self, pattern: str, start: int = 0, backwards: bool = False,
               regex: bool = False) -> int | None:
        """Index of the first line at or after `start` (or at or before it, `backwards`)
        that contains `pattern`; None when there is none.

        Case-insensitive; a plain substring unless `regex`. The whole spool is searched
        CHUNK bytes at a time (chunks end on line boundaries), never loaded at once.
        Raises re.error for an invalid regex, so the caller can say so.
        """
        n = self.line_count
        if n == 0 or not pattern:
            return None
        if not regex and pattern.isascii() and "\n" not in pattern:
            return self._search_bytes(pattern.lower().encode("ascii"), start, backwards)
        rx = re.compile(pattern if regex else re.escape(pattern), re.IGNORECASE | re.MULTILINE)
        if not backwards:
            i = max(0, start)
            while i < n:
                j = self._chunk_end(i, n)
                text = self._read_text(i, j)
                m = rx.search(text)
                if m is not None:
                    return i + text.count("\n", 0, m.start())
                i = j
            return None
        j = min(start, n - 1) + 1
        while j > 0:
            i = self._chunk_start(j)
            text = self._read_text(i, j)
            last = None
            for last in rx.finditer(text):  # noqa: B007 - the last match is the one kept
                pass
            if last is not None:
                return i + text.count("\n", 0, last.start())
            j = i
        return None

    def _search_bytes(self, needle: bytes, start: int, backwards: bool) -> int | None:
        """The common case (an ASCII substring) without decoding: bytes.lower() and
        find() run at memory speed, ~10x the decode + regex path."""
        n = self.line_count
        if not backwards:
            i = max(0, start)
            while i < n:
                j = self._chunk_end(i, n)
                lo, hi = self._span(i, j)
                buf = os.pread(self._fd, hi - lo, lo).lower()
                pos = buf.find(needle)
                if pos != -1:
                    return i + buf.count(b"\n", 0, pos)
                i = j
            return None
        j = min(start, n - 1) + 1
        while j > 0:
            i = self._chunk_start(j)
            lo, hi = self._span(i, j)
            buf = os.pread(self._fd, hi - lo, lo).lower()
            pos = buf.rfind(needle)
            if pos != -1:
                return i + buf.count(b"\n", 0, pos)
            j = i
        return None
