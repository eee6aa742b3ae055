"""Issue 40's additions cannot freeze the console: the catalog's new wordings and the
search for the first real error (`FirstError`) run in linear time on any line.

Growth tests as in tests/test_parser_bounds.py: each pathological line is timed at sizes
4x apart and the times compared (a ratio, never a time against a limit); the result on
one size is checked too, so the line is read right, not just fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.test_parser_bounds import SIZES, assert_linear_retried
from tui.core.diagnosis import Diagnoser, literal_alternation

_D: list[Diagnoser] = []


def _diag() -> Diagnoser:
    if not _D:
        _D.append(Diagnoser(user_catalog=False))
    return _D[0]


def _verdict(lines: list[str]) -> Any:
    """The whole verdict (catalog, ranking, the first real error) on these lines."""
    return _diag().verdict(lines).to_json()


def _one(line: str) -> Any:
    return _verdict([line])


def _tb(line: str) -> Any:
    """The line as the one that ends a traceback (read at the traceback's column)."""
    return _verdict(["Traceback (most recent call last):", line])


def _frame(line: str) -> Any:
    """The line as a frame of a traceback that ends in an error."""
    return _verdict(["Traceback (most recent call last):", line, "    x()", "ValueError: bad"])


CASES: list[tuple[str, Callable[[str], Any], Callable[[int], str], Callable[[Any], bool]]] = [
    ("an exception name, then spaces without end", _one, lambda n: "AError" + " " * n + "x",
     lambda v: v["id"] is None),
    ("exception-like names without a colon, repeated", _one, lambda n: " AError  x" * (n // 10),
     lambda v: v["id"] is None),
    ("a dotted run before an exception name", _one, lambda n: "a." * (n // 2) + "Error: x",
     lambda v: v["id"] is None),
    ("the end of a traceback: a name, then spaces", _tb, lambda n: "x" + " " * n + "y",
     lambda v: v["id"] is None),
    ("a frame line of quotes", _frame, lambda n: 'File "reward' * (n // 12),
     lambda v: v["id"] == "unrecognised-error"),
    ("version pins glued together", _one, lambda n: "a-" * (n // 2) + " is required for a normal functioning",
     lambda v: v["id"] is None),
    ("a metric key run before ':nan'", _one, lambda n: "a/" * (n // 2) + "x:nan",
     lambda v: v["id"] is None),
    ("a loss that is nan after a long key", _one, lambda n: "q " * (n // 2) + "actor/pg_loss:nan",
     lambda v: v["id"] == "numeric-blowup"),
    ("an unclosed Hydra input quote", _one, lambda n: "mismatched input '" + "a" * n,
     lambda v: v["id"] is None),
    ("dotted callees before an unexpected keyword", _one,
     lambda n: "a.b " * (n // 4) + "got an unexpected keyword argument 'k'", lambda v: v["id"] is None),
    ("exit codes without a number", _one, lambda n: "exit code: " * (n // 11), lambda v: v["id"] is None),
    ("keyword prefixes without their ends (the prefilter's trie)", _one,
     lambda n: "out of memor exceeds the total number of available gpu" * (n // 55), lambda v: v["id"] is None),
]


@pytest.mark.parametrize("name,fn,make,check", CASES, ids=[c[0] for c in CASES])
def test_diagnosis_grows_linearly(name: str, fn: Callable[[str], Any], make: Callable[[int], str],
                                  check: Callable[[Any], bool]) -> None:
    assert_linear_retried(fn, make, SIZES)
    assert check(fn(make(SIZES[-2]))), fn(make(SIZES[-2]))


def test_prefilter_trie_finds_what_the_keywords_find() -> None:
    """The prefilter's one regex (`literal_alternation`, the keywords' trie) passes a line
    exactly when some keyword is in it: on every line of both corpora with the catalog's
    keywords, and on random words and texts over a small alphabet (shared prefixes, a
    word inside another, regex metacharacters)."""
    import random
    import re
    from pathlib import Path

    d = _diag()
    assert d._gate is not None
    data = Path(__file__).parent / "data"
    for log in sorted(data.glob("failures*/*.log")):
        for line in log.read_text(encoding="utf-8").splitlines():
            low = line.lower()
            assert (d._gate.search(low) is not None) == any(k in low for k in d._keywords), line
    rnd = random.Random(40)
    for _ in range(1500):
        words = ["".join(rnd.choice("ab(.*") for _ in range(rnd.randint(1, 4))) for _ in range(rnd.randint(1, 6))]
        rx = re.compile(literal_alternation(words))
        for _ in range(15):
            text = "".join(rnd.choice("ab(.*x") for _ in range(rnd.randint(0, 12)))
            assert (rx.search(text) is not None) == any(w in text for w in words), (words, text)
