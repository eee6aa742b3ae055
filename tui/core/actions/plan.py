"""What `submit` will launch, said before it launches: the run, where it resumes, the
cards, and the preflight's verdict.

A submit starts a 32-card job that runs for a day; one key press must not do that
blind. The console's `s` and the CLI's `submit` (its y/N prompt and `--dry-run`) show
the same `SubmitPlan`, built here from the profile, the checkpoint directory and the
preflight checks run a moment before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tui.core.actions.base import Remote
from tui.core.actions.events import ActionEvent
from tui.core.actions.resume import TRACKER, fresh_profile, resume_parent, resume_step
from tui.core.job.metrics import fmt_range
from tui.core.profile import Profile
from tui.core.state import ACTIVE_JOB_STATUSES, ClusterState

__all__ = ["TRACKER", "SubmitPlan", "build_plan", "resume_parent", "resume_step", "submit_plan"]

if TYPE_CHECKING:
    from tui.core.checks import CheckResult

FRESH_S = 60.0
"""A verdict older than this is not trusted to stand for the checks at submit time."""



@dataclass(frozen=True)
class SubmitPlan:
    """Everything the confirmation names. `failed` non-empty: submit would refuse."""

    profile: str
    run_name: str
    project: str | None
    resume: str  # "from scratch" or "from step N (<dir>)"
    resume_step: int | None
    nodes: int
    cards: int
    head: str
    total_steps: int | None
    duration: str | None  # e.g. "about 20.0 h at 4-5 min a step"
    passed: int
    warnings: int
    failed_ids: tuple[str, ...]
    warning_ids: tuple[str, ...]
    running: str | None = None  # a job already on the cluster, e.g. "job raysubmit_x at step 812"
    resume_run: str | None = None  # the earlier run whose checkpoint it resumes (`resume_parent`)
    taken_at: float = field(default_factory=time.time)
    results: tuple[CheckResult, ...] = ()
    from_scratch: bool = False  # `submit --fresh`: step 0 whatever the checkpoint dir holds
    checkpoint_dir: str = ""

    @property
    def finished(self) -> bool:
        """The checkpoint it would resume from is the run's last step: a resume would end at
        once (VeRL stops when its step passes the total). Only a fresh start trains."""
        return (not self.from_scratch and self.resume_step is not None and bool(self.total_steps)
                and self.resume_step >= (self.total_steps or 0))

    @property
    def ok(self) -> bool:
        """Submit would go ahead: no check failed and no job is running."""
        return not self.failed_ids and not self.running

    def fresh(self, now: float | None = None) -> bool:
        """The verdict may stand for the checks `submit` would run: it passed, and it
        was taken less than `FRESH_S` ago."""
        return self.ok and ((time.time() if now is None else now) - self.taken_at) < FRESH_S

    def verdict(self) -> str:
        # results counted as the preflight list shows them (one per check and node), the
        # failed checks named once: "4 failed (containers.images)", never "1 failed" beside 4 rows
        failed = sum(getattr(r.status, "value", r.status) == "fail" for r in self.results) or len(self.failed_ids)
        text = f"preflight: {self.passed} passed, {self.warnings} warnings, {failed} failed"
        if self.failed_ids:
            text += f" ({', '.join(self.failed_ids)})"
        return text

    def lines(self) -> list[str]:
        """The plan as text, one fact a line (the modal and the CLI print these)."""
        out = [f"run:     {self.run_name}" + (f" (project {self.project})" if self.project else ""),
               f"resume:  {self.resume}" + (f", the checkpoint of run {self.resume_run}" if self.resume_run else ""),
               f"cards:   {self.cards} on {self.nodes} nodes, head {self.head}"]
        if self.total_steps:
            out.append(f"steps:   {self.total_steps}" + (f", {self.duration}" if self.duration else ""))
        if self.finished:
            out.append(f"finished: the checkpoint is the run's last step ({self.resume_step} of {self.total_steps}): "
                       "resuming would end at once; start it fresh (`submit --fresh`) to train again from step 0")
        if self.from_scratch and self.resume_step is not None:
            out.append(f"fresh:   the checkpoints in {self.checkpoint_dir} (up to step {self.resume_step}) are "
                       "overwritten as the new run reaches their steps")
        out.append(self.verdict())
        if self.running:
            out.append(f"running: {self.running}: submit will refuse (stop it first with x)")
        if self.failed_ids:
            out.append("submit will refuse: fix the failed checks first (p lists them with their fixes)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "run_name": self.run_name, "project": self.project,
                "resume": self.resume, "resume_step": self.resume_step, "resume_run": self.resume_run,
                "nodes": self.nodes,
                "cards": self.cards, "head": self.head, "total_steps": self.total_steps,
                "duration": self.duration, "passed": self.passed, "warnings": self.warnings,
                "failed": list(self.failed_ids), "warning_ids": list(self.warning_ids),
                "running": self.running, "ok": self.ok, "fresh": self.from_scratch, "finished": self.finished}


def running_job_text(state: ClusterState | None) -> str | None:
    """The job a cluster state shows running (or about to), as questions name it:
    "job raysubmit_x at step 812". None: no job runs."""
    job = state.job if state is not None else None
    if job is None or job.status not in ACTIVE_JOB_STATUSES:
        return None
    return f"job {job.id}" + (f" at step {job.step}" if job.step is not None else f", {job.status.lower()}")


def _resume(profile: Profile, step: int | None) -> str:
    mode = str(profile.override_value("trainer.resume_mode", "auto") or "auto")
    ckpt = profile.paths.checkpoint_dir
    if mode == "disable":
        return "from scratch (trainer.resume_mode=disable)"
    if mode == "resume_path":
        return f"from {profile.override_value('trainer.resume_from_path', '?')} (trainer.resume_mode=resume_path)"
    if step is None:
        return f"from scratch (no checkpoint in {ckpt})"
    return f"from step {step} ({ckpt}/global_step_{step})"


def _duration(profile: Profile, total: int | None) -> str | None:
    rng = profile.monitoring.step_time_min
    if not total or not rng:
        return None
    lo, hi = rng
    hours = total * (lo + hi) / 2 / 60
    span = f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.1f} h" if hours >= 1 else f"{hours * 60:.0f} min"
    # the range in the unit a person reads it ("15-20 min", "0.1-8 s"), not always minutes
    return f"about {span} at {fmt_range('step_time', lo * 60, hi * 60)} a step (monitoring.step_time_min)"


def build_plan(profile: Profile, results: list[CheckResult], resume_step: int | None,
               running: str | None = None, now: float | None = None,
               resume_run: str | None = None, fresh: bool = False) -> SubmitPlan:
    """The plan from what was read (pure: the console's demo and tests build it too).
    `fresh`: as `submit --fresh` would launch it (`fresh_profile`)."""
    from tui.core.checks import CheckStatus

    if fresh:
        profile, resume_run = fresh_profile(profile), None
    total = profile.monitoring.total_steps or _int(profile.override_value("trainer.total_training_steps"))
    failed = tuple(dict.fromkeys(r.id for r in results if r.status is CheckStatus.FAIL))
    warned = tuple(dict.fromkeys(r.id for r in results if r.status is CheckStatus.WARN))
    project = profile.override_value("trainer.project_name")
    return SubmitPlan(
        profile=profile.name,
        run_name=str(profile.override_value("trainer.experiment_name") or profile.name),
        project=str(project) if project else None,
        resume=_resume(profile, resume_step),
        resume_step=resume_step,
        nodes=len(profile.nodes),
        cards=profile.total_gpus,
        head=profile.head.name,
        total_steps=total,
        duration=_duration(profile, total),
        passed=sum(r.status is CheckStatus.PASS for r in results),
        warnings=sum(r.status is CheckStatus.WARN for r in results),
        failed_ids=failed,
        warning_ids=warned,
        running=running,
        resume_run=resume_run,
        taken_at=time.time() if now is None else now,
        results=tuple(results),
        from_scratch=fresh,
        checkpoint_dir=profile.paths.checkpoint_dir,
    )


def preflight_events(results: list[CheckResult]) -> list[ActionEvent]:
    """What submit says of its preflight: each result that did not pass (with its fix),
    then, when a check failed, the refusal that ends it."""
    from tui.core.checks import CheckStatus, check_event

    out: list[ActionEvent] = []
    for r in results:
        if r.status is not CheckStatus.PASS:
            ev = check_event(r, action="submit")
            if r.status in (CheckStatus.FAIL, CheckStatus.WARN):
                ev.kind = "warn"
                ev.message += f" (fix: {r.fix})" if r.fix else ""
            out.append(ev)
    failed = [r for r in results if r.status is CheckStatus.FAIL]
    if failed:
        ids = list(dict.fromkeys(r.id for r in failed))
        out.append(ActionEvent("submit", "fail", f"{len(failed)} preflight check(s) failed "
                                                 f"({', '.join(ids)}); fix them or use --skip-checks"))
    return out


def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


async def submit_plan(profile: Profile, remote: Remote, running: str | None = None,
                      fresh: bool = False) -> SubmitPlan:
    """Read the checkpoint tracker and run the preflight (as `submit` would), then the
    plan. `running`: the job the caller knows is on the cluster (the console's watched
    job); submit itself asks Ray again. `fresh`: as `submit --fresh` launches it."""
    from tui.core.checks import run_checks

    results = await run_checks(fresh_profile(profile) if fresh else profile, remote=remote, before_submit=True)
    step = await resume_step(profile, remote)
    return build_plan(profile, results, step, running=running, resume_run=resume_parent(profile, step), fresh=fresh)
