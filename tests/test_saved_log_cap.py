"""A saved log is read with the same line cap as the live path (issue 39 S4).

`diagnose LOG` and `metrics LOG` read a file someone saved: it may hold a line of many
megabytes without a newline (a binary file, a runaway progress bar). Iterating the file
builds that whole line first; `linecap.capped_lines` keeps `LINE_CAP` characters of it and
drops the rest as it reads, so the peak memory does not grow with the line. The tests
compare the peak (tracemalloc, no clock) for a line of n and of 4n characters.
"""

from __future__ import annotations

import io
import json
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from tui.core.linecap import LINE_CAP, cap_line, capped_lines, cut_mark

BIG = 16 << 20  # characters of the long line at the first size; the second is 4x


def _peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _write_log(path: Path, long_chars: int, before: str, after: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(before)
        chunk = "x" * (1 << 20)
        for _ in range(long_chars // len(chunk)):
            f.write(chunk)
        f.write("\n" + after)


@pytest.mark.parametrize("newline", [None, ""])
def test_capped_lines_is_cap_line_of_each_line(newline: str | None) -> None:
    """The lines a file iteration gives, each as `cap_line` cuts it, line ends kept."""
    rnd = random.Random(39)
    for _ in range(500):
        cap = rnd.randint(1, 12)
        text = "".join(rnd.choice(["a", "bb", "\n", "\r\n", "\r", "é", "x" * rnd.randint(0, 40)])
                       for _ in range(rnd.randint(0, 30)))
        want = []
        for line in io.StringIO(text, newline=newline):
            body = line.rstrip("\r\n")
            want.append(cap_line(body, cap) + line[len(body):])
        got = list(capped_lines(io.StringIO(text, newline=newline), cap))
        if newline == "":  # (a "\r\n" may be split by a cut exactly at it: the same text then)
            assert "".join(got).replace("\r\n", "\n") == "".join(want).replace("\r\n", "\n"), (text, cap)
        else:
            assert got == want, (text, cap)


def test_metrics_reads_a_saved_log_with_the_cap(tmp_path: Path) -> None:
    """A step line after a line of 16 or 64 MiB is still read; the peak stays small and
    does not grow with the long line (iterating the file held the whole line)."""
    from tui.cli.metrics import load_metrics

    peaks = []
    for n in (BIG, 4 * BIG):
        log = tmp_path / f"saved-{n}.log"
        _write_log(log, n, "(TaskRunner pid=9) step:1 - actor/loss:0.5\n",
                   "(TaskRunner pid=9) step:2 - actor/loss:0.25\n")
        rows: list[dict[str, object]] = []
        peaks.append(_peak(lambda: rows.extend(load_metrics(log))))  # noqa: B023 (called at once)
        assert [r["step"] for r in rows] == [1, 2]
    assert peaks[1] < 2 * peaks[0] + (1 << 20), peaks
    assert peaks[1] < 8 * LINE_CAP * 4 + (4 << 20), peaks  # far below the 64 MiB line


def test_metrics_jsonl_with_a_long_record_is_one_line_error(tmp_path: Path) -> None:
    """A file-logger record longer than the cap is cut, so it is not JSON: one line naming
    the file and line (before: the whole record was read, whatever its size)."""
    from tui.cli.metrics import MetricsSourceError, load_metrics

    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps({"step": 1, "data": {"a": 1}}) + "\n"
                 + '{"step": 2, "data": {"a": "' + "y" * (LINE_CAP + 10) + '"}}\n')
    with pytest.raises(MetricsSourceError, match=r"m\.jsonl:2: not a file-logger record"):
        load_metrics(p)


def test_diagnose_reads_a_saved_log_with_the_cap(tmp_path: Path) -> None:
    """`diagnose LOG` on a log whose failing line is megabytes long: the verdict names it,
    the line as the live path would have cut it, and the peak does not grow with it."""
    from tui.cli.diagnose import _lines

    peaks = []
    for n in (BIG, 4 * BIG):
        log = tmp_path / f"dead-{n}.log"
        _write_log(log, n, "RuntimeError: CUDA error: an illegal memory access was encountered ",
                   "step:3 - a:1\n")
        seen: list[int] = []

        def read(log: Path = log, seen: list[int] = seen) -> None:
            with open(log, encoding="utf-8", errors="replace") as f:
                seen.extend(len(line) for line in _lines(f))

        peaks.append(_peak(read))
        long_len = len("RuntimeError: CUDA error: an illegal memory access was encountered ") + n
        assert seen[0] == LINE_CAP + len(cut_mark(long_len - LINE_CAP)), seen
    assert peaks[1] < 2 * peaks[0] + (1 << 20), peaks
    assert peaks[1] < 8 * LINE_CAP * 4 + (4 << 20), peaks


def test_diagnose_cli_on_a_saved_log_with_a_huge_line(tmp_path: Path) -> None:
    """The whole command: the cause is found in the cut line, printed bounded, exit 0."""
    from tui.cli.diagnose import run_diagnose

    log = tmp_path / "dead.log"
    _write_log(log, BIG, "RuntimeError: CUDA error: an illegal memory access was encountered ", "")
    out, err = io.StringIO(), io.StringIO()
    peak = _peak(lambda: run_diagnose(str(log), as_json=True, out=out, err=err))
    got = json.loads(out.getvalue())
    assert got["line"] == 1 and got["id"], got
    assert peak < BIG // 2, peak
