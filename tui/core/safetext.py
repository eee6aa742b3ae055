"""Text from outside, made safe to show: the one rule.

What a node prints, a log line, the Ray dashboard's JSON, a TensorBoard tag, an SSH
server's disconnect text, an imported script: none of it may drive the terminal it is
shown on. An ESC starts a sequence the terminal obeys (OSC 0 sets the window title, OSC
52 writes the clipboard, CSI 2J clears the screen), and so do the 8-bit C1 controls
(0x9b is CSI); a `\\r` or a backspace draws over what came before. `shown` writes every
such character as a visible escape (`\\x1b`, `\\r`, `\\x9b`), so the text reads as what
was sent and does nothing. Every CLI printer and every widget that shows outside text
goes through it (README: Security model).

Two neighbours, for text that is not shown as plain text:
- a log is shown as a terminal would draw it, with its own colours: `shown_log` keeps
  the colour sequences (SGR) and drops every other sequence and control character (the
  console's log pane, `rlconsole logs`);
- exports escape for their own format: `md_text` / `md_code` (Markdown, so a job id or a
  message cannot add structure, links or HTML) and `csv_cell` (CSV, so a tag name cannot
  start a spreadsheet formula). Both go through `shown` first.
"""

from __future__ import annotations

import re

__all__ = ["shown", "shown_log", "md_text", "md_code", "csv_cell"]


def shown(text: object, lines: bool = False) -> str:
    """`text` as printable text: control characters (C0 including ESC, BEL, `\\r`,
    backspace; DEL; the C1 range 0x80-0x9f), line and paragraph separators, format
    characters (bidi overrides, zero widths) and lone surrogates written as Python
    escapes (`\\x1b`, `\\r`, `\\u202e`).

    One line by default (`\\n` and `\\t` escaped too: a name in a table cell or a YAML
    comment). `lines=True` keeps `\\n` and `\\t` (a message of several lines), and a
    `\\r\\n` line end is read as `\\n`. Idempotent: what it returns is printable."""
    s = text if type(text) is str else str(text)  # a str enum (JobStatus) as its value
    if s.isprintable():  # the common case: one C-level scan
        return s
    if lines:
        if "\r\n" in s:
            s = s.replace("\r\n", "\n")
        return "".join(c if c.isprintable() or c in "\n\t" else _escape(c) for c in s)
    return "".join(c if c.isprintable() else _escape(c) for c in s)


def _escape(c: str) -> str:
    o = ord(c)
    if c in "\n\t\r":
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[c]
    return f"\\x{o:02x}" if o < 0x100 else (f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")


# ----------------------------------------------------------------------------- logs

_ESC_BODY = (r"(?:\[[0-?]*[ -/]*(?:[@-~]|\Z)"  # CSI (colour, cursor, clear, modes, keyboard)
             r"|[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|\Z)"  # OSC (title, clipboard, link), DCS, SOS, PM, APC
             r"|[ -/]*[0-~]"  # two-character escapes (ESC c, ESC 7, ESC ( B, ...)
             r"|)")  # a lone ESC
_ESC_ALL = re.compile(r"\x1b" + _ESC_BODY)
_ESC_BUT_SGR = re.compile(r"\x1b(?!\[[0-9;]*m)" + _ESC_BODY)
"""Every 7-bit sequence, or every one but an SGR (`ESC [ digits m`: colour, bold). Each
starts with the literal ESC, so the regex engine scans for that one character (one
alternation of every start character cost ~15x on a coloured line), and each part is one
run of a character class not followed by a class it overlaps, stopping at the next ESC:
linear on any line. Substituted with "" (no Python call per sequence)."""
_C1_CSI = re.compile(r"\x9b[0-?]*[ -/]*(?:[@-~]|\Z)")
_C1_STRING = re.compile(r"[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|\Z)")
"""The 8-bit forms (CSI 0x9b; DCS, SOS, OSC, PM, APC strings): only for a line holding a C1 character."""
_C1 = re.compile(r"[\x80-\x9f]")
_LOG_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1a\x1c-\x1f\x7f-\x9f]")
"""What is left after the sequences: every control character but the tab (and the ESC of a
kept SGR: every other ESC began a sequence just removed)."""
_LOG_NEEDS_WORK = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def shown_log(line: str, colour: bool = True) -> str:
    """One log line as a terminal shows it: a line redrawn with carriage returns (tqdm)
    keeps its last state, colour sequences (SGR `ESC [ ... m`) are kept (`colour=False`:
    dropped too), every other escape sequence (titles, clipboard, cursor moves, screen
    clears; 7- or 8-bit) and every other control character but the tab is dropped. A
    line without any is returned as it is (one C-level scan)."""
    if _LOG_NEEDS_WORK.search(line) is None:
        return line
    if "\r" in line:
        line = line.rstrip("\r").rsplit("\r", 1)[-1]
    if not line.isascii() and _C1.search(line) is not None:  # isascii: O(1), a flag of the str
        line = _C1_STRING.sub("", _C1_CSI.sub("", line))
    if "\x1b" in line:
        line = (_ESC_BUT_SGR if colour else _ESC_ALL).sub("", line)
    return _LOG_CONTROL.sub("", line)


# -------------------------------------------------------------------------- exports

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&])")


def md_text(text: object) -> str:
    """Text as Markdown (CommonMark, GitHub's tables) shows it literally: one line (runs of
    whitespace become one space), control characters made visible (`shown`), and every
    character that could start emphasis, code, a link, an image, a heading, a table cell,
    an HTML tag or an entity backslash-escaped."""
    return _MD_SPECIAL.sub(r"\\\1", shown(" ".join(str(text).split())))


def md_code(text: object) -> str:
    """Text as a Markdown code span: one line, control characters made visible, fenced by
    more backticks than it holds in a row (so it cannot close the span early); inside a
    code span nothing is Markdown or HTML."""
    s = shown(" ".join(str(text).split()))
    run = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (run + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|nan)")


def csv_cell(value: object) -> object:
    """A CSV cell that a spreadsheet reads as the text it is: control characters made
    visible (`shown`), and a text that starts with `=`, `+`, `-`, `@` (a formula there),
    a tab or a carriage return gets a leading `'`. Numbers (a negative one too, as int,
    float or its text) are returned as they are, so they stay numbers."""
    if value is None or isinstance(value, (int, float)):
        return value
    s = shown(value)
    if s[:1] in ("=", "+", "-", "@", "\t", "\r") and _NUMBER.fullmatch(s) is None:
        return "'" + s
    return s
