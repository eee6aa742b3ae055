"""nvidia-smi CSV parsers on real captured output (tests/data/samples/nvidia-smi) and on
the probe's exact noheader,nounits query with [N/A]/[Not Supported], cut-off output,
ANSI colour, 16 cards and errors on stdout."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.core.parsers.nvsmi import (
    NVSMI_APPS_ARGS,
    NVSMI_QUERY_ARGS,
    attach_nvsmi_apps,
    parse_nvsmi_apps,
    parse_nvsmi_csv,
)
from tui.core.state import GpuReport
from tests.samples import FUZZ, read_sample, samples_dir


H200 = "nvidia-smi/01_query_gpu_csv_header_units_and_compute_apps_8xH200_REAL.txt"
VARIANTS = "nvidia-smi/03_noheader_nounits_NA_and_NotSupported_variants_REAL.txt"

UUIDS = [
    "GPU-a44622e3-2296-6285-0a86-84d0f6c67900",
    "GPU-4f31bb83-f8dc-d0af-029e-bc4356e6afeb",
    "GPU-4e9e74b7-4977-f04d-3af3-ccfe5f570e90",
    "GPU-02dbe542-8a6f-11a4-7c2a-486b7d4e9092",
    "GPU-cb449822-5571-be90-8303-e7558da3ea66",
    "GPU-8e137fa6-c3d9-6980-7733-0d8df296756e",
    "GPU-d9337494-6060-1440-039f-4654245b5764",
    "GPU-28780eb0-24d5-1f13-59b8-ae5c23617a72",
]


def _sections(text: str) -> list[str]:
    """Blank-line separated blocks of a sample file."""
    return [block for block in re.split(r"\n\s*\n", text) if block.strip()]


def test_the_query_asked_is_the_query_parsed() -> None:
    """The probe asks nvidia-smi for a column order and parses its answer by the same
    order: a row answering the exact query (one distinct value a field, in the order the
    argv names them) lands in the right card fields, and the apps query the same."""
    fields = NVSMI_QUERY_ARGS[1].split("=", 1)[1].split(",")
    value = {"index": "3", "name": "NVIDIA H200", "utilization.gpu": "71", "memory.used": "1234",
             "memory.total": "143771", "temperature.gpu": "45", "power.draw": "512.5", "uuid": UUIDS[0]}
    assert NVSMI_QUERY_ARGS[0] == "nvidia-smi" and "--format=csv,noheader,nounits" in NVSMI_QUERY_ARGS
    report = parse_nvsmi_csv(", ".join(value[f] for f in fields) + "\n", header=False)
    assert report.parsed, report.error
    (card,) = report.cards
    assert (card.index, card.name, card.util_pct, card.mem_used_mib, card.mem_total_mib, card.temp_c,
            card.power_w, card.uuid) == (3, "NVIDIA H200", 71.0, 1234.0, 143771.0, 45.0, 512.5, UUIDS[0])
    apps = NVSMI_APPS_ARGS[1].split("=", 1)[1].split(",")
    app = {"gpu_uuid": UUIDS[0], "pid": "4242", "process_name": "python3", "used_memory": "999"}
    procs = parse_nvsmi_apps(", ".join(app[f] for f in apps) + "\n")
    assert [(p.pid, p.name, p.mem_used_mib) for p in procs[UUIDS[0]]] == [(4242, "python3", 999.0)]


# ------------------------------------------------------------------ H200 sample


def test_h200_header_with_units_first_snapshot() -> None:
    blocks = _sections(read_sample(H200))
    gpu_block = next(b for b in blocks if "index, uuid" in b)
    report = parse_nvsmi_csv(gpu_block)
    assert report.parsed and report.tool == "nvidia-smi"
    assert [c.index for c in report.cards] == list(range(8))
    assert [c.uuid for c in report.cards] == UUIDS
    assert all(c.mem_total_mib == 143771 for c in report.cards)
    assert [c.mem_used_mib for c in report.cards] == [
        130013, 130053, 105851, 129993, 106091, 105851, 106139, 58071,
    ]
    assert [c.util_pct for c in report.cards] == [100] * 7 + [0]
    # Not in this query: None, never 0.
    assert all(c.temp_c is None and c.power_w is None and c.name == "" for c in report.cards)


def test_h200_whole_file_later_snapshot_wins() -> None:
    report = parse_nvsmi_csv(read_sample(H200, strip_source=False), header=None)
    assert report.parsed and len(report.cards) == 8
    assert report.cards[2].mem_used_mib == 0 and report.cards[2].util_pct == 0
    assert report.cards[4].mem_used_mib == 244


def test_h200_compute_apps_attach_by_uuid() -> None:
    text = read_sample(H200)
    first_half = text[: text.index("## After")]
    report = parse_nvsmi_csv(first_half)
    apps = parse_nvsmi_apps(first_half)
    assert len(apps) == 8
    attach_nvsmi_apps(report, apps)
    card0 = report.cards[0]
    assert [(p.pid, p.name, p.mem_used_mib) for p in card0.processes] == [
        (1328667, "/usr/local/bin/python3.10", 130004)
    ]
    card7 = report.cards[7]
    assert [(p.pid, p.name, p.mem_used_mib) for p in card7.processes] == [(1758887, "", 58060)]  # [Not Found]
    assert report.cards[2].processes[0].name == "python3"
    # Attaching again replaces, it does not duplicate.
    attach_nvsmi_apps(report, apps)
    assert len(report.cards[0].processes) == 1


def test_h200_apps_whole_file_uses_last_snapshot() -> None:
    apps = parse_nvsmi_apps(read_sample(H200, strip_source=False))
    assert set(apps) == {UUIDS[0], UUIDS[1], UUIDS[3], UUIDS[7]}
    assert all(len(v) == 1 for v in apps.values())


# --------------------------------------------------------------- variants sample


def test_variants_source_a_na_and_not_supported() -> None:
    text = read_sample(VARIANTS)
    rows = [line for line in text.splitlines() if re.match(r"^\d+, \d+", line)]
    assert len(rows) == 2
    fields = (
        "memory.total", "memory.free", "memory.used", "temperature.gpu", "fan.speed",
        "utilization.gpu", "utilization.memory",
    )
    for row in rows:  # "[N/A]" (new drivers) and "[Not Supported]" (old) in fan.speed
        report = parse_nvsmi_csv(row + "\n", header=False, fields=fields)
        assert report.parsed and len(report.cards) == 1
        card = report.cards[0]
        assert (card.index, card.mem_total_mib, card.mem_used_mib, card.temp_c, card.util_pct) == (0, 2004, 0, 44, 0)


def test_variants_source_b_units_and_not_supported() -> None:
    text = read_sample(VARIANTS)
    row = next(line for line in text.splitlines() if line.startswith("GeForce GTX 770"))
    fields = (
        "name", "memory.used", "memory.total", "temperature.gpu", "power.draw", "fan.speed",
        "utilization.gpu", "pstate", "clocks.sm", "clocks.mem", "clocks.gr", "power.limit",
    )
    report = parse_nvsmi_csv(row, header=False, fields=fields)
    card = report.cards[0]
    assert card.name == "GeForce GTX 770"
    assert (card.mem_used_mib, card.mem_total_mib, card.power_w) == (None, None, None)
    assert card.temp_c == 52 and card.util_pct == 52  # "52 %" with its unit


def test_variants_source_c_header_nounits_unknown_error() -> None:
    text = read_sample(VARIANTS)
    start = text.index("name, utilization.gpu [%]")
    block = text[start:].split("# SOURCE D")[0]
    report = parse_nvsmi_csv(block)
    assert report.parsed and len(report.cards) == 1
    card = report.cards[0]
    assert card.name == "GeForce RTX 2080 Ti"
    assert (card.util_pct, card.temp_c) == (100, 56)
    assert card.power_w == pytest.approx(228.82)


def test_variants_whole_file_does_not_raise() -> None:
    report = parse_nvsmi_csv(read_sample(VARIANTS, strip_source=False))
    assert isinstance(report, GpuReport)
    assert [c.name for c in report.cards] == ["GeForce RTX 2080 Ti"]  # only the headed block fits


# ------------------------------------------------------------- the probe's query


def _probe_row(i: int, *, temp: str = "48", power: str = "350.12", uuid: str | None = None) -> str:
    u = uuid if uuid is not None else f"GPU-{i:08x}-0000-1111-2222-{i:012x}"
    return f"{i}, NVIDIA H100 80GB HBM3, {i * 5}, {i * 1000}, 81559, {temp}, {power}, {u}"


def test_probe_query_noheader_nounits() -> None:
    text = "\n".join(_probe_row(i) for i in range(8)) + "\n"
    report = parse_nvsmi_csv(text)
    assert report.parsed and len(report.cards) == 8
    c = report.cards[3]
    assert (c.index, c.name, c.util_pct, c.mem_used_mib, c.mem_total_mib, c.temp_c) == (
        3, "NVIDIA H100 80GB HBM3", 15, 3000, 81559, 48,
    )
    assert c.power_w == pytest.approx(350.12)
    assert c.uuid == "GPU-00000003-0000-1111-2222-000000000003"


@pytest.mark.parametrize("placeholder", ["[N/A]", "[Not Supported]", "[Unknown Error]", "N/A"])
def test_probe_query_placeholders_are_none(placeholder: str) -> None:
    report = parse_nvsmi_csv(_probe_row(0, temp=placeholder, power=placeholder) + "\n", header=False)
    card = report.cards[0]
    assert card.temp_c is None and card.power_w is None
    assert card.mem_total_mib == 81559


def test_probe_query_sixteen_cards_with_ansi() -> None:
    text = "".join(f"\x1b[0m{_probe_row(i)}\r\n" for i in range(16))
    report = parse_nvsmi_csv(text)
    assert [c.index for c in report.cards] == list(range(16))


def test_truncated_last_row_is_dropped() -> None:
    text = "\n".join(_probe_row(i) for i in range(3))
    report = parse_nvsmi_csv(text[:-10])  # cut inside the last uuid
    assert [c.index for c in report.cards] == [0, 1]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
         "Make sure that the latest NVIDIA driver is installed and running.\n",
         "NVIDIA-SMI has failed"),
        ("No devices were found\n", "No devices were found"),
        ("Error: failed to initialize NVML: Driver/library version mismatch\n", "Error: failed to initialize NVML"),
    ],
)
def test_error_on_stdout(text: str, expected: str) -> None:
    report = parse_nvsmi_csv(text)
    assert not report.parsed and report.cards == []
    assert (report.error or "").startswith(expected)


@pytest.mark.parametrize("text", ["", "\n", "   \n"])
def test_empty_output(text: str) -> None:
    report = parse_nvsmi_csv(text)
    assert not report.parsed and report.error == "nvidia-smi printed nothing"
    assert parse_nvsmi_apps(text) == {}


def test_missing_fields_row_is_skipped() -> None:
    report = parse_nvsmi_csv("0, A100, 5\n")
    assert not report.parsed and "unreadable" in (report.error or "")


# --------------------------------------------------------------------------- fuzzing


@FUZZ
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    report = parse_nvsmi_csv(text)
    assert isinstance(report, GpuReport) and (report.parsed or report.error)
    assert isinstance(parse_nvsmi_csv(text, header=True), GpuReport)
    assert isinstance(parse_nvsmi_csv(text, header=False), GpuReport)
    assert isinstance(parse_nvsmi_apps(text), dict)


@FUZZ
@given(st.data())
def test_probe_query_prefix_never_invents_values(data: st.DataObject) -> None:
    full = ("\n".join(_probe_row(i) for i in range(8)) + "\n").encode()
    cut = data.draw(st.integers(0, len(full)))
    report = parse_nvsmi_csv(full[:cut].decode("utf-8", errors="ignore"))
    for card in report.cards:
        assert card.mem_total_mib == 81559
        assert card.mem_used_mib == card.index * 1000
        assert card.temp_c == 48


@FUZZ
@given(st.data())
def test_sample_prefix_never_raises(data: st.DataObject) -> None:
    raw = (samples_dir() / H200).read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    text = raw[:cut].decode("utf-8", errors="ignore")
    report = parse_nvsmi_csv(text)
    assert len(report.cards) <= 8
    # A 5-cell row always has its memory.total complete (only the last cell can be cut).
    assert all(c.mem_total_mib == 143771 for c in report.cards)
    apps = parse_nvsmi_apps(text)
    assert set(apps) <= set(UUIDS)


def test_apps_rows_without_uuid_or_pid_are_skipped() -> None:
    text = (
        "[N/A], 11, python3, 100\n"
        f"{UUIDS[0]}, [N/A], python3, 100\n"
        f"{UUIDS[0]}, 12, python3, [N/A]\n"
        f"{UUIDS[0]}, 13\n"
    )
    apps = parse_nvsmi_apps(text)
    assert list(apps) == [UUIDS[0]]
    assert [(p.pid, p.mem_used_mib) for p in apps[UUIDS[0]]] == [(12, None)]
