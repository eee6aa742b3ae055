"""Scalar series helpers for the graph screen and CSV export (no Textual here).

`ema` is TensorBoard's smoothing slider: an exponential moving average, debiased so the
first points are not pulled towards zero (TensorBoard divides by 1 - w^n for the same
reason), and skipping non-finite values. `to_csv` writes every scalar of a run, one row
per step, so a spreadsheet or pandas reads it directly.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Iterable, Mapping, Sequence

from tui.core.safetext import csv_cell

Point = tuple[int, float]


def ema(points: Sequence[Point], weight: float) -> list[Point]:
    """Debiased exponential moving average with `weight` in [0, 1) (0: the raw series)."""
    w = min(max(weight, 0.0), 0.999)
    if w == 0.0:
        return list(points)
    out: list[Point] = []
    last = 0.0
    n = 0
    for step, v in points:
        if not math.isfinite(v):
            out.append((step, v))
            continue
        n += 1
        last = last * w + (1 - w) * v
        out.append((step, last / (1 - w ** n)))
    return out


def in_range(points: Iterable[Point], lo: int | None, hi: int | None) -> list[Point]:
    """The points with lo <= step <= hi (None: unbounded on that side)."""
    return [(s, v) for s, v in points if (lo is None or s >= lo) and (hi is None or s <= hi)]


def to_csv(series: Mapping[str, Sequence[Point]]) -> str:
    """All scalars as CSV: a `step` column and one column per scalar (sorted by name),
    one row per step any scalar has; empty where a scalar has no value at that step. The
    names are TensorBoard tags and log keys: written as text a spreadsheet cannot run
    (`safetext.csv_cell`)."""
    names = sorted(series)
    rows: dict[int, dict[str, float]] = {}
    for name in names:
        for step, v in series[name]:
            rows.setdefault(int(step), {})[name] = v
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["step", *(csv_cell(n) for n in names)])
    for step in sorted(rows):
        r = rows[step]
        w.writerow([step, *(repr(r[n]) if n in r else "" for n in names)])
    return buf.getvalue()
