"""Which card tool a node has, the one shell snippet that asks it, and the dispatcher
that turns its output into a GpuReport.

A node may have `mthreads-gmi` (Moore Threads, the seed's S5000 nodes) or `nvidia-smi`;
the probe learns which in the same SSH round trip that reads the cards, so the console
needs no per-node configuration. The snippet only ever runs the exact commands below:
`mthreads-gmi` has flags that change the hardware (top-level `-r` resets a GPU), so
nothing here builds a command line from guesses or user input.

Probe output format (one marker per line, tool output between them)::

    @@tool=mthreads-gmi            # or nvidia-smi, or none
    @@cmd=mthreads-gmi -q --json   # a command that follows
    ...its stdout and stderr...
    @@rc=0                         # its exit code
    @@cmd=mthreads-gmi             # plain table: the JSON has no process list, and it
    ...                            # is the fallback when the JSON query fails
    @@rc=0
    @@end

For nvidia-smi the two commands are `NVSMI_QUERY_ARGS` and `NVSMI_APPS_ARGS`.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Iterator

from tui.core.parsers.ansi import first_error_line, strip_ansi
from tui.core.parsers.gmi import attach_processes, parse_gmi_json, parse_gmi_plain, parse_gmi_processes
from tui.core.parsers.nvsmi import (
    NVSMI_APPS_ARGS,
    NVSMI_QUERY_ARGS,
    attach_nvsmi_apps,
    parse_nvsmi_apps,
    parse_nvsmi_csv,
)
from tui.core.state import GpuReport

__all__ = [
    "GMI_JSON_ARGS",
    "GMI_PLAIN_ARGS",
    "GPU_PROBE_SCRIPT",
    "KNOWN_TOOLS",
    "parse_gpu_output",
    "parse_probe_output",
]

GMI_JSON_ARGS: tuple[str, ...] = ("mthreads-gmi", "-q", "--json")
"""The exact JSON query (docs/ARCHITECTURE.md, probes). Never add flags: `-r` resets a GPU."""
GMI_PLAIN_ARGS: tuple[str, ...] = ("mthreads-gmi",)
"""Bare `mthreads-gmi`: the card table and the process table."""
KNOWN_TOOLS: tuple[str, ...] = ("mthreads-gmi", "nvidia-smi")


def _sh(args: tuple[str, ...]) -> str:
    return " ".join(shlex.quote(a) for a in args)


def _run_block(args: tuple[str, ...]) -> str:
    """Run one command, print its marker, its output (stdout+stderr: the tools print
    errors on either) with a final newline, and its exit code."""
    cmd = _sh(args)
    return (
        f"echo '@@cmd={' '.join(args)}'\n"
        f"  out=$({cmd} 2>&1); rc=$?\n"
        "  [ -n \"$out\" ] && printf '%s\\n' \"$out\"\n"
        "  echo \"@@rc=$rc\"\n"
    )


GPU_PROBE_SCRIPT: str = (
    "if command -v mthreads-gmi >/dev/null 2>&1; then\n"
    "  echo '@@tool=mthreads-gmi'\n"
    f"  {_run_block(GMI_JSON_ARGS)}"
    f"  {_run_block(GMI_PLAIN_ARGS)}"
    "elif command -v nvidia-smi >/dev/null 2>&1; then\n"
    "  echo '@@tool=nvidia-smi'\n"
    f"  {_run_block(NVSMI_QUERY_ARGS)}"
    f"  {_run_block(NVSMI_APPS_ARGS)}"
    "else\n"
    "  echo '@@tool=none'\n"
    "fi\n"
    "echo '@@end'\n"
)
"""POSIX sh: detect the card tool and run exactly its fixed queries (see module doc)."""


def _tool_name(tool: str) -> str:
    return os.path.basename(tool.strip()).casefold()


def _with_rc(report: GpuReport, tool: str, text: str, rc: int) -> GpuReport:
    """Word a failed parse with the exit code: "exit 127" is "tool not installed"."""
    if report.parsed or rc == 0:
        return report
    if rc == 127:
        report.error = f"{tool}: command not found (exit code 127)"
    elif not strip_ansi(text).strip():
        report.error = f"{tool} exited with code {rc} and printed nothing"
    elif report.error and f"exit code {rc}" not in report.error:
        report.error = f"{report.error} (exit code {rc})"
    return report


def parse_gpu_output(tool: str, text: str, rc: int) -> GpuReport:
    """Parse one card tool's output: "mthreads-gmi" (JSON or plain table, told apart
    by the text itself) or "nvidia-smi" (the CSV query). Never raises.

    The exit code is not trusted on its own: mthreads-gmi prints errors on stdout and
    may exit 0, and may exit non-zero after printing a good table. The text decides
    `parsed`; `rc` only words the error.
    """
    name = _tool_name(tool) if isinstance(tool, str) else ""
    try:
        if name == "mthreads-gmi":
            clean = strip_ansi(text)
            if re.search(r"^[ \t]*\{", clean, re.MULTILINE):
                report = parse_gmi_json(clean)
            else:
                report = parse_gmi_plain(clean)
        elif name == "nvidia-smi":
            report = parse_nvsmi_csv(text)
        else:
            return GpuReport(tool=name or "unknown", parsed=False, error=f"unknown GPU tool {tool!r}")
        return _with_rc(report, name, text, rc)
    except Exception as exc:  # noqa: BLE001 - defensive: a parser never raises
        return GpuReport(tool=name or "unknown", parsed=False, error=f"GPU output parser failed: {exc!r}")


_MARKER_RE = re.compile(r"[^\S\n]*@@(tool|cmd|rc|end)(?:=([^\n]*)|[^\S\n]*)")
"""A marker line (spaces around it allowed), matched on a line that holds "@@"."""


def _markers(clean: str) -> Iterator[tuple[int, int, str, str]]:
    """(line start, line end, kind, value) of each marker line, in order: "@@" found by
    `str.find` (C speed over the ~450 lines of a busy node) and its line matched whole."""
    at = clean.find("@@")
    while at >= 0:
        start = clean.rfind("\n", 0, at) + 1
        end = clean.find("\n", at)
        if end < 0:
            end = len(clean)
        m = _MARKER_RE.fullmatch(clean, start, end)
        if m:
            yield start, end, m.group(1), (m.group(2) or "").strip()
        at = clean.find("@@", end)


class _Section:
    """One `@@cmd=` block of probe output: its text kept as the slices of the output it
    came in (joined once, when read), not line by line."""

    def __init__(self, cmd: str) -> None:
        self.cmd = cmd
        self.parts: list[str] = []
        self.rc: int | None = None

    @property
    def text(self) -> str:
        """Its lines, each ending in a newline ("" when it has none)."""
        return "".join(self.parts)


def _split_probe(clean: str) -> tuple[str | None, list[_Section], list[str], bool]:
    """(tool, sections, lines after @@tool outside any section, saw @@end).

    The marker lines are found by `str.find` ("@@"), each matched whole; the text between
    two markers goes to the open section (or, non-blank lines only, to the loose lines) as
    a slice. A busy node's ~450 lines were a Python loop here, a fifth of parsing its sample."""
    tool: str | None = None
    sections: list[_Section] = []
    loose: list[str] = []
    current: _Section | None = None
    ended = False

    def take(chunk: str) -> None:
        """Text between markers: whole lines, each ending in a newline."""
        if tool is None or not chunk:
            return  # junk before the probe started (motd, shell noise)
        if current is not None:
            current.parts.append(chunk)
        else:
            loose.extend(line for line in chunk[:-1].split("\n") if line.strip())

    pos = 0
    for start, end, kind, value in _markers(clean):
        take(clean[pos:start])
        pos = end + 1  # past its newline (beyond the end when it is the last line)
        if kind == "tool":
            tool = value
        elif kind == "cmd":
            current = _Section(value)
            sections.append(current)
        elif kind == "rc" and current is not None:
            current.rc = int(value) if re.fullmatch(r"-?[0-9]{1,9}", value) else None
            current = None
        elif kind == "end":
            ended = True
    if pos <= len(clean):
        take(clean[pos:] + "\n")  # the last line, unended (or "" after a final newline)
    return tool, sections, loose, ended


