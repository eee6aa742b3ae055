"""`rlconsole status [--json]`: one snapshot of nodes, cards, containers, Ray and job.

Down nodes are a state, not an error: the exit code is 0 whenever the profile is valid,
even if every node is down, so scripts can run `status --json` and decide for
themselves. The human form is a compact table that fits 80 columns; messages that say
what to do (a refused host key) are wrapped below their node, never cut.
"""

from __future__ import annotations

import asyncio
import json as _json
import logging
import sys
import textwrap
import time
from typing import Any, TextIO

from tui.core.job.metrics import fmt_range, fmt_step_time, judge_range
from tui.core.probes import snapshot
from tui.core.profile import Profile
from tui.core.safetext import shown
from tui.core.secrets import mask_secrets
from tui.core.state import ClusterState, JobState, JobStatus, NodeState

WIDTH = 80


def _verdict(sm: dict[str, Any], key: str, name: str, value: float) -> str:
    """" ✓ 380-1300" / " ✗ 0.1-8 s": `value` judged against the profile's range for `key`
    (in `sm["expected"]`, in the value's own unit), as the console's training pane draws it."""
    rng = (sm.get("expected") or {}).get(key)
    ok = judge_range(value, (rng[0], rng[1]) if rng else None)
    if ok is None or not rng:
        return ""
    return f" {'✓' if ok else '✗'} {fmt_range(name, rng[0], rng[1])}"


def _gib(mib: float) -> str:
    return f"{mib / 1024:.0f}" if mib >= 10240 else f"{mib / 1024:.1f}"


def _cards_cells(n: NodeState) -> tuple[str, str, str, str, str]:
    """(cards, util avg/max, mem used/total GiB, temp max, power sum)."""
    if not n.reachable and n.gpu is None:
        return "-", "", "", "", ""
    if n.gpu is None:
        return "?", "", "", "", ""
    cards = n.gpu.cards
    if not n.gpu.parsed:
        return "unparsed", "", "", "", ""
    if not cards:
        return "0", "", "", "", ""
    utils = [c.util_pct for c in cards if c.util_pct is not None]
    used = [c.mem_used_mib for c in cards if c.mem_used_mib is not None]
    total = [c.mem_total_mib for c in cards if c.mem_total_mib is not None]
    temps = [c.temp_c for c in cards if c.temp_c is not None]
    power = [c.power_w for c in cards if c.power_w is not None]
    util = f"{sum(utils) / len(utils):.0f}%/{max(utils):.0f}%" if utils else "n/a"
    mem = f"{_gib(sum(used))}/{_gib(sum(total))}" if used and total else "n/a"
    return (str(len(cards)), util, mem, f"{max(temps):.0f}C" if temps else "n/a",
            f"{sum(power):.0f}W" if power else "n/a")


log = logging.getLogger("rlconsole.status")


_HDR = (f"{'NODE':<10}{'ROLE':<7}{'SSH':<6}{'CONTAINER':<12}{'CARDS':<9}{'UTIL avg/max':<14}"
        f"{'MEM GiB':<11}{'TEMP':<6}{'POWER':>5}")


def _node_notes(n: NodeState) -> list[str]:
    """Why a node's row is short: its SSH error, an unparsed card report, a container
    that is not running. Each is the node's (or its SSH server's) text: made safe to show
    before it is wrapped (the one rule for outside text, tui/core/safetext.py)."""
    notes = []
    if n.error:
        notes.append(shown(n.error))
    if n.gpu is not None and not n.gpu.parsed and n.gpu.error:
        notes.append(f"cards: {shown(n.gpu.error)}")
    if n.container is not None and n.container.error and n.container.status not in ("running",):
        notes.append(f"container: {shown(n.container.error)}")
    return notes


def _node_lines(n: NodeState, width: int) -> list[str]:
    cards, util, mem, temp, power = _cards_cells(n)
    container = shown(n.container.status) if n.container else "-"
    row = (f"{n.name[:9]:<10}{n.role[:6]:<7}{'up' if n.reachable else 'DOWN':<6}{container[:11]:<12}"
           f"{cards:<9}{util:<14}{mem:<11}{temp:<6}{power:>5}")
    lines = [row.rstrip()]
    for note in _node_notes(n):
        lines += textwrap.wrap(note, width - 1, initial_indent="  ! ", subsequent_indent="    ")
    return lines


