"""`rlconsole runs [--json]`: every run of the profile, from local files only (the run
history, the spools, their journals: `tui/core/job/runs.py`), so it answers with the
cluster gone. A figure the local files cannot give is `-` in the table, null in JSON,
and named in the run's `unknown` list.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from tui.core.errors import UsageError
from tui.core.job.runs import RUN_SORTS, RunSummary, list_runs, run_cells, sort_runs
from tui.core.profile import Profile
from tui.core.safetext import shown

ID_WIDTH = 40
"""Run ids (`<name>-<date>-<time>`, 40 characters for the seed's run) are told apart by their
end: a longer one keeps its start and its end, cut in the middle."""


def _fit(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep - keep * 2 // 3] + "…" + text[len(text) - keep * 2 // 3:]


def table(rs: list[RunSummary], cards_per_node: float | None = None) -> list[str]:
    """The runs as text rows (the console's `R` view shows the same cells, `run_cells`). A
    run's id is Ray's and its notes quote the history and the journal: outside text, made
    safe to show (the one rule, tui/core/safetext.py) before it is fitted to its column."""
    idw = min(ID_WIDTH, max([3, *(len(shown(s.id)) for s in rs)]))
    head = f"{'RUN':<{idw}} {'STATUS':<10} {'STEPS':>11} {'STARTED':<16} {'WALL':>7} {'GPU-H':>8} " \
           f"{'REWARD':>8} {'BEST':>8} {'TOK/S/NODE':>10}  NOTES"
    out = [head]
    for s in rs:
        rid, status, steps, started, wall, gpu_h, reward, best, tps, notes = run_cells(s, cards_per_node)
        out.append(f"{_fit(shown(rid), idw):<{idw}} {shown(status)[:10]:<10} {steps:>11} {started:<16} "
                   f"{wall:>7} {gpu_h:>8} {reward:>8} {best:>8} {tps:>10}  {shown(notes)}")
    return out


def run_runs(profile: Profile, as_json: bool, out: TextIO | None = None, sort: str | None = None) -> int:
    out = out or sys.stdout
    rs = list_runs(profile.name, default_cards=profile.total_gpus)
    if sort:
        if sort not in RUN_SORTS:
            raise UsageError(f"runs --sort {sort!r}: sort by one of {', '.join(RUN_SORTS)}")
        rs = sort_runs(rs, sort)
    if as_json:
        print(json.dumps([s.to_json() for s in rs], indent=2), file=out)
        return 0
    if not rs:
        print(f"rlconsole: no runs of {profile.name} in the history or the spools", file=sys.stderr)
        return 0
    for line in table(rs, profile.total_gpus / len(profile.nodes) if profile.nodes else None):
        print(shown(line), file=out)
    return 0
