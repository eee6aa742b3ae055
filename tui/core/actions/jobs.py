"""`submit` (seed 7 + 8.3) and `stop` (the job), through Ray's job API.

The API is reached at the dashboard on the head through the SSH connection (a local
port forward), so the dashboard never has to listen beyond loopback. It is spoken by
`rayapi.RayJobClient` (asyncio, bounded reads, typed answers), not by Ray's
`JobSubmissionClient`, whose `requests` reads are unbounded and whose import is slow.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, AsyncIterator, Callable

from tui.core.actions.base import Remote, gather_nodes
from tui.core.actions.events import ActionEvent
from tui.core.actions.stray_driver import driver_node, end_stray_driver, job_processes
from tui.core.job.history import RunRecord, last_run, record_run
from tui.core.parsers.detect import GPU_PROBE_SCRIPT, parse_probe_output
from tui.core.profile import Node, Profile
from tui.core.rayapi import RUN_TAG_KEY, JobTrace, RayJobClient, client_for_url
from tui.core.raypaths import ray_temp_dir
from tui.core.render import render
from tui.core.state import ACTIVE_JOB_STATUSES, JobStatus, RayJobState


async def job_client(remote: Remote) -> RayJobClient:
    """A job API client for the head's dashboard (through the SSH forward). Cheap: the
    forward is made once per connection by the SSH layer, and a reconnect gets a new
    forwarded port, hence a new URL and a new client."""
    url = await remote.dashboard_url()
    return client_for_url(url)


async def list_jobs(client: RayJobClient) -> list[RayJobState]:
    """Every job Ray knows, oldest first (typed; any answer shape accepted)."""
    return await client.list_jobs()


def _first_line(e: BaseException) -> str:
    """An error as one line for a 'fail' event: its message's first line, or its type
    when it has none (a bare TimeoutError)."""
    return next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)


LOCK_STALE_S = 300
"""A submit lock older than this is a console that died mid-submit: it is broken. A
submit holds the lock for seconds (list the jobs, submit one)."""

LOCK_SCRIPT = r"""
d=$1; info=$2; stale=$3
mkdir -p -- "${d%/*}" 2>/dev/null
if mkdir -- "$d" 2>/dev/null; then printf '%s\n' "$info" > "$d/owner"; echo @@taken; exit 0; fi
now=$(date +%s); m=$(stat -c %Y -- "$d" 2>/dev/null || echo "$now"); age=$((now - m))
if [ "$age" -gt "$stale" ] && rm -rf -- "$d" && mkdir -- "$d" 2>/dev/null; then
  printf '%s\n' "$info" > "$d/owner"; echo "@@taken stale $age"; exit 0
