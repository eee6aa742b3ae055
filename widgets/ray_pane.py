"""Ray as the head sees it: nodes alive against the profile's expectation, GPUs used
against total, and the jobs with their status.

"4/4 nodes, 32/32 GPUs" is the seed's own acceptance test for `setup-ray`, so it is the
first line; a shortfall is coloured, not merely printed.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.core.safetext import shown
from tui.core.state import ClusterState, JobStatus

STATUS_STYLE: dict[str, str] = {
    JobStatus.RUNNING: "$text-success", JobStatus.PENDING: "$text-warning", JobStatus.SUCCEEDED: "$text-primary",
    JobStatus.FAILED: "$text-error", JobStatus.STOPPED: "$text-muted",
}
MAX_JOBS = 6
"""Jobs listed, newest first; older ones stay one `ray job list` away."""


ALLOCATION_STYLE: dict[str, str] = {"RUNNING": "$text-success", "PENDING": "$text-warning",
                                    "CONFIGURING": "$text-warning", "NONE": "$text-muted"}


def allocation_line(state: ClusterState) -> Content | None:
    """A Slurm profile's allocation (job id, state, nodes, time left, why pending) as
    the pane's first line; None for any other profile."""
    a = state.allocation
    if a is None:
        return None
    return Content.assemble((shown(a.short()), ALLOCATION_STYLE.get(a.state, "$text-error")))


def ray_markup(state: ClusterState, expected_nodes: int, expected_gpus: int) -> Content:
    """The pane's text. The error and job ids come from the head, so they join as plain
    Content pieces, never as markup, through the one rule for outside text."""
    alloc = allocation_line(state)
    body = _ray_body(state, expected_nodes, expected_gpus)
    return body if alloc is None else Content("\n").join([alloc, body])


def _starting(state: ClusterState, used: float) -> bool:
    """A job just submitted holds no GPU until its workers are placed: "0/32 used" alone
    read as "the job is not using the cluster"."""
    job = state.job
    return used == 0 and job is not None and job.status in (JobStatus.PENDING, JobStatus.RUNNING)


def _ray_body(state: ClusterState, expected_nodes: int, expected_gpus: int) -> Content:
    r = state.ray
    if not r.available:
        why = shown(r.error or "not started")
        return Content.assemble(("Ray not available", "$text-muted"), " ", (f"({why})", "dim"),
                                f"\nexpected {expected_nodes} nodes, {expected_gpus} GPUs")
    n_style = "$text-success" if r.nodes_alive >= expected_nodes else "$text-error"
    g_style = "$text-success" if r.gpus_total >= expected_gpus else "$text-error"
    lines: list[Content] = [Content.from_markup(line) for line in (
        f"nodes [{n_style}]{r.nodes_alive}/{expected_nodes}[/] alive"
        + (f"  [$text-error]{r.nodes_dead} dead[/]" if r.nodes_dead else ""),
        f"GPUs  {r.gpus_used:.0f}/[{g_style}]{r.gpus_total:.0f}[/] used"
        + (f" [dim](expected {expected_gpus})[/]" if r.gpus_total != expected_gpus else "")
        + (" [dim](job starting: its workers take them next)[/]" if _starting(state, r.gpus_used) else ""),
    )]
    jobs = sorted(r.jobs, key=lambda j: j.start_time or 0, reverse=True)[:MAX_JOBS]
    if not jobs:
        lines.append(Content.assemble(("no jobs", "dim")))
    for j in jobs:
        st = STATUS_STYLE.get(j.status, "$text")
        lines.append(Content.assemble((f"{shown(j.status):<9}", st), " ", shown(j.id)))
    return Content("\n").join(lines)


class RayPane(Static):
    """Ray summary and job list; redrawn whole at the probe rate (a few short lines)."""

    DEFAULT_CSS = """
    RayPane { height: auto; }
    """

    def __init__(self, expected_nodes: int, expected_gpus: int, **kw) -> None:
        super().__init__("[dim]waiting for the first probe…[/]", **kw)
        self.expected_nodes = expected_nodes
        self.expected_gpus = expected_gpus
        self.border_title = "Ray"
        self._last: Content | str = ""

    def update_state(self, state: ClusterState) -> None:
        markup = ray_markup(state, self.expected_nodes, self.expected_gpus)
        if markup != self._last:  # height is auto: every update costs a layout pass
            self._last = markup
            self.update(markup)
