"""The one bound on the length of a line of node output, and the helpers that apply it.

What a node prints is untrusted: a line without a newline (a runaway progress bar, a
binary file cat'ed by mistake, a hostile job) must not grow the console's memory, and
no parser may be handed a line long enough to take noticeable time. Every place where
remote text becomes lines uses `LINE_CAP`: the SSH line stream, the sampler's stream,
the log spool, `parsers.ansi.strip_ansi` (so every parser), and a saved log read by
`diagnose` or `metrics` (`capped_lines`). A longer line keeps its
first `LINE_CAP` characters (bytes, in the spool), then a visible `cut_mark` saying how
much was dropped; the rest of it, up to the next newline, is dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

__all__ = ["LINE_CAP", "LineCapper", "cap_line", "cap_line_bytes", "cap_lines", "capped_lines", "cut_mark"]

LINE_CAP = 64 * 1024
"""Characters of one line that are kept (64 KiB). Real lines are far shorter: the card
tools' and `ray status` lines are under 4 KB, a VeRL step line with a hundred metrics a
few KB. A parser's work on a line this long is linear and takes well under a
millisecond, and a stream holds at most this much of an unfinished line."""


def cut_mark(dropped: int, unit: str = "chars") -> str:
    """What replaces the dropped rest of a line: visible, and says how much went."""
    return f"…[cut {dropped} {unit}]"


def cap_line(line: str, cap: int = LINE_CAP) -> str:
    """`line` itself, or its first `cap` characters and a `cut_mark`."""
    if len(line) <= cap:
        return line
    return line[:cap] + cut_mark(len(line) - cap)


def cap_lines(text: str, cap: int = LINE_CAP) -> str:
    """`text` with every line longer than `cap` cut (see `cap_line`). Text no longer than
    `cap` is returned at once; otherwise one C-level split finds whether any line is."""
    if len(text) <= cap:
        return text
    lines = text.split("\n")
    if max(map(len, lines)) <= cap:
        return text
    return "\n".join(cap_line(line, cap) for line in lines)


def cap_line_bytes(raw: bytes, cap: int = LINE_CAP, total: int | None = None) -> bytes:
    """A raw line (no newline) cut to at most `cap` bytes, at a UTF-8 character boundary,
    then a `cut_mark` in bytes. `total`: the line's real length when `raw` is only its
    start (the spool reads no more of a long line than it keeps)."""
    length = len(raw) if total is None else total
    if length <= cap:
        return raw
    cut = min(cap, len(raw))
    # never split a UTF-8 sequence: back off over continuation bytes (at most 3)
    back = cut
    while back > cut - 3 and back > 0 and back < len(raw) and 0x80 <= raw[back] < 0xC0:
        back -= 1
    if back < len(raw) and 0x80 <= raw[back] < 0xC0:
        back = cut  # not UTF-8 anyway: cut where the cap says
    return raw[:back] + cut_mark(length - back, "bytes").encode()


def capped_lines(stream: IO[str], cap: int = LINE_CAP) -> Iterator[str]:
    """The lines of a text file as `for line in stream` gives them (line ends kept), each
    cut by `cap_line`'s rule as it is read: a saved log holding a gigabyte without a
    newline costs `cap` characters, not a gigabyte (iterating the file would build the
    whole line first). The rest of a long line is read in `cap`-sized pieces and dropped."""
    ends = ("\n", "\r")
    while True:
        line = stream.readline(cap + 1)
        if not line:
            return
        if len(line) <= cap or line.endswith(ends):
            yield line
            continue
        dropped = 1  # the line holds more than `cap` characters: its last one read goes too
        end = ""
        while True:
            more = stream.readline(cap)
            if not more:
                break
            if more.endswith(ends):
                end = "\r\n" if more.endswith("\r\n") else more[-1]
                dropped += len(more) - len(end)
                break
            dropped += len(more)
        yield line[:cap] + cut_mark(dropped) + end


class LineCapper:
    """Applies `LINE_CAP` to a text stream that arrives in chunks (an SSH channel's
    reads), across chunk boundaries: of a line longer than the cap only its first `cap`
    characters are passed on; the rest is counted and dropped, and the mark goes out
    with the newline that ends the line (or with `flush` at the end of the stream).
    What it holds does not grow with the line: two integers."""

    def __init__(self, cap: int = LINE_CAP) -> None:
        self.cap = cap
        self.col = 0  # characters of the current line passed on so far
        self.dropped = 0  # characters of the current line dropped so far

    def feed(self, chunk: str) -> str:
        """The chunk as it may be passed on."""
        if not chunk:
            return chunk
        if not self.dropped and len(chunk) <= self.cap:
            # the common case, with no split: only the line the chunk continues can be
            # too long (an SSH read is at most 64 KiB, so any other line in it is not)
            nl = chunk.find("\n")
            if nl < 0 and self.col + len(chunk) <= self.cap:
                self.col += len(chunk)
                return chunk
            if nl >= 0 and self.col + nl <= self.cap:
                self.col = len(chunk) - chunk.rfind("\n") - 1
                return chunk
        parts = chunk.split("\n")
        if (not self.dropped and self.col + len(parts[0]) <= self.cap
                and (len(parts) == 1 or max(map(len, parts)) <= self.cap)):
            # the common case: nothing to cut
            self.col = self.col + len(parts[0]) if len(parts) == 1 else len(parts[-1])
            return chunk
        out: list[str] = []
        for i, part in enumerate(parts):
            if i:
                if self.dropped:
                    out.append(cut_mark(self.dropped))
                    self.dropped = 0
                out.append("\n")
                self.col = 0
            room = self.cap - self.col
            if len(part) > room:
                out.append(part[:room])
                self.dropped += len(part) - room
                self.col = self.cap
            else:
                out.append(part)
                self.col += len(part)
        return "".join(out)

    def flush(self) -> str:
        """At the end of the stream: the mark of a last line that was cut, if any."""
        if not self.dropped:
            return ""
        mark, self.dropped = cut_mark(self.dropped), 0
        return mark
