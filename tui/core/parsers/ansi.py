"""Shared text clean-up for every parser.

Command output reaches us through SSH sessions, `docker exec` and Ray's log streamer;
any of them may colour text (ANSI CSI), set window titles or hyperlinks (OSC), end
lines with CRLF, or redraw a line with a bare carriage return (tqdm). Parsers are
written against plain `\\n`-separated text, so they all call `strip_ansi` first instead
of each guessing which escape sequences to expect.

The small number helpers live here too because the GPU tools all print values with
units glued on ("81920MiB", "27C", "96.66W", "100 %") and placeholders such as
`N/A` / `[Not Supported]`, and every parser must map those the same way: a
placeholder is `None` ("not reported"), never zero.
"""

from __future__ import annotations

import functools
import math
import re

from tui.core.linecap import cap_lines

__all__ = [
    "strip_ansi",
    "strip_escapes",
    "clean_line",
    "parse_number",
    "parse_mib",
    "is_placeholder",
    "first_error_line",
]

# CSI: ESC [ params intermediates final (or cut off by truncated output at the very end).
# OSC: ESC ] ... (BEL | ESC \). Then two-char escapes, and a lone ESC at the end. Every
# alternative starts with the literal ESC, so the regex engine scans for that one byte
# (a 4 KB step line: ~2 us; the same grammar as one alternation of two start bytes took
# ~110 us, and every coloured log line and sample pays it).
_ESCAPES_7BIT = re.compile(r"\x1b(?:\[[0-?]*[ -/]*(?:[@-~]|\Z)|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_]|\Z)")
# The same, plus the single-byte 8-bit CSI (0x9b): only for text that holds that byte.
_ESCAPES_8BIT = re.compile(
    r"\x1b\[[0-?]*[ -/]*(?:[@-~]|\Z)"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*\Z"
    r"|\x1b\Z")


def _sub_escapes(text: str) -> str:
    return (_ESCAPES_8BIT if "\x9b" in text else _ESCAPES_7BIT).sub("", text)
# C0 controls other than TAB and LF (CR is handled before this), plus DEL and a lone ESC.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Anything strip_ansi would change: an escape (7- or 8-bit CSI), CR, or another control.
# Most output has none, and one C-level scan for it is far cheaper than the substitutions
# (the console strips every node's sample on every refresh).
_NEEDS_WORK = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")


