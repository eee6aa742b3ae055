"""`LiveBackend`: the console's `Backend` over the real core.

One SessionPool is shared by the telemetry monitor, the job watcher and the actions, so
the console holds exactly one SSH connection per node whatever it is doing. The job to
watch is found (and re-found after a submit) from the run history and Ray's job list;
its log, scalars and checkpoint flow into the metrics pane and alerts. Stopping the
backend stops *watching*: the job and Ray are never touched by quitting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, AsyncIterator

from tui.backend.base import AlertCallback, LogCallback, MetricsCallback, StateCallback
from tui.core.actions.events import ActionEvent
from tui.core.actions.plan import SubmitPlan
from tui.core.alerts import Alert, AlertRules
from tui.core.job.metrics import MetricsSummary, summarize
from tui.core.profile import Profile
from tui.core.state import ClusterState, JobState, JobStatus, NodeState
from tui.core.waits import kicked_or_timeout

_ACTIVE = (JobStatus.RUNNING, JobStatus.PENDING, JobStatus.UNKNOWN)
"""Watched-job states that are not an end (UNKNOWN: not yet seen by Ray's job API)."""

log = logging.getLogger("rlconsole.live")


class LiveBackend:
    def __init__(self, profile: Profile, who: str = "console") -> None:
        """`who`: what the run journal says saw things and ran actions ("console", "watch")."""
        from tui.core.actions.remote import PoolRemote
        from tui.core.probes import ClusterMonitor
        from tui.core.transport import open_pool

        self.profile = profile
        self.simulated = profile.simulated
        if profile.simulated:
            from tui.sim.faults import install_submit_hook

            install_submit_hook()
        refresh = profile.monitoring.refresh_s
        self.pool = open_pool(profile, backoff_max_s=max(2.0, 2 * refresh))
        self.monitor = ClusterMonitor(profile, pool=self.pool)
        # the screen draws what changed at most this often (MainScreen.pace_s): the same
        # bound as the monitor's notifications, so one frame carries a refresh's changes
        self.frame_pace_s = self.monitor.notify_every_s
        self.remote = PoolRemote(self.pool, profile)
        self.watcher: Any = None
        self._state_cbs: list[StateCallback] = []
        self._log_cbs: list[LogCallback] = []
        self._restart_cbs: list[Any] = []
        self._metric_cbs: list[MetricsCallback] = []
        self._alert_cbs: list[AlertCallback] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self.rules = AlertRules.for_profile(profile)  # the alert rule set, fed every refresh
        self._kick = asyncio.Event()
        self._attach_lock = asyncio.Lock()
        self._attached_at = float("-inf")
        self._job: JobState | None = None
        self._plan: SubmitPlan | None = None  # the last plan `s` showed (see run_action)
        self._last_good: dict[str, NodeState] = {}
        self.state: ClusterState | None = None
        self._parent_cache: tuple[str, dict[str, list[tuple[int, float]]]] | None = None
        self._catalog_told: set[str] = set()
        self._failed_at: dict[str, float] = {}  # job id -> when it was first seen FAILED
        self.who = who
        self._journal: Any = None  # the watched run's journal (tui/core/job/journal.py)
        self._ckpt_told: int | None = None
        self._walltime: Any = None  # a Slurm profile's walltime rule (tui/core/slurm.py)

    # -- subscriptions ------------------------------------------------------------

    def subscribe_state(self, cb: StateCallback) -> None:
        self._state_cbs.append(cb)

    def subscribe_log(self, cb: LogCallback) -> None:
        self._log_cbs.append(cb)

    def subscribe_log_restart(self, cb: Any) -> None:
        self._restart_cbs.append(cb)

    def subscribe_metrics(self, cb: MetricsCallback) -> None:
        self._metric_cbs.append(cb)

    def subscribe_alerts(self, cb: AlertCallback) -> None:
        self._alert_cbs.append(cb)

    def _alert(self, a: Alert) -> None:
        if a.source == "diagnosis":  # a broken user catalog: told once a console, not once a job
            if a.message in self._catalog_told:
                return
            self._catalog_told.add(a.message)
        self._journal_alert(a)
        for cb in self._alert_cbs:
            with contextlib.suppress(Exception):
                cb(a)

    # -- the run journal: what this backend saw, in the watched run's spool --------------

    def _journal_alert(self, a: Alert) -> None:
        """Episodes (opened, ended) and warnings/errors; an info one-off ("watching job
        X") is this console's news, not the run's."""
        if self._journal is None or (a.key is None and a.level == "info"):
            return
        from tui.core.job.journal import alert_entry

        self._journal.append(alert_entry(a, self.who))

    def _journal_state(self, w: Any, step: int | None) -> None:
        """The job's status when Ray's word for it changed (UNKNOWN and the console's
        NOT_ON_CLUSTER say nothing of the run)."""
        if self._journal is None or w.status in (JobStatus.UNKNOWN, JobStatus.NOT_ON_CLUSTER):
            return
        from tui.core.job.journal import job_state_entry

        self._journal.append(job_state_entry(str(w.status), step, self.who, self.profile))

    def _lines(self, lines: list[str]) -> None:
        for cb in self._log_cbs:
            with contextlib.suppress(Exception):
                cb(lines)

    END_LOG_GRACE_S = 3.0
    """A job seen FAILED has its end told this long after, so that the driver's last lines
    (its traceback: the diagnosis) have reached the spool: a job that fails at once (Hydra
    refusing an override) was seen FAILED by Ray's poll before the log follower had read a
    line, and its end was told "unrecognised" (a clean-clone CI run). STOPPED and
    SUCCEEDED need no cause and are told at once."""

    ATTACH_GRACE_S = 20.0
    """After attaching to a job just submitted, Ray's job list (polled by the monitor)
    may not name it yet: it is not called "not on this cluster" before this long."""

    def _on_state(self, st: ClusterState) -> None:
        if self.profile.cluster.slurm:  # the allocation, as the transport last read it
            from tui.core.slurm import Allocation

            st.allocation = getattr(self.pool, "allocation", None) or Allocation("", "NONE")
        w = self.watcher
        if w is not None:
            was = w.status
            self._observe_ray(w, st)
            st.job = self._job_now(w)
            if w.status != was:
                self._job_changed(w)
        self._mark_stale(st)
        for a in self.rules.observe_state(st):
            self._alert(a)
        self.state = st
        for cb in self._state_cbs:
            with contextlib.suppress(Exception):
                cb(st)

    def _observe_ray(self, w: Any, st: ClusterState) -> None:
        """What Ray says of the watched job, told to the watcher: its status when Ray
        lists it; "not on this cluster" only when Ray positively says so, the head is up
        and the grace after attaching is over (a job just submitted may not be listed)."""
        ray_job = next((j for j in st.ray.jobs if j.id == w.job_id), None)
        if ray_job is not None:
            w.observe(ray_job.status, True)
        elif time.monotonic() - self._attached_at > self.ATTACH_GRACE_S:
            from tui.core.job.watcher import job_on_cluster

            head = next((n for n in st.nodes if n.role == "head"), None)
            if head is not None and head.reachable and job_on_cluster(st.ray, w.job_id) is False:
                w.observe(JobStatus.NOT_ON_CLUSTER, False)

    def _job_now(self, w: Any) -> JobState:
        """The job as of the last refresh (one RunMetrics a refresh serves both), with
        the status just observed."""
        if self._job is not None and self._job.id == w.job_id:
            self._job.status = w.status if w.on_cluster is not False else JobStatus.NOT_ON_CLUSTER
            if w.on_cluster is not False and self._job.on_cluster is False:
                self._job = w.job_state()
        else:
            self._job = w.job_state()
        return self._job

    def _job_changed(self, w: Any) -> None:
        self._journal_state(w, self._job.step if self._job is not None else None)
        if w.status == JobStatus.FAILED:
            # told after the log's grace (`_job_alerts` holds it until then), from here
            # too: the job loop may be a refresh away, or wedged on a slow head
            self._failed_at.setdefault(w.job_id, time.monotonic())
            with contextlib.suppress(RuntimeError):  # no loop running: the job loop tells it
                asyncio.get_running_loop().call_later(self.END_LOG_GRACE_S + 0.05, self._end_after_grace, w)
        if w.status not in _ACTIVE:
            # The job just ended: say so now, from this state, not at the job loop's next
            # turn (which may be a refresh away, or never if that loop is wedged on a
            # slow head); the alert rules fire once per episode either way.
            try:
                self.refresh_metrics(w)
            except Exception as e:  # noqa: BLE001 - the state must still reach the screen
                log.info("job end: %s", e)

    def _mark_stale(self, st: ClusterState) -> None:
        """A node that is down keeps its last known container and cards, marked as such
        with their age (`stale_since`), instead of blanks or values that look current."""
        for n in st.nodes:
            if n.reachable:
                self._last_good[n.name] = n
                continue
            prev = self._last_good.get(n.name)
            if prev is None:
                continue
            if n.container is None or n.container.status == "unknown":
                n.container = prev.container
            if n.gpu is None and prev.gpu is not None:
                n.gpu = prev.gpu
            n.stale_since = prev.updated_at

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        from tui.core.diagnosis import Diagnoser

        for a in Diagnoser().take_problems():  # before any job: the user's catalog is broken now
            self._alert(a)
        self.monitor.subscribe(self._on_state)
        await self.monitor.start()
        self._tasks.append(asyncio.create_task(self._job_loop(), name="job-loop"))

    STOP_STEP_S = 10.0
    """`stop()` must return: each part of it is given this long (a part that overruns is
    logged and left behind, it cannot keep the console from quitting)."""

    async def stop(self) -> None:
        """Stop watching: the job loop, the watcher's streams, the probes, the SSH
        connections, in that order. Never touches the job or Ray."""
        for t in self._tasks:
            t.cancel()
        parts: list[tuple[str, Any]] = [("job loop", asyncio.gather(*self._tasks, return_exceptions=True))]
        self._tasks = []
        if self.watcher is not None:
            parts.append(("job watcher", self.watcher.stop()))
        parts += [("monitor", self.monitor.stop()), ("ssh pool", self.pool.close())]
        for what, aw in parts:
            try:
                await asyncio.wait_for(aw, self.STOP_STEP_S)
            except asyncio.TimeoutError:
                log.warning("stop: %s did not stop within %.0fs", what, self.STOP_STEP_S)
            except Exception as e:  # noqa: BLE001 - stopping goes on whatever failed
                log.info("stop: %s: %s", what, e)

    async def _attach(self, job_id: str, status: str, fresh: bool = False) -> None:
        """Watch `job_id`. Serialised: the job loop (finding a job) and `run_action`
        (after a submit) may both attach; without the lock the slower one could start
        a second watcher nobody stops (its log follower holds one of the head's few SSH
        channel slots for ever)."""
        from tui.core.job.watcher import JobWatcher

        async with self._attach_lock:
            if self.watcher is not None:
                if self.watcher.job_id == job_id:
                    return
                old, self.watcher, self._job = self.watcher, None, None
                await old.stop()
            from tui.core.job.journal import Journal

            self._journal, self._ckpt_told = None, None  # the old run's journal is closed to news
            for cb in self._restart_cbs:  # another job's log: its lines are numbered from 0 again
                with contextlib.suppress(Exception):
                    cb(job_id)
            w = JobWatcher(self.profile, self.pool, job_id, on_lines=self._lines, on_alert=self._alert)
            w.observe(status, None)
            # a re-attach: parse what the spool already holds, show its tail, then follow
            await asyncio.to_thread(w.reattach)
            n = w.spool.line_count
            if n:
                # the app numbers lines from 0 in delivery order: deliver them all
                # (the log pane keeps only its window; the spool holds the rest), in
                # batches with a pause between them so the app keeps drawing and
                # drops what it will not keep before the next batch arrives
                for a in range(0, n, 50_000):
                    self._lines(w.spool.lines(a, min(n, a + 50_000)))
                    await asyncio.sleep(0.01)
            for alert in w.alerts[-20:]:
                self._alert(alert)
            self._past_end(w)
            self.watcher = w
            self._journal = Journal(w.spool.path.parent)
            self._journal_state(w, None)
            for alert in w.alerts[-20:]:  # what the log says already happened, once per run
                self._journal_alert(alert)
            # a job just submitted gets a grace period before "not on this cluster";
            # one found in the run history does not need one
            self._attached_at = time.monotonic() if fresh else float("-inf")
            w.start()
        self._alert(Alert("info", "ray", f"watching job {job_id}"))
        self._kick.set()

    _past_key: str | None = None

    def _past_end(self, w: Any) -> None:
        """A job found FAILED (the console reopened on it): its cause, as the alert rules
        would have told it had this console seen it end (they tell an end seen happen
        only), an episode open while it is the watched job. Not journalled: the run's
        journal has its end already."""
        if self._past_key is not None:
            for cb in self._alert_cbs:
                with contextlib.suppress(Exception):
                    cb(Alert("info", "job", f"no longer watching {self._past_key.partition(':')[2]}",
                             key=self._past_key, ends=True))
            self._past_key = None
        if w.status != JobStatus.FAILED:
            return
        from tui.core.alerts import diagnose_tail

        n = w.spool.line_count
        start = max(0, n - 300)
        d = diagnose_tail(w.spool.lines(start, n), start)
        step = w.job_state().step
        msg = f"job {w.job_id} FAILED" + (f" at step {step}" if step is not None else "") + ": " + \
            (d.message if d is not None else "no known cause in the log's last lines (`rlconsole logs`)")
        self._past_key = f"job-end:{w.job_id}"
        a = Alert("error", "job", msg, line=d.line if d is not None else None, key=self._past_key,
                  diagnosis=d.diagnosis if d is not None else None)
        for cb in self._alert_cbs:
            with contextlib.suppress(Exception):
                cb(a)

    def all_series(self) -> dict[str, list[tuple[int, float]]]:
        """Every scalar of the watched run (TensorBoard reader or log step lines), for the
        graph screen and its CSV export; empty before a job is attached."""
        if self.watcher is None:
            return {}
        rm = self.watcher.run_metrics()
        own = {k: rm.raw_series(k) for k in rm.keys()}
        parent = self._parent_series(self.watcher.job_id)
        if not parent:
            return own
        # a resumed run's curve continues its parent's (the parent's steps before this
        # run's first, then this run's: tui/core/job/compare.py `stitch`)
        from tui.core.job.compare import stitch

        return {k: stitch(parent.get(k, []), own.get(k, [])) for k in own.keys() | parent.keys()}

    def _parent_series(self, job_id: str) -> dict[str, list[tuple[int, float]]]:
        """The series of the run(s) this one resumed, from their local spools (finished
        runs: read once per watched job, then kept)."""
        if self._parent_cache is not None and self._parent_cache[0] == job_id:
            return self._parent_cache[1]
        from tui.core.job.compare import spool_loader, stitched_steps

        parent_of, load = spool_loader(None, self.profile.name)
        out: dict[str, list[tuple[int, float]]] = {}
        parent = parent_of(job_id)
        if parent is not None:
            for step, metrics in stitched_steps(parent, parent_of, load).items():
                for k, v in metrics.items():
                    out.setdefault(k, []).append((step, v))
        self._parent_cache = (job_id, out)
        return out

    def runs(self) -> list[Any]:
        from tui.core.job.runs import list_runs

        return list_runs(self.profile.name, default_cards=self.profile.total_gpus)

    def run_series(self, job_id: str, keys: list[str]) -> list[tuple[int, float]]:
        from tui.core.job.compare import load_run_series

        return load_run_series(job_id, keys, self.profile.name)

    def journal(self) -> list[Any]:
        return self._journal.entries() if self._journal is not None else []

    def job_status(self) -> JobStatus | None:
        w = self.watcher
        return None if w is None else JobStatus.of(w.status)

    async def _job_loop(self) -> None:
        from tui.core.job.watcher import find_job

        refresh = self.profile.monitoring.refresh_s
        last_push = 0.0
        while True:
            try:
                if self.head_up():
                    w = self.watcher
                    active = w is not None and w.status in _ACTIVE
                    if not active:
                        # the monitor's job list when it has one: no second job API call
                        ray = self.state.ray if self.state is not None else None
                        known = ray.jobs if ray is not None and ray.available and ray.source == "api" else None
                        found = await find_job(self.profile, self.remote, known)
                        if found is not None:
                            await self._attach(*found)
                w = self.watcher
                if w is not None and time.monotonic() - last_push >= refresh:
                    last_push = time.monotonic()
                    self.refresh_metrics(w)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the loop must outlive any one failure
                self._job_loop_failed(e)
            else:
                self._job_loop_ok()
            await kicked_or_timeout(self._kick, refresh)
            self._kick.clear()

    _JOB_LOOP_KEY = "console:job-watch"
    _job_loop_error: str | None = None

    def _job_loop_failed(self, e: Exception) -> None:
        """A job-loop round failed. The head's link going away is shown as the node down
        and is retried quietly; anything else (a bug building the watcher, an odd run
        record) would otherwise leave the console silently never watching the job, so it
        is a warning episode, told once (the traceback in the log once per distinct
        error), ended when a round succeeds again."""
        from tui.core.ssh import SshError

        if isinstance(e, (SshError, OSError, asyncio.TimeoutError)):
            log.info("job loop: %s", e)
            return
        what = f"{type(e).__name__}: {e}"
        if what != self._job_loop_error:
            log.warning("job loop failed (retried every refresh): %s", what, exc_info=e)
        if self._job_loop_error is None:
            self._alert(Alert("warning", "console", f"the job cannot be watched: {what} (retrying; see the log)",
                              key=self._JOB_LOOP_KEY))
        self._job_loop_error = what

    def _job_loop_ok(self) -> None:
        if self._job_loop_error is not None:
            self._job_loop_error = None
            self._alert(Alert("info", "console", "the job is watched again", key=self._JOB_LOOP_KEY, ends=True))

    def _end_after_grace(self, w: Any) -> None:
        if w is self.watcher and w.status == JobStatus.FAILED:
            try:
                self.refresh_metrics(w)
            except Exception as e:  # noqa: BLE001 - a timer callback: log, never raise
                log.info("job end: %s", e)

    def _job_alerts(self, summary: MetricsSummary) -> None:
        """Feed the watched job to the alert rules; the log's tail only once it FAILED,
        and not before END_LOG_GRACE_S after it was first seen so."""
        from tui.core.state import JobState

        w = self.watcher
        tail, start = None, 0
        if w.status == JobStatus.FAILED:
            seen = self._failed_at.setdefault(w.job_id, time.monotonic())
            if time.monotonic() - seen < self.END_LOG_GRACE_S:
                return  # the driver's last lines may still be on their way
            n = w.spool.line_count
            start = max(0, n - 300)
            tail = w.spool.lines(start, n)
        message = None
        if w.status == JobStatus.FAILED:
            # Ray's word on the job as the monitor has it now: a snapshot reaches this
            # backend a notify later, and the job's end is told from the first sign of it
            message = next((j.message for j in self.monitor.state.ray.jobs if j.id == w.job_id), None)
        job = JobState(id=w.job_id, status=w.status, step=summary.step)
        for a in self.rules.observe_job(job, summary, log_tail=tail, tail_start=start, job_message=message):
            self._alert(a)
        if self.profile.cluster.slurm and self.state is not None:  # the walltime against the run's ETA
            if self._walltime is None:
                from tui.core.slurm import WalltimeRule

                self._walltime = WalltimeRule.for_profile(self.profile)
            for a in self._walltime.observe(self.state.allocation, summary):
                self._alert(a)

    def refresh_metrics(self, w: Any) -> None:
        """One RunMetrics a refresh: it serves the metrics pane and the state's job
        (merging every step's metrics is the costly part). Runs on the app's loop."""
        rm = w.run_metrics()
        self._job = w.job_state(rm)
        ckpt = rm.last_checkpoint
        if self._journal is not None and isinstance(ckpt, int) and ckpt != self._ckpt_told:
            from tui.core.job.journal import checkpoint_entry

            self._ckpt_told = ckpt
            self._journal.append(checkpoint_entry(ckpt, self.who))
        summary = summarize(rm, self.profile.monitoring, w.status, w.on_cluster, w.job_id)
        series = {"reward": rm.series("critic/rewards/mean", 300) or rm.series("critic/score/mean", 300),
                  "throughput": rm.series("throughput_tokens_per_s_per_node", 300),
                  "response_length": rm.series("response_length/mean", 300)}
        for cb in self._metric_cbs:
            with contextlib.suppress(Exception):
                cb(summary, series)
        self._job_alerts(summary)

    def head_up(self) -> bool:
        return self.pool.head.connected

    async def dashboard_url(self) -> str:
        from tui.core.errors import RlconsoleError

        head = self.pool.head
        if not head.connected:
            raise RlconsoleError(f"head {head.name} is not connected ({head.reason or head.state})")
        url = await self.remote.dashboard_url()
        if not self.monitor.state.ray.available:
            return f"{url} (Ray is not up yet: the page answers once `r` has started it)"
        return url

    async def submit_plan(self) -> SubmitPlan:
        from tui.core.actions.plan import running_job_text, submit_plan

        self._plan = await submit_plan(self.profile, self.remote, running=running_job_text(self.state))
        return self._plan

    # -- actions ----------------------------------------------------------------------

    async def run_action(self, name: str, **opts: Any) -> AsyncIterator[ActionEvent]:
        from tui.core.actions.registry import run_action

        submitted: str | None = None
        plan, self._plan = self._plan, None
        if name == "submit" and plan is not None and plan.fresh() and "skip_checks" not in opts \
                and plan.from_scratch == bool(opts.get("fresh")):
            # The user just confirmed a plan whose preflight passed seconds ago (the same
            # checks, `before_submit`): running them again would only make them wait.
            # A stale or failed verdict is never reused.
            opts = {**opts, "skip_checks": True}
        async for ev in run_action(name, self.profile, self.remote, who=self.who, **opts):
            if name == "submit" and ev.kind == "done":
                submitted = ev.data.get("job_id")
            if ev.node is None and ev.kind == "fail" and name != "check":  # the preflight screen shows it
                self._alert(Alert("error", f"action:{name}", ev.message))
            if name == "stop" and ev.kind == "warn" and ev.node:
                self._alert(Alert("warning", "action:stop", f"{ev.node}: {ev.message}"))
            yield ev
        if name in ("submit", "stop"):
            self.monitor.refresh_now()
            self._kick.set()
        if submitted:
            # Watch the new job from its first line. In a task of its own: the caller
            # has its `done` event and must not wait on an attach (nor be cancelled
            # half-way through one when it stops iterating).
            t = asyncio.create_task(self._attach(submitted, JobStatus.PENDING, fresh=True), name="attach-submitted")
            self._tasks.append(t)

    def describe_stop(self, cluster: bool = False) -> str:
        w = self.watcher
        if w is not None and w.status in (JobStatus.RUNNING, JobStatus.PENDING, JobStatus.UNKNOWN):
            js = self._job if self._job is not None and self._job.id == w.job_id else w.job_state()
            text = f"stop job {w.job_id}"
            if js.step is not None:
                text += f" at step {js.step}"
            text += "; " + (f"last checkpoint at step {js.last_checkpoint}" if js.last_checkpoint is not None
                            else "no checkpoint saved yet: the progress since the start is lost")
        else:
            text = "no job is running: nothing to stop"
        if cluster:
            text += f"; then `ray stop --force` on all {len(self.profile.nodes)} nodes"
            if self.profile.cluster.slurm:
                from tui.core.slurm import known_job

                job = known_job(self.profile)
                if job:
                    text += (f"; then stop the container {self.profile.container.name} on every node and release "
                             f"Slurm job {job} (scancel): its {len(self.profile.nodes)} nodes go back to Slurm")
        return text

    async def describe_convert(self) -> str | None:
        from tui.core.actions.model import list_dir, mcore_missing

        if not self.head_up():
            return None
        d = await list_dir(self.remote, self.profile.head.name, self.profile.paths.mcore_checkpoint)
        if not d.exists or d.empty:
            return None
        shards = sum(f.endswith(".distcp") for f in d.files)
        missing = mcore_missing(d)
        if missing:
            return f"{self.profile.paths.mcore_checkpoint} is half-written (lacks {', '.join(missing)})"
        return f"{self.profile.paths.mcore_checkpoint} holds a checkpoint ({shards} .distcp shards)"

    async def log_search(self, pattern: str, start_line: int, backwards: bool) -> int | None:
        if self.watcher is None:
            return None
        # the contract's start is exclusive; the spool's search includes its start
        start = start_line - 1 if backwards else start_line + 1
        if start < 0:
            return None
        return await asyncio.to_thread(self.watcher.spool.search, pattern, start, backwards)