fi
echo "@@held $age"; head -c 200 -- "$d/owner" 2>/dev/null; exit 0
"""
"""Exit 0 after `@@held` whatever `head` says: the holder may have made the directory and
not yet written its owner file (a second console then read "cannot reserve", in CI)."""
UNLOCK_SCRIPT = r"""d=$1; [ "$(head -c 300 -- "$d/owner" 2>/dev/null)" = "$2" ] && rm -rf -- "$d"; exit 0"""


def submit_lock_path(profile: Profile) -> str:
    """The reservation two consoles contend for: a directory under the head's Ray temp
    dir (where Ray runs, so every console of this cluster sees the same one). `mkdir` is
    atomic: exactly one of two racing consoles creates it."""
    return f"{ray_temp_dir(profile)}/rlconsole-submit.lock"


async def take_submit_lock(profile: Profile, remote: Remote) -> tuple[str | None, str | None]:
    """Reserve the submit slot on the head: (owner token, None) when taken, (None, why)
    when another console holds it or the head cannot be asked."""
    import os
    import socket

    token = f"{socket.gethostname()} pid {os.getpid()} at {time.strftime('%H:%M:%S')} #{time.monotonic_ns()}"
    r = await remote.run(profile.head.name, ["sh", "-c", LOCK_SCRIPT, "sh", submit_lock_path(profile), token,
                                             str(LOCK_STALE_S)], container=True, timeout=60)
    out = r.stdout if r.ok else ""
    if out.startswith("@@taken"):
        return token, None
    if out.startswith("@@held"):
        first, _, owner = out.partition("\n")
        age = first.split()[1] if len(first.split()) > 1 else "?"
        owner = " ".join(owner.split())[:200] or "unknown"
        return None, (f"another console is submitting to this cluster right now (reservation "
                      f"{submit_lock_path(profile)} on {profile.head.name}, held {age}s by {owner}); "
                      f"wait for its job to appear, then check `rlconsole status`")
    return None, f"cannot reserve the submit on {profile.head.name}: {r.tail(1) or f'exit {r.rc}'}"


async def release_submit_lock(profile: Profile, remote: Remote, token: str) -> None:
    try:
        await remote.run(profile.head.name, ["sh", "-c", UNLOCK_SCRIPT, "sh", submit_lock_path(profile), token],
                         container=True, timeout=60)
    except Exception:  # noqa: BLE001 - a lock left behind goes stale; never fail a submit for it
        pass


SubmitHook = Callable[[Profile], list[str]]
SUBMIT_HOOKS: list[SubmitHook] = []
"""Run (in a thread) before every submit; each returns what it did, one line each. The
core knows no simulator: the simulated cluster registers its hook here (a new job on the
sim starts without the faults planted for the last one, as on a repaired cluster)."""


def add_submit_hook(hook: SubmitHook) -> None:
    if hook not in SUBMIT_HOOKS:
        SUBMIT_HOOKS.append(hook)


async def submit(profile: Profile, remote: Remote, force: bool = False,
                 fresh: bool = False) -> AsyncIterator[ActionEvent]:
    """Submit the job, holding the head's submit reservation from before the list of
    running jobs until Ray has the new one: two consoles pressing `s` together cannot
    both see "nothing running" and both submit. `fresh`: from step 0 whatever checkpoint
    the directory holds (`trainer.resume_mode=disable`, `resume.fresh_profile`)."""
    if fresh:
        from tui.core.actions.resume import fresh_profile

        profile = fresh_profile(profile)
    job = render(profile)
    yield ActionEvent("submit", "start", f"submitting {job.submission_id}")
    for hook in SUBMIT_HOOKS:
        try:
            done = await asyncio.to_thread(hook, profile)
        except Exception as e:  # noqa: BLE001 - a hook's problem must not block the submit
            done = [f"{getattr(hook, '__name__', 'hook')}: {e}"]
        for what in done:
            yield ActionEvent("submit", "step", what)
    token, why = await take_submit_lock(profile, remote)
    if token is None:
        yield ActionEvent("submit", "fail", why or "cannot reserve the submit")
        return
    try:
        async for ev in _submit_locked(profile, remote, job, force):
            yield ev
    finally:
        await release_submit_lock(profile, remote, token)


async def _submit_locked(profile: Profile, remote: Remote, job: Any, force: bool) -> AsyncIterator[ActionEvent]:
    try:
        client = await job_client(remote)
        jobs = await list_jobs(client)
    except Exception as e:  # noqa: BLE001 - any failure to reach Ray is the same one-line story
        yield ActionEvent("submit", "fail", f"cannot reach Ray's job API on {profile.head.name}: {e}; run setup-ray first")
        return
    running = [j for j in jobs if j.status in ACTIVE_JOB_STATUSES]
    if running and not force:
        ids = ", ".join(j.id for j in running)
        yield ActionEvent("submit", "fail", f"a job is already running on this cluster ({ids}); stop it first or use --force")
        return
    # where it resumes, named before the submit (the tracker the trainer will read)
    from tui.core.actions.resume import resume_parent, resume_step

    step = await resume_step(profile, remote)
    parent_id = resume_parent(profile, step)
    parent = {"job_id": parent_id, "step": step} if parent_id and step is not None else None
    shown = job.masked().entrypoint_str
    yield ActionEvent("submit", "step", "$ " + shown[:300] + ("..." if len(shown) > 300 else ""))
    try:
        job_id = await client.submit(job.entrypoint_str, submission_id=job.submission_id,
                                     runtime_env=job.runtime_env, metadata={RUN_TAG_KEY: uuid.uuid4().hex})
    except Exception as e:  # noqa: BLE001 - a refusal, a timeout or a hostile answer: one line
        yield ActionEvent("submit", "fail", f"Ray refused the job: {_first_line(e)}")
        return
    extra: dict[str, Any] = {"run_name": str(profile.override_value("trainer.experiment_name") or profile.name),
                             "cards": profile.total_gpus}
    if parent is not None:
        extra["parent"] = parent
    try:
        record_run(RunRecord(
            profile=profile.name, profile_path=profile.path, job_id=job_id, submitted_at=time.time(),
            entrypoint=job.entrypoint, runtime_env=job.runtime_env,
            tensorboard_dir=job.runtime_env["env_vars"].get("TENSORBOARD_DIR"),
            checkpoint_dir=profile.paths.checkpoint_dir, extra=extra,
        ))
    except OSError as e:  # the job runs; only a later console's re-attach is lost
        yield ActionEvent("submit", "warn", f"{job_id} is running but not in the run history: {e}")
    resumed = f", resuming step {parent['step']} of {parent['job_id']}" if parent else ""
    yield ActionEvent("submit", "done", f"submitted {job_id}{resumed}",
                      data={"job_id": job_id, **({"parent": parent} if parent else {})})


async def _wait_status(client: RayJobClient, job_id: str, want: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        s = await client.status(job_id)
        if s in want or time.monotonic() > deadline:
            return s
        await asyncio.sleep(0.5)


async def leftover_processes(profile: Profile, remote: Remote) -> dict[str, list[str]]:
    """Cards still holding memory or processes after a stop, by node (Ray can leave
    GPU processes behind after a cancel: ray-project/ray#23638)."""
    found: dict[str, list[str]] = {}

    async def one(n: Any) -> None:
        ok, _ = remote.reachable(n.name)
        if not ok:
            return
        r = await remote.run(n.name, ["sh", "-c", GPU_PROBE_SCRIPT], container=True, timeout=60)
        rep = parse_probe_output(r.stdout)
        busy = []
        for c in rep.cards:
            procs = ", ".join(f"pid {p.pid} {p.name}".strip() for p in c.processes)
            if c.processes or (c.mem_used_mib or 0) > 1024:
                busy.append(f"card {c.index}: " + (procs or f"{c.mem_used_mib:.0f} MiB in use"))
        if busy:
            found[n.name] = busy

    await gather_nodes(profile.nodes, one)
    return found


async def _live_actors(client: RayJobClient, ray_job_id: str | None) -> int | None:
    """`RayJobClient.live_actors`; None when Ray's id of the job or the answer did not come."""
    if ray_job_id is None:
        return None
    try:
        return await client.live_actors(ray_job_id)
    except Exception:  # noqa: BLE001 - the state API is an extra look: without it, the cards decide
        return None


async def _trace(client: RayJobClient, job_id: str) -> JobTrace | None:
    """`RayJobClient.job_trace`; None when it did not come (the cards check still decides)."""
    try:
        return await client.job_trace(job_id)
    except Exception:  # noqa: BLE001 - as `_live_actors`
        return None


async def _still_up(profile: Profile, remote: Remote, client: RayJobClient,
                    job_id: str) -> tuple[JobTrace | None, Node | None, list[str]]:
    """A job's processes still up on its driver's node (`stray_driver.job_processes`)."""
    trace = await _trace(client, job_id)
    if trace is None:
        return None, None, []
    node = driver_node(profile, trace)
    return trace, node, await job_processes(remote, node, trace)


async def stop_job(profile: Profile, remote: Remote, job_id: str | None = None,
                   wait_s: float = 120.0, settle_s: float = 10.0) -> AsyncIterator[ActionEvent]:
    yield ActionEvent("stop", "start", "stopping the job")
    try:
        client = await job_client(remote)
        jobs = await list_jobs(client)
    except Exception as e:  # noqa: BLE001
        yield ActionEvent("stop", "skip", f"Ray's job API does not answer ({e}); no job to stop")
        return
    known = {j.id: j for j in jobs}
    if job_id is None:
        running = [j for j in jobs if j.status in ACTIVE_JOB_STATUSES]
        rec = last_run(profile.name)
        pick = [j for j in running if rec and j.id == rec.job_id] or running[-1:]
        if not pick:
            # Ray's stop (this console's, or `ray job stop`) can miss a starting driver: say
            # so for the last run, but end it only when it is named (`--job`)
            if rec and rec.job_id in known:
                _, node, up = await _still_up(profile, remote, client, rec.job_id)
                if up and node is not None:
                    yield ActionEvent("stop", "warn", f"{rec.job_id} is {known[rec.job_id].status} but its driver is "
                                                      f"still up: {'; '.join(up[:3])}; `rlconsole stop --job "
                                                      f"{rec.job_id}` ends it", node=node.name)
            yield ActionEvent("stop", "skip", "no job is running; nothing to stop")
            return
        job_id = pick[0].id
    elif job_id not in known:
        yield ActionEvent("stop", "fail", f"Ray knows no job {job_id}")
        return
    status: str = known[job_id].status
    trace: JobTrace | None = None
    if status not in ACTIVE_JOB_STATUSES:
        # named and ended for Ray: what is left of it (a driver Ray's stop missed) is ended
        trace, _, up = await _still_up(profile, remote, client, job_id)
        if not up:
            yield ActionEvent("stop", "skip", f"{job_id} is already {status}; nothing to stop")
            return
        yield ActionEvent("stop", "step", f"{job_id} is already {status}, but its driver is still up")
    else:
        yield ActionEvent("stop", "step", f"stopping {job_id}")
        try:
            await client.stop(job_id)
            status = await _wait_status(client, job_id, {JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED},
                                        wait_s)
        except Exception as e:  # noqa: BLE001 - a refusal, a timeout or a hostile answer: one line
            yield ActionEvent("stop", "fail", f"Ray did not stop {job_id}: {_first_line(e)}")
            return
        if status in ACTIVE_JOB_STATUSES:
            yield ActionEvent("stop", "fail", f"{job_id} is still {status} after {wait_s:.0f} s")
            return
    async for ev in _after_stop(profile, remote, client, job_id, status, settle_s, trace):
        yield ev


async def _after_stop(profile: Profile, remote: Remote, client: RayJobClient, job_id: str, status: str,
                      settle_s: float, trace: JobTrace | None = None) -> AsyncIterator[ActionEvent]:
    """Make sure a job Ray calls ended is: its driver, its actors, its cards. `trace`: the
    job's, when the caller already read it (after the job ended)."""
    yield ActionEvent("stop", "step", f"{job_id} is {status}; waiting for its actors to end, then checking that "
                                      "the cards are free")
    if trace is None:
        trace = await _trace(client, job_id)
    if trace is not None:
        # Ray's stop can miss the driver of a job stopped as it starts (stray_driver.py):
        # Ray says STOPPED while that driver goes on and takes every card.
        dnode = driver_node(profile, trace)
        ended = await end_stray_driver(remote, dnode, trace)
        if ended:
            yield ActionEvent("stop", "warn", f"Ray calls {job_id} {status}, but its driver was still up (Ray's "
                                              "stop misses a driver that is starting); ended it: " + "; ".join(ended[:3]),
                              node=dnode.name)
            trace = await _trace(client, job_id) or trace  # it may have joined Ray before it ended
    deadline = time.monotonic() + settle_s
    # A job stopped while it starts ends at once, but its actors (the TaskRunner, the
    # workers holding the cards) may still be coming up, and take their cards seconds
    # after the job is STOPPED (a CI run: a stop said "every card is free", and the next
    # preflight found all 32 cards busy). The cards count only once Ray has none left.
    rid = None if trace is None else trace.ray_job_id
    actors = await _live_actors(client, rid)
    while actors and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        actors = await _live_actors(client, rid)
    if actors:
        yield ActionEvent("stop", "warn", f"Ray still has {actors} actor(s) of {job_id} after {settle_s:.0f} s")
    while True:
        left = await leftover_processes(profile, remote)
        if not left or time.monotonic() > deadline:
            break
        await asyncio.sleep(1.0)
    if left:
        for node, items in left.items():
            yield ActionEvent("stop", "warn", "cards not freed: " + "; ".join(items), node=node)
        yield ActionEvent("stop", "fail", f"{job_id} stopped but cards are still busy on {', '.join(sorted(left))}",
                          data={"job_id": job_id, "leftovers": left, "status": status})
        return
    yield ActionEvent("stop", "done", f"{job_id} {status}; every card is free", data={"job_id": job_id, "status": status})
