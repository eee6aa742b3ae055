"""Parsers for Moore Threads' `mthreads-gmi` (the card tool on the seed's S5000 nodes).

Two shapes are read:

* the plain table that bare `mthreads-gmi` prints (gmi 2.4.1 on S5000 with an
  "ECC Mode" row, gmi 1.9.0 on S80 without it, and the "Processes:" table whose rows
  are `ID PID name memory`), and
* `mthreads-gmi -q --json`, whose values carry units ("81920MiB", "27C", "96.66W",
  "0%") and whose key "Power Draw " has a trailing space.

The vendor documents neither layout as stable, so both parsers look for landmarks
(column bars, `used(total)` memory, `NNC` temperatures, normalised JSON keys) rather
than fixed offsets, and neither ever raises: bad input yields
`GpuReport(parsed=False, error=...)` with whatever cards could be salvaged. The tool
prints its own errors on stdout, sometimes with exit code 0, so "no table found"
reports the tool's message when there is one.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from tui.core.parsers.ansi import first_error_line, is_placeholder, parse_mib, parse_number, strip_ansi
from tui.core.state import GpuCard, GpuProcess, GpuReport

__all__ = ["TOOL", "parse_gmi_plain", "parse_gmi_json", "parse_gmi_processes", "attach_processes"]

TOOL = "mthreads-gmi"

# Every pattern here runs on untrusted node output and must take linear time: no two
# adjacent quantifiers may match the same characters (`\s*:?\s*` tries every split of
# a run of spaces), and a search must not restart inside a run it already scanned.
_VERSION_RE = re.compile(r"mthreads-gmi(?:\s*:|\s)\s*v?([0-9][\w.+-]*)", re.IGNORECASE)
_DRIVER_RE = re.compile(r"Driver\s+Version\s*(?::\s*)?([0-9][\w.+-]*)", re.IGNORECASE)
# `(?<![0-9])`: a number is tried from its first digit only; from every digit of a 32k
# digit run, each try scanning the rest of it, took 6 s on 8k digits.
_QUANTITY = r"(?:(?<![0-9])[+-]?[0-9]+(?:\.[0-9]+)?\s*[KMGT]?i?B|N/A|\[N/A\]|-)"
_MEM_PAIR_RE = re.compile(
    rf"({_QUANTITY})\s*(?:\(\s*({_QUANTITY})\s*\)|/\s*({_QUANTITY}))", re.IGNORECASE
)
_UTIL_RE = re.compile(r"(?<![\w.])([0-9]+(?:\.[0-9]+)?)\s*%")
_TEMP_RE = re.compile(r"(?<![\w.:])(-?[0-9]+(?:\.[0-9]+)?)\s*°?C\b")
_POWER_RE = re.compile(r"(?<![\w.:])([0-9]+(?:\.[0-9]+)?)\s*W\b")
_CARD_HEAD_RE = re.compile(r"^\s*([0-9]{1,9})\s+(\S.*)")  # the name: group 2, right-stripped
_PROCESSES_RE = re.compile(r"^\s*(?:\|\s*)?Processes\s*:", re.IGNORECASE)
# The name ends with a non-space, so the `\s+` after it starts only where a run of
# spaces starts (`\S.*?\s+` retried the rest of a run after each of its spaces).
_PROCESS_ROW_RE = re.compile(
    r"^\s*([0-9]{1,9})\s+([0-9]{1,10})\s+(\S(?:.*?\S)?)\s+"  # the name is never empty: "N/A" at the end of a cut row is it
    r"([0-9]+(?:\.[0-9]+)?\s*[KMGT]?i?B|N/A|\[N/A\]|-|--|Not\s+Supported)\s*$",
    re.IGNORECASE,
)
_NO_PROCESSES_RE = re.compile(r"No\s+running\s+processes\s+found", re.IGNORECASE)


def _unbox(line: str) -> str:
    """Drop the outer `|` borders a boxed (nvidia-smi-like) layout puts on each row."""
    stripped = line.strip()
    if stripped.startswith("|"):
        stripped = stripped[1:]
    if stripped.endswith("|"):
        stripped = stripped[:-1]
    return stripped


def _is_rule(line: str) -> bool:
    """A separator such as `+-----+` or `=====` (no data)."""
    stripped = line.strip()
    return bool(stripped) and re.fullmatch(r"[+|=\-\s]+", stripped) is not None


def _process_name(raw: str) -> str:
    """`N/A` / `[Not Found]` process names mean "unknown", which GpuProcess spells ""."""
    name = raw.strip()
    return "" if is_placeholder(name) else name


def parse_gmi_processes(text: str) -> dict[int, list[GpuProcess]]:
    """The "Processes:" table of plain `mthreads-gmi`, as {card index: [processes]}.

    Separate from `parse_gmi_plain` because the JSON query has no process list: the
    probe runs plain `mthreads-gmi` too and attaches these to the JSON cards. It also
    reads a process table on its own (the musatop fixture). Rows that do not fit are
    skipped; "No running processes found" gives {}. Never raises.
    """
    result: dict[int, list[GpuProcess]] = {}
    try:
        lines = strip_ansi(text).split("\n")
        in_table = False
        for raw in lines:
            if _PROCESSES_RE.match(raw):
                in_table = True
                continue
            if not in_table:
                continue
            line = _unbox(raw)
            if not line.strip() or _is_rule(line) or _NO_PROCESSES_RE.search(line):
                continue
            match = _PROCESS_ROW_RE.match(line)
            if not match:
                continue
            index, pid = int(match.group(1)), int(match.group(2))
            mem = match.group(4)
            result.setdefault(index, []).append(
                GpuProcess(pid=pid, name=_process_name(match.group(3)), mem_used_mib=parse_mib(mem))
            )
    except Exception:  # noqa: BLE001 - a parser must never raise; keep what we have
        return result
    return result


def attach_processes(report: GpuReport, processes: dict[int, list[GpuProcess]]) -> GpuReport:
    """Attach processes to the report's cards by card index (mutates and returns it).

    Each named card's list is replaced, so attaching a fresh table twice does not
    duplicate. Processes naming a card the report does not have are dropped: a
    process table cannot create cards.
    """
    by_index = {card.index: card for card in report.cards}
    for index, procs in processes.items():
        card = by_index.get(index)
        if card is not None:
            card.processes = list(procs)
    return report


def _apply_metrics(card: GpuCard, cells: str, *, first_row: bool) -> None:
    """Fill what the right-hand columns of one table row say, without overwriting."""
    if first_row:
        pair = _MEM_PAIR_RE.search(cells)
        if pair:
            card.mem_used_mib = parse_mib(pair.group(1))
            card.mem_total_mib = parse_mib(pair.group(2) or pair.group(3) or "")
            before = cells[: pair.start()]
        else:
            before = cells
        util = _UTIL_RE.search(before)
        if util:
            card.util_pct = parse_number(util.group(1))
    if card.temp_c is None:
        temp = _TEMP_RE.search(cells)
        if temp:
            card.temp_c = parse_number(temp.group(1))
    if card.power_w is None:
        power = _POWER_RE.search(cells)
        if power:
            card.power_w = parse_number(power.group(1))


def parse_gmi_plain(text: str) -> GpuReport:
    """Parse the plain `mthreads-gmi` table into a GpuReport (never raises).

    A card starts at a row whose first column is `<index> <name>`; rows after it
    whose first column is not an index continue that card (device type, temperature,
    ECC). Columns are split on `|`; the metrics are taken from the third column on
    (the second holds the PCI bus id and lane width, which would fool a loose regex).
    Processes from the "Processes:" table are attached by card index.
    """
    try:
        return _parse_gmi_plain(text)
    except Exception as exc:  # noqa: BLE001 - defensive: a parser never raises
        return GpuReport(tool=TOOL, parsed=False, error=f"mthreads-gmi plain parser failed: {exc!r}")


def _parse_gmi_plain(text: str) -> GpuReport:
    clean = strip_ansi(text)
    driver = _DRIVER_RE.search(clean)
    report = GpuReport(tool=TOOL, driver_version=driver.group(1) if driver else None)
    cards: list[GpuCard] = []
    current: GpuCard | None = None
    for raw in clean.split("\n"):
        if _PROCESSES_RE.match(raw):
            break
        line = _unbox(raw)
        if _is_rule(line):
            current = None  # a rule closes the card; its rows never span one
            continue
        if "|" not in line:
            continue
        cols = line.split("|")
        if len(cols) < 3:
            continue
        head = _CARD_HEAD_RE.match(cols[0])
        metrics = " ".join(cols[2:])
        if head:
            current = GpuCard(index=int(head.group(1)), name=head.group(2).rstrip())
            cards.append(current)
            _apply_metrics(current, metrics, first_row=True)
        elif current is not None and not cols[0].strip().upper().startswith("ID"):
            _apply_metrics(current, metrics, first_row=False)
    report.cards = cards
    processes = parse_gmi_processes(clean)
    if cards:
        attach_processes(report, processes)
        return report
    report.parsed = False
    message = first_error_line(clean)
    if message:
        report.error = message
    elif processes:
        report.error = "mthreads-gmi output has a process table but no card table"
    elif not clean.strip():
        report.error = "mthreads-gmi printed nothing"
    else:
        report.error = "no card table found in mthreads-gmi output"
    return report


# --------------------------------------------------------------------------- JSON


_NON_ALNUM = re.compile(r"[^a-z0-9]")


@functools.lru_cache(maxsize=1024)
def _norm(key: str) -> str:
    """Key normalisation: "Power Draw " -> "powerdraw", "GPU UUID" -> "gpuuuid"."""
    return _NON_ALNUM.sub("", key.casefold())


def _keys(mapping: object) -> dict[str, Any]:
    """The mapping by normalised key (the first of keys that normalise alike wins): made
    once per mapping, then looked up many times (a card is read with a dozen lookups;
    normalising its keys for each one was most of the cost of a busy 64-node refresh)."""
    found: dict[str, Any] = {}
    if isinstance(mapping, dict):
        for key, value in mapping.items():
            found.setdefault(_norm(str(key)), value)
    return found


def _pick(found: dict[str, Any], *names: str) -> Any:
    """From a `_keys` view: the first of `names` that is present."""
    for name in names:
        value = found.get(_norm(name))
        if value is not None:
            return value
    return None


def _get(mapping: object, *names: str) -> Any:
    """Look a key up ignoring case, spaces and punctuation (the trailing-space key).
    The first of `names` that is present wins."""
    return _pick(_keys(mapping), *names)


def _section(found: dict[str, Any], *names: str) -> dict[str, Any]:
    """From a `_keys` view: a sub-mapping, as its own view ({} when absent or not one)."""
    value = _pick(found, *names)
    return _keys(value) if isinstance(value, dict) else {}


def _text(value: object) -> str:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        text = str(value).strip()
        return "" if is_placeholder(text) else text
    return ""


def _json_processes(entry: dict[str, Any]) -> list[GpuProcess]:
    """Processes if a JSON GPU entry (a `_keys` view) carries any (gmi documents none;
    tolerate some)."""
    raw = _pick(entry, "Processes", "Process Info", "Compute Processes")
    if isinstance(raw, dict):
        raw = _get(raw, "Process Info", "Processes", "ProcessInfo") or list(raw.values())
    if not isinstance(raw, list):
        return []
    procs: list[GpuProcess] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        pid = parse_number(_get(item, "PID", "Process ID"))
        if pid is None or pid < 0 or pid != int(pid):
            continue
        name = _text(_get(item, "Process Name", "Name", "Command"))
        mem = parse_mib(_get(item, "Used GPU Memory", "Used Memory", "GPU Memory", "Memory Usage", "Memory"))
        procs.append(GpuProcess(pid=int(pid), name=name, mem_used_mib=mem))
    return procs


def _json_card(raw: dict[str, Any], position: int) -> GpuCard:
    entry = _keys(raw)
    index_value = parse_number(_pick(entry, "Index", "Minor Number", "GPU Index"))
    index = int(index_value) if index_value is not None and index_value == int(index_value) else position
    memory = _section(entry, "FB Memory Usage", "Memory Usage", "Memory")
    utilization = _section(entry, "Utilization")
    temperature = _section(entry, "Temperature")
    power = _section(entry, "Power Readings", "Power")
    uuid = _text(_pick(entry, "GPU UUID", "UUID"))
    temp_raw = _pick(temperature, "GPU Current Temp", "GPU Temp", "Current Temp", "GPU")
    power_raw = _pick(power, "Power Draw", "Instant Power Draw", "Average Power Draw")
    return GpuCard(
        index=index,
        name=_text(_pick(entry, "Product Name", "Name")),
        util_pct=parse_number(_pick(utilization, "Gpu", "GPU Util", "GPU Utilization"), ("%",)),
        mem_used_mib=parse_mib(_pick(memory, "Used")),
        mem_total_mib=parse_mib(_pick(memory, "Total")),
        temp_c=parse_number(temp_raw, ("C", "°C")),
        power_w=parse_number(power_raw, ("W",)),
        uuid=uuid or None,
        processes=_json_processes(entry),
    )


def _gpu_entries(data: dict[str, Any]) -> list[Any]:
    gpus = _get(data, "GPU", "GPUs")
    if isinstance(gpus, dict):
        return [gpus]
    if isinstance(gpus, list):
        return gpus
    return []


_GPU_ARRAY_RE = re.compile(r'"GPUs?"\s*:\s*\[')
_JSON_DRIVER_RE = re.compile(r'"Driver Version"\s*:\s*"([^"]*)"')


def _salvage(clean: str, start: int) -> list[dict[str, Any]]:
    """Decode the complete GPU objects of a cut-off JSON document one by one.

    A probe that times out returns a prefix of the document; every card object that
    arrived whole is still true, so we keep those and stop at the first broken one.
    """
    found = _GPU_ARRAY_RE.search(clean, start)
    if not found:
        return []
    decoder = json.JSONDecoder()
    pos = found.end()
    entries: list[dict[str, Any]] = []
    while True:
        while pos < len(clean) and clean[pos] in " \t\n,":
            pos += 1
        if pos >= len(clean) or clean[pos] != "{":
            break
        try:
            value, pos = decoder.raw_decode(clean, pos)
        except ValueError:
            break
        if isinstance(value, dict):
            entries.append(value)
    return entries


def _find_json_object(clean: str) -> tuple[dict[str, Any] | None, int, str | None]:
    """(object, start offset, decode error) for the first JSON object in `clean`.

    Leading junk (a shell banner, a `// SOURCE` comment, a warning on stderr merged
    into stdout) is skipped: the object starts at the first line that starts with `{`.
    """
    match = re.search(r"^[ \t]*\{", clean, re.MULTILINE)
    if match is None:
        index = clean.find("{")
        if index < 0:
            return None, -1, None
        start = index
    else:
        start = match.end() - 1
    try:
        value, _ = json.JSONDecoder().raw_decode(clean, start)
    except ValueError as exc:
        return None, start, str(exc)
    if not isinstance(value, dict):
        return None, start, "top-level JSON value is not an object"
    return value, start, None


def parse_gmi_json(text: str) -> GpuReport:
    """Parse `mthreads-gmi -q --json` into a GpuReport (never raises).

    Keys are matched ignoring case, spaces and punctuation, so "Power Draw " (trailing
    space) and any future spelling fixes both work; missing sections give None values.
    Cut-off JSON keeps every complete card and reports parsed=False. Text without any
    JSON (the tool's error message, or a plain table) is handed to the plain parser's
    error detection so the message reaches the user.
    """
    try:
        return _parse_gmi_json(text)
    except Exception as exc:  # noqa: BLE001 - defensive: a parser never raises
        return GpuReport(tool=TOOL, parsed=False, error=f"mthreads-gmi JSON parser failed: {exc!r}")


def _parse_gmi_json(text: str) -> GpuReport:
    clean = strip_ansi(text)
    data, start, decode_error = _find_json_object(clean)
    if data is None and start < 0:
        plain = parse_gmi_plain(clean)
        if plain.parsed:
            return plain
        message = first_error_line(clean)
        if message is None:
            message = "mthreads-gmi printed nothing" if not clean.strip() else "no JSON object in mthreads-gmi output"
        return GpuReport(tool=TOOL, parsed=False, error=message)
    if data is None:
        entries = _salvage(clean, start)
        driver = _JSON_DRIVER_RE.search(clean, start)
        cards = [_json_card(entry, i) for i, entry in enumerate(entries)]
        return GpuReport(
            tool=TOOL,
            cards=cards,
            parsed=False,
            error=f"invalid or truncated mthreads-gmi JSON ({decode_error}); {len(cards)} complete card(s) kept",
            driver_version=driver.group(1).strip() or None if driver else None,
        )
    entries = _gpu_entries(data)
    cards = [_json_card(entry, i) for i, entry in enumerate(entries) if isinstance(entry, dict)]
    driver_version = _text(_get(data, "Driver Version")) or None
    if not cards:
        message = _text(_get(data, "Error", "Message")) or first_error_line(clean[:start])
        attached = parse_number(_get(data, "Attached GPUs"))
        if attached == 0:
            return GpuReport(tool=TOOL, parsed=True, driver_version=driver_version)
        return GpuReport(
            tool=TOOL,
            parsed=False,
            error=message or "mthreads-gmi JSON has no GPU entries",
            driver_version=driver_version,
        )
    return GpuReport(tool=TOOL, cards=cards, driver_version=driver_version)
