"""Watching a running job: its driver log, its scalars, its checkpoints, its failures.

Choice of log source, and why: the driver's log *file* on the head
(`<ray temp dir>/session_latest/logs/job-driver-<id>.log`), followed with
`tail -c +OFFSET -F` over the node's SSH connection, rather than Ray's job log API.
The API replays the whole log from the start on every connection, so after a dropped
link or a console restart the console would re-read (and re-transfer) hours of log to
find its place; the file is append-only, so a byte offset resumes exactly: the local
spool is a byte-for-byte copy of the remote file, and its size *is* the offset. No line
is lost or repeated, even when the stream is cut in the middle of a line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Callable

from tui.core.alerts import Alert
from tui.core.job.history import last_run, runs
from tui.core.profile import Profile
from tui.core.state import ACTIVE_JOB_STATUSES, JobState, JobStatus, RayJobState

log = logging.getLogger("rlconsole.jobwatch")

LineCallback = Callable[[list[str]], None]
AlertCallback = Callable[[Alert], None]


def job_on_cluster(ray: Any, job_id: str) -> bool | None:
    """Whether the current Ray knows `job_id`: its job list says (dashboard API). No
    only when Ray positively says so: the job list omits it, or nothing listens on
    Ray's GCS port. A head that could not be asked (`unasked`), a dashboard that missed
    its answers while the GCS still listens (`unconfirmed`), and the CLI fallback (which
    lists no jobs) say nothing: not known. A "no" from a slow dashboard flipped a running
    job to NOT_ON_CLUSTER and back in bench_chaos's full run, with no fault near it."""
    if not ray.available:
        if getattr(ray, "unasked", False) or getattr(ray, "unconfirmed", False):
            return None
        return False
    if ray.source == "api":
        return any(j.id == job_id for j in ray.jobs)
    return None


def spool_dir() -> Path:
    from tui.core.locations import spool_root

    return spool_root()


