"""mthreads-gmi parsers on real captured output (tests/data/samples/mthreads-gmi) and on
the ugly variants a probe meets: cut-off output, ANSI colour, errors on stdout with
exit 0, N/A values, missing fields, 16 cards."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.core.parsers.ansi import parse_mib, parse_number, strip_ansi
from tui.core.parsers.gmi import attach_processes, parse_gmi_json, parse_gmi_plain, parse_gmi_processes
from tui.core.state import GpuReport
from tests.samples import FUZZ, read_sample, samples_dir


S5000 = "mthreads-gmi/01_gmi_plain_S5000x8_gmi2.4.1_drv5.1.0-server.txt"
S80 = "mthreads-gmi/04_gmi_plain_S80_with_processes_gmi1.9.0_drv2.7.0.txt"
JSON_EXCERPT = "mthreads-gmi/09_gmi_query_json_S5000_EXCERPT_2of8.json"
MUSATOP = "mthreads-gmi/11_musatop_fixture_gmi_x10000_process_REAL_FORMAT.txt"


# --------------------------------------------------------------------- plain, S5000


@pytest.mark.parametrize("strip_source", [True, False])
def test_plain_s5000_eight_cards(strip_source: bool) -> None:
    report = parse_gmi_plain(read_sample(S5000, strip_source=strip_source))
    assert report.parsed and report.error is None
    assert report.tool == "mthreads-gmi"
    assert report.driver_version == "5.1.0-server"
    assert [c.index for c in report.cards] == list(range(8))
    assert {c.name for c in report.cards} == {"MTT S5000"}
    assert all(c.mem_total_mib == 81920 for c in report.cards)
    assert all(c.mem_used_mib == 0 for c in report.cards)
    assert all(c.util_pct == 0 for c in report.cards)
    assert [c.temp_c for c in report.cards] == [48, 48, 49, 48, 48, 50, 48, 49]
    # The plain table has no power column and no uuid: None, never 0.
    assert all(c.power_w is None and c.uuid is None for c in report.cards)
    assert all(c.processes == [] for c in report.cards)  # "No running processes found"


def test_plain_s5000_pcie_column_does_not_leak() -> None:
    """The PCIe column ("00000000:3a:00.0", "16x(16x)") must not be read as values."""
    report = parse_gmi_plain(read_sample(S5000))
    card1 = report.cards[1]
    assert card1.temp_c == 48 and card1.mem_total_mib == 81920


# ----------------------------------------------------------------------- plain, S80


def test_plain_s80_with_processes() -> None:
    report = parse_gmi_plain(read_sample(S80, strip_source=False))  # prompt line + source line
    assert report.parsed
    assert report.driver_version == "2.7.0"
    assert len(report.cards) == 1
    card = report.cards[0]
    assert (card.index, card.name) == (0, "MTT S80")
    assert (card.util_pct, card.mem_used_mib, card.mem_total_mib, card.temp_c) == (0, 1016, 16384, 54)
    assert [(p.pid, p.name, p.mem_used_mib) for p in card.processes] == [
        (4307, "/usr/local/bin/Xorg", 149),
        (5034, "/usr/bin/gnome-shell", 381),
        (5519, "/usr/lib/firefox/firefox", 240),
        (6173, "", 224),  # "N/A" process name: unknown
    ]


# ------------------------------------------------------------------ musatop fixture


def test_musatop_process_table_only() -> None:
    text = read_sample(MUSATOP)
    procs = parse_gmi_processes(text)
    assert list(procs) == [0]
    assert [(p.pid, p.name, p.mem_used_mib) for p in procs[0]] == [(12345, "/path/gpu_smoke", 111)]
    # A process table alone is not a card table: no invented cards.
    report = parse_gmi_plain(text)
    assert not report.parsed and report.cards == []
    assert "process table" in (report.error or "")


def test_boxed_process_table_variant() -> None:
    """The boxed layout (| borders, ===== rule, "512 MiB" with a space, N/A memory)."""
    text = (
        "+--------------------------------------------------------------+\n"
        "| Processes:                                                   |\n"
        "|  ID     PID       Process name                  GPU Memory   |\n"
        "|                                                  Usage       |\n"
        "|==============================================================|\n"
        "|  0      12345     python3 train.py --name x     1024MiB      |\n"
        "|  3      12345     python3 train.py --name x     512 MiB      |\n"
        "|  3      23456     /usr/bin/python3              N/A          |\n"
        "+--------------------------------------------------------------+\n"
    )
    procs = parse_gmi_processes(text)
    assert [(p.pid, p.mem_used_mib) for p in procs[0]] == [(12345, 1024)]
    assert [(p.pid, p.name, p.mem_used_mib) for p in procs[3]] == [
        (12345, "python3 train.py --name x", 512),
        (23456, "/usr/bin/python3", None),
    ]


# ------------------------------------------------------------------------------ JSON


@pytest.mark.parametrize("strip_source", [True, False])
def test_json_excerpt(strip_source: bool) -> None:
    report = parse_gmi_json(read_sample(JSON_EXCERPT, strip_source=strip_source))
    assert report.parsed and report.error is None
    assert report.driver_version == "3.3.5-server"
    assert len(report.cards) == 2
    c0, c1 = report.cards
    assert (c0.index, c0.name, c0.uuid) == (0, "MTT S5000", "399282a8-ba01-1475-893c-2eeca9e302f5")
    assert (c0.mem_total_mib, c0.mem_used_mib, c0.util_pct, c0.temp_c) == (81920, 0, 0, 27)
    assert c0.power_w == pytest.approx(96.66)  # from the key "Power Draw " (trailing space)
    assert (c1.index, c1.temp_c) == (1, 26)
    assert c1.power_w == pytest.approx(97.09)
    assert c1.uuid == "5ebdeb63-ba7a-5904-4f16-495b3e1de6c8"


def _json_doc(n: int) -> dict:
    return {
        "Driver Version": "3.3.8-server",
        "Attached GPUs": str(n),
        "GPU": [
            {
                "Index": str(i),
                "Product Name": "MTT S5000",
                "GPU UUID": f"uuid-{i}",
                "FB Memory Usage": {"Total": "81920MiB", "Used": f"{1000 * i}MiB"},
                "Utilization": {"Gpu": f"{i}%"},
                "Temperature": {"GPU Current Temp": f"{30 + i}C"},
                "Power Readings": {"Power Draw ": f"{100 + i}.5W"},
            }
            for i in range(n)
        ],
    }


def test_json_sixteen_cards() -> None:
    report = parse_gmi_json(json.dumps(_json_doc(16), indent=4))
    assert report.parsed and len(report.cards) == 16
    last = report.cards[15]
    assert (last.index, last.mem_used_mib, last.util_pct, last.temp_c, last.power_w) == (15, 15000, 15, 45, 115.5)


def test_json_na_and_missing_fields_are_none() -> None:
    doc = {
        "GPU": [
            {
                "Index": "3",
                "Product Name": "X10000",
                "FB Memory Usage": {"Total": "81920MiB", "Used": "N/A"},
                "Utilization": {"Gpu": "N/A"},
                "Temperature": {"GPU Current Temp": "N/A"},
                "Power Readings": {"Power Draw ": "[Not Supported]"},
            },
            {"Index": "4"},  # everything else missing
        ]
    }
    report = parse_gmi_json(json.dumps(doc))
    assert report.parsed and [c.index for c in report.cards] == [3, 4]
    c3, c4 = report.cards
    assert c3.mem_total_mib == 81920
    assert (c3.mem_used_mib, c3.util_pct, c3.temp_c, c3.power_w) == (None, None, None, None)
    assert (c4.name, c4.mem_total_mib, c4.uuid) == ("", None, None)
    assert report.driver_version is None


def test_json_single_gpu_object_and_processes() -> None:
    doc = {
        "GPU": {
            "Index": "0",
            "Processes": [{"PID": "42", "Process Name": "python3", "Used GPU Memory": "2GiB"}],
        }
    }
    report = parse_gmi_json(json.dumps(doc))
    assert report.parsed
    assert [(p.pid, p.name, p.mem_used_mib) for p in report.cards[0].processes] == [(42, "python3", 2048)]


def test_json_truncated_keeps_complete_cards() -> None:
    text = json.dumps(_json_doc(8), indent=4)
    cut = text.index('"Index": "5"')  # cut inside card 5
    report = parse_gmi_json(text[:cut])
    assert not report.parsed
    assert [c.index for c in report.cards] == [0, 1, 2, 3, 4]
    assert report.cards[4].temp_c == 34
    assert "truncated" in (report.error or "")
    assert report.driver_version == "3.3.8-server"


def test_json_with_ansi_and_leading_junk() -> None:
    text = "\x1b[33mWarning: something\x1b[0m\r\n" + json.dumps(_json_doc(2)).replace("\n", "\r\n")
    report = parse_gmi_json(text)
    assert report.parsed and len(report.cards) == 2


def test_json_parser_given_plain_table_falls_back() -> None:
    report = parse_gmi_json(read_sample(S5000))
    assert report.parsed and len(report.cards) == 8


# -------------------------------------------------------------------- error output


@pytest.mark.parametrize("parser", [parse_gmi_plain, parse_gmi_json])
def test_error_on_stdout_with_exit_zero(parser) -> None:
    report = parser("Error: failed to initialize MTML: driver not loaded\n")
    assert isinstance(report, GpuReport)
    assert not report.parsed and report.cards == []
    assert report.error == "Error: failed to initialize MTML: driver not loaded"


@pytest.mark.parametrize("parser", [parse_gmi_plain, parse_gmi_json])
@pytest.mark.parametrize("text", ["", "\n\n", "   "])
def test_empty_output(parser, text: str) -> None:
    report = parser(text)
    assert not report.parsed and report.error


@pytest.mark.parametrize("parser", [parse_gmi_plain, parse_gmi_json])
def test_garbage_output(parser) -> None:
    report = parser("lorem ipsum | dolor | sit\n{not json")
    assert not report.parsed and report.error


def test_plain_with_ansi_colour_and_crlf() -> None:
    text = read_sample(S5000)
    coloured = re.sub(r"(\d+C)", "\x1b[1;31m\\1\x1b[0m", text).replace("\n", "\r\n")
    coloured = "\x1b]0;node125\x07" + coloured
    report = parse_gmi_plain(coloured)
    assert report.parsed and len(report.cards) == 8
    assert report.cards[5].temp_c == 50


def _plain_rows(i: int) -> str:
    """One card of the gmi 2.4.1 layout, as in the S5000 sample."""
    return (
        "+-------------------------------------------------------------------+\n"
        f"{i:<5}MTT S5000            |00000000:{i + 16:02x}:00.0    |{i}%    {i * 100}MiB(81920MiB)\n"
        f"     Physical      P0     |16x(16x)            |{40 + i}C   YES\n"
        "                                               |      On-die, EDC\n"
    )


def test_plain_sixteen_cards() -> None:
    text = read_sample(S5000)
    head = text[: text.index("+---")]
    synthetic = head + "".join(_plain_rows(i) for i in range(16)) + "-" * 69 + "\n"
    report = parse_gmi_plain(synthetic)
    assert report.parsed and report.driver_version == "5.1.0-server"
    assert [c.index for c in report.cards] == list(range(16))
    assert all(c.mem_total_mib == 81920 for c in report.cards)
    last = report.cards[15]
    assert (last.util_pct, last.mem_used_mib, last.temp_c) == (15, 1500, 55)


def test_plain_na_values() -> None:
    text = read_sample(S5000).replace("|0%    0MiB(81920MiB)", "|N/A   N/A(81920MiB)", 1)
    text = text.replace("|48C   YES", "|N/A   YES", 1)
    report = parse_gmi_plain(text)
    card = report.cards[0]
    assert (card.util_pct, card.mem_used_mib, card.mem_total_mib, card.temp_c) == (None, None, 81920, None)
    assert report.cards[1].temp_c == 48


def test_attach_processes_ignores_unknown_cards_and_does_not_duplicate() -> None:
    report = parse_gmi_plain(read_sample(S80))
    procs = parse_gmi_processes(read_sample(S80))
    procs[9] = procs[0][:1]
    attach_processes(report, procs)
    attach_processes(report, procs)
    assert len(report.cards) == 1 and len(report.cards[0].processes) == 4


# ----------------------------------------------------------------- helpers (ansi.py)


def test_units_helpers() -> None:
    assert parse_mib("81920MiB") == 81920
    assert parse_mib("80GiB") == 80 * 1024
    assert parse_mib("512 MiB") == 512
    assert parse_mib("N/A") is None and parse_mib("[Not Supported]") is None
    assert parse_number("96.66W", ("W",)) == pytest.approx(96.66)
    assert parse_number("27C", ("C",)) == 27
    assert parse_number("27C", ("W",)) is None
    assert parse_number("nan") is None and parse_number("") is None


def test_strip_ansi() -> None:
    assert strip_ansi("\x1b[32mok\x1b[0m\r\n") == "ok\n"
    assert strip_ansi("a\rb") == "a\nb"
    assert strip_ansi("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\") == "link"
    assert strip_ansi("cut\x1b[3") == "cut"
    assert strip_ansi(b"\xe4\xb8") == "\ufffd"
    assert strip_ansi(None) == ""


# --------------------------------------------------------------------------- fuzzing


@FUZZ
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    for parser in (parse_gmi_plain, parse_gmi_json):
        report = parser(text)
        assert isinstance(report, GpuReport)
        assert report.parsed or report.error
    assert isinstance(parse_gmi_processes(text), dict)


@FUZZ
@given(st.data())
def test_plain_prefix_never_invents_values(data: st.DataObject) -> None:
    raw = (samples_dir() / S5000).read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    report = parse_gmi_plain(raw[:cut].decode("utf-8", errors="ignore"))
    assert len(report.cards) <= 8
    for card in report.cards:
        assert 0 <= card.index < 8
        assert card.mem_total_mib in (None, 81920)
        assert card.temp_c in (None, 48, 49, 50)
        assert card.util_pct in (None, 0)


@FUZZ
@given(st.data())
def test_json_prefix_never_invents_values(data: st.DataObject) -> None:
    raw = (samples_dir() / JSON_EXCERPT).read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    report = parse_gmi_json(raw[:cut].decode("utf-8", errors="ignore"))
    assert len(report.cards) <= 2
    if cut < len(raw.rstrip()):
        assert not report.parsed
    for card in report.cards:
        assert card.mem_total_mib == 81920
        assert card.power_w in (pytest.approx(96.66), pytest.approx(97.09))


@FUZZ
@given(st.data())
def test_s80_prefix_processes_exact(data: st.DataObject) -> None:
    raw = (samples_dir() / S80).read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    procs = parse_gmi_processes(raw[:cut].decode("utf-8", errors="ignore"))
    good = {(4307, 149), (5034, 381), (5519, 240), (6173, 224)}
    assert all((p.pid, p.mem_used_mib) in good for p in procs.get(0, []))
