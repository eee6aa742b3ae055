"""Parsers for `nvidia-smi --query-gpu=... --format=csv` and `--query-compute-apps`.

rlconsole's target is Moore Threads hardware, but the same console is used on NVIDIA
nodes, and a CSV query is the one stable nvidia-smi interface. The probe runs exactly
`NVSMI_QUERY_ARGS` (and `NVSMI_APPS_ARGS`), so the column order is known; the parser
still reads a header line when one is present (`--format=csv` with or without units),
because a person pasting output or an older probe may include it.

`[N/A]`, `[Not Supported]`, `[Unknown Error]` become None (not reported), never 0.
Nothing here raises on bad input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tui.core.parsers.ansi import first_error_line, is_placeholder, parse_mib, parse_number, strip_ansi
from tui.core.state import GpuCard, GpuProcess, GpuReport

__all__ = [
    "TOOL",
    "NVSMI_QUERY_FIELDS",
    "NVSMI_QUERY_ARGS",
    "NVSMI_APPS_FIELDS",
    "NVSMI_APPS_ARGS",
    "parse_nvsmi_csv",
    "parse_nvsmi_apps",
    "attach_nvsmi_apps",
]

TOOL = "nvidia-smi"

NVSMI_QUERY_FIELDS: tuple[str, ...] = (
    "index", "name", "utilization.gpu", "memory.used", "memory.total",
    "temperature.gpu", "power.draw", "uuid",
)
"""Column order of the probe's query; the no-header parser relies on it."""

NVSMI_QUERY_ARGS: tuple[str, ...] = (
    "nvidia-smi",
    "--query-gpu=" + ",".join(NVSMI_QUERY_FIELDS),
    "--format=csv,noheader,nounits",
)
"""The exact argv the probe runs (never guessed flags)."""

NVSMI_APPS_FIELDS: tuple[str, ...] = ("gpu_uuid", "pid", "process_name", "used_memory")

NVSMI_APPS_ARGS: tuple[str, ...] = (
    "nvidia-smi",
    "--query-compute-apps=" + ",".join(NVSMI_APPS_FIELDS),
    "--format=csv,noheader,nounits",
)
"""The exact argv for per-card compute processes."""

# Header names nvidia-smi prints, mapped to our query field names.
_ALIASES = {
    "utilization.gpu": "utilization.gpu", "utilization.gpu [%]": "utilization.gpu",
    "temperature.gpu": "temperature.gpu", "power.draw": "power.draw",
    "power.draw.instant": "power.draw", "power.draw.average": "power.draw",
    "gpu_uuid": "gpu_uuid", "used_gpu_memory": "used_memory", "used_memory": "used_memory",
    "gpu_name": "name", "pci.bus_id": "pci.bus_id",
}
_KNOWN_HEADER_WORDS = set(NVSMI_QUERY_FIELDS) | set(NVSMI_APPS_FIELDS) | {
    "used_gpu_memory", "memory.free", "utilization.memory", "fan.speed", "power.limit",
    "pci.bus_id", "driver_version", "pstate", "gpu_name", "gpu_bus_id", "clocks.current.graphics",
}


def _column_name(raw: str) -> str:
    """"memory.used [MiB]" -> "memory.used"; "used_gpu_memory [MiB]" -> "used_memory"."""
    name = raw.strip()
    if name.endswith("]") and "[" in name:  # not a regex: "[[[[..." must stay linear
        name = name[: name.rfind("[")]
    name = name.strip().casefold()
    return _ALIASES.get(name, name)


def _split(line: str) -> list[str]:
    """nvidia-smi CSV is `, `-separated and never quotes; names have no commas."""
    return [cell.strip() for cell in line.split(",")]


