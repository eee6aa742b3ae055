"""The run's metrics store: the log's steps completed by TensorBoard's scalars (which
carry every tag even when the console line was cut short), merged incrementally so a
refresh's cost does not grow with the run, and the index the metrics model reads."""

from __future__ import annotations

import bisect
import itertools
from typing import Any, Callable

from tui.core.job.metrics import SeriesIndex
from tui.core.job.verl_log import LogMetricsParser


class MetricsStore:
    """`reader()` is the run's ScalarReader, or None before scalars are read."""

    def __init__(self, parser: LogMetricsParser, reader: Callable[[], Any]) -> None:
        self.parser = parser
        self.reader = reader
        self.merged: dict[int, dict[str, float]] = {}
        self.index = SeriesIndex(self.merged)
        self._m_np = self._m_ntb = self._m_tbcount = self._m_replaced = 0
        self._m_tbmax = 0
        self._tb_sorted: list[int] = []  # TensorBoard's steps, ascending
        self._tb_of: Any = None  # the reader's dict they are of

    @property
    def _tb(self) -> Any:
        return self.reader()

    def rows(self) -> dict[int, dict[str, float]]:
        """Steps from the log, completed by TensorBoard's scalars (which carry every tag
        even when the console line was cut short). Kept up to date incrementally: a
        refresh merges only the steps that are new or may have changed (the log's last
        step, TensorBoard's steps from its last one on), so its cost does not grow with
        the run; anything else (an older step rewritten: a resumed run) rebuilds it."""
        p = self.parser.steps
        tb = self._tb.by_step if self._tb is not None else {}
        replaced = len(self._tb.replaced) if self._tb is not None else 0
        if replaced != self._m_replaced or len(p) < self._m_np:
            self.rebuild()
            self._m_replaced = replaced
            return self.merged
        # the log's new steps: the end of its dict, walked from there (not the whole run)
        dirty = set(itertools.islice(reversed(p.keys()), max(1, len(p) - self._m_np)))
        if tb is not self._tb_of:  # another reader (or the first): its steps afresh
            self._tb_of, self._tb_sorted = tb, sorted(tb)
        elif len(tb) > len(self._tb_sorted):  # TensorBoard's new steps, kept sorted
            for st in itertools.islice(reversed(tb.keys()), len(tb) - len(self._tb_sorted)):
                bisect.insort(self._tb_sorted, st)
        if len(tb) != self._m_ntb or self._tb is not None and len(self._tb) != self._m_tbcount:
            ts = self._tb_sorted
            dirty.update(ts[bisect.bisect_left(ts, self._m_tbmax):])
        self._m_np = len(p)
        self._m_ntb = len(tb)
        self._m_tbcount = len(self._tb) if self._tb is not None else 0
        if tb:
            self._m_tbmax = max(self._m_tbmax, next(reversed(tb)))
        merged = self.merged
        last = next(reversed(merged)) if merged else None
        settled_max = self.index.settled_step
        for st in sorted(dirty):
            if (last is not None and st < last and st not in merged) or \
                    (settled_max is not None and st <= settled_max):
                self.rebuild()  # out of order, or an old step changed
                return self.merged
            merged[st] = {**p.get(st, {}), **tb.get(st, {})}
            last = st if last is None or st > last else last
        self._settle()
        return merged

    def _settle(self) -> None:
        """Steps that can no longer change: a few behind the log's last step, and
        behind the last step TensorBoard has been read up to (it lags the log by up to
        a refresh: its new steps must not land in the cached part)."""
        if not self.merged:
            return
        final = next(reversed(self.merged)) - self.index.TAIL
        if self._tb is not None and self._tb.by_step:
            final = min(final, self._m_tbmax - 1)
        prev = self.index.settled_step
        self.index.settled_step = final if prev is None else max(prev, final)

    def rebuild(self) -> None:
        p = self.parser.steps
        tb = self._tb.by_step if self._tb is not None else {}
        self.merged.clear()
        for st in sorted(set(p) | set(tb)):
            self.merged[st] = {**p.get(st, {}), **tb.get(st, {})}
        self.index.reset()
        self._tb_of, self._tb_sorted = tb, sorted(tb)
        self._m_np, self._m_ntb = len(p), len(tb)
        self._m_tbcount = len(self._tb) if self._tb is not None else 0
        self._m_tbmax = next(reversed(tb)) if tb else 0
        self._settle()