def _find(sections: list[_Section], predicate: str) -> _Section | None:
    for section in sections:
        if predicate == "gmi-json" and "--json" in section.cmd:
            return section
        if predicate == "gmi-plain" and section.cmd.strip() == "mthreads-gmi":
            return section
        if predicate == "nv-gpu" and "--query-gpu" in section.cmd:
            return section
        if predicate == "nv-apps" and "--query-compute-apps" in section.cmd:
            return section
    return None


def _note_incomplete(report: GpuReport, ended: bool) -> GpuReport:
    if not ended and not report.parsed and report.error and "incomplete" not in report.error:
        report.error = f"{report.error} (probe output incomplete)"
    return report


def parse_probe_output(text: str) -> GpuReport:
    """Parse what `GPU_PROBE_SCRIPT` printed into one GpuReport; never raises.

    mthreads-gmi: the JSON query gives the cards and the plain table's processes are
    attached by index; when the JSON query fails the plain table is used instead.
    nvidia-smi: the GPU query gives the cards, the compute-apps query the processes
    (by uuid). Output with only `@@tool=NAME` followed by the tool's output (no
    `@@cmd` blocks) is read as that tool's output.
    """
    try:
        return _parse_probe_output(text)
    except Exception as exc:  # noqa: BLE001 - defensive: a parser never raises
        return GpuReport(tool="unknown", parsed=False, error=f"probe output parser failed: {exc!r}")