def _ray_lines(st: ClusterState, width: int) -> list[str]:
    r = st.ray
    if r.available:
        return [f"Ray: {r.nodes_alive} nodes alive, {r.nodes_dead} dead; GPUs {r.gpus_used:g}/{r.gpus_total:g} "
                f"used ({r.source})"]
    return textwrap.wrap(f"Ray: not available: {shown(r.error or 'unknown')}", width - 1, subsequent_indent="     ")


def _job_figures(j: JobState) -> list[str]:
    """The running job's figures, each with its range verdict, as the training pane shows them."""
    sm = j.summary or {}
    bits = []
    if j.status == "RUNNING" and (st_s := sm.get("wall_step_time_s") or sm.get("step_time_s")) is not None:
        bits.append(f"{fmt_step_time(st_s)}{_verdict(sm, 'step_time_s', 'step_time', st_s)}")
    if sm.get("reward_mean") is not None:
        bits.append(f"reward {sm['reward_mean']:.3f}")
    if sm.get("throughput_tokens_per_s_per_node") is not None:
        tn = sm["throughput_tokens_per_s_per_node"]
        bits.append(f"{tn:,.0f} tok/s/node{_verdict(sm, 'throughput_tokens_per_s_per_node', 'throughput', tn)}")
    if sm.get("mfu_pct") is not None:
        bits.append(f"MFU {sm['mfu_pct']:.1f}%{_verdict(sm, 'mfu_pct', 'mfu', sm['mfu_pct'])}")
    if j.last_checkpoint is not None:
        bits.append(f"checkpoint step {j.last_checkpoint}")
    return bits


def _job_lines(st: ClusterState) -> list[str]:
    j = st.job
    if j is None:
        return ["Job: none"]
    step = f" step {j.step}/{j.total_steps or '?'}" if j.step is not None else ""
    if j.on_cluster is False:
        ck = f", checkpoint step {j.last_checkpoint}" if j.last_checkpoint is not None else ""
        return [f"Job: last run {shown(j.id)}: not on this cluster{step}{ck}"]
    lines = [f"Job: {shown(j.id)} {shown(j.status)}{step}"]
    if bits := _job_figures(j):
        lines.append("     " + "  ".join(bits))
    lines += _cause_lines(j)
    return lines


def _cause_lines(j: JobState, width: int = WIDTH) -> list[str]:
    """A FAILED job's cause and its fix, as `--json`'s job.diagnosis has them: what a user
    asks first of a failed run, so the plain form says it too."""
    d = j.diagnosis
    if not d:
        return []
    line = d.get("line")  # 0-based in the log; -1: named by Ray's job message
    where = f" (log line {line + 1})" if isinstance(line, int) and line >= 0 else \
        (" (Ray's job message)" if line == -1 else "")
    out = textwrap.wrap(f"cause: {shown(str(d.get('title') or d.get('id')))}{where}", width - 1,
                        initial_indent="     ", subsequent_indent="       ")
    if d.get("fix"):
        out += textwrap.wrap(f"fix: {shown(str(d['fix']))}", width - 1, initial_indent="     ",
                             subsequent_indent="       ")
    return out


def render_table(st: ClusterState, width: int = WIDTH, sim_notes: tuple[str, ...] = ()) -> str:
    """The human form of a snapshot (fits `width` columns). What came from outside (node
    and Ray errors, the job's id and status) is made safe to show piece by piece, and the
    whole once more as it is printed (`run_status`)."""
    sim = " (SIMULATED)" if st.simulated else ""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.taken_at or time.time()))
    title = f"{st.profile}{sim}"
    lines = [f"{title:<{width - len(when) - 1}} {when}"]
    if st.simulated:
        lines.append("simulated cluster: card figures come from the sim, not from hardware")
        lines += [f"simulated cluster: {n}" for n in sim_notes if n]
    rule = "-" * min(width, len(_HDR) + 1)
    lines += [_HDR, rule]
    for n in st.nodes:
        lines += _node_lines(n, width)
    lines.append(rule)
    reachable = sum(1 for n in st.nodes if n.reachable)
    total_cards = sum(len(n.gpus) for n in st.nodes)
    lines.append(f"nodes: {reachable}/{len(st.nodes)} reachable, {total_cards} cards reporting")
    if st.allocation is not None:
        lines.append(f"Allocation: {shown(st.allocation.summary())}")
    lines += _ray_lines(st, width)
    lines += _job_lines(st)
    return "\n".join(lines) + "\n"


