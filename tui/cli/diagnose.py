"""`rlconsole diagnose LOG [--json]`: why did this run die, from a log saved after the fact.

LOG is whatever the person debugging has: the driver log saved from `ray job logs`, the
console's spool, a worker log, an excerpt pasted from a ticket (`-` reads stdin). It is
read against the same catalog and the same verdict as the console's job-end alert and
`status --json`'s job.diagnosis (`Diagnoser.verdict`: the packaged `diagnosis.yaml` plus
the user's), streaming, so a log of millions of lines costs memory only for its findings.

Text: the cause's title, the line number and the line, why, the fix, and the other known
failures seen. `--json`: `{"id", "title", "fix", "line", "also"}`, `line` 1-based from the
top of the file and always the cause's first line. When no entry knows the failure, the
first real error in the log is the answer: `"id": "unrecognised-error"`, its line as
printed for `title` (made safe to show) and a generic next step for `fix`; `id`/`line` are
null only for a log with no error at all (a healthy log, benign warnings). Exit 0 either
way (a log without a failure is an answer, not an error); 2 when LOG cannot be read. A
broken user catalog is said on stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import IO, TextIO

from tui.core.errors import UsageError
from tui.core.linecap import capped_lines
from tui.core.safetext import shown

MAX_LINE_CHARS = 400
"""The offending line is printed up to this many characters: a log line can be a 1 MB
JSON blob or a `[repeated 7x]` wall, and the terminal is for the person reading it."""


def _lines(stream: IO[str]) -> Iterator[str]:
    # each line cut at LINE_CAP as it is read, as the live path cuts it (issue 39 S4): a
    # saved log with a gigabyte and no newline costs 64 KiB, not the gigabyte
    for line in capped_lines(stream):
        yield line.rstrip("\r\n")


def _shown(line: str) -> str:
    """The line as one line of text, bounded: its control characters (an ESC, a BEL, an
    8-bit CSI) made visible by the one rule for outside text (tui/core/safetext.py); the
    log is untrusted, and so is what the catalog's templates quote from it."""
    text = line.strip()
    text = text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " ..."
    return shown(text)


def run_diagnose(source: str, as_json: bool = False, out: TextIO | None = None,
                 err: TextIO | None = None) -> int:
    from tui.core.diagnosis import Diagnoser

    out = out or sys.stdout
    err = err or sys.stderr
    d = Diagnoser()
    for a in d.take_problems():
        err.write(f"rlconsole: warning: {shown(a.message)}\n")
    try:
        if source == "-":
            # a pasted log is any bytes: undecodable ones are replaced, never a traceback
            stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
            verdict = d.verdict(_lines(stdin))
        else:
            with open(source, encoding="utf-8", errors="replace") as stream:
                verdict = d.verdict(_lines(stream))
    except IsADirectoryError:
        raise UsageError(f"{source}: is a directory, not a log file") from None
    except OSError as e:
        raise UsageError(f"{source}: cannot read: {e.strerror or e}") from None
    if as_json:
        out.write(json.dumps(verdict.to_json(), indent=2) + "\n")
        return 0
    f = verdict.finding
    name = "stdin" if source == "-" else source
    if f is None:
        out.write(f"no known failure in {name}")
        out.write(" (known: " + shown(", ".join(verdict.also)) + ")\n" if verdict.also else "\n")
        out.write("unknown errors can be added to the catalog: <config dir>/diagnosis.yaml "
                  "(README: Alerts)\n")
        return 0
    out.write(f"{'unrecognised failure: ' if f.unrecognised else ''}{_shown(f.title)}\n")
    out.write(f"  line {f.line_no + 1}: {_shown(f.line)}\n")
    out.write(f"  why: {shown(f.explanation, lines=True)}\n")
    out.write(f"  fix: {shown(f.fix, lines=True)}\n")
    if verdict.also:
        out.write(f"  also seen: {shown(', '.join(verdict.also))}\n")
    out.write(f"  [{shown(f.signature.id)}]\n")
    return 0
