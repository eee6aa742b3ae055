"""`rlconsole logs [--job ID] [--follow]`: the job's driver log, from the local spool on.

What the spool already holds is printed from disk; only what is new comes over SSH.
Interrupting and running it again resumes where it stopped: no line twice, none lost.
"""

from __future__ import annotations

import asyncio
import sys

from .errors import ActionError
from .profile import Profile


async def _logs(profile: Profile, job_id: str | None, follow: bool) -> int:
    from .actions.remote import PoolRemote
    from .jobwatch import JobWatcher, find_job
    from .ssh import SessionPool

    pool = SessionPool(profile)
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
            sys.stdout.write("".join(line + "\n" for line in lines))
            sys.stdout.flush()

        w = JobWatcher(profile, pool, job_id, on_lines=out)
        # what is already spooled first (a re-attach), then the rest from the node
        n = w.spool.line_count
        for start in range(0, n, 10000):
            out(w.spool.lines(start, min(n, start + 10000)))
        w.reattached = True  # printing is all `logs` needs; metrics are not computed here
        await w.follow_log(once=not follow)
        return 0
    finally:
        await pool.close()


def run_logs(profile: Profile, job_id: str | None = None, follow: bool = False) -> int:
    try:
        return asyncio.run(_logs(profile, job_id, follow))
    except KeyboardInterrupt:
        return 130