def _parse_probe_output(text: str) -> GpuReport:
    clean = strip_ansi(text)
    tool, sections, loose, ended = _split_probe(clean)
    if tool is None:
        message = first_error_line(clean)
        return GpuReport(
            tool="unknown",
            parsed=False,
            error=message or ("GPU probe printed nothing" if not clean.strip() else "no GPU probe marker in output"),
        )
    name = _tool_name(tool)
    if name == "none":
        return GpuReport(tool="none", parsed=False, error="neither mthreads-gmi nor nvidia-smi found on this node")
    if name not in KNOWN_TOOLS:
        return GpuReport(tool=name or "unknown", parsed=False, error=f"unknown GPU tool {tool!r}")
    if not sections:
        body = "\n".join(loose)
        if not body.strip():
            return GpuReport(tool=name, parsed=False, error=f"{name} probe output has no command output")
        return _note_incomplete(parse_gpu_output(name, body, 0), ended)
    if name == "mthreads-gmi":
        json_sec = _find(sections, "gmi-json")
        plain_sec = _find(sections, "gmi-plain")
        json_report = parse_gpu_output(name, json_sec.text, json_sec.rc or 0) if json_sec else None
        if json_report is not None and json_report.parsed:
            if plain_sec is not None:
                attach_processes(json_report, parse_gmi_processes(plain_sec.text))
            return json_report
        plain_report = parse_gpu_output(name, plain_sec.text, plain_sec.rc or 0) if plain_sec else None
        if plain_report is not None and plain_report.parsed:
            return plain_report
        candidates = [r for r in (json_report, plain_report) if r is not None]
        if not candidates:
            return _note_incomplete(GpuReport(tool=name, parsed=False, error="no mthreads-gmi output in probe"), ended)
        best = max(candidates, key=lambda r: len(r.cards))
        errors = []
        for candidate in candidates:
            if candidate.error and candidate.error not in errors:
                errors.append(candidate.error)
        best.error = "; ".join(errors) or best.error
        return _note_incomplete(best, ended)
    gpu_sec = _find(sections, "nv-gpu")
    apps_sec = _find(sections, "nv-apps")
    if gpu_sec is None:
        return _note_incomplete(GpuReport(tool=name, parsed=False, error="no nvidia-smi GPU query in probe"), ended)
    report = parse_gpu_output(name, gpu_sec.text, gpu_sec.rc or 0)
    if report.parsed and apps_sec is not None:
        attach_nvsmi_apps(report, parse_nvsmi_apps(apps_sec.text))
    return _note_incomplete(report, ended)
