"""What the user sees about a training run: a few numbers, each judged against the
profile's expected range.

Inputs are deliberately plain - rows of ``{"step": N, "metrics": {key: value}}`` (from
the log parser or the TensorBoard reader), the total step count, the last checkpoint,
and the profile's expected ranges as a dict of ``(low, high)`` - so the same model serves
the TUI's metrics pane, ``status --json`` (`summary()` becomes ``job.metrics``) and tests.

VeRL's metric keys and units (verl/trainer/ppo/metric_utils.py, ray_trainer.py):

- ``timing_s/step``: wall seconds of one training step;
- ``perf/throughput``: tokens/s **per GPU** (total tokens / (step time x #GPUs)), so the
  per-node figure the reference run quotes (600-900) is this x GPUs per node;
- ``perf/mfu/actor`` (``mfu/actor`` in early-2025 runs): a fraction 0..1, shown as %;
- ``perf/max_memory_allocated_gb`` / ``perf/max_memory_reserved_gb``: GiB per card
  (torch's counters / 1024**3); reserved is what the card's own tool shows, so it is the
  one judged against the expected per-card memory;
- ``critic/rewards/mean``, ``critic/score/mean``, ``response_length/mean``;
- validation: ``val-core/<source>/<var>/<metric>`` (``val/...`` in older runs), printed
  only every ``test_freq`` steps - so "latest" means the latest step that has the key.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["RunMetrics", "Indicator", "Flag", "judge", "downsample", "json_safe"]

Flag = Literal["low", "high", "ok"]

K_STEP_TIME = "timing_s/step"
K_THROUGHPUT = "perf/throughput"
K_MFU = ("perf/mfu/actor", "mfu/actor")
K_REWARD = "critic/rewards/mean"
K_SCORE = "critic/score/mean"
K_RESP_LEN = "response_length/mean"
K_MEM_ALLOC = "perf/max_memory_allocated_gb"
K_MEM_RESERVED = "perf/max_memory_reserved_gb"
VALIDATION_PREFIXES = ("val-core/", "val/")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def judge(value: float | None, rng: Sequence[float] | None) -> Flag | None:
    """"low" / "high" / "ok" against an inclusive (low, high) range; None when either
    side is unknown (no value, NaN, no range) - unknown is not the same as fine."""
    if rng is None or value is None or not _finite(value):
        return None
    lo, hi = rng[0], rng[1]
    if lo is not None and value < lo:
        return "low"
    if hi is not None and value > hi:
        return "high"
    return "ok"


def json_safe(x: Any) -> Any:
    """Numbers stay numbers; NaN/inf (not JSON) become None; containers recurse."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def downsample(points: Sequence[tuple[int, float]], max_points: int = 500
               ) -> list[tuple[int, float]]:
    """At most `max_points` points for a plot a few hundred cells wide.

    All but the last point are cut into `max_points - 1` equal runs, each shown as the
    mean of its values at its last step (means keep the trend honest where picking
    every k-th point would alias the step-to-step noise); the last point is kept exactly,
    because the latest value is the one the user is watching.
    """
    n = len(points)
    if max_points <= 0:
        return []
    if n <= max_points:
        return list(points)
    if max_points == 1:
        return [points[-1]]
    body = n - 1
    buckets = max_points - 1
    out: list[tuple[int, float]] = []
    for b in range(buckets):
        lo = b * body // buckets
        hi = (b + 1) * body // buckets
        if hi <= lo:
            continue
        chunk = points[lo:hi]
        out.append((chunk[-1][0], sum(v for _, v in chunk) / len(chunk)))
    out.append(points[-1])
    return out


@dataclass
class Indicator:
    """One displayed number: its value, unit, the metric key it came from, the
    expected range and the verdict. `step` is the step the value was read at."""

    name: str
    label: str
    value: float | None
    unit: str = ""
    flag: Flag | None = None
    range: tuple[float, float] | None = None
    source: str | None = None
    step: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["range"] = list(self.range) if self.range is not None else None
        return json_safe(d)


def _rows_to_steps(rows: Iterable[Mapping[str, Any]] | Mapping[int, Mapping[str, float]]
                   ) -> dict[int, Mapping[str, float]]:
    """{step: metrics} in step order. Metrics dicts are referenced, not copied (this
    runs on every refresh and the model never mutates them); rows repeating a step are
    merged into a new dict, later values winning."""
    if isinstance(rows, Mapping):
        return {int(k): v for k, v in sorted(rows.items())}
    out: dict[int, Mapping[str, float]] = {}
    for row in rows:
        step = int(row["step"])
        metrics = row.get("metrics") or {}
        cur = out.get(step)
        out[step] = metrics if cur is None else {**cur, **metrics}
    if any(a > b for a, b in zip(out, list(out)[1:])):
        out = dict(sorted(out.items()))
    return out


