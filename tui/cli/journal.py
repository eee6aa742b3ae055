"""`rlconsole journal [RUN] [--json | --markdown]`: what happened to a run (its journal,
`tui/core/job/journal.py`): one line an entry, JSON lines, or a post-mortem page in
Markdown (summary table, timeline, diagnosis, links to the log lines). Local files only.
RUN defaults to the profile's last run.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from tui.core.errors import UsageError
from tui.core.job.history import last_run, runs
from tui.core.job.journal import Journal
from tui.core.profile import Profile
from tui.core.safetext import shown


def run_journal(profile: Profile, run: str | None, fmt: str, out: TextIO | None = None) -> int:
    from tui.core.job.postmortem import markdown
    from tui.core.job.runs import summarize_run
    from tui.core.safepath import UnsafeName

    out = out or sys.stdout
    if run is None:
        rec = last_run(profile.name)
        if rec is None:
            raise UsageError(f"journal: profile {profile.name} has no run in the history; name one (RUN)")
        run = rec.job_id
    try:
        j = Journal.for_job(run)
    except UnsafeName as err:
        raise UsageError(f"journal: {err}") from None
    if not j.base.is_dir():
        raise UsageError(f"journal: no spool of run {run} on this machine ({j.base})")
    entries = j.entries()
    if fmt == "json":
        for e in entries:
            print(json.dumps(e.to_json(), sort_keys=True), file=out)
    elif fmt == "markdown":
        rec = next((r for r in reversed(runs()) if r.job_id == run), None)
        s = summarize_run(run, rec, j.base, default_cards=profile.total_gpus)
        out.write(markdown(s, entries, j.base / "driver.log"))
    else:
        if not entries:
            print(f"rlconsole: run {run} has no journal entries", file=sys.stderr)
        for e in entries:
            # one line an entry; its text came from nodes and logs: the one rule for outside text
            print(shown(e.one_line()), file=out)
    return 0
