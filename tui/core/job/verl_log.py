"""Parse VeRL's console output: step metric lines, tqdm progress, total steps.

VeRL's console logger prints one line per training step::

    (TaskRunner pid=2016251) step:19 - actor/pg_loss:0.0195 - perf/mfu/actor:0.0426 - ...

What arrives here has been through Ray's log forwarding and, often, a terminal or an
issue tracker, so the parser must cope with:

- the Ray prefix, ``(TaskRunner pid=N)`` today and ``(main_task pid=N)`` in early-2025
  runs, possibly with ``, ip=...``, and ANSI colour codes around it. Only those (or no
  prefix: the driver's own output) are steps; a worker's line that contains ``step:``
  (``(WorkerDict pid=N, ip=A) ...``) is not (`DRIVER_ACTORS`);
- Ray's de-duplication suffix ``[repeated 3x across cluster]``;
- values printed as ``0.0195``, ``0.020`` (older runs: 3 decimals), ``3e-06``, ``nan``,
  ``inf``, or numpy reprs ``np.float64(0.12)`` / ``np.int64(3)`` (pprint under numpy 2);
- keys with ``/``, ``@``, ``-`` and ``_`` (``val-core/openai/gsm8k/reward/mean@1``);
- lines cut short: a segment that is cut (no ``:``, an unclosed ``np.float64(``, an empty
  value) is dropped and counted, the complete metrics before it are kept. When a line
  was wrapped (a copy from a terminal or an issue), the next line continues it
  (``...response_length/mean:235.7`` / ``8125 - response_length/max:...``):
  `LogMetricsParser` joins such continuations and re-parses, so the value becomes
  235.78125 rather than a silently wrong 235.7;
- tqdm's ``Training Progress:  0%|   | 1/624 [10:00<103:53:21, 600.32s/it]``, several
  of them joined by ``\\r`` on one physical line (the last one is the current state).

Speed matters (a log of a long run is millions of lines, and it is re-read when the
console attaches): lines are pre-filtered with substring tests that are much cheaper
than any regex, and only candidate lines are parsed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from tui.core.parsers.ansi import strip_escapes

__all__ = [
    "parse_step_line",
    "parse_value",
    "parse_tqdm",
    "LogMetricsParser",
    "TqdmProgress",
    "strip_ansi",
]

# `(?<!\s)`: a run of spaces is tried from its start only, not from each of its spaces
# (each such try scanned the rest of the run: quadratic in a long run).
_REPEATED_RE = re.compile(r"(?<!\s)\s*\[repeated [0-9]+x across cluster\]")
# `step:N` as the first field of a step line: not part of a longer key such as
# `training/global_step:19` or `timing_s/step:12.5`, and followed by ` - ` or the end.
# A number of more than 18 digits is no step (and Python refuses int() of 4300+ digits,
# which would raise out of the parser and lose the rest of the chunk): `[0-9]{1,18}`
# followed by no further digit, everywhere a number becomes an int.
_STEP_RE = re.compile(r"(?<![\w/@.\-])step:\s*(-?[0-9]{1,18})(?:\s+-(?:\s+|$)|\s*$)")
# Ray's prefix on a line a task or actor printed: `(Name pid=N)` or `(Name pid=N, ip=A)`,
# `(pid=N)` for an unnamed task.
_RAY_PREFIX_RE = re.compile(r"\s*\((?:([^\s()]+) )?pid=[0-9]+(?:, ip=[^)]*)?\)")
DRIVER_ACTORS = frozenset({"TaskRunner", "main_task"})
"""The Ray actors whose output is the trainer's driver: VeRL's `TaskRunner` (and
`main_task`, its name in early-2025 runs). Their step lines are the training steps."""
_TQDM_RE = re.compile(
    r"Training Progress:\s*([0-9]{1,18})%\|[^|\r\n]*\|\s*([0-9]{1,18})/([0-9]{1,18})(?!\d)\s*(?:\[([^\]\r\n]*)\])?"
)
_TOTAL_RE = re.compile(r"Total training steps:\s*([0-9]{1,18})(?!\d)")
_CKPT_RE = re.compile(r"global_step_([0-9]{1,18})(?!\d)")
MAX_LINE = 1 << 20
"""A partial line `feed_text` keeps waiting for its newline, at most (1 MiB)."""

MAX_METRIC_NAMES = 4096
"""Distinct metric names one run keeps. VeRL prints 100-300 (a validation set adds a few
per dataset); a log that makes up new names every step (a counter or a timestamp in a key,
a hostile job) would grow every step's dict, the series index and the graph picker
without bound: 8.6x the memory of the same log with fixed names. Values of a name past the
cap are dropped, and that is said once (`take_names_note`)."""

MAX_METRIC_NAME = 256
"""Characters of one metric name; a longer key is dropped (VeRL's longest are under 100)."""

MAX_SEGMENT = 4096
"""Longest last segment a continuation may extend: a `key:value` is well under 200
characters; a run of lines each ending in a cut segment is not one metric."""
# A line that is nothing but metric segments (a wrapped/cut piece of a step line).
_FRAGMENT_RE = re.compile(r"\s*[\w./@\-]+:\S+ - \S")

# Numeric wrappers whose inner text is the number (numpy 2 reprs, torch tensors).
_WRAPPERS = frozenset(
    f"{mod}.{t}"
    for mod in ("np", "numpy")
    for t in ("float64", "float32", "float16", "longdouble", "int64", "int32", "int16",
              "int8", "uint64", "uint32", "uint16", "uint8", "intp", "float_", "int_")
) | {"tensor", "float", "int"}


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (Ray colours its prefixes): the parsers' one rule."""
    return strip_escapes(text)


def parse_value(text: str) -> float | None:
    """A metric value as printed by VeRL, or None if it is not (or no longer) a number.

    `np.float64(0.12)` and friends are unwrapped; an unclosed wrapper (a cut line) is
    rejected rather than guessed.
    """
    if text.endswith(")"):
        i = text.find("(")
        if i <= 0 or text[:i] not in _WRAPPERS:
            return None
        text = text[i + 1:-1]
    try:
        return float(text)
    except ValueError:
        return None


def _parse(line: str) -> tuple[int, dict[str, float], int, bool] | None:
    """Core of `parse_step_line`: (step, metrics, bad segment count, last segment bad)."""
    got = _parse_rest(line)
    if got is None:
        return None
    step, rest = got
    if not rest:
        return step, {}, 0, False
    fast = _fast_metrics(rest)
    if fast is not None:
        return step, fast, 0, False
    metrics, bad, last_bad = _careful_metrics(rest)
    return step, metrics, bad, last_bad


def _last_segment(rest: str) -> str:
    """The text after the last ` - ` of a step line's metrics: all that a wrapped
    continuation can change (the segments before it are final)."""
    i = rest.rfind(" - ")
    return rest if i < 0 else rest[i + 3:]


def _parse_rest(line: str) -> tuple[int, str] | None:
    """(step, the metrics text after `step:N - `), or None when it is no step line."""
    line = strip_escapes(line)
    m = _STEP_RE.search(line)
    if m is None:
        return None
    if m.start() and not _from_driver(line[:m.start()]):
        return None
    step = int(m.group(1))
    rest = line[m.end():]
    if "[repeated" in rest:
        rest = _REPEATED_RE.sub("", rest)
    return step, rest.strip()


def _from_driver(head: str) -> bool:
    """Whether the text before `step:` says the line is the driver's own.

    A driver log holds the driver's own output (no prefix) and, forwarded by Ray, every
    worker's output with a `(Name pid=N, ip=A)` prefix. Only the driver's lines (no
    prefix, or the TaskRunner's) count as steps: a rollout scheduler or a Megatron
    worker that prints `step:` is chatter, not training progress."""
    m = _RAY_PREFIX_RE.match(head)
    if m is None:
        return True
    return m.group(1) in DRIVER_ACTORS


def _careful_metrics(rest: str) -> tuple[dict[str, float], int, bool]:
    """Segment by segment: keep every whole `key:number`, count the others, and say
    whether the last one was bad (then the line may continue on the next one)."""
    metrics: dict[str, float] = {}
    bad = 0
    last_bad = False
    cut_at_separator = rest.endswith(" -")
    if cut_at_separator:  # the line stops right after a ` - `: what precedes is whole
        rest = rest[:-2].rstrip()
    for seg in rest.split(" - "):
        key, _, val = seg.rpartition(":")
        last_bad = True
        # a key holds no space and no colon: `pg_loss:0.1k0/a` is two segments glued
        # by a wrong join, never a metric of its own
        if not key or " " in key or ":" in key:
            bad += 1
            continue
        try:
            metrics[key] = float(val)
        except ValueError:
            num = parse_value(val.strip())
            if num is None:
                bad += 1
                continue
            metrics[key] = num
        last_bad = False
    if cut_at_separator:
        bad += 1
        last_bad = True
    return metrics, bad, last_bad


def _wrapped_float(text: str) -> float:
    """`float` that also takes `np.float64(0.12)`; raises ValueError like `float`."""
    if text[-1:] == ")":
        i = text.find("(")
        if i > 0 and text[:i] in _WRAPPERS:
            return float(text[i + 1:-1])
        raise ValueError(text)
    return float(text)


def _fast_metrics(rest: str) -> dict[str, float] | None:
    """The whole-line fast path: C-level string operations, no per-segment Python.

    It applies only when the line is exactly `k:v - k:v ...` with one colon per segment,
    keys without spaces, and every value a number or a numpy-wrapped number; anything
    else (a cut segment, an unclosed `np.float64(`, an odd key) returns None and
    `_careful_metrics` decides. On the lines it accepts, both give the same result
    (a property test checks this).
    """
    if rest.count(":") != rest.count(" - ") + 1:
        return None
    parts = rest.replace(" - ", ":").split(":")
    keys = parts[0::2]
    if not all(keys) or " " in "".join(keys):
        return None
    try:
        return dict(zip(keys, map(_wrapped_float if ")" in rest else float, parts[1::2])))
    except ValueError:
        return None


def parse_step_line(line: str) -> tuple[int, dict[str, float]] | None:
    """`(step, {key: value})` for a VeRL step line, else None. Never raises.

    Segments that are not `key:number` (a cut last segment, a non-numeric value) are
    dropped; the complete ones are kept.
    """
    if "step:" not in line:
        return None
    got = _parse(line)
    if got is None:
        return None
    return got[0], got[1]


_INTERVAL_RE = re.compile(r"^(?:([0-9]{1,9})d\s*)?(?:([0-9]{1,12}):)?([0-9]{1,12}):([0-9]{1,12})$")


def _interval(text: str) -> float | None:
    """tqdm's `MM:SS`, `H:MM:SS` (hours may exceed 24) or `Dd H:MM:SS`, in seconds."""
    m = _INTERVAL_RE.match(text.strip())
    if m is None:
        return None
    d, h, mi, s = m.groups()
    return int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi) * 60 + int(s)


