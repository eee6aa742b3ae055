"""`rlconsole logs [--job ID] [--follow] [--tail N]`: the job's driver log, from the local spool on.

What the spool already holds is printed from disk; only what is new comes over SSH.
Interrupting and running it again resumes where it stopped: no line twice, none lost.
With `--tail N` the spool is first brought up to date silently, then its last N lines
are printed (and, with `--follow`, what arrives after them).

Each line is printed as a terminal shows it, with the log's own colours: a line redrawn
with carriage returns (tqdm) as its last state, colour sequences (SGR) kept, every other
escape sequence (a window title, a clipboard write, a screen clear; 7- or 8-bit) and
control character dropped (`safetext.shown_log`, the rule the console's log pane uses),
whether stdout is a terminal or a pipe (a file is often read on a terminal next). The
bytes as the job printed them stay in the spool, `<state dir>/spool/<job>/driver.log`.
"""

from __future__ import annotations

import asyncio
import sys

from tui.core.errors import ActionError
from tui.core.profile import Profile
from tui.core.safetext import shown_log
from tui.core.secrets import mask_secrets


async def _logs(profile: Profile, job_id: str | None, follow: bool, tail: int | None = None) -> int:
    from tui.core.actions.remote import PoolRemote
    from tui.core.job.watcher import JobWatcher, find_job
    from tui.core.safepath import UnsafeName, safe_job_id
    from tui.core.transport import open_pool

    if job_id is not None:
        try:
            safe_job_id(job_id)  # it names the spool's directory: refused before connecting
        except UnsafeName as e:
            raise ActionError(f"--job {job_id!r}: not a job id ({e})") from None
    pool = open_pool(profile)
    w: JobWatcher | None = None
    try:
        await pool.open()
        if not pool.head.connected:
            raise ActionError(f"head unreachable: {pool.head.reason}", node=profile.head.name)
        if job_id is None:
            found = await find_job(profile, PoolRemote(pool, profile))
            if found is None:
                raise ActionError("no job found (none running, none submitted from here); pass --job ID")
            job_id = found[0]

        def out(lines: list[str]) -> None:
            # a driver log echoes its command line and env (a token among them): masked; and
            # it is the job's text: no sequence but colour reaches the terminal
            sys.stdout.write("".join(shown_log(mask_secrets(line)) + "\n" for line in lines))
            sys.stdout.flush()

        if tail is not None:
            live = {"on": False}
            w = JobWatcher(profile, pool, job_id, on_lines=lambda lines: out(lines) if live["on"] else None)
            w.reattached = True
            await w.follow_log(once=True)  # catch up silently, then print the last N
            out(w.spool.tail(max(0, tail)) if tail > 0 else [])
            if follow:
                live["on"] = True
                await w.follow_log(once=False)
            return 0
        w = JobWatcher(profile, pool, job_id, on_lines=out)
        # what is already spooled first (a re-attach), then the rest from the node
        n = w.spool.line_count
        for start in range(0, n, 10000):
            out(w.spool.lines(start, min(n, start + 10000)))
        w.reattached = True  # printing is all `logs` needs; metrics are not computed here
        await w.follow_log(once=not follow)
        return 0
    finally:
        if w is not None:
            w.spool.close()  # give the job's spool lock back at once
        await pool.close()


def run_logs(profile: Profile, job_id: str | None = None, follow: bool = False,
             tail: int | None = None) -> int:
    try:
        return asyncio.run(_logs(profile, job_id, follow, tail))
    except KeyboardInterrupt:
        return 130
