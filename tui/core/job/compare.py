"""Runs side by side (`g` then `c`, `rlconsole metrics --job A --job B`): another run's
series for a key, read from its local spool (no SSH), and a resumed run's curve stitched
onto its parent's by step.

Stitching: a run resumed from step N of its parent starts its step lines after N; the
curve a user wants is the parent's points before the child's first step, then the
child's (the parent's steps past the resume point are the ones the child redid). A chain
of resumes is followed to its root (a cycle in the history, or a parent with no spool,
ends the chain there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

Point = tuple[int, float]
StepMetrics = dict[int, dict[str, float]]

MAX_CHAIN = 32
"""Resumes followed at most (a history edited into a long or looping chain stays cheap)."""


def spool_steps(base: Path) -> StepMetrics:
    """Every step's metrics from the spooled driver log under `base` (the parse cache the
    console left is reused; opened as a reader, so a console following it keeps its lock)."""
    from tui.core.job.parsecache import parse_spool

    parser = parse_spool(base)
    if parser is None:
        return {}
    return {s: dict(m) for s, m in parser.steps.items()}


def series_of(steps: StepMetrics, keys: Sequence[str]) -> list[Point]:
    """The first of `keys` the run has, as (step, value) in step order."""
    for key in keys:
        pts = sorted((s, float(m[key])) for s, m in steps.items() if key in m)
        if pts:
            return pts
    return []


def stitch(parent: Sequence[Point], child: Sequence[Point]) -> list[Point]:
    """The parent's points before the child's first step, then the child's."""
    if not child:
        return list(parent)
    first = min(s for s, _ in child)
    return [p for p in parent if p[0] < first] + sorted(child)


def stitch_steps(parent: StepMetrics, child: StepMetrics) -> StepMetrics:
    """`stitch` for whole steps: the parent's steps before the child's first, then the child's."""
    if not child:
        return dict(parent)
    first = min(child)
    out = {s: m for s, m in parent.items() if s < first}
    out.update(child)
    return dict(sorted(out.items()))


def stitched_steps(job_id: str, parent_of: Callable[[str], str | None],
                   load: Callable[[str], StepMetrics]) -> StepMetrics:
    """`job_id`'s steps continuing its parent's (and that one's parent's ...) by step."""
    chain = [job_id]
    while len(chain) < MAX_CHAIN:
        p = parent_of(chain[-1])
        if p is None or p in chain:
            break
        chain.append(p)
    out: StepMetrics = {}
    for jid in reversed(chain):  # the root first
        out = stitch_steps(out, load(jid))
    return out


def stitched_series(job_id: str, keys: Sequence[str], parent_of: Callable[[str], str | None],
                    load: Callable[[str], StepMetrics]) -> list[Point]:
    """`job_id`'s series for the first of `keys` it has, stitched onto its parents'."""
    return series_of(stitched_steps(job_id, parent_of, load), keys)


def spool_loader(root: Path | None, profile_name: str | None
                  ) -> tuple[Callable[[str], str | None], Callable[[str], StepMetrics]]:
    """parent_of (the history records' `extra.parent.job_id`) and load (the spool under
    `root`, the id checked by `safepath`: a foreign history names no path)."""
    from tui.core.job.history import runs
    from tui.core.locations import spool_root
    from tui.core.safepath import UnsafeName, confined, safe_job_id

    base = root or spool_root()
    parents: dict[str, str] = {}
    for rec in runs(profile_name):
        p = rec.extra.get("parent")
        if isinstance(p, dict) and isinstance(p.get("job_id"), str):
            parents[rec.job_id] = p["job_id"]

    def load(jid: str) -> StepMetrics:
        try:
            return spool_steps(confined(base, safe_job_id(jid)))
        except UnsafeName:
            return {}

    return parents.get, load


def side_by_side(job_ids: Sequence[str], keys: Sequence[str] = (), root: Path | None = None
                 ) -> list[dict[str, object]]:
    """Runs side by side (`rlconsole metrics --job A --job B`): the contract's rows
    ``[{"step": N, "metrics": {"A:key": v, "B:key": w}}]`` over the union of steps, each
    run stitched onto the runs it resumed; only `keys` when given."""
    parent_of, load = spool_loader(root, None)
    merged: dict[int, dict[str, float]] = {}
    for jid in job_ids:
        for step, m in stitched_steps(jid, parent_of, load).items():
            row = merged.setdefault(step, {})
            for k, v in m.items():
                if not keys or k in keys:
                    row[f"{jid}:{k}"] = v
    return [{"step": s, "metrics": merged[s]} for s in sorted(merged) if merged[s]]


def load_run_series(job_id: str, keys: Sequence[str], profile_name: str | None = None,
                    root: Path | None = None) -> list[Point]:
    """A run's series for a key from the local spools, stitched onto the runs it resumed
    (the parent is the history record's `extra.parent.job_id`)."""
    parent_of, load = spool_loader(root, profile_name)
    return stitched_series(job_id, keys, parent_of, load)


STEP_TIME_KEYS = ("timing_s/step", "step_time_s", "step_time")
"""VeRL's seconds per step (older names after the first): the wall-time axis is their sum."""


def by_wall_time(points: Sequence[Point], step_times: Sequence[Point]) -> list[tuple[float, float]]:
    """`points` against hours of training: each step's x is the sum of the step times up
    to and including it (a stitched run's sum runs through its parent's steps; the time
    between runs, queued or down, is not counted). Points of a step with no time are left out."""
    cum: dict[int, float] = {}
    total = 0.0
    for s, t in sorted(step_times):
        total += max(0.0, t)
        cum[s] = total / 3600.0
    return [(cum[s], v) for s, v in points if s in cum]