def _range(v: Any) -> tuple[float, float] | None:
    if v is None:
        return None
    if isinstance(v, Mapping):
        lo, hi = v.get("min", v.get("low")), v.get("max", v.get("high"))
    else:
        lo, hi = v[0], v[1]
    return (float(lo) if lo is not None else None,  # type: ignore[return-value]
            float(hi) if hi is not None else None)


class SeriesView(Sequence[tuple[int, float]]):
    """A series as the index holds it: its settled points (a list the index extends)
    followed by the last few, re-read each time. Read it, never keep it past the refresh
    it was made for; a slice or an index costs what it returns, not the whole run."""

    __slots__ = ("_head", "_n", "_tail", "_off")

    def __init__(self, head: PointList, tail: list[tuple[int, float]], dropped: int = 0) -> None:
        self._head, self._n, self._tail = head, len(head), tail
        self._off = dropped  # points before `head` a summary index does not hold

    def __len__(self) -> int:
        return self._off + self._n + len(self._tail)

    def __bool__(self) -> bool:
        return self._off > 0 or self._n > 0 or bool(self._tail)

    def __getitem__(self, i: Any) -> Any:
        n, off = self._n, self._off
        if isinstance(i, slice):
            a, b, step = i.indices(len(self))
            if step != 1 or (a < off and b > a):
                if off:
                    raise IndexError("a summary index holds only the last points of a series")
                return list(self)[i]
            a, b = max(0, a - off), max(0, b - off)
            out = self._head[a:min(b, n)] if a < n else []
            if b > n:
                out += self._tail[max(0, a - n):b - n]
            return out
        if i < 0:
            i += len(self)
        i -= off
        if not 0 <= i < n + len(self._tail):
            raise IndexError(i)
        return self._head[i] if i < n else self._tail[i - n]

    def __iter__(self) -> Any:
        if self._off:
            raise IndexError("a summary index holds only the last points of a series")
        yield from self._head[:self._n] if len(self._head) != self._n else self._head
        yield from self._tail


class PointList:
    """A growing series of (step, value) points held as two C arrays (16 bytes a point;
    a list of tuples costs ~80: 23 MB at the end of a 2710-step run with 130 tags).
    Reads build the tuples they return, so it stands in for the list it replaced."""

    __slots__ = ("_st", "_v")

    def __init__(self, points: Iterable[tuple[int, float]] = ()) -> None:
        self._st: array[int] = array("q")
        self._v: array[float] = array("d")
        for st, v in points:
            self.append((st, v))

    def __len__(self) -> int:
        return len(self._st)

    def append(self, p: tuple[int, float]) -> None:
        self._st.append(p[0])
        self._v.append(p[1])

    def pop(self) -> tuple[int, float]:
        return self._st.pop(), self._v.pop()

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(zip(self._st[i], self._v[i]))
        return self._st[i], self._v[i]

    def __iter__(self) -> Iterator[tuple[int, float]]:
        return zip(self._st, self._v)


def _two_sum_append(hs: array[float], ls: array[float], v: float) -> None:
    """Append the running sum plus `v` as a double-double (`hs` + `ls`: the rounded sum
    and what rounding lost, Knuth's two-sum), so differences of prefixes stay exact to
    about 1e-16 of a run's own sum however long the run."""
    a = hs[-1]
    s = a + v
    bp = s - a
    hs.append(s)
    ls.append(ls[-1] + ((a - (s - bp)) + (v - bp)))