class JobWatcher:
    """Follows one job, composing the job package's parts: the log follower (log ->
    spool), the VeRL parser and the diagnosis catalog over each new line, the scalar
    source (TensorBoard, checkpoints), the parse cache, and the metrics store."""

    CACHE_EVERY_LINES = 200_000
    """The console saves the parse cache when this many lines were parsed since the
    last save (and when it stops watching): a later `status` re-parses at most that."""

    def __init__(self, profile: Profile, pool: Any, job_id: str, *,
                 on_lines: LineCallback | None = None, on_alert: AlertCallback | None = None,
                 refresh_s: float | None = None, root: Path | None = None,
                 wall_clock: bool = True, diagnose: bool = True, summary: bool = False) -> None:
        from tui.core.job.follower import LogFollower
        from tui.core.job.mirror import ScalarSource
        from tui.core.job.parsecache import ParseCache
        from tui.core.job.spool import LogSpool
        from tui.core.job.store import MetricsStore
        from tui.core.job.verl_log import LogMetricsParser
        from tui.core.safepath import confined, safe_job_id

        self.profile = profile
        self.pool = pool
        self.job_id = job_id
        self.status: JobStatus = JobStatus.UNKNOWN  # Ray's word for it, or one of the console's two
        self.on_cluster: bool | None = None  # see JobState.on_cluster
        self.on_lines = on_lines
        self.on_alert = on_alert
        self.refresh_s = refresh_s or profile.monitoring.refresh_s
        # The id comes from Ray (anyone can submit a job): one confined name, or
        # UnsafeName before anything is created.
        base = confined(root or spool_dir(), safe_job_id(job_id))
        base.mkdir(parents=True, exist_ok=True)
        self.spool = LogSpool(base / "driver.log")
        # wall_clock=False (a one-shot `status`): lines read in one go say nothing
        # about when steps happened; the ETA then comes from tqdm's own rate.
        self.wall_clock = wall_clock
        self.parser = LogMetricsParser(clock=time.time if wall_clock else None)
        # diagnose=False (a one-shot `status`, which reports no alerts): the catalog is
        # not even loaded (~0.2 s of a fresh process)
        self.diagnose = diagnose
        # summary=True (a one-shot `status`): re-attach from the parse cache's small summary
        # file when there is one; the parser then holds only the run's last steps, and the
        # metrics model counts the others from the summary (no graph, no sparklines here)
        self.summary = summary
        self._diagnoser: Any = None
        self.alerts: list[Alert] = []
        rec = next((r for r in reversed(runs(profile.name)) if r.job_id == job_id), None)
        tb_remote = (rec.tensorboard_dir if rec and rec.tensorboard_dir else
                     profile.env.get("TENSORBOARD_DIR", profile.paths.tensorboard_dir))
        ckpt_dir = rec.checkpoint_dir if rec and rec.checkpoint_dir else profile.paths.checkpoint_dir
        self.follower = LogFollower(profile, pool, job_id, self.spool, self._consume, self.container)
        self.scalars = ScalarSource(profile, pool, tb_remote, base / "tb", ckpt_dir, self.container,
                                    may_write=self.spool.try_lock, earlier_run=earlier_run(rec))
        self.cache = ParseCache(self.spool, self.parser)
        self.store = MetricsStore(self.parser, lambda: self.scalars.reader)
        self.reattached = False
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def diagnoser(self) -> Any:
        """The diagnosis catalog over the log's lines, loaded on first use."""
        if self._diagnoser is None:
            from tui.core.diagnosis import Diagnoser

            self._diagnoser = Diagnoser()
        return self._diagnoser

    @diagnoser.setter
    def diagnoser(self, d: Any) -> None:
        self._diagnoser = d

    @property
    def container(self) -> bool:
        return self.profile.container.access == "docker-exec"

    def observe(self, status: str | JobStatus, on_cluster: bool | None) -> None:
        """What Ray says of the job now (the backend's and `status`'s one way to tell
        the watcher; they never set its fields)."""
        self.status = JobStatus.of(status)
        self.on_cluster = on_cluster

    @property
    def last_checkpoint(self) -> int | None:
        return self.scalars.last_checkpoint

    @property
    def _reader(self) -> Any:
        return self.scalars.reader

    @_reader.setter
    def _reader(self, reader: Any) -> None:  # tests hand the watcher a reader of their own
        self.scalars.reader = reader

    def _consume(self, lines: list[str], notify: bool = True) -> None:
        # A broken user diagnosis.yaml is told once, as a warning, before any log line is
        # read against the catalog without it (news now, even while old lines are re-read).
        for problem in (self.diagnoser.take_problems() if self.diagnose else ()):
            self.alerts.append(problem)
            if self.on_alert:
                self.on_alert(problem)
        if not lines:
            return
        first = self.spool.line_count - len(lines)
        self.parser.feed_many(lines)
        note = self.parser.take_names_note()  # (once per run: metric names past the cap)
        if note is not None:
            log.warning("job %s: %s", self.job_id, note)
            a = Alert("warning", "log", note)
            self.alerts.append(a)
            if notify and self.on_alert:
                self.on_alert(a)
        for i, line in enumerate(lines if self.diagnose else ()):
            a = self.diagnoser.match(line, first + i)
            if a is not None:
                self.alerts.append(a)
                if notify and self.on_alert:
                    self.on_alert(a)
        if notify and self.on_lines:
            self.on_lines(lines)

    async def follow_log(self, once: bool = False) -> None:
        """Follow the driver log into the spool (tui/core/job/follower.py)."""
        await self.follower.follow(once)

    async def poll_scalars_once(self, read_scalars: bool = True) -> None:
        """The checkpoint marker and (unless `read_scalars` is False) the event files'
        new scalars, in one round trip."""
        await self.scalars.poll_once(read_scalars)

    async def poll_scalars(self) -> None:
        while True:
            try:
                if self.spool.line_count - self.cache.cached_lines >= self.CACHE_EVERY_LINES:
                    await self.save_cache()
                await self.poll_scalars_once()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - a failed poll is retried at the next refresh
                log.info("scalar poll failed: %s", e)
            await asyncio.sleep(self.refresh_s)

    # -- the parse cache (tui/core/job/parsecache.py) ---------------------------------

    @property
    def cache_path(self) -> Path:
        return self.cache.path

    @property
    def _cached_lines(self) -> int:
        return self.cache.cached_lines

    def cache_snapshot(self) -> tuple[Any, ...]:
        return self.cache.snapshot()

    def write_cache(self, snap: tuple[Any, ...]) -> None:
        self.cache.write(snap)

    async def save_cache(self) -> None:
        snap = self.cache.snapshot()
        await asyncio.to_thread(self.cache.write, snap)

    def reattach(self, diagnose_tail: int = 200_000, batch: int = 20_000) -> None:
        """Re-attach: parse what the spool already holds (nothing is re-fetched), in
        batches so memory stays bounded; diagnose only its tail (old failures were
        reported when they happened). Blocking: run it in a thread."""
        n = self.spool.line_count
        # when these lines arrived is not known: no wall times for them (ETA cadence)
        clock, self.parser._clock = self.parser._clock, None
        try:
            self._reparse(n, diagnose_tail, batch)
        finally:
            self.parser._clock = clock if self.wall_clock else None
        self.reattached = True

    def _reparse(self, n: int, diagnose_tail: int, batch: int) -> None:
        first = self.cache.load(summary=True) if self.summary else 0
        if first and self.cache.base is not None:
            self.store.index.seed(self.cache.base)
        else:
            first = self.cache.load()  # lines the parse cache already covers
        self._reparse_from(first, n, diagnose_tail, batch)
        if self.cache.bad and self.parser.lines == n:  # an unsafe or foreign cache: ours instead, now
            with contextlib.suppress(OSError):
                self.write_cache(self.cache_snapshot())

    def _reparse_from(self, first: int, n: int, diagnose_tail: int, batch: int) -> None:
        dstart = max(0, n - diagnose_tail) if diagnose_tail > 0 and self.diagnose else n
        for start in range(min(first, dstart), n, batch):
            lines = self.spool.lines(start, min(n, start + batch))
            if start + len(lines) > first:
                self.parser.feed_many(lines[max(0, first - start):])
            if start + len(lines) > dstart:
                for i in range(max(0, dstart - start), len(lines)):
                    a = self.diagnoser.match(lines[i], start + i)
                    if a is not None:
                        self.alerts.append(a)

    async def run(self, follow: bool = True) -> None:
        if not self.reattached:
            await asyncio.to_thread(self.reattach)
        await asyncio.gather(self.follow_log(once=not follow), self.poll_scalars())

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self.run())]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._tasks and self.spool.line_count > self._cached_lines:
            with contextlib.suppress(Exception):
                await self.save_cache()
        self._tasks = []
        self.spool.release()  # another console may take the job's spool over

    # -- what the user sees -----------------------------------------------------------

    def rows(self) -> dict[int, dict[str, float]]:
        """Steps from the log, completed by TensorBoard's scalars (tui/core/job/store.py)."""
        return self.store.rows()

    def run_metrics(self) -> Any:
        from tui.core.job.metrics import RunMetrics

        mon = self.profile.monitoring
        expected: dict[str, Any] = {}
        if mon.mfu_pct:
            expected["mfu_pct"] = mon.mfu_pct
        if mon.throughput_tokens_per_s_per_node:
            expected["throughput_tokens_per_s_per_node"] = mon.throughput_tokens_per_s_per_node
        if mon.step_time_min:
            expected["step_time_s"] = (mon.step_time_min[0] * 60, mon.step_time_min[1] * 60)
        if mon.mem_gib_per_card:
            expected["mem_gib_per_card"] = mon.mem_gib_per_card
        prog = self.parser.progress
        total = self.parser.total_steps or (prog.total if prog else None)
        return RunMetrics(self.rows(), index=self.store.index, total_steps=total or mon.total_steps,
                          last_checkpoint=self.last_checkpoint or self.parser.last_checkpoint,
                          expected=expected, gpus_per_node=self.profile.nodes[0].gpus,
                          wall_times=self.parser.seen_at, now=time.time(),
                          tqdm_s_per_step=prog.s_per_it if prog else None)

    def job_state(self, rm: Any = None) -> JobState:
        """The job as `status --json` shows it; `rm`: a RunMetrics already computed for
        this moment (merging every step's metrics is the costly part)."""
        rm = rm if rm is not None else self.run_metrics()
        step = rm.last_step
        if self.on_cluster is False:
            # The last run, not a live one: where it got to, nothing that looks current.
            return JobState(id=self.job_id, status=JobStatus.NOT_ON_CLUSTER, step=step, total_steps=rm.total_steps,
                            last_checkpoint=rm.last_checkpoint, on_cluster=False,
                            summary={"step": step, "total_steps": rm.total_steps,
                                     "last_checkpoint": rm.last_checkpoint})
        last = rm.by_step.get(step, {}) if step is not None else {}
        metrics = {k: v for k, v in last.items()
                   if isinstance(v, (int, float)) and v == v and v not in (float("inf"), float("-inf"))}
        summary = rm.summary()
        if self.status != JobStatus.RUNNING:
            summary["eta_s"] = summary["wall_step_time_s"] = None  # only a running job has an ETA
        return JobState(id=self.job_id, status=self.status, step=step, total_steps=rm.total_steps,
                        metrics=metrics, last_checkpoint=rm.last_checkpoint, summary=summary,
                        on_cluster=self.on_cluster)


