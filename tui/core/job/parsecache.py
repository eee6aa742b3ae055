"""The parse cache: what the spool's lines came to (the VeRL parser's state), up to a
line, so a re-attach (a `status`, a console restart) parses only the lines after it
instead of the whole run's log. JSON, private, type-checked on the way in: a file that
only ever holds data, never code."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from tui.core.job.spool import LogSpool
from tui.core.job.verl_log import MAX_LINE, LogMetricsParser

log = logging.getLogger("rlconsole.jobwatch")


class ParseCache:
    """The cache beside one job's spool. `cached_lines`: the lines the last save (or
    load) covers; `bad`: the cache on disk was refused (rewrite it after the parse)."""

    def __init__(self, spool: LogSpool, parser: LogMetricsParser) -> None:
        self.spool = spool
        self.parser = parser
        self.cached_lines = 0
        self.bad = False
        self.base: dict[str, Any] | None = None
        self._folded: tuple[int, int | None, dict[str, Any] | None] | None = None
        """(steps folded, the last of them, their summary) as of the last `write`."""
        """After `load(summary=True)`: the summary of the steps the parser does not hold
        (the parser then holds only the run's last steps; `write` writes no full cache)."""

    VERSION = 3  # 2: the parser keeps a wrapped line's last segment; 3: JSON, not pickle

    @property
    def path(self) -> Path:
        return self.spool.path.with_name("parsed.json")

    @property
    def summary_path(self) -> Path:
        """The small companion of `path`: the parser's state with only the last
        `SUMMARY_STEPS` steps, and a summary of the ones before (`fold`). What a
        one-shot `status` reads: 0.34 MB where the full cache of a whole run is 11 MB."""
        return self.spool.path.with_name("parsed-summary.json")

    def snapshot(self) -> tuple[Any, ...]:
        """The parser's state as of now, cheap enough for the app's loop: shallow
        copies (a finished step's metrics are never changed again; the last one may
        be, by a wrapped continuation, so it is copied too). Serialise it in a thread
        with `write`."""
        p = self.parser
        # plain values only (the cache is JSON): steps and progress are converted below
        state = {k: v for k, v in vars(p).items()
                 if k == "progress" or (k not in ("steps", "seen_at", "_clock")
                                        and isinstance(v, (str, int, float, bool, type(None))))}
        steps = dict(p.steps)
        if steps:
            last = next(reversed(steps))
            steps[last] = dict(steps[last])
        state["steps"] = steps
        return (self.VERSION, self.spool.size, self.spool.line_count, state)

    def write(self, snap: tuple[Any, ...]) -> None:
        """Save a snapshot and the spool's line index (blocking: run it in a thread).
        A later re-attach (a `status`, a console restart) then parses only the lines
        after it instead of the whole run's log. JSON, written private (0600) and
        renamed into place: a file that only ever holds data, never code. With it, the
        summary file (`summary_path`); from a summary parser (`base` set), that alone."""
        version, size, lines, state = snap
        state = dict(state)
        steps = state["steps"]
        prog = state.get("progress")
        state["progress"] = prog.to_dict() if prog is not None else None
        if self.base is None:  # a parser holding every step: the full cache
            state["steps"] = [[step, m] for step, m in steps.items()]  # ordered; int keys
            self._write_json(self.path, {"version": version, "size": size, "lines": lines, "state": state})
            self.spool.save_index()
        # the summary beside it (from a summary parser: its base, folded on)
        keys = list(steps)
        if all(a < b for a, b in zip(keys, keys[1:])):  # else (a rewritten old step): none
            cut = max(0, len(keys) - SUMMARY_STEPS)
            # folded on from the last save's summary (a whole run's from scratch is ~0.2 s
            # of this thread per save): steps that far back are final, as for the store
            done, last, prev = self._folded if self._folded is not None else (0, None, self.base)
            if not (done <= cut and (keys[done - 1] if done else None) == last):
                done, prev = 0, self.base  # another parser state: from the start
            base = fold(prev, ((st, steps[st]) for st in keys[done:cut]))
            self._folded = (cut, keys[cut - 1] if cut else None, base)
            state["steps"] = [[st, steps[st]] for st in keys[cut:]]
            self._write_json(self.summary_path, {"version": version, "size": size, "lines": lines,
                                                 "state": state, "base": base})
        else:
            with contextlib.suppress(OSError):
                os.unlink(self.summary_path)
        self.cached_lines = lines

    def _write_json(self, path: Path, doc: dict[str, Any]) -> None:
        """`doc` as JSON in a fresh 0600 file of our own (mkstemp: O_EXCL), renamed over `path`."""
        import json
        import tempfile

        text = json.dumps(doc)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="parsed.", suffix=".tmp")
        try:
            with open(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def read(self, summary: bool = False) -> dict[str, Any] | None:
        """The cache's parser state, or None: none, not ours (another user's file, or
        one group/world could write: anyone could have planted what it says), not a
        regular file, or not exactly the JSON `write` writes. `summary`: the summary
        file's (its base under "__base")."""
        import json
        import stat

        path = self.summary_path if summary else self.path
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with open(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
                log.warning("parse cache %s ignored (owner uid %d, mode %o): rebuilt from the spool",
                            path, st.st_uid, stat.S_IMODE(st.st_mode))
                self.bad = True
                return None
            if st.st_size > CACHE_MAX_BYTES:  # not one we wrote (a whole run's is ~16 MB)
                self.bad = True
                return None
            raw = f.read()
        try:
            doc = json.loads(raw)
            fields = set(vars(self.parser)) - {"seen_at", "_clock"}
            state = _cache_state(doc, self.VERSION, fields)
            if state is not None and summary:
                state["__base"] = _base(doc["base"])
        except (ValueError, TypeError, KeyError, RecursionError, OverflowError):
            self.bad = True
            return None
        if state is None:
            return None
        if doc["size"] > self.spool.size or doc["lines"] > self.spool.line_count:
            return None
        state["__lines"] = doc["lines"]
        return state

    def load(self, summary: bool = False) -> int:
        """Restore the parser from the cache if it matches this spool; the number of
        lines it covers (0: parse from the start). `summary`: from the summary file
        (the parser then holds the last steps only, `base` summarises the others; 0
        when there is none: load the full cache then)."""
        self.bad = False
        self._folded = None
        state = self.read(summary)
        if state is None:
            return 0
        lines = int(state.pop("__lines"))
        if summary:
            self.base = state.pop("__base")
        for k, v in state.items():
            setattr(self.parser, k, v)
        self.cached_lines = lines
        return lines


CACHE_MAX_BYTES = 1 << 30

SUMMARY_STEPS = 64
"""Steps the summary file holds whole (the last ones: a wrapped line may still complete
the last; the step time and reward trend read the last 20)."""

SUMMARY_POINTS = 32
"""Per key, the last (step, value) pairs the summary keeps of the steps before those."""


def fold(base: dict[str, Any] | None, steps: Any) -> dict[str, Any]:
    """`base` (a summary, or None) followed by `steps` ((step, metrics) in step order):
    per key, its finite values' count and sum (summed one by one in step order, as the
    metrics model sums them) and its last `SUMMARY_POINTS` (step, value) pairs."""
    import math

    out_keys: dict[str, list[Any]] = {k: [n, total, [list(p) for p in pts]] for k, (n, total, pts) in
                                      (base or {}).get("keys", {}).items()}  # `base` is left as it is
    count = int((base or {}).get("steps", 0))
    for step, metrics in steps:
        count += 1
        for k, v in metrics.items():
            e = out_keys.get(k)
            if e is None:
                e = out_keys[k] = [0, 0.0, []]
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                e[0] += 1
                e[1] += float(v)
                e[2].append([step, float(v)])
                if len(e[2]) > 2 * SUMMARY_POINTS:
                    del e[2][:-SUMMARY_POINTS]
    for e in out_keys.values():
        del e[2][:-SUMMARY_POINTS]
    return {"steps": count, "keys": out_keys}


def _base(raw: Any) -> dict[str, Any]:
    """A summary file's base, type-checked (raises TypeError/KeyError otherwise)."""
    import math

    if not isinstance(raw, dict) or set(raw) != {"steps", "keys"} or not isinstance(raw["keys"], dict):
        raise KeyError("base")
    steps = _count(raw["steps"], "base steps")
    keys: dict[str, tuple[int, float, list[tuple[int, float]]]] = {}
    for k, e in raw["keys"].items():
        if not isinstance(e, list) or len(e) != 3:
            raise TypeError("base key")
        n, total, pts = _count(e[0], "base count"), _number(e[1], "base sum"), e[2]
        if not math.isfinite(total) or not isinstance(pts, list) or not 0 <= len(pts) <= min(n, SUMMARY_POINTS):
            raise TypeError("base key")
        got: list[tuple[int, float]] = []
        for p in pts:
            if not isinstance(p, list) or len(p) != 2:
                raise TypeError("base point")
            step, value = _count(p[0], "base point step"), _number(p[1], "base point")
            if not math.isfinite(value):
                raise TypeError("base point")
            got.append((step, value))
        if n and len(got) < min(n, SUMMARY_POINTS):
            raise TypeError("base points")
        keys[k] = (n, total, got)
    return {"steps": steps, "keys": keys}
"""A parse cache larger than this is not read (2710 steps x 150 metrics: 16 MB)."""

_CACHE_SCALARS: dict[str, tuple[type, ...]] = {
    "total_steps": (int, type(None)), "last_checkpoint": (int, type(None)), "malformed": (int,),
    "lines": (int,), "_tail": (str,), "_pending": (str, type(None)), "_pending_step": (int,),
    "_pending_bad": (int,), "_pending_prefix_bad": (int,), "_pending_last_bad": (bool,)}
"""The parser fields the parse cache holds besides `steps` and `progress`, by type."""

_MAX_INT = 10**18
"""Every integer in a cache is a count, a step or a line number: the parser takes no step
of more than 18 digits, so a larger one (or a negative one) is not what `write` wrote. An
unbounded one was taken as it was: 10**400 as a metric crashed `runs` in float()."""
_MAX_TEXT = MAX_LINE
"""A parser string in a cache (a partial line, a wrapped segment) is at most the parser's own
bound on a partial line."""


def _count(v: Any, what: str) -> int:
    """A non-negative integer below `_MAX_INT` (TypeError otherwise)."""
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < _MAX_INT:
        raise TypeError(what)
    return v


def _number(v: Any, what: str) -> float:
    """A metric's value: a float as the parser keeps it (nan and inf included), or an
    integer within `_MAX_INT` (TypeError otherwise: `float(10**400)` raises)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, int) and not -_MAX_INT < v < _MAX_INT):
        raise TypeError(what)
    return float(v)


def _scalar(k: str, v: Any, types: tuple[type, ...]) -> Any:
    """A plain parser field of one of `types`, integers and strings within their bounds."""
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
        raise TypeError(k)
    if isinstance(v, int) and not isinstance(v, bool):
        _count(v, k)
    elif isinstance(v, str) and len(v) > _MAX_TEXT:
        raise TypeError(k)
    return v


def _progress(prog: Any) -> Any:
    """The last tqdm bar: exactly TqdmProgress's fields, counts and finite times."""
    import dataclasses
    import math

    from tui.core.job.verl_log import TqdmProgress

    if prog is None:
        return None
    names = {f.name for f in dataclasses.fields(TqdmProgress)}
    if not isinstance(prog, dict) or not {"n", "total", "percent"} <= set(prog) <= names:
        raise KeyError("progress")
    out: dict[str, Any] = {}
    for k, v in prog.items():
        if k in ("n", "total", "percent"):
            out[k] = _count(v, f"progress {k}")
        elif v is None:
            out[k] = None
        else:
            x = _number(v, f"progress {k}")
            if not math.isfinite(x) or x < 0:
                raise TypeError(f"progress {k}")
            out[k] = x
    return TqdmProgress(**out)


def _cache_state(doc: Any, version: int, fields: set[str]) -> dict[str, Any] | None:
    """The parser state in a parse-cache document, type-checked field by field (None:
    another version). Raises ValueError/TypeError/KeyError on anything else: a cache
    is data written by `ParseCache.write`, and nothing else is taken from it. `fields`: the
    parser's own attributes; a field added to the parser later (not in
    `_CACHE_SCALARS`) is taken only as a plain scalar."""
    if not isinstance(doc, dict) or doc.get("version") != version:
        return None
    for k in ("size", "lines"):
        _count(doc[k], k)
    raw = doc["state"]
    if not isinstance(raw, dict) or not set(_CACHE_SCALARS) | {"steps", "progress"} <= set(raw) <= fields:
        raise KeyError("state fields")
    state: dict[str, Any] = {}
    for k, v in raw.items():
        if k in ("steps", "progress"):
            continue
        state[k] = _scalar(k, v, _CACHE_SCALARS.get(k, (str, int, float, bool, type(None))))
    steps: dict[int, dict[str, float]] = {}
    if not isinstance(raw["steps"], list):
        raise TypeError("steps")
    for item in raw["steps"]:
        step, metrics = item
        if not isinstance(metrics, dict) or not all(isinstance(name, str) for name in metrics):
            raise TypeError("steps")
        steps[_count(step, "step")] = {name: _number(x, "step metrics") for name, x in metrics.items()}
    state["steps"] = steps
    state["progress"] = _progress(raw["progress"])
    return state


def parse_spool(base: Path, batch: int = 20_000) -> LogMetricsParser | None:
    """The VeRL parser over the spooled driver log under `base` (a job's spool dir),
    starting from the parse cache a console left; opened as a reader, so a console
    following the job keeps its lock. None when the job has no spool here. For the
    runs list and the run comparison, which read finished or foreign runs."""
    log_path = base / "driver.log"
    if not log_path.exists():
        return None
    parser = LogMetricsParser(clock=None)
    with LogSpool(log_path, lock=False) as spool:
        first = ParseCache(spool, parser).load()
        n = spool.line_count
        for a in range(first, n, batch):
            parser.feed_many(spool.lines(a, min(n, a + batch)))
    return parser