def _is_header(cells: list[str]) -> bool:
    names = [_column_name(c) for c in cells]
    return sum(1 for n in names if n in _KNOWN_HEADER_WORDS) >= max(1, len(names) // 2)


def _is_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#") or stripped.startswith("$ ")


def _nv_text(value: str | None) -> str:
    if value is None:
        return ""
    return "" if is_placeholder(value) else value.strip()


_UUID_RE = re.compile(r"^(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$|^MIG-GPU-\S+/[0-9]+/[0-9]+$")


def _row_to_card(row: dict[str, str], position: int) -> GpuCard | None:
    index_value = parse_number(row.get("index"))
    if "index" in row and (index_value is None or index_value != int(index_value) or index_value < 0):
        return None  # a row whose index is not an index is not a GPU row
    uuid = _nv_text(row.get("uuid"))
    if uuid and not _UUID_RE.match(uuid):
        # The probe puts uuid last on purpose: a capture cut inside the last row leaves
        # a short uuid here, and every other value in that row may be cut too.
        return None
    return GpuCard(
        index=int(index_value) if index_value is not None else position,
        name=_nv_text(row.get("name")),
        util_pct=parse_number(row.get("utilization.gpu"), ("%",)),
        mem_used_mib=parse_mib(row.get("memory.used")),
        mem_total_mib=parse_mib(row.get("memory.total")),
        temp_c=parse_number(row.get("temperature.gpu"), ("C",)),
        power_w=parse_number(row.get("power.draw"), ("W",)),
        uuid=uuid or None,
    )


def parse_nvsmi_csv(
    text: str, header: bool | None = None, fields: Sequence[str] | None = None
) -> GpuReport:
    """Parse `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` (never raises).

    `header`: True if the output has a header line, False if not (columns are then
    `fields`, by default `NVSMI_QUERY_FIELDS`), None to detect it. A header seen later in the text (a
    paste of several queries) switches the column map; a compute-apps header starts
    a section that is skipped here (see `parse_nvsmi_apps`). A card index seen twice
    keeps the later row (the newer snapshot).
    """
    try:
        return _parse_nvsmi_csv(text, header, tuple(fields) if fields else NVSMI_QUERY_FIELDS)
    except Exception as exc:  # noqa: BLE001 - defensive: a parser never raises
        return GpuReport(tool=TOOL, parsed=False, error=f"nvidia-smi CSV parser failed: {exc!r}")


def _parse_nvsmi_csv(text: str, header: bool | None, fields: tuple[str, ...]) -> GpuReport:
    clean = strip_ansi(text)
    default = [_column_name(f) for f in fields]
    columns: list[str] | None = None if header else list(default)
    expect_header = header is True
    cards: dict[int, GpuCard] = {}
    skipped = 0
    for line in clean.split("\n"):
        if _is_comment(line):
            continue
        cells = _split(line)
        if header is not False and (expect_header or _is_header(cells)):
            names = [_column_name(c) for c in cells]
            expect_header = False
            if "gpu_uuid" in names or "pid" in names:
                columns = []  # a compute-apps section: not GPU rows
            else:
                columns = names
            continue
        if columns is None:
            columns = list(default)
        if not columns:
            continue
        if len(cells) != len(columns):
            skipped += 1
            continue
        card = _row_to_card(dict(zip(columns, cells, strict=True)), len(cards))
        if card is None:
            skipped += 1
            continue
        cards[card.index] = card
    report = GpuReport(tool=TOOL, cards=list(cards.values()))
    if report.cards:
        return report
    report.parsed = False
    message = first_error_line(clean)
    if message:
        report.error = message
    elif not clean.strip():
        report.error = "nvidia-smi printed nothing"
    else:
        report.error = f"no GPU rows in nvidia-smi output ({skipped} unreadable line(s))"
    return report


def parse_nvsmi_apps(text: str) -> dict[str, list[GpuProcess]]:
    """Parse `--query-compute-apps=gpu_uuid,pid,process_name,used_memory` output into
    {gpu uuid: [processes]} (never raises).

    Keyed by uuid because that query names no card index; `attach_nvsmi_apps` joins
    on the uuid column of the GPU query. A header line (with or without units) is
    honoured; a GPU-query section in the same text is skipped. `[Not Found]` process
    names (a PID in another container's namespace) become "". If the text holds
    several headed snapshots, the last one wins, as in `parse_nvsmi_csv`.
    """
    result: dict[str, list[GpuProcess]] = {}
    try:
        columns: list[str] = list(NVSMI_APPS_FIELDS)
        for line in strip_ansi(text).split("\n"):
            if _is_comment(line):
                continue
            cells = _split(line)
            if _is_header(cells):
                names = [_column_name(c) for c in cells]
                columns = names if ("gpu_uuid" in names or "pid" in names) else []
                if columns:
                    result.clear()  # a new snapshot of the same query: the later one wins
                continue
            if not columns or len(cells) != len(columns):
                continue
            row = dict(zip(columns, cells, strict=True))
            uuid = _nv_text(row.get("gpu_uuid"))
            pid = parse_number(row.get("pid"))
            if not uuid or pid is None or pid < 0 or pid != int(pid):
                continue
            result.setdefault(uuid, []).append(
                GpuProcess(
                    pid=int(pid),
                    name=_nv_text(row.get("process_name")),
                    mem_used_mib=parse_mib(row.get("used_memory")),
                )
            )
    except Exception:  # noqa: BLE001 - keep what was read
        return result
    return result


def attach_nvsmi_apps(report: GpuReport, apps: dict[str, list[GpuProcess]]) -> GpuReport:
    """Attach processes to cards by uuid (mutates and returns `report`). Processes
    on a uuid the report does not know are dropped; each card's list is replaced,
    so attaching a fresh query twice does not duplicate."""
    by_uuid = {card.uuid: card for card in report.cards if card.uuid}
    for uuid, procs in apps.items():
        card = by_uuid.get(uuid)
        if card is not None:
            card.processes = list(procs)
    return report
