"""`rlconsole runs [--json]`: every run of the profile, from local files only (the run
history, the spools, their journals: `tui/core/job/runs.py`), so it answers with the
cluster gone. A figure the local files cannot give is `-` in the table, null in JSON,
and named in the run's `unknown` list.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TextIO

from tui.core.job.runs import RunSummary, list_runs
from tui.core.profile import Profile
from tui.core.safetext import shown


def _cell(x: object, fmt: str = "{}") -> str:
    return "-" if x is None else fmt.format(x)


def table(rs: list[RunSummary]) -> list[str]:
    """The runs as text rows (the console's `R` view shows the same columns). A run's id
    is Ray's and its notes quote the history and the journal: outside text, made safe to
    show (the one rule, tui/core/safetext.py) before it is cut to its column."""
    head = f"{'RUN':<28} {'STATUS':<10} {'STEPS':>11} {'STARTED':<16} {'WALL':>7} {'GPU-H':>8} " \
           f"{'REWARD':>8} {'BEST':>8} {'TOK/S':>7}  NOTES"
    out = [head]
    for s in rs:
        steps = f"{_cell(s.step)}/{_cell(s.total_steps)}"
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started_at)) if s.started_at else "-"
        notes = [shown(n) for n in (s.resumed_text, f"diagnosis: {s.diagnosis}" if s.diagnosis else None) if n]
        out.append(f"{shown(s.id)[:28]:<28} {shown(s.status)[:10]:<10} {steps:>11} {started:<16} "
                   f"{_cell(s.wall_s and s.wall_s / 3600, '{:.1f}h'):>7} {_cell(s.gpu_hours, '{:.2f}'):>8} "
                   f"{_cell(s.last_reward, '{:.3f}'):>8} {_cell(s.best_reward, '{:.3f}'):>8} "
                   f"{_cell(s.mean_throughput, '{:.0f}'):>7}  {'; '.join(notes)}")
    return out


def run_runs(profile: Profile, as_json: bool, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    rs = list_runs(profile.name, default_cards=profile.total_gpus)
    if as_json:
        print(json.dumps([s.to_json() for s in rs], indent=2), file=out)
        return 0
    if not rs:
        print(f"rlconsole: no runs of {profile.name} in the history or the spools", file=sys.stderr)
        return 0
    for line in table(rs):
        print(shown(line), file=out)
    return 0