class SeriesIndex:
    """Per-key (step, value) lists over a growing run, extended by new steps only.

    A console refresh used to rebuild every series from every step (2710 steps x 130
    tags at the end of a reference run: ~50 ms a refresh, growing with the run), then
    to copy whole series and walk them for the sparklines and the summary (~2 us a step
    a refresh). Here `by_step` is the caller's own {step: metrics} dict, in step order
    and append-only; a series scans only the steps added since it was last asked for,
    and what a refresh reads of it (the last points, its sum, a key's latest value, the
    sparkline's downsampled curve from exact prefix sums) costs the same at step 20 as
    at step 20 000. The last `TAIL` steps are re-read every time (a wrapped log line or
    late TensorBoard events can still complete them); the caller calls `reset()` if an
    older step changes."""

    TAIL = 3

    def __init__(self, by_step: Mapping[int, Mapping[str, float]]) -> None:
        self.by_step = by_step
        self._seed: Mapping[str, Any] | None = None
        self.reset()

    def seed(self, base: Mapping[str, Any] | None) -> None:
        """Start from a summary of the steps before `by_step`'s first (a one-shot
        `status` from the parse cache's summary: tui/core/job/parsecache.py `fold`):
        {"steps": how many, "keys": {key: [finite values, their sum, the last
        (step, value) pairs]}}. Counts, sums, latest values and the last points then
        cover the whole run; whole series (the graph, the sparklines) are not there."""
        self._seed = base
        self.reset()

    def reset(self) -> None:
        self.settled_step: int | None = None
        """Set by the caller: steps up to this one are final (their series are cached)."""
        self.order: list[int] = []
        self._series: dict[str, PointList] = {}
        self._pos: dict[str, int] = {}
        self._sum: dict[str, float] = {}
        self._prefix: dict[Any, tuple[array[float], array[float]]] = {}
        """Per (key, scale): the double-double prefix sums, as C doubles (8 bytes a step,
        not a float object and a list slot: 23 MB -> 6 MB at the end of a 2710-step run
        with 130 tags)."""
        self._memo: dict[Any, tuple[Any, list[tuple[int, float]]]] = {}
        self._keys: set[str] = set()
        self._last: dict[str, tuple[float, int]] = {}
        self._last_pos: dict[str, int] = {}
        self._dropped: dict[str, int] = {}
        self.dropped_steps = 0
        if self._seed:
            self.dropped_steps = int(self._seed["steps"])
            for key, (n, total, pts) in self._seed["keys"].items():
                self._keys.add(key)
                self._series[key] = PointList((int(st), float(v)) for st, v in pts)
                self._sum[key] = float(total)
                self._dropped[key] = int(n) - len(pts)
                if pts:
                    self._last[key] = (float(pts[-1][1]), int(pts[-1][0]))
        self._keys_pos = 0

    def sync(self) -> None:
        """Take in the steps appended to `by_step` since the last call (only those:
        the dict is walked from its end)."""
        new = len(self.by_step) - len(self.order)
        if new > 0:
            # a dict's keys (what every caller passes) walk backwards; Mapping's need not
            ends = reversed(self.by_step.keys())  # type: ignore[call-overload]
            self.order.extend(reversed(list(itertools.islice(ends, new))))

    def _settled(self) -> int:
        n = max(0, len(self.order) - self.TAIL)
        if self.settled_step is not None:
            n = min(n, bisect.bisect_right(self.order, self.settled_step))
        return n

    def points(self, key: str) -> SeriesView:
        """Every finite (step, value) of `key`, in step order, as a view (no copy)."""
        lst = self._series.get(key)
        if lst is None:
            lst = self._series[key] = PointList()
        end = self._settled()
        by = self.by_step
        pos = self._pos.get(key, 0)
        if end > pos:
            total = self._sum.get(key, 0.0)
            for st in self.order[pos:end]:
                v = by[st].get(key)
                if v is not None and _finite(v):
                    lst.append((st, float(v)))
                    total += float(v)
            self._sum[key] = total
            self._pos[key] = end
        tail = [(st, float(v)) for st in self.order[end:] if (v := by[st].get(key)) is not None and _finite(v)]
        return SeriesView(lst, tail, self._dropped.get(key, 0))

    def raw_series(self, key: str) -> list[tuple[int, float]]:
        return list(self.points(key))

    def total(self, key: str) -> float:
        """The sum of `key`'s finite values (summed in step order, as `sum` would)."""
        view = self.points(key)
        total = self._sum.get(key, 0.0)
        for _, v in view._tail:
            total += v
        return total

    def downsample(self, key: str, max_points: int, scale: Any = None) -> list[tuple[int, float]]:
        """`downsample(points(key) mapped by scale, max_points)` in O(max_points): each
        run's mean from compensated prefix sums (a double-double running sum, so a run's
        sum is the difference of two prefixes to about 1e-16 of itself; `downsample` sums
        floats one by one: the same figure to the last bits or so). `scale`: None, a
        number the values are multiplied by, or a named mapping (`"mfu_pct"`). A refresh
        with no new step gets the last result again."""
        view = self.points(key)
        n = len(view)
        if max_points <= 0:
            return []
        if n <= max_points:
            return view[:] if scale is None else [(st, _scale1(v, scale)) for st, v in view]
        if max_points == 1:
            return [(view[n - 1][0], _scale1(view[n - 1][1], scale))]
        memo_key = (key, scale, max_points)
        state = (n, tuple(view._tail))
        memo = self._memo.get(memo_key)
        if memo is not None and memo[0] == state:
            return list(memo[1])
        hs, ls = self._prefix.setdefault((key, scale), (array("d", [0.0]), array("d", [0.0])))
        head, nh = view._head, view._n
        vals = head._v
        for i in range(len(hs) - 1, nh):
            _two_sum_append(hs, ls, _scale1(vals[i], scale))
        # the unsettled points go on for this call only (the lists are the index's own)
        for p in view._tail:
            head.append(p)
            _two_sum_append(hs, ls, _scale1(p[1], scale))
        try:
            body, buckets = n - 1, max_points - 1
            cut = [b * body // buckets for b in range(buckets + 1)]
            steps = head._st
            out = [(steps[hi - 1], ((hs[hi] - hs[lo]) + (ls[hi] - ls[lo])) / (hi - lo))
                   for lo, hi in zip(cut, cut[1:]) if hi > lo]
        finally:
            for _ in view._tail:
                head.pop()
                hs.pop()
                ls.pop()
        last = view[n - 1]
        out.append((last[0], _scale1(last[1], scale)))
        self._memo[memo_key] = (state, out)
        return list(out)

    def key_set(self) -> set[str]:
        end = self._settled()
        for st in self.order[self._keys_pos:end]:
            self._keys.update(self.by_step[st])
        self._keys_pos = end
        return self._keys.union(*(self.by_step[st] for st in self.order[end:]))

    def latest(self, key: str) -> tuple[float, int] | tuple[None, None]:
        """(value, step) of `key`'s most recent finite value: the steps from the end
        back to the first that has one, or to where the last call left off (what the
        settled steps held then is kept): a key in every step costs a step or two."""
        end = self._settled()
        order, by = self.order, self.by_step
        stop = self._last_pos.get(key, 0)
        for i in range(len(order) - 1, stop - 1, -1):
            v = by[order[i]].get(key)
            if v is not None and _finite(v):
                if i < end:  # settled: nothing after it up to `end` will change
                    self._last[key], self._last_pos[key] = (float(v), order[i]), end
                return float(v), order[i]
        if end > stop:
            self._last_pos[key] = end
        return self._last.get(key, (None, None))


def _scale1(v: float, scale: Any) -> float:
    if scale is None:
        return v
    if scale == "mfu_pct":
        return v * 100.0 if v <= 1.0 else v
    return float(v * scale)


def _scaled(points: Iterable[tuple[int, float]], scale: Any) -> Iterable[tuple[int, float]]:
    return ((s, _scale1(v, scale)) for s, v in points)


class RunMetrics:
    """A snapshot of a run's metrics, with derived figures and range verdicts.

    Args:
      rows: ``[{"step": N, "metrics": {...}}]`` (any order) or a ``{step: metrics}`` map.
      total_steps: from ``Total training steps: N`` or the tqdm bar; None if unknown.
      last_checkpoint: the last saved step (``latest_checkpointed_iteration.txt``).
      expected: the profile's ranges, e.g. ``{"mfu_pct": (25, 40),
        "throughput_tokens_per_s_per_node": (600, 900), "step_time_s": (900, 1200),
        "mem_gib_per_card": (50, 70)}``; any indicator name may be given a range.
      gpus_per_node: to turn VeRL's per-GPU throughput into the per-node figure.
      wall_times: ``{step: unix time}`` (event wall times, or when a log line was seen)
        - the fallback clock when ``timing_s/step`` is absent.
      now: the current time, for elapsed time since `started_at`.
      window: how many recent steps the step time and trends are averaged over.
      tqdm_s_per_step: tqdm's own rate from the log's progress bar: the wall cadence when
        the arrival times of step lines say nothing (a one-shot `status`, a catch-up).
    """

    def __init__(
        self,
        rows: Iterable[Mapping[str, Any]] | Mapping[int, Mapping[str, float]],
        *,
        total_steps: int | None = None,
        last_checkpoint: int | None = None,
        expected: Mapping[str, Any] | None = None,
        gpus_per_node: int = 8,
        wall_times: Mapping[int, float] | None = None,
        started_at: float | None = None,
        now: float | None = None,
        window: int = 10,
        tqdm_s_per_step: float | None = None,
        index: SeriesIndex | None = None,
    ) -> None:
        # `index`: the caller keeps the run's steps (in order) and their series
        # incrementally; `rows` is then its `by_step`, used as is.
        self._index = index
        if index is not None:
            index.sync()
        self.by_step = index.by_step if index is not None else _rows_to_steps(rows)
        # the index's own list of steps (read, never changed here): no copy a refresh
        self.steps: list[int] = index.order if index is not None else list(self.by_step)
        self.total_steps = total_steps
        self.last_checkpoint = last_checkpoint
        self.expected: dict[str, tuple[float, float] | None] = {
            k: _range(v) for k, v in (expected or {}).items()
        }
        self.gpus_per_node = max(1, int(gpus_per_node))
        # the caller's map (the parser's arrival times) is read, not copied, with an index
        self.wall_times: Mapping[int, float] = (wall_times or {}) if index is not None else dict(wall_times or {})
        self.started_at = started_at
        self.now = now
        self.window = max(1, int(window))
        self.tqdm_s_per_step = tqdm_s_per_step if tqdm_s_per_step and _finite(tqdm_s_per_step) else None
        self._series_cache: dict[str, Sequence[tuple[int, float]]] = {}
        self._keys: list[str] | None = None
        self._keyset: set[str] | None = None
        self._summary: dict[str, Any] | None = None

    # -- raw access ---------------------------------------------------------------------

    @property
    def last_step(self) -> int | None:
        return self.steps[-1] if self.steps else None

    def keys(self) -> list[str]:
        """Every metric key seen, sorted."""
        if self._keys is None:
            self._keys = sorted(self._key_set())
        return self._keys

    def _key_set(self) -> set[str]:
        if self._keyset is None:
            self._keyset = (self._index.key_set() if self._index is not None
                            else set().union(*self.by_step.values()))
        return self._keyset

    def raw_series(self, key: str) -> list[tuple[int, float]]:
        """Every finite (step, value) of a metric key, in step order (a list of its own:
        the graph screen and exports; the model itself reads `_points`)."""
        pts = self._points(key)
        return pts if isinstance(pts, list) else list(pts)

    def _points(self, key: str) -> Sequence[tuple[int, float]]:
        """`raw_series` without a copy: with an index, a view of its series (what a
        refresh reads of it costs what it reads, not the run's length)."""
        got = self._series_cache.get(key)
        if got is None and self._index is not None:
            got = self._series_cache[key] = self._index.points(key)
        if got is None:
            got = [(s, float(m[key])) for s, m in self.by_step.items()
                   if key in m and _finite(m[key])]
            self._series_cache[key] = got
        return got

    def has_series(self, key: str) -> bool:
        """Whether `key` has a finite value at any step."""
        return bool(self._points(key))

    def latest(self, *keys: str) -> tuple[float, int] | tuple[None, None]:
        """(value, step) of the most recent finite value of the first key that has one."""
        present = self._key_set()
        for key in keys:
            if key not in present:
                continue
            if self._index is not None:
                got = self._index.latest(key)
                if got[0] is not None:
                    return got
                continue
            for step in reversed(self.steps):
                v = self.by_step[step].get(key)
                if v is not None and _finite(v):
                    return float(v), step
        return None, None

    def recent_mean(self, key: str, n: int | None = None) -> float | None:
        pts = self._points(key)[-(n or self.window):]
        return sum(v for _, v in pts) / len(pts) if pts else None

    # -- derived figures ----------------------------------------------------------------

    def step_time_s(self) -> float | None:
        """Mean seconds per step over the recent window: `timing_s/step`, else the
        spacing of the steps' wall times."""
        mean = self.recent_mean(K_STEP_TIME)
        if mean is not None:
            return mean
        wt: list[tuple[int, float]] = []  # the last window + 1 steps with a wall time
        for s in reversed(self.steps):
            if len(wt) > self.window:
                break
            if s in self.wall_times:
                wt.append((s, self.wall_times[s]))
        wt.reverse()
        if len(wt) >= 2 and wt[-1][0] > wt[0][0]:
            return (wt[-1][1] - wt[0][1]) / (wt[-1][0] - wt[0][0])
        return None

    SAME_CHUNK_S = 0.05
    """Step lines seen closer together than this came in one read of the log."""

    def wall_step_time_s(self) -> float | None:
        """Seconds per step on the wall clock: the cadence of the recent steps' wall
        times (when the console saw each step line arrive, or the events' wall times).
        This is what the user waits, whatever `timing_s/step` says the trainer measured
        (the two differ when steps overlap with I/O, or in the sim's accelerated time)."""
        wt = [(s, self.wall_times[s]) for s in self.steps[-(self.window + 1):] if s in self.wall_times]
        # Per pair of consecutive steps seen, seconds per step; steps that arrived in one
        # chunk of log (a re-attach reading the backlog, a catch-up after a reconnect)
        # say nothing about the cadence and are left out. The mean of the rest, less a gap
        # over OUTLIER_X the median (the link was down): validation and checkpoint steps
        # recur and take their share of the time left, as tqdm's rate counts them (the
        # median alone said 1.0 s/step beside tqdm's 1.11 s/it, and an ETA short by as much).
        rates = [(t2 - t1) / (s2 - s1) for (s1, t1), (s2, t2) in zip(wt, wt[1:])
                 if s2 > s1 and t2 - t1 >= self.SAME_CHUNK_S]
        if len(rates) >= 3:
            m = statistics.median(rates)
            kept = [r for r in rates if r <= self.OUTLIER_X * m]
            return sum(kept) / len(kept)
        return self.tqdm_s_per_step

    OUTLIER_X = 3.0
    """A step gap over this many times the median is the link or the console away, not
    the run's pace: left out of the cadence."""

    def elapsed_s(self) -> float | None:
        """Training time so far: the sum of `timing_s/step`, else wall clock."""
        pts = self._points(K_STEP_TIME)
        if pts:
            return self._index.total(K_STEP_TIME) if self._index is not None else sum(v for _, v in pts)
        if self.started_at is not None:
            end = self.now if self.now is not None else (
                max(self.wall_times.values()) if self.wall_times else None)
            if end is not None:
                return max(0.0, end - self.started_at)
        if len(self.wall_times) >= 2:
            return max(self.wall_times.values()) - min(self.wall_times.values())
        return None

    def remaining_steps(self) -> int | None:
        if self.total_steps is None or self.last_step is None:
            return None
        return max(0, self.total_steps - self.last_step)

    def eta_s(self) -> float | None:
        """Remaining steps x the wall-clock cadence of the recent steps (else the mean
        `timing_s/step`): it must agree with what tqdm says in the log."""
        rem = self.remaining_steps()
        st = self.wall_step_time_s()
        if st is None:
            st = self.step_time_s()
        if rem is None or st is None:
            return None
        return rem * st

    def progress_pct(self) -> float | None:
        if not self.total_steps or self.last_step is None:
            return None
        return 100.0 * min(self.last_step, self.total_steps) / self.total_steps

    def mfu_pct(self) -> tuple[float, int, str] | tuple[None, None, None]:
        """VeRL logs MFU as a fraction; a value above 1 is taken as already a percent."""
        for key in K_MFU:
            v, step = self.latest(key)
            if v is not None:
                return (v * 100.0 if v <= 1.0 else v), step, key  # type: ignore[return-value]
        return None, None, None

    def trend(self, key: str = K_REWARD) -> Literal["rising", "falling", "flat"] | None:
        """Compare the mean of the last window with the window before it. The threshold
        (2% of the earlier mean, at least 0.005) keeps noise from reading as a trend."""
        pts = self._points(key)
        w = self.window
        if len(pts) < 4:
            return None
        w = min(w, len(pts) // 2)
        recent = [v for _, v in pts[-w:]]
        before = [v for _, v in pts[-2 * w:-w]]
        a = sum(before) / len(before)
        b = sum(recent) / len(recent)
        eps = max(0.005, 0.02 * abs(a))
        if b > a + eps:
            return "rising"
        if b < a - eps:
            return "falling"
        return "flat"

    def validation(self) -> dict[str, dict[str, Any]]:
        """Latest value of every validation key: {key: {"value": v, "step": s}}."""
        out: dict[str, dict[str, Any]] = {}
        for key in self.keys():
            if key.startswith(VALIDATION_PREFIXES):
                v, step = self.latest(key)
                if v is not None:
                    out[key] = {"value": v, "step": step}
        return out

    def indicators(self) -> list[Indicator]:
        """The headline numbers, in display order, each judged against its range."""
        exp = self.expected
        out: list[Indicator] = []

        def add(name: str, label: str, value: float | None, unit: str,
                source: str | None, step: int | None) -> None:
            rng = exp.get(name)
            out.append(Indicator(name, label, value, unit, judge(value, rng), rng,
                                 source, step))

        st = self.step_time_s()
        add("step_time_s", "Step time", st, "s",
            K_STEP_TIME if self.has_series(K_STEP_TIME) else ("wall clock" if st else None),
            self.last_step)
        tp, tp_step = self.latest(K_THROUGHPUT)
        add("throughput_tokens_per_s_per_gpu", "Throughput / GPU", tp, "tok/s",
            K_THROUGHPUT if tp is not None else None, tp_step)
        add("throughput_tokens_per_s_per_node", "Throughput / node",
            tp * self.gpus_per_node if tp is not None else None, "tok/s",
            K_THROUGHPUT if tp is not None else None, tp_step)
        mfu, mfu_step, mfu_key = self.mfu_pct()
        add("mfu_pct", "Actor MFU", mfu, "%", mfu_key, mfu_step)
        rw, rw_step = self.latest(K_REWARD)
        add("reward_mean", "Reward", rw, "", K_REWARD if rw is not None else None, rw_step)
        sc, sc_step = self.latest(K_SCORE)
        add("score_mean", "Score", sc, "", K_SCORE if sc is not None else None, sc_step)
        rl, rl_step = self.latest(K_RESP_LEN)
        add("response_length_mean", "Response length", rl, "tok",
            K_RESP_LEN if rl is not None else None, rl_step)
        mr, mr_step = self.latest(K_MEM_RESERVED)
        ma, ma_step = self.latest(K_MEM_ALLOC)
        mem, mem_step, mem_key = (mr, mr_step, K_MEM_RESERVED) if mr is not None else (
            ma, ma_step, K_MEM_ALLOC if ma is not None else None)
        add("mem_gib_per_card", "Peak memory / card", mem, "GiB", mem_key, mem_step)
        return out

    # -- outputs ------------------------------------------------------------------------

    def series(self, key: str, max_points: int = 500) -> list[tuple[int, float]]:
        """A plot-ready series. `key` is a metric key, or a derived name:
        ``mfu_pct``, ``throughput_tokens_per_s_per_node``, ``step_time_s``."""
        if self._index is not None:
            # from the index's prefix sums: O(max_points), whatever the run's length
            if key == "mfu_pct":
                return self._index.downsample(next((k for k in K_MFU if self.has_series(k)), K_MFU[0]),
                                              max_points, "mfu_pct")
            if key == "throughput_tokens_per_s_per_node":
                return self._index.downsample(K_THROUGHPUT, max_points, self.gpus_per_node)
            return self._index.downsample(K_STEP_TIME if key == "step_time_s" else key, max_points)
        if key == "mfu_pct":
            src = next((k for k in K_MFU if self.raw_series(k)), K_MFU[0])
            pts = [(s, v * 100.0 if v <= 1.0 else v) for s, v in self.raw_series(src)]
        elif key == "throughput_tokens_per_s_per_node":
            pts = [(s, v * self.gpus_per_node) for s, v in self.raw_series(K_THROUGHPUT)]
        elif key in ("step_time_s",):
            pts = self.raw_series(K_STEP_TIME)
        else:
            pts = self.raw_series(key)
        return downsample(pts, max_points)

    def summary(self) -> dict[str, Any]:
        """JSON-able snapshot (``job.metrics`` in ``status --json``): numbers stay
        numbers, unknown is null, NaN/inf are null. Computed once (a copy each call:
        callers adjust it)."""
        if self._summary is None:
            self._summary = self._summary_uncached()
        return dict(self._summary)

    def _summary_uncached(self) -> dict[str, Any]:
        inds = self.indicators()
        values = {i.name: i.value for i in inds}
        d: dict[str, Any] = {
            "step": self.last_step,
            "total_steps": self.total_steps,
            "steps_seen": len(self.steps) + (self._index.dropped_steps if self._index is not None else 0),
            "progress_pct": self.progress_pct(),
            "last_checkpoint": self.last_checkpoint,
            "elapsed_s": self.elapsed_s(),
            "eta_s": self.eta_s(),
            "wall_step_time_s": self.wall_step_time_s(),
            **values,
            "reward_trend": self.trend(K_REWARD),
            "mem_allocated_gib": self.latest(K_MEM_ALLOC)[0],
            "mem_reserved_gib": self.latest(K_MEM_RESERVED)[0],
            "validation": {k: v["value"] for k, v in self.validation().items()},
            "flags": {i.name: i.flag for i in inds if i.range is not None},
            "expected": {k: list(v) if v else None for k, v in self.expected.items()},
            "gpus_per_node": self.gpus_per_node,
        }
        return json_safe(d)


# --------------------------------------------------------------------------- the pane's summary

Trend = Literal["rising", "falling", "flat"]


def judge_range(value: float | None, rng: tuple[float, float] | None) -> bool | None:
    """`judge` as a yes/no: inside the range or not (None: unknown). The pane's verdicts
    and the alerts' out-of-range runs use it, `status` the indicators' flags: one rule."""
    flag = judge(value, rng)
    return None if flag is None else flag == "ok"


@dataclass(frozen=True)
class Judged:
    """A figure judged against its expected range, in the range's own unit."""

    value: float
    low: float
    high: float
    ok: bool


@dataclass(frozen=True)
class MetricsSummary:
    """What the training pane shows of a job, produced by the core and read as it is.

    Step time and ETA only while the job is RUNNING (a stopped job has neither); a job
    the current Ray does not list (`on_cluster` False) is the last run: its step and
    checkpoint, nothing else. The figures with an expected range in the profile come
    judged (`judged`), once, here."""

    job_id: str | None = None
    status: str | None = None
    on_cluster: bool | None = None
    step: int | None = None
    total_steps: int | None = None
    last_checkpoint: int | None = None
    step_time_s: float | None = None  # wall-clock seconds per step of the recent steps
    eta_s: float | None = None
    throughput_per_gpu: float | None = None  # tokens/s per card
    throughput_per_node: float | None = None  # tokens/s per node (the profile's range unit)
    reward: float | None = None  # mean critic reward (or score) of the last step
    reward_trend: Trend | None = None
    mfu_pct: float | None = None  # 0-100
    response_length: float | None = None  # mean, tokens
    judged: Mapping[str, Judged] = field(default_factory=dict)
    """"step_time" (seconds a step, the unit of `step_time_s`), "throughput" (tokens/s per
    node), "mfu" (%): each in the unit of the value it judges, so a range is shown as is."""

    @classmethod
    def judge(cls, ranges: Mapping[str, tuple[float, float] | None], **figures: Any) -> MetricsSummary:
        """A summary with its figures judged against `ranges` (the profile's monitoring
        ranges by the names of `judged`)."""
        made = cls(**figures)
        values = {"step_time": made.step_time_s,
                  "throughput": made.throughput_per_node, "mfu": made.mfu_pct}
        judged: dict[str, Judged] = {}
        for name, value in values.items():
            rng = ranges.get(name)
            ok = judge_range(value, rng)
            if ok is not None and value is not None and rng is not None:
                judged[name] = Judged(float(value), rng[0], rng[1], ok)
        return cls(**{**figures, "judged": judged})

    def stopped(self, status: str) -> MetricsSummary:
        """The same run after it stopped: no step time, no ETA."""
        return MetricsSummary.judge(self.ranges(), **{**self.figures(), "status": status, "step_time_s": None,
                                                      "eta_s": None})

    def figures(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "judged"}

    def ranges(self) -> dict[str, tuple[float, float]]:
        return {k: (j.low, j.high) for k, j in self.judged.items()}


def fmt_step_time(s: float) -> str:
    """Seconds per step, in the unit a person reads: "42 s/step", "17.2 min/step" (the
    training pane and `status` alike)."""
    if s < 60:
        return f"{s:.1f} s/step" if s < 10 else f"{s:.0f} s/step"
    return f"{s / 60:.1f} min/step"


def fmt_seconds(s: float) -> str:
    """A duration in the unit a person reads it: "0.5 s", "42 s", "2 min", "17.5 min"."""
    return f"{s:.2g} s" if s < 10 else f"{s:.0f} s" if s < 120 else f"{s / 60:.3g} min"


def fmt_duration(s: float) -> str:
    """A wall time as a person reads it, one unit pair at a time: "45s", "3m10s", "2h05m", "3d04h"."""
    s = max(0, int(round(s)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def fmt_range(name: str, low: float, high: float) -> str:
    """A judged range as text, in the unit of the value beside it: a step time's in
    seconds or minutes ("3 s-2 min", "15-20 min"), the others as numbers ("600-900")."""
    if name != "step_time":
        return f"{low:.4g}-{high:.4g}"
    lo, hi = fmt_seconds(low), fmt_seconds(high)
    lo_n, lo_u = lo.split(" ")
    hi_n, hi_u = hi.split(" ")
    return f"{lo_n}-{hi}" if lo_u == hi_u else f"{lo}-{hi}"


def monitoring_ranges(mon: Any) -> dict[str, tuple[float, float] | None]:
    """The profile's `monitoring:` ranges by the names `MetricsSummary.judged` uses, in the
    units of the values judged (the profile's step time in minutes becomes seconds)."""
    st = mon.step_time_min
    return {"step_time": (st[0] * 60, st[1] * 60) if st else None,
            "throughput": mon.throughput_tokens_per_s_per_node,
            "mfu": mon.mfu_pct}


def summarize(rm: RunMetrics, mon: Any, status: str | None = "RUNNING", on_cluster: bool | None = True,
              job_id: str | None = None) -> MetricsSummary:
    """RunMetrics -> the pane's summary: the wall-clock cadence of the recent steps for
    step time and ETA (RUNNING only), the core's reward trend, judged once."""
    s = rm.summary()
    base: dict[str, Any] = {"job_id": job_id, "status": status, "on_cluster": on_cluster,
                            "step": s.get("step"), "total_steps": s.get("total_steps"),
                            "last_checkpoint": s.get("last_checkpoint")}
    if on_cluster is False:
        return MetricsSummary(**base)
    reward = s.get("reward_mean")
    if reward is None:
        reward = s.get("score_mean")
    running = status == "RUNNING"
    trend = rm.trend(K_REWARD) if rm.has_series(K_REWARD) else rm.trend("critic/score/mean")
    return MetricsSummary.judge(
        monitoring_ranges(mon), **base,
        step_time_s=(s.get("wall_step_time_s") or s.get("step_time_s")) if running else None,
        eta_s=s.get("eta_s") if running else None,
        throughput_per_gpu=s.get("throughput_tokens_per_s_per_gpu"),
        throughput_per_node=s.get("throughput_tokens_per_s_per_node"),
        reward=reward, reward_trend=trend, mfu_pct=s.get("mfu_pct"),
        response_length=s.get("response_length_mean"))