def strip_ansi(text: str | bytes | None) -> str:
    """Return `text` without ANSI escape sequences and with only `\\n` line breaks.

    `\\r\\n` becomes `\\n`; a bare `\\r` (a terminal "redraw this line", as tqdm does)
    also becomes `\\n`, so each redrawn state is its own line and no two states are
    glued together. Bytes are decoded as UTF-8 with replacement, because a cut-off
    multi-byte character must not make a probe fail. A line longer than
    `linecap.LINE_CAP` is cut, with a mark (`linecap.cap_lines`): every parser starts
    here, so none is ever handed an unbounded line. Never raises.
    """
    if text is None:
        return ""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = str(text)
    if _NEEDS_WORK.search(text) is None:
        return cap_lines(text)
    text = _sub_escapes(text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return cap_lines(_CONTROLS.sub("", text))



def strip_escapes(text: str) -> str:
    """Only the escape sequences (colour, titles, hyperlinks), nothing else: for a log
    line a parser reads as it is (carriage returns and controls are its business)."""
    return _sub_escapes(text) if "\x1b" in text or "\x9b" in text else text


def clean_line(line: str) -> str:
    """One log line as a terminal would leave it: escapes and controls removed, and of a
    line redrawn with carriage returns (tqdm) only its last state. `strip_ansi` keeps
    every redrawn state as its own line (parsers want them all); a log view wants one."""
    if _NEEDS_WORK.search(line) is None:
        return line
    if "\r" in line:
        line = line.rstrip("\r").rsplit("\r", 1)[-1]
    return _CONTROLS.sub("", _sub_escapes(line))


_PLACEHOLDERS = {
    "", "n/a", "na", "none", "null", "unknown", "-", "--", "not supported",
    "not found", "unknown error", "not available", "gpu requires reset",
    "insufficient permissions", "no permission",
}


def is_placeholder(value: str) -> bool:
    """True for the tools' ways of saying "no value": `[N/A]`, `N/A`, `[Not Supported]`,
    `[Unknown Error]`, `-`, empty. Such values must become `None`, not 0."""
    return value.strip().strip("[]()").strip().casefold() in _PLACEHOLDERS


# The unit is optional as a whole, with the spaces before it: `\s*([A-Za-z%°]*)\s*$`
# (two runs of spaces around a unit that may be empty) tried every split of a run of
# spaces after the number, 14 s on 32k spaces.
_NUMBER_RE = re.compile(r"^\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)(?:\s*([A-Za-z%°]+))?\s*$")


@functools.lru_cache(maxsize=64)
def _folded(units: tuple[str, ...]) -> frozenset[str]:
    return frozenset(u.casefold() for u in units)


def parse_number(value: object, allowed_units: tuple[str, ...] | None = None) -> float | None:
    """Parse "96.66W", "27C", "0%", "100 %", "3", 3.5 into a float.

    Returns None for placeholders, for text that is not one number with an optional
    unit, for NaN/inf, and (when `allowed_units` is given) for a unit not in it
    (compared case-insensitively; the empty unit is always allowed). Never raises.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        result = float(value)
        return result if math.isfinite(result) else None
    if not isinstance(value, str):
        return None
    match = _NUMBER_RE.match(value)  # no placeholder (`[N/A]`, `-`, ...) has a digit: no match
    if not match:
        return None
    unit = match.group(2) or ""
    if unit and allowed_units is not None and unit.casefold() not in _folded(allowed_units):
        return None
    try:
        result = float(match.group(1))
    except ValueError:  # pragma: no cover - the regex only admits valid floats
        return None
    return result if math.isfinite(result) else None


_MIB_FACTORS = {
    "": 1.0, "mib": 1.0, "mb": 1.0, "m": 1.0,
    "gib": 1024.0, "gb": 1024.0, "g": 1024.0,
    "tib": 1024.0 * 1024.0, "tb": 1024.0 * 1024.0,
    "kib": 1.0 / 1024.0, "kb": 1.0 / 1024.0, "k": 1.0 / 1024.0,
    "b": 1.0 / (1024.0 * 1024.0),
}


def parse_mib(value: object) -> float | None:
    """Parse a memory quantity into MiB: "81920MiB", "512 MiB", "80GiB", "130013".

    A bare number is taken as MiB because every tool we read reports MiB when it
    drops the unit (`nounits`). The GPU tools say "MB"/"MiB" interchangeably for
    binary megabytes, so both count as MiB. Returns None for placeholders or junk.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return parse_number(value)
    if not isinstance(value, str):
        return None
    match = _NUMBER_RE.match(value)
    if not match:
        return None
    factor = _MIB_FACTORS.get((match.group(2) or "").casefold())
    if factor is None:
        return None
    number = parse_number(match.group(1))
    return None if number is None else number * factor


_ERROR_LINE = re.compile(
    r"(?i)^\s*(?:error\b|fatal\b|failed\b|failure\b)"
    r"|\b(?:failed to|unable to|cannot|can't|could not|couldn't|not found|"
    r"no devices? (?:were |was )?found|permission denied|command not found|"
    r"no such file|not supported on|is not running|has failed)\b"
)


def first_error_line(text: str) -> str | None:
    """The first line that reads like an error message ("Error: failed to initialize
    MTML", "NVIDIA-SMI has failed ...", "sh: 1: mthreads-gmi: not found").

    GPU tools print such messages on stdout and sometimes exit 0, so a parser that
    found no data uses this to say why instead of a generic "could not parse".
    """
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and _ERROR_LINE.search(stripped):
            return stripped[:500]
    return None
