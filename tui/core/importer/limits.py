"""The importer's resource bounds, and how script text is shown.

An imported script is untrusted text: it may double a variable until memory runs out,
make a million one-letter words or array elements from a few lines, nest `$(` until the
stack does, name `/dev/zero` as its runtime env, or carry line breaks
and terminal escapes in a name. Every such input is refused with one line (`Refused`, a
`UsageError`: exit 2) naming the file, the line and what was too big; nothing from the
script reaches a message or a comment without `shown` making it one printable line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tui.core.errors import UsageError
from tui.core.safetext import shown  # the one rule for outside text; the importer's names go through it

MAX_FILE_BYTES = 1 << 20  # a launch script, hostfile or runtime env is a few KB
MAX_WORD_CHARS = 1 << 20  # one expanded word (or variable value)
MAX_EXPANDED_CHARS = 16 << 20  # all expansion work of one import, loops of functions included
MAX_ARRAY_ITEMS = 100_000
MAX_ITEMS = 500_000
"""What one import may make, counted one each whatever their size: the scan's commands and
words; the walk's commands read (a function's body once per call), fields, array elements
(a gap `a[99999]=x` leaves counts too), exported variables handed to each command, notes.
Characters alone do not bound memory: a one-character field costs a hundred bytes."""
MAX_NESTING = 100  # quotes, $( and ${ inside each other
MAX_ARITH_CHARS = 1000  # one $((...)) after expansion
MAX_ARITH_DEPTH = 200  # operators inside each other in one $((...))
MAX_NODES = 4096  # hosts in a hostfile, or trainer.nnodes for the template


class Refused(UsageError):
    """Input the importer will not read; the caller adds the file name."""

    def __init__(self, line: int, what: str) -> None:
        self.line = line
        self.what = what
        super().__init__(f"line {line}: {what}" if line else what)


def read_text_bounded(path: str | Path, cap: int = MAX_FILE_BYTES) -> str:
    """A regular file's UTF-8 text, at most `cap` bytes. A FIFO, a device (`/dev/zero`) or
    a larger file is refused without reading it (the open does not block on a FIFO).
    Raises OSError (missing, unreadable), UnicodeDecodeError, or UsageError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{shown(path)}: not a regular file; refused")
        chunks: list[bytes] = []
        got = 0
        while got <= cap:
            b = os.read(fd, min(1 << 16, cap + 1 - got))
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if got > cap:
            raise UsageError(f"{shown(path)}: larger than {cap:,} bytes; refused")
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")
