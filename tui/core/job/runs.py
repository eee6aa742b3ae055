"""Every run of a profile, from local files only: the run history, each run's spool
(its driver log) and its journal. No SSH: `rlconsole runs` answers on a laptop with the
cluster gone; what the local files cannot tell is null and named in `unknown`.

- status, ended, GPU-hours: from the journal's state entries (the console, `watch` or
  `status` wrote them while it watched). GPU-hours are the cards times the time spent
  RUNNING (from a RUNNING entry to the next state entry; a run still RUNNING counts up
  to now). A run nobody watched has no states: its status is unknown.
- steps, rewards, throughput, checkpoint: the spool's driver log, parsed (with the parse
  cache the console left, so a 1 GB log is not parsed again).
- the diagnosis: the last alert of the journal that named one.
- the parent: "resumed from step N of <run>", recorded at submit (`actions/plan.py`).
"""

from __future__ import annotations

import math
import os
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tui.core.job.history import RunRecord, runs
from tui.core.job.journal import Entry, Journal
from tui.core.job.metrics import fmt_duration
from tui.core.state import JobStatus

_TERMINAL = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}


@dataclass
class RunSummary:
    """One run as `runs` lists it (the JSON fields are these, `unknown` included)."""

    id: str
    name: str | None = None
    profile: str | None = None
    status: str = JobStatus.UNKNOWN
    step: int | None = None
    total_steps: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    wall_s: float | None = None
    cards: int | None = None
    gpu_hours: float | None = None
    last_reward: float | None = None
    best_reward: float | None = None
    mean_throughput: float | None = None  # tokens/s per card, mean over the run's steps
    last_checkpoint: int | None = None
    diagnosis: str | None = None
    parent: dict[str, Any] | None = None  # {"job_id", "step"}: resumed from that run's checkpoint
    unknown: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def resumed_text(self) -> str | None:
        if not self.parent:
            return None
        return f"resumed from step {self.parent.get('step')} of {self.parent.get('job_id')}"