EARLIER_RUN_SLACK_S = 10.0
"""How much earlier than its submission a run's own event file may be named: the name's
time is the head's clock, the submission the console's (NTP keeps them within this)."""


def earlier_run(rec: Any) -> tuple[float, int] | None:
    """What the run's ScalarReader reads of an earlier run's event files under the same
    TensorBoard dir (`ScalarReader.earlier_run`): those named before this run was
    submitted, up to the step it resumed from (its record's parent, `extra["parent"]`),
    or none of them. None (read them all, as TensorBoard does) for a job this console did
    not submit: its start and its resume step are not known here."""
    if rec is None or not getattr(rec, "submitted_at", None):
        return None
    extra = rec.extra if isinstance(getattr(rec, "extra", None), dict) else {}
    parent = extra.get("parent")
    step = parent.get("step") if isinstance(parent, dict) else None
    return (float(rec.submitted_at) - EARLIER_RUN_SLACK_S, int(step) if isinstance(step, int) and step > 0 else 0)


async def find_job(profile: Profile, remote: Any, known: list[RayJobState] | None = None) -> tuple[str, str] | None:
    """The job to watch: a running one this console submitted, else any running one,
    else the last one submitted from here. (id, status). `known`: Ray's job list when the
    caller already has it (the monitor polls it), which saves asking the job API again."""
    from tui.core.actions.jobs import job_client, list_jobs
    from tui.core.safepath import UnsafeName, safe_job_id

    jobs: list[dict[str, Any]] = []
    if known is None:
        with contextlib.suppress(Exception):
            known = await list_jobs(await job_client(remote))
    if known is not None:
        jobs = [{"id": j.id, "status": j.status} for j in sorted(known, key=lambda j: j.start_time or 0)]

    def usable(job_id: Any) -> bool:
        """A job whose id cannot name its spool directory is never watched."""
        try:
            safe_job_id(job_id)
            return True
        except UnsafeName as e:
            log.warning("job passed over: %s", e)
            return False

    jobs = [j for j in jobs if usable(j.get("id"))]
    mine = {r.job_id for r in runs(profile.name)}
    active = [j for j in jobs if j["status"] in ACTIVE_JOB_STATUSES]
    for pick in ([j for j in active if j["id"] in mine], active):
        if pick:
            return pick[-1]["id"], pick[-1]["status"]
    rec = last_run(profile.name)
    if rec and usable(rec.job_id):
        st = next((j["status"] for j in jobs if j["id"] == rec.job_id), JobStatus.UNKNOWN)
        return rec.job_id, st
    if jobs:
        return jobs[-1]["id"], jobs[-1]["status"]
    return None