async def _snapshot_with_job(profile: Profile) -> ClusterState:
    """The cluster snapshot, plus the job's progress: the run history and Ray's job
    list name the job; its log (read on from the local spool, so a re-run fetches only
    what is new) and its scalars give step, total and metrics."""
    from tui.core.transport import open_pool

    pool = open_pool(profile)
    try:
        await pool.open()
        st = await snapshot(profile, pool=pool)
        if profile.cluster.slurm:
            from tui.core import slurm

            st.allocation = getattr(pool, "allocation", None) or await slurm.resolve(profile, rename=False) \
                or slurm.Allocation("", "NONE")
        if pool.head.connected:
            try:
                await _attach_job(profile, pool, st)
            except Exception as e:  # noqa: BLE001 - the job part must not sink the snapshot
                log.info("status: job details unavailable: %s", e)
        return st
    finally:
        await pool.close()



async def _attach_job(profile: Profile, pool: Any, st: ClusterState) -> None:
    from tui.core.actions.remote import PoolRemote
    from tui.core.job.watcher import JobWatcher, find_job, job_on_cluster

    # Ray's job list: the dashboard's when the probe read it; none at all when no Ray
    # answered (then the slow-to-import job client has nothing to ask either).
    known = st.ray.jobs if st.ray.source == "api" else (None if st.ray.available else [])
    found = await find_job(profile, PoolRemote(pool, profile), known)
    if found is None:
        return
    job_id, status = found
    # no diagnosis of the log's lines here: status reports none (a FAILED job's cause is
    # read from the log's tail below)
    w = JobWatcher(profile, pool, job_id, wall_clock=False, diagnose=False, summary=True)
    try:
        # Ray answered (or is not running on a reachable head) without this job: it is a
        # run from the history, shown as the last run, never as current.
        w.observe(status, job_on_cluster(st.ray, job_id))
        # the parse cache (saved by the console, or by an earlier status) leaves only the
        # lines after it to parse; old failures are not re-diagnosed here
        await asyncio.to_thread(w.reattach, 0)
        if w.on_cluster:
            await w.follow_log(once=True)
            # the log's step lines carry every metric; event files only when it has none
            await w.poll_scalars_once(read_scalars=not w.parser.steps)
        st.job = w.job_state()
        if w.on_cluster and w.status not in (JobStatus.UNKNOWN, JobStatus.NOT_ON_CLUSTER):
            # what this status saw goes in the run's journal (a state already there is not written again)
            from tui.core.job.journal import Journal, job_state_entry

            Journal(w.spool.path.parent).append(job_state_entry(str(w.status), st.job.step, "cli", profile))
        if w.status == JobStatus.FAILED:
            from tui.core.alerts import diagnose_failure

            n = w.spool.line_count
            message = next((j.message for j in st.ray.jobs if j.id == job_id), None)
            v = diagnose_failure(w.spool.lines(max(0, n - 300), n), max(0, n - 300), message)
            f = v.finding
            if f is not None:
                st.job.diagnosis = {"id": f.signature.id, "title": f.title, "fix": f.fix, "line": f.line_no,
                                    "also": v.also}
        if w.spool.line_count - w._cached_lines >= w.CACHE_EVERY_LINES:
            await w.save_cache()
    finally:
        w.spool.close()  # the spool's lock goes back at once (a console may own it next)


def run_status(profile: Profile, json: bool = False, out: TextIO | None = None) -> int:
    """Print one snapshot (`--json`: ClusterState.to_json()). Returns the exit code:
    0 whenever the profile is valid, even if every node is down."""
    out = out or sys.stdout
    st = asyncio.run(_snapshot_with_job(profile))
    if json:
        out.write(_json.dumps(st.to_json(), indent=2) + "\n")
    else:
        # node errors and Ray's job message are remote text: a credential in them masked,
        # and no control character (an SSH server's OSC title or clipboard write) printed
        notes = (f"trainer on {profile.sim_verl}" if profile.sim_verl else "",
                 f"containers: {profile.sim_containers}" if profile.sim_containers else "")
        out.write(shown(mask_secrets(render_table(st, sim_notes=notes)), lines=True))
    return 0