@dataclass
class TqdmProgress:
    """The last `Training Progress` bar seen. `s_per_it` is tqdm's own estimate."""

    n: int
    total: int
    percent: int
    elapsed_s: float | None = None
    remaining_s: float | None = None
    s_per_it: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_tqdm(line: str) -> TqdmProgress | None:
    """The last `Training Progress` bar on a line (bars redrawn with `\\r` pile up on
    one physical line), else None."""
    if "Training Progress" not in line:
        return None
    found = _TQDM_RE.findall(strip_ansi(line))
    if not found:
        return None
    pct, n, total, bracket = found[-1]
    prog = TqdmProgress(n=int(n), total=int(total), percent=int(pct))
    if bracket:
        times, _, rate = bracket.partition(",")
        elapsed, _, remaining = times.partition("<")
        prog.elapsed_s = _interval(elapsed)
        prog.remaining_s = _interval(remaining) if remaining.strip() != "?" else None
        rate = rate.strip()
        try:
            if rate.endswith("s/it"):
                prog.s_per_it = float(rate[:-4])
            elif rate.endswith("it/s"):
                r = float(rate[:-4])
                prog.s_per_it = 1.0 / r if r > 0 else None
        except ValueError:
            pass
    return prog


class LogMetricsParser:
    """Accumulate what a VeRL driver log says, one line at a time.

    `feed` takes complete lines; `feed_text` takes arbitrary chunks of a stream (it
    keeps an unterminated tail until its newline arrives - a line being written must not
    be parsed half-way) and `flush` processes that tail at end of input.

    State: `steps` (step -> metrics, in order of first appearance; a step printed again
    updates its metrics), `total_steps`, `progress` (last tqdm bar), `last_checkpoint`
    (from `global_step_N` in checkpoint messages), `malformed` (step lines that lost a
    segment, plus stray metric fragments that belong to no step line), `lines`.
    `seen_at[step]` is the wall-clock time the step line was fed, for ETA from a live
    stream (pass `clock=None` to disable).
    """

    def __init__(self, clock: Callable[[], float] | None = time.time) -> None:
        self.steps: dict[int, dict[str, float]] = {}
        self.total_steps: int | None = None
        self.progress: TqdmProgress | None = None
        self.last_checkpoint: int | None = None
        self.malformed = 0
        self.lines = 0
        self.seen_at: dict[int, float] = {}
        self._clock = clock
        self._tail = ""
        # The last segment of the last step line (its text after the last ` - `), kept
        # until the next line shows whether the line was wrapped; with its step, the
        # line's bad segment count, the bad count before that segment, and whether that
        # segment was bad. Only the last segment is re-parsed with a continuation, never
        # the whole joined line: the cost of a line does not grow with what came before
        # it (a re-parse of the joined line was quadratic on 8000 continuation lines).
        self._pending: str | None = None
        self._pending_step = 0
        self._pending_bad = 0
        self._pending_prefix_bad = 0
        self._pending_last_bad = False
        # The Ray prefix of the pending step line (`(TaskRunner pid=N)`), or "" for none:
        # a line Ray's log streaming cut in two carries it again on its rest.
        self._pending_ray_prefix = ""
        # The distinct metric names kept (MAX_METRIC_NAMES). None: not built yet (a parser
        # restored from the parse cache builds it from its steps); a set is not cached.
        self._names: set[str] | None = None
        self.names_dropped = 0  # values dropped: their name was past the cap, or too long
        self._names_noted = False

    # -- input --------------------------------------------------------------------------

    def feed(self, line: str) -> int | None:
        """Process one line; return the step number if it was a step line."""
        self.lines += 1
        if "\r" in line:
            return self._parts(line)
        return self._one(line.rstrip("\n"))

    def feed_many(self, lines: Iterable[str]) -> int:
        """Process many lines; return how many were step lines.

        Most lines of a driver log are worker chatter. They are dismissed here, inline,
        by substring tests on the raw line (no method call, no ANSI stripping, no
        regex); only lines holding one of the markers go on to `_one`."""
        n = 0
        count = 0
        one = self._one
        for line in lines:
            count += 1
            if (
                self._pending is None
                and "step:" not in line
                and " - " not in line
                and "Training Progress" not in line
                and "Total training steps" not in line
                and "global_step_" not in line
                and "\r" not in line
            ):
                continue
            if "\r" in line:
                if self._parts(line) is not None:
                    n += 1
            elif one(line.rstrip("\n")) is not None:
                n += 1
        self.lines += count
        return n

    def _parts(self, line: str) -> int | None:
        """A physical line holding several `\r`-separated redraws: each in turn."""
        got = None
        for part in line.split("\r"):
            part = part.rstrip("\n")
            if part.strip():
                r = self._one(part)
                got = r if r is not None else got
        return got

    def feed_text(self, chunk: str) -> int:
        """Process a chunk of a stream; a trailing partial line waits for its end."""
        if not chunk:
            return 0
        text = self._tail + chunk
        lines = text.split("\n")
        self._tail = lines.pop()
        if len(self._tail) > MAX_LINE:
            # a stream that never ends its line: hand it on in pieces (as the SSH layer
            # does), or every chunk would copy the whole growing tail (quadratic)
            lines.append(self._tail)
            self._tail = ""
        return self.feed_many(lines)

    def flush(self) -> int:
        """End of input: process a final line that had no newline."""
        tail, self._tail = self._tail, ""
        return self.feed_many([tail]) if tail else 0

    # -- results ------------------------------------------------------------------------

    @property
    def last_step(self) -> int | None:
        return max(self.steps) if self.steps else None

    def rows(self) -> list[dict[str, Any]]:
        """``[{"step": N, "metrics": {...}}]`` sorted by step (copies)."""
        return [{"step": s, "metrics": dict(self.steps[s])} for s in sorted(self.steps)]

    def summary(self) -> dict[str, Any]:
        """Counters for status displays and tests."""
        return {
            "lines": self.lines,
            "steps": len(self.steps),
            "last_step": self.last_step,
            "total_steps": self.total_steps,
            "malformed": self.malformed,
            "last_checkpoint": self.last_checkpoint,
            "progress": self.progress.to_dict() if self.progress else None,
        }

    def take_names_note(self) -> str | None:
        """Once per run, when names were first dropped: what a person should be told."""
        if not self.names_dropped or self._names_noted:
            return None
        self._names_noted = True
        return (f"the log names more than {MAX_METRIC_NAMES} distinct metrics (or names longer than "
                f"{MAX_METRIC_NAME} characters): the values of the others are not kept")

    # -- internals ----------------------------------------------------------------------

    def _one(self, line: str) -> int | None:
        line = strip_escapes(line)
        if self._pending is not None:
            behind = self._rest_behind_own_prefix(line)
            if self._continue(line) if behind is None else self._continue(behind, behind_prefix=True):
                return None
            self._pending = None
        if "step:" in line:
            got = _parse(line)
            if got is not None:
                step, metrics, bad, last_bad = got
                self._record(step, metrics)
                if bad:
                    self.malformed += 1
                rest = _parse_rest(line)
                tail = _last_segment(rest[1]) if rest is not None else ""
                self._pending = tail
                self._pending_step = step
                self._pending_bad = bad
                self._pending_prefix_bad = bad - (_careful_metrics(tail)[1] if tail else 0)
                self._pending_last_bad = last_bad
                m = _RAY_PREFIX_RE.match(line)
                self._pending_ray_prefix = m.group(0).strip() if m else ""
                return step
        if "Training Progress" in line:
            prog = parse_tqdm(line)
            if prog is not None:
                self.progress = prog
            return None
        if "Total training steps" in line:
            m = _TOTAL_RE.search(line)
            if m:
                self.total_steps = int(m.group(1))
            return None
        if "global_step_" in line and ("checkpoint" in line.lower()
                                       or "local_global_step_folder" in line):
            found = _CKPT_RE.findall(line)
            if found:
                self.last_checkpoint = int(found[-1])
            return None
        if " - " in line and _FRAGMENT_RE.match(line):
            self.malformed += 1  # metrics with no step line to belong to
        return None

    def _admit(self, metrics: dict[str, float]) -> None:
        """Drop from `metrics` (ours to change) the names past MAX_METRIC_NAMES and the too
        long ones. A step of known names costs one C-level subset test."""
        names = self._names
        if names is None:
            names = self._names = {k for m in self.steps.values() for k in m}
        if names.issuperset(metrics):
            return
        for k in [k for k in metrics if k not in names]:
            if len(k) > MAX_METRIC_NAME or len(names) >= MAX_METRIC_NAMES:
                del metrics[k]
                self.names_dropped += 1
            else:
                names.add(k)

    def _record(self, step: int, metrics: dict[str, float]) -> None:
        self._admit(metrics)
        cur = self.steps.get(step)
        if cur is None:
            self.steps[step] = metrics  # fresh from _parse, owned by us
            if self._clock is not None:
                self.seen_at[step] = self._clock()
        else:
            cur.update(metrics)

    def _rest_behind_own_prefix(self, line: str) -> str | None:
        """The text of a line behind the pending step line's own Ray prefix (without
        the one space Ray puts after it), else None. Ray's log streaming, reading a long
        line (real VeRL's are 3-5 KB) while it was being written, forwards it as two
        lines, each behind the actor's prefix (seen in CI under load: `... -
        timing_s/adv:15.11 -`, then `(TaskRunner pid=N)  response_length/mean:...`).
        Whether it is the rest of the step line, `_continue` decides as for a wrapped
        line: the join must leave every segment whole (the actor's next message,
        `Saving checkpoint - done`, does not)."""
        prefix = self._pending_ray_prefix
        if not prefix or not line.startswith(prefix):
            return None
        m = _RAY_PREFIX_RE.match(line)
        if m is None or m.group(0).strip() != prefix:
            return None
        rest = line[m.end():]
        return rest[1:] if rest.startswith(" ") else rest

    def _continue(self, line: str, behind_prefix: bool = False) -> bool:
        """Join `line` to the pending step line if it is the rest of a wrapped line (or,
        `behind_prefix`, of a line Ray forwarded in two: its own leading space is the
        line's, e.g. the one after a cut ` -`)."""
        if not line or (line[0] in " \t([" and not behind_prefix) or "Training Progress" in line:
            return False
        if _STEP_RE.search(line):
            return False
        if " - " not in line and not self._pending_last_bad:
            return False
        assert self._pending is not None
        if "[repeated" in line:
            line = _REPEATED_RE.sub("", line)
        text = (self._pending + line.rstrip()).strip()
        if not text or len(self._pending) > MAX_SEGMENT:
            return False  # no metric segment is that long: not a wrap
        metrics, bad, last_bad = _careful_metrics(text)
        if bad - (1 if last_bad else 0):
            return False  # the join broke a segment inside: not the rest of this line
        self._record(self._pending_step, metrics)
        total_bad = self._pending_prefix_bad + bad
        self.malformed += (1 if total_bad else 0) - (1 if self._pending_bad else 0)
        self._pending = _last_segment(text)
        self._pending_bad = total_bad
        self._pending_last_bad = last_bad
        return True
