"""A user's own catalog cannot hang the console or be steered by a log line (issue 39 S6).

The user catalog (README: Alerts, adding a failure signature) is searched in every driver
log line on the event loop, like the packaged one, but nobody reviewed its regexes. So:
a pattern that can backtrack exponentially (a repeat inside a repeated group, a repeated
alternation whose branches start alike) is refused when the catalog loads, in one line
that names the file and the entry; what passes runs on a line's first USER_LINE_CHARS
characters only (a pattern can still be quadratic); and a title/explanation/fix is filled
by plain replacement of `{name}`, never `str.format`, so a captured value cannot become a
field width.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.test_parser_bounds import SIZES, assert_linear_retried
from tui.core.diagnosis import (
    PACKAGED_CATALOG,
    USER_LINE_CHARS,
    CatalogError,
    Diagnoser,
    load_catalog,
    pattern_risk,
    render_template,
)


def catalog(tmp: Path, pattern: str, *, title: str = "seen {what}", fix: str = "f",
            keywords: str = "") -> Path:
    p = tmp / "diagnosis.yaml"
    kw = f"    keywords: [{json.dumps(keywords)}]\n" if keywords else ""
    p.write_text("version: 1\nsignatures:\n"
                 "  - id: site-ok\n    level: error\n    pattern: 'Site failure (?P<what>\\w+)'\n"
                 "    title: 'site {what}'\n    explanation: e\n    fix: f\n"
                 f"  - id: site-bad\n    level: warning\n{kw}    pattern: {json.dumps(pattern)}\n"
                 f"    title: {json.dumps(title)}\n    explanation: e\n    fix: {json.dumps(fix)}\n",
                 encoding="utf-8")
    return p


# --------------------------------------------------------------------------- patterns

HANGING = [
    r"(?P<what>(a+)+)!",          # the textbook nested quantifier
    r"(?P<what>(.*)*)x",          # a repeat of something that can be empty, holding a repeat
    r"(?P<what>(x|x)*)y",         # a repeated alternation whose branches match alike
    r"(?P<what>(\w+\s?)+)!",      # words and optional spaces, repeated
    r"(?P<what>(a|a?)+)b",        # an alternation with an empty branch, repeated
    r"(?P<what>(?:a?a?)+)b",      # two optional parts that can match the same text
    r"(?P<what>(a|ab)+)c",        # branches with a common start
]


@pytest.mark.parametrize("pattern", HANGING)
def test_a_pattern_that_can_backtrack_exponentially_is_refused_in_one_line(tmp_path: Path,
                                                                          pattern: str) -> None:
    path = catalog(tmp_path, pattern)
    with pytest.raises(CatalogError) as e:
        load_catalog(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert str(path) in msg and "signatures[2]" in msg and "'site-bad'" in msg and "'pattern'" in msg
    assert "exponential" in msg


def test_the_refused_catalog_is_reported_once_and_the_packaged_one_still_works(tmp_path: Path) -> None:
    """The console path: the user catalog is ignored as a whole, with one warning naming it."""
    path = catalog(tmp_path, r"(?P<what>(a+)+)!")
    d = Diagnoser(user_catalog=path)
    problems = d.take_problems()
    assert len(problems) == 1 and str(path) in problems[0].message and "'site-bad'" in problems[0].message
    assert [s.id for s in d.signatures] == [s.id for s in load_catalog(PACKAGED_CATALOG)]
    assert d.find("a" * 30, 1) is None  # and the hanging pattern is not searched


@pytest.mark.parametrize("pattern", [
    r"Stale file handle(?:: (?P<what>\S+))?",      # the README's example
    r"(?P<what>(?:\d{1,3}\.){3}\d{1,3}) unreachable",  # small bounded repeats
    r"(?P<what>(?:foo|bar)+) failed",              # branches that start differently
    r"(?P<what>(?:-|\s)+)",                        # likewise
    r"(?P<what>(\w|\d)+)!",                        # one character class (re merges it)
    r"(?P<what>(?:\s?\w)+)!",                      # an optional part before a required one
    r"(?P<what>\S+) is (?:not )?ready",
])
def test_ordinary_patterns_load(tmp_path: Path, pattern: str) -> None:
    assert [s.id for s in load_catalog(catalog(tmp_path, pattern))] == ["site-ok", "site-bad"]


def test_every_packaged_pattern_passes_the_same_check() -> None:
    import yaml

    doc = yaml.safe_load(PACKAGED_CATALOG.read_text(encoding="utf-8"))
    flagged = {}
    for e in doc["signatures"]:
        flags = re.IGNORECASE if e.get("ignore_case") else 0
        flagged[e["id"]] = pattern_risk(e["pattern"], flags)
        for n, v in enumerate(e.get("variants", []), 1):  # every wording of the entry
            flagged[f"{e['id']}/variants[{n}]"] = pattern_risk(
                v["pattern"], re.IGNORECASE if v.get("ignore_case", e.get("ignore_case")) else 0)
    assert len(flagged) > len(doc["signatures"])
    assert {k: v for k, v in flagged.items() if v} == {}


# --------------------------------------------------------------------------- line length

# `a\S+x` passes the check but is quadratic where it fails: every `a` after `:` is a start
# (whole-word edges allow it), and each scans `\S+` to the line's end and back. On a 64 KiB
# line that took seconds; on the first USER_LINE_CHARS characters it stays bounded.
_QUADRATIC = r"a(?P<what>\S+)x"


def test_a_user_pattern_runs_on_a_bounded_part_of_the_line(tmp_path: Path) -> None:
    d = Diagnoser(signatures=[], user_catalog=catalog(tmp_path, _QUADRATIC))
    assert d.take_problems() == []
    assert_linear_retried(lambda line: d.find(line, 1), lambda n: ":a" * (n // 2))
    assert (USER_LINE_CHARS < SIZES[-1]) and d.signatures[-1].max_chars == USER_LINE_CHARS


def test_a_user_pattern_still_names_a_line_within_the_bound(tmp_path: Path) -> None:
    d = Diagnoser(signatures=[], user_catalog=catalog(tmp_path, _QUADRATIC))
    f = d.find("(worker pid=1) ab:cx and more " + "y" * 100_000, 1)
    assert f is not None and f.signature.id == "site-bad" and f.groups["what"] == "b:c"
    assert d.find("y" * USER_LINE_CHARS + " ab:cx", 1) is None  # past it: not searched


def test_the_packaged_catalog_still_reads_the_whole_line() -> None:
    d = Diagnoser(user_catalog=False)
    assert all(s.max_chars is None for s in d.signatures)
    f = d.find("x " * 20_000 + "RuntimeError: CUDA error: an illegal memory access was encountered", 1)
    assert f is not None and f.signature.id == "device-error"


# --------------------------------------------------------------------------- templates


@pytest.mark.parametrize("template", [
    "{what:>{width}}",       # the field width taken from the log line
    "{what:{width}}",
    "{what!r}",              # a conversion
    "{what:>99999999}",      # a width written in the catalog: no format specs at all
    "a { brace",
])
def test_a_template_with_a_format_spec_is_refused(tmp_path: Path, template: str) -> None:
    path = catalog(tmp_path, r"Site (?P<what>\w+) width (?P<width>\S+)", title=template)
    with pytest.raises(CatalogError) as e:
        load_catalog(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "'site-bad'" in msg and "'title'" in msg


def test_a_log_line_cannot_choose_a_field_width(tmp_path: Path) -> None:
    """The whole path on the line that used to pad the title to 100 MB: whether the catalog
    is refused (here) or rendered, the alert stays the size of its text."""
    path = catalog(tmp_path, r"Site (?P<what>\w+) width (?P<width>\S+)", title="{what:>{width}}")
    d = Diagnoser(signatures=[], user_catalog=path)
    d.take_problems()
    a = d.match("Site down width 99999999", 1)
    assert a is None or len(a.message) < 1000


def test_captured_values_are_inserted_as_text(tmp_path: Path) -> None:
    path = catalog(tmp_path, r"Site failure (?P<what>\S+)", keywords="site failure",
                   title="{{literal}} {what} {unknown", fix="check {what} ({what})")
    with pytest.raises(CatalogError):
        load_catalog(path)  # the stray `{unknown` is broken
    path = catalog(tmp_path, r"Site failure (?P<what>\S+)", keywords="site failure",
                   title="{{literal}} {what}", fix="check {what} ({what})")
    d = Diagnoser(signatures=[], user_catalog=path)
    assert d.take_problems() == []
    f = d.find("Site failure {what}{0}{what:>9999}%s", 1)
    assert f is not None and f.signature.id == "site-bad"
    assert f.title == "{literal} {what}{0}{what:>9999}%s"
    assert f.fix == "check {what}{0}{what:>9999}%s ({what}{0}{what:>9999}%s)"


def test_render_template_is_one_pass_of_plain_replacement() -> None:
    assert render_template("{a} {b} {{c}} {d} {", {"a": "{b}", "b": ":>{9}"}) == "{b} :>{9} {c} {d} {"
