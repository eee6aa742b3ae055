"""The sample's fast split (issue 37, the busy row): `_sample_parts` (string search for
the usual sample) and `_split_probe` (marker lines found by `str.find`, the text between
them kept as slices) must give what the line-by-line reading gives, on the card tools'
real output and on anything a node might send instead. The line-by-line readers are the
reference: `_sample_parts_by_line` is the product's own (the way odd samples still go),
and `_reference_split_probe` below is the loop `_split_probe` replaced, kept as its spec."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.samples import read_sample
from tui.core.parsers.detect import _split_probe, parse_probe_output
from tui.core.probes import DOCKER_BEGIN, DOCKER_RC, SAMPLE_BEGIN, _sample_parts, _sample_parts_by_line, parse_sample
from tui.core.profile import load_profile
from tui.sim import gmi

PROFILE = load_profile("profiles/qwen3-8b-grpo-32gpu.yaml")
S5000 = "mthreads-gmi/01_gmi_plain_S5000x8_gmi2.4.1_drv5.1.0-server.txt"
JSON_EXCERPT = "mthreads-gmi/09_gmi_query_json_S5000_EXCERPT_2of8.json"
INSPECT = "docker/01_docker_inspect_State_samples_REAL.json.txt"

_REF_MARKER = re.compile(r"^@@(tool|cmd|rc|end)(?:=(.*))?$")


def _reference_split_probe(clean: str) -> tuple[str | None, list[tuple[str, str, int | None]], list[str], bool]:
    """The line-by-line split `_split_probe` replaced: (tool, [(cmd, text, rc)], loose, ended)."""
    tool: str | None = None
    sections: list[list] = []
    loose: list[str] = []
    current: list | None = None
    ended = False
    for line in clean.split("\n"):
        marker = _REF_MARKER.match(line.strip()) if "@@" in line else None
        if marker:
            kind, value = marker.group(1), (marker.group(2) or "").strip()
            if kind == "tool":
                tool = value
            elif kind == "cmd":
                current = [value, [], None]
                sections.append(current)
            elif kind == "rc" and current is not None:
                current[2] = int(value) if re.fullmatch(r"-?[0-9]{1,9}", value) else None
                current = None
            elif kind == "end":
                ended = True
            continue
        if tool is None:
            continue
        if current is not None:
            current[1].append(line)
        elif line.strip():
            loose.append(line)
    return tool, [(c, "\n".join(ls) + ("\n" if ls else ""), rc) for c, ls, rc in sections], loose, ended


def _split(clean: str) -> tuple[str | None, list[tuple[str, str, int | None]], list[str], bool]:
    tool, sections, loose, ended = _split_probe(clean)
    return tool, [(s.cmd, s.text, s.rc) for s in sections], loose, ended


def _busy_sample(util: float) -> str:
    loads = {}
    for i in range(8):
        load = gmi.CardLoad()
        load.util, load.mem_mib, load.processes = util + i, 40000.0 + i, [(1000 + i, "python3", 40000.0)]
        loads[i] = load
    cs = gmi.cards(1, 8, loads)
    return "\n".join([SAMPLE_BEGIN, "@@tool=mthreads-gmi", "@@cmd=mthreads-gmi -q --json", gmi.render_json(cs).rstrip("\n"),
                      "@@rc=0", "@@cmd=mthreads-gmi", gmi.render_plain(cs).rstrip("\n"), "@@rc=0", "@@end",
                      DOCKER_BEGIN, read_sample(INSPECT).rstrip("\n"), DOCKER_RC + "0"]) + "\n"


BASES = [
    _busy_sample(60.0),
    "\n".join([SAMPLE_BEGIN, "@@tool=mthreads-gmi", "@@cmd=mthreads-gmi -q --json", read_sample(JSON_EXCERPT).rstrip("\n"),
               "@@rc=0", "@@cmd=mthreads-gmi", read_sample(S5000).rstrip("\n"), "@@rc=0", "@@end",
               DOCKER_BEGIN, "Error: No such object: train-rl", DOCKER_RC + "1"]) + "\n",
    "\n".join([SAMPLE_BEGIN, "@@tool=mthreads-gmi", "@@cmd=mthreads-gmi -q --json", "Failed to initialize MTML",
               "@@rc=0", "@@end", DOCKER_BEGIN, DOCKER_RC + "127"]) + "\n",
]

# What a node might send instead: markers where they do not belong, markers inside lines,
# spaces and CRs around them, cut lines, blank lines, no final newline.
_JUNK = [SAMPLE_BEGIN, DOCKER_BEGIN, DOCKER_RC + "0", DOCKER_RC + "x", "@@end", "@@rc=3", "@@rc=", "@@cmd=mthreads-gmi",
         "@@tool=nvidia-smi", "  @@rc=0  ", "\t@@end\r", "x @@rc=0", "@@rcx", "@@", "", "   ", "{", "\x1b[31m@@end\x1b[0m",
         "@@docker", "@@sample-beginx", "@@tool=mthreads-gmi @@cmd=x"]


@st.composite
def samples(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(BASES)).split("\n")
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["insert", "delete", "cut", "replace"]))
        at = draw(st.integers(0, len(lines)))
        if op == "insert":
            lines.insert(at, draw(st.sampled_from(_JUNK) | st.text(alphabet="@ \t\r-=x0{}", max_size=12)))
        elif lines and at < len(lines) and op == "delete":
            del lines[at]
        elif op == "cut":
            lines = lines[:at]
        elif lines and at < len(lines):
            lines[at] = draw(st.sampled_from(_JUNK))
    text = "\n".join(lines)
    return text if draw(st.booleans()) else text.rstrip("\n")


def _lines(text: str) -> list[str]:
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


def test_the_usual_samples_take_the_fast_way_and_read_as_line_by_line() -> None:
    for text in BASES:
        fast = _sample_parts(text)
        assert fast is not None, text[:200]
        assert fast == _sample_parts_by_line(_lines(text))
        assert parse_sample(text, PROFILE) == parse_sample(_lines(text), PROFILE)
    gpu, container = parse_sample(BASES[0], PROFILE)
    assert gpu.parsed and len(gpu.cards) == 8 and all(c.processes for c in gpu.cards)
    assert [c.util_pct for c in gpu.cards] == [60.0 + i for i in range(8)]
    assert container.status == "running"


@settings(max_examples=400, deadline=None)
@given(samples())
def test_any_sample_reads_as_line_by_line(text: str) -> None:
    fast = _sample_parts(text)
    if fast is not None:
        assert fast == _sample_parts_by_line(_lines(text))
    assert parse_sample(text, PROFILE) == parse_sample(_lines(text), PROFILE)


@settings(max_examples=400, deadline=None)
@given(samples())
def test_the_probe_split_is_the_line_by_line_split(text: str) -> None:
    clean = text.split(DOCKER_BEGIN)[0]
    assert _split(clean) == _reference_split_probe(clean)
    assert _split(text) == _reference_split_probe(text)


def test_a_marker_counts_on_its_own_line_only() -> None:
    text = "@@tool=mthreads-gmi\n@@cmd=mthreads-gmi\nrow @@rc=0\n  @@rc=2  \nloose\n@@end"
    assert _split(text) == _reference_split_probe(text) == (
        "mthreads-gmi", [("mthreads-gmi", "row @@rc=0\n", 2)], ["loose"], True)
    assert not parse_probe_output(text).parsed  # no table in "row": unparsed, not a crash
