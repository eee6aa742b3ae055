"""Finding and ending a stopped job's driver that Ray's own stop missed.

Ray's job supervisor (2.60 measured) stops a driver by signalling the processes it sees
at that moment: the shell it started the entrypoint with, and that shell's children. A
job stopped as it starts can be caught between the two: the supervisor signals a shell
whose Python it has not seen yet, marks the job STOPPED, and that Python goes on,
reparented, joins the cluster and takes every card (measured on the sim under load:
6 of 14 stops made a second or two after the submit; in CI the next module's
preflight found all 32 cards busy). The watchdog Ray starts to kill the driver's process
group once the supervisor exits did not end it either: such a driver trained on.

The driver is found by what Ray gives it and nothing else has: its environment holds the
job's metadata (`RAY_JOB_CONFIG_JSON_ENV_VAR`), where `submit` puts a fresh id per job
(`rayapi.RUN_TAG_KEY`). So the console ends exactly the job the user named, never
another run on the same machine.
"""

from __future__ import annotations

import asyncio
import time

from tui.core.actions.base import Remote
from tui.core.profile import Node, Profile
from tui.core.rayapi import JobTrace
from tui.core.safetext import shown

STRAY_SCRIPT = r"""
n=$1; s=$2
for f in $(grep -laF -- "$n" /proc/[0-9]*/environ 2>/dev/null); do
  p=${f#/proc/}; p=${p%/environ}
  [ "$p" = "$$" ] && continue
  c=$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-160)
  [ -n "$s" ] && kill -s "$s" "$p" 2>/dev/null
  printf '%s %s\n' "$p" "$c"
done
exit 0
"""
"""Lists (and with a signal name in $2, signals) the processes whose environment holds
$1, one `pid command` line each. One grep reads every process's environment: a node in
the sim shares one machine's thousand processes, and a grep per process costs a fork
each. The needle and the signal are data ($1, $2), never part of the script."""

MAX_LISTED = 20
"""At most this many processes are reported (a driver and what it started)."""

TERM_GRACE_S = 5.0
"""How long a signalled driver may take to stop its trainer before SIGKILL (Ray's own
grace is 3 s; VeRL's driver stops its TaskRunner on SIGTERM)."""


def driver_node(profile: Profile, trace: JobTrace) -> Node:
    """The node the job's supervisor started its driver on: the one whose address Ray
    named, else the head (where Ray places a supervisor of a job that asks for no
    entrypoint resources, as rlconsole's never do)."""
    return next((n for n in profile.nodes if trace.driver_ip and n.address == trace.driver_ip), profile.head)


async def job_processes(remote: Remote, node: Node, trace: JobTrace, signal: str = "") -> list[str]:
    """The job's processes on `node` as `pid command` lines (shown as text, bounded),
    each sent `signal` (a name: TERM, KILL) when one is given. A node that cannot be
    asked gives none: the cards check after it still tells the truth."""
    ok, _ = remote.reachable(node.name)
    if not ok:
        return []
    r = await remote.run(node.name, ["sh", "-c", STRAY_SCRIPT, "sh", trace.environ_needle, signal],
                         container=True, timeout=30)
    if r.rc != 0:
        return []
    lines = [ln for ln in r.stdout.splitlines() if ln.split(" ", 1)[0].isdigit()]
    return [shown(ln)[:200] for ln in lines[:MAX_LISTED]]


async def end_stray_driver(remote: Remote, node: Node, trace: JobTrace) -> list[str]:
    """SIGTERM to every process of the job on `node`, SIGKILL to any left after
    TERM_GRACE_S; the processes that were found (none: nothing was signalled)."""
    found = await job_processes(remote, node, trace, "TERM")
    if not found:
        return []
    deadline = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        if not await job_processes(remote, node, trace):
            return found
    await job_processes(remote, node, trace, "KILL")
    return found