def _f(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _spool_metrics(base: Path) -> dict[str, Any]:
    """Steps, total, rewards, throughput and checkpoint from the spooled driver log
    (opened as a reader: a console following it keeps its lock)."""
    from tui.core.job.parsecache import parse_spool

    parser = parse_spool(base)
    if parser is None:
        return {}
    rewards: list[tuple[int, float]] = []
    for step, m in parser.steps.items():
        r = _f(m.get("critic/rewards/mean", m.get("critic/score/mean")))
        if r is not None:
            rewards.append((step, r))
    tps = [t for m in parser.steps.values() if (t := _f(m.get("perf/throughput"))) is not None]
    prog = parser.progress
    return {"step": parser.last_step, "total_steps": parser.total_steps or (prog.total if prog else None),
            "last_reward": max(rewards)[1] if rewards else None,
            "best_reward": max(r for _, r in rewards) if rewards else None,
            "mean_throughput": sum(tps) / len(tps) if tps else None,
            "last_checkpoint": parser.last_checkpoint}


def _from_journal(s: RunSummary, entries: list[Entry], now: float) -> None:
    # in time order: writers append what they saw when they saw it, not always in order
    states = sorted((e for e in entries if e.kind == "state" and isinstance(e.data.get("status"), str)),
                    key=lambda e: e.at)
    running_s = 0.0
    for e, nxt in zip(states, [*states[1:], None]):
        if e.data["status"] == JobStatus.RUNNING:
            # the last state still RUNNING: running up to now, as far as anyone saw
            end = nxt.at if nxt is not None else now
            running_s += max(0.0, end - e.at)
    if states:
        s.status = states[-1].data["status"]
        if s.started_at is None:
            s.started_at = states[0].at
        if s.status in _TERMINAL:
            s.ended_at = states[-1].at
        if s.cards:
            s.gpu_hours = round(s.cards * running_s / 3600, 4)
    for e in entries:
        if e.kind == "checkpoint" and isinstance(e.data.get("step"), int):
            s.last_checkpoint = max(s.last_checkpoint or 0, e.data["step"])
        if e.kind == "alert" and e.data.get("diagnosis"):
            s.diagnosis = str(e.data["diagnosis"])


def summarize_run(job_id: str, rec: RunRecord | None, base: Path, now: float | None = None,
                  default_cards: int | None = None) -> RunSummary:
    """One run from its history record (None: found only as a spool) and its spool dir."""
    now = time.time() if now is None else now
    s = RunSummary(id=job_id)
    if rec is not None:
        s.profile = rec.profile
        s.started_at = rec.submitted_at
        s.name = rec.extra.get("run_name") if isinstance(rec.extra.get("run_name"), str) else None
        cards = rec.extra.get("cards")
        s.cards = cards if isinstance(cards, int) and cards > 0 else default_cards
        parent = rec.extra.get("parent")
        s.parent = parent if isinstance(parent, dict) else None
    else:
        s.cards = default_cards
    for k, v in _spool_metrics(base).items():
        if v is not None:
            setattr(s, k, v)
    entries = Journal(base).entries()
    if s.profile is None:
        s.profile = next((str(e.data["profile"]) for e in entries if e.data.get("profile")), None)
    _from_journal(s, entries, now)
    if s.started_at is not None:
        end = s.ended_at if s.ended_at is not None else (now if s.status == JobStatus.RUNNING else None)
        s.wall_s = round(end - s.started_at, 1) if end is not None else None
    s.unknown = [k for k in ("name", "status", "step", "total_steps", "started_at", "ended_at", "wall_s",
                             "cards", "gpu_hours", "last_reward", "mean_throughput")
                 if getattr(s, k) in (None, JobStatus.UNKNOWN)]
    return s


def list_runs(profile_name: str | None, root: Path | None = None, now: float | None = None,
              default_cards: int | None = None) -> list[RunSummary]:
    """Every run of `profile_name` (None: of every profile), oldest first: those in the
    history, then spools the history does not name (another machine's history, a lost
    one) when their journal says they belong to the profile."""
    from tui.core.locations import spool_root
    from tui.core.safepath import UnsafeName, confined, safe_job_id

    root = root or spool_root()
    out: list[RunSummary] = []
    seen: set[str] = set()
    for rec in runs(profile_name):
        if rec.job_id in seen:
            continue
        try:
            base = confined(root, safe_job_id(rec.job_id))
        except UnsafeName:
            continue
        seen.add(rec.job_id)
        out.append(summarize_run(rec.job_id, rec, base, now, default_cards))
    extra: list[RunSummary] = []
    for d in _run_dirs(root, seen):
        s = summarize_run(d.name, None, d, now, default_cards)
        if profile_name is None or s.profile == profile_name:
            extra.append(s)
    extra.sort(key=lambda s: s.started_at or 0)
    return out + extra


def _run_dirs(root: Path, seen: set[str]) -> list[Path]:
    """The spool's run folders the history did not name: real directories only. A symlink
    in the spool (to another user's folder, to `/`) is not followed: `runs` would read,
    and its parse cache write, wherever it points. Each is confined under the root too."""
    from tui.core.safepath import UnsafeName, confined, safe_job_id

    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    out = []
    for name in names:
        if name in seen:
            continue
        p = root / name
        try:
            if not stat.S_ISDIR(os.lstat(p).st_mode):
                continue
            out.append(confined(root, safe_job_id(name)))
        except (OSError, UnsafeName, ValueError):
            continue
    return out


RUN_SORTS: dict[str, str] = {
    "started": "started_at", "reward": "last_reward", "best": "best_reward", "gpu-hours": "gpu_hours",
    "wall": "wall_s", "throughput": "mean_throughput", "steps": "step",
}
"""What runs can be sorted by (`rlconsole runs --sort`, `s` in the console's runs view), and
the RunSummary field each one reads."""


def sort_runs(rs: list[RunSummary], by: str = "started") -> list[RunSummary]:
    """`rs` by `by` (a RUN_SORTS key): `started` oldest first, as `list_runs` gives them;
    a figure biggest first (the best reward, the most GPU-hours on top), runs that did not
    record it last, in their started order. Raises KeyError for an unknown key."""
    field_name = RUN_SORTS[by]
    ordered = sorted(rs, key=lambda s: s.started_at if s.started_at is not None else math.inf)
    if by == "started":
        return ordered
    known = [s for s in ordered if getattr(s, field_name) is not None]
    unknown = [s for s in ordered if getattr(s, field_name) is None]
    return sorted(known, key=lambda s: getattr(s, field_name), reverse=True) + unknown


RUN_COLUMNS = ("run", "status", "steps", "started", "wall", "GPU-h", "reward", "best", "tok/s/node", "notes")
"""The runs' columns, in `rlconsole runs` and the console's `R` view alike."""


def run_cells(s: RunSummary, cards_per_node: float | None) -> list[str]:
    """One run as the text of RUN_COLUMNS: the same units in every view (wall time as a
    duration; throughput per node, as the training pane shows it: VeRL's perf/throughput is
    per card). `-` where nothing recorded the figure. Not made safe to show: id, status and
    notes are outside text, and each face applies the one rule as it shows them."""
    def cell(x: object, fmt: str = "{}") -> str:
        return "-" if x is None else fmt.format(x)

    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started_at)) if s.started_at else "-"
    notes = "; ".join(n for n in (s.resumed_text, f"diagnosis: {s.diagnosis}" if s.diagnosis else None) if n)
    per_node = s.mean_throughput * cards_per_node if s.mean_throughput is not None and cards_per_node else None
    return [s.id, str(s.status), f"{cell(s.step)}/{cell(s.total_steps)}", started,
            fmt_duration(s.wall_s) if s.wall_s is not None else "-", cell(s.gpu_hours, "{:.2f}"),
            cell(s.last_reward, "{:.3f}"), cell(s.best_reward, "{:.3f}"), cell(per_node, "{:,.0f}"), notes]

