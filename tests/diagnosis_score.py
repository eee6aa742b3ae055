"""Scoring the diagnosis catalog against a directory of real failure excerpts (issue 40).

Each directory holds `<stem>.log` files (line 1: `# source: URL`, then the excerpt as
printed) and `EXPECTED.yaml`, which maps a stem to what an expert names, written from the
thread before scoring:

- a catalog id (the first corpus, tests/data/failures/, older entries): the verdict's id;
- `{class: C, line: N}`: the class of the cause and its first line (1-based in the file);
  right is a verdict of class C, or `unrecognised-error` at line N (the catalog has no entry
  for C, but points at the cause);
- `null`: a benign excerpt, where any verdict or finding is an alarm.

A verdict is read on the whole file (its source line is a line too), so a reported line is
the file's line number. `tests/test_diagnosis_heldout.py` and `tests/test_diagnosis_corpus.py`
use this; `python -m tests.diagnosis_score` prints both sets' scores (BENCHMARKS.md).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tui.core.diagnosis import UNRECOGNISED_ID, Diagnoser

REPO = Path(__file__).resolve().parent.parent
TUNE = REPO / "tests" / "data" / "failures"
HELDOUT = REPO / "tests" / "data" / "failures_heldout"


@dataclass
class Case:
    stem: str
    expected: Any
    got_id: str | None
    got_class: str | None
    got_line: int | None
    alarms: int
    outcome: str
    """right-class, right-unrecognised, right-benign, wrong-class, wrong-line (unrecognised
    elsewhere), alarm (a finding on a benign excerpt), unnamed."""

    @property
    def right(self) -> bool:
        return self.outcome.startswith("right")

    @property
    def line_ok(self) -> bool | None:
        """Whether the reported line is the cause's line (None: no line expected)."""
        if isinstance(self.expected, dict):
            return self.got_line == self.expected["line"]
        return None


@dataclass
class Score:
    cases: list[Case] = field(default_factory=list)

    def count(self, *outcomes: str) -> int:
        return sum(1 for c in self.cases if c.outcome in outcomes)

    @property
    def right(self) -> int:
        return sum(1 for c in self.cases if c.right)

    @property
    def wrong(self) -> int:
        return self.count("wrong-class", "wrong-line", "alarm")

    @property
    def unnamed(self) -> int:
        return self.count("unnamed")

    @property
    def lines(self) -> tuple[int, int]:
        """(cases whose reported line is the cause's line, cases with an expected line)."""
        with_line = [c for c in self.cases if c.line_ok is not None]
        return sum(1 for c in with_line if c.line_ok), len(with_line)

    def summary(self) -> str:
        n = len(self.cases)
        ok, of = self.lines
        return (f"{self.right}/{n} right ({self.count('right-class')} by class, "
                f"{self.count('right-unrecognised')} unrecognised-error at the cause's line, "
                f"{self.count('right-benign')} benign left alone), {self.wrong} wrong "
                f"({self.count('wrong-class')} another class, {self.count('wrong-line')} "
                f"unrecognised-error elsewhere, {self.count('alarm')} alarms on benign), "
                f"{self.unnamed} unnamed; the cause's line {ok}/{of}")

    def misses(self) -> list[str]:
        return [f"{c.stem}: expected {c.expected}, got {c.got_id} (class {c.got_class}) at line "
                f"{c.got_line} [{c.outcome}]" for c in self.cases if not c.right]


def expected_of(directory: Path) -> dict[str, Any]:
    return yaml.safe_load((directory / "EXPECTED.yaml").read_text(encoding="utf-8"))


def judge(stem: str, expected: Any, diag: Diagnoser, directory: Path) -> Case:
    lines = (directory / f"{stem}.log").read_text(encoding="utf-8").splitlines()
    v = diag.verdict(lines)
    f = v.finding
    got_id = f.signature.id if f else None
    got_class = f.signature.klass if f else None
    got_line = f.line_no + 1 if f else None
    if expected is None:
        outcome = "right-benign" if f is None and not v.findings else "alarm"
    elif isinstance(expected, str):
        outcome = "right-class" if got_id == expected else ("unnamed" if f is None else "wrong-class")
    elif f is None:
        outcome = "unnamed"
    elif got_id == UNRECOGNISED_ID:
        outcome = "right-unrecognised" if got_line == expected["line"] else "wrong-line"
    else:
        outcome = "right-class" if got_class == expected["class"] else "wrong-class"
    return Case(stem, expected, got_id, got_class, got_line, len(v.findings), outcome)


def score(directory: Path, only: set[str] | None = None) -> Score:
    diag = Diagnoser(user_catalog=False)
    s = Score()
    for stem, exp in sorted(expected_of(directory).items()):
        if only is None or stem in only:
            s.cases.append(judge(stem, exp, diag, directory))
    return s


def main() -> int:
    tune = score(TUNE)
    new = {k for k, v in expected_of(TUNE).items() if isinstance(v, dict)}
    print("tune set (tests/data/failures): " + tune.summary())
    print("  of which issue 40's tune half (class and line): " + score(TUNE, new).summary())
    held = score(HELDOUT)
    print("held-out (tests/data/failures_heldout): " + held.summary())
    for m in held.misses():
        print("  " + m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
