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

from .backend import AlertCallback, LogCallback, MetricsCallback, StateCallback
from .core.actions.events import ActionEvent
from .core.alerts import Alert
from .core.profile import Profile
from .core.state import ClusterState

log = logging.getLogger("rlconsole.live")


def to_pane_summary(rm: Any) -> dict[str, Any]:
    """RunMetrics -> the `MetricsSummary` keys the metrics pane reads."""
    s = rm.summary()
    trend = None
    pts = rm.raw_series("critic/rewards/mean") or rm.raw_series("critic/score/mean")
    if len(pts) >= 4:
        window = [v for _, v in pts[-10:]]
        trend = pts[-1][1] - sum(window) / len(window)
    reward = s.get("reward_mean")
    if reward is None:
        reward = s.get("score_mean")
    return {
        "step": s.get("step"),
        "total_steps": s.get("total_steps"),
        "step_time_s": s.get("step_time_s"),
        "eta_s": s.get("eta_s"),
        "throughput_per_gpu": s.get("throughput_tokens_per_s_per_gpu"),
        "throughput_per_node": s.get("throughput_tokens_per_s_per_node"),
        "reward": reward,
        "reward_trend": trend,
        "mfu_pct": s.get("mfu_pct"),
        "response_length": s.get("response_length_mean"),
        "last_checkpoint": s.get("last_checkpoint"),
    }


class LiveBackend:
    def __init__(self, profile: Profile) -> None:
        from .core.actions.remote import PoolRemote
        from .core.probes import ClusterMonitor
        from .core.ssh import SessionPool

        self.profile = profile
        self.simulated = profile.simulated
        refresh = profile.monitoring.refresh_s
        self.pool = SessionPool(profile, backoff_max_s=max(2.0, 2 * refresh))
        self.monitor = ClusterMonitor(profile, pool=self.pool)
        self.remote = PoolRemote(self.pool, profile)
        self.watcher: Any = None
        self._state_cbs: list[StateCallback] = []
        self._log_cbs: list[LogCallback] = []
        self._metric_cbs: list[MetricsCallback] = []
        self._alert_cbs: list[AlertCallback] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._down: set[str] = set()
        self._kick = asyncio.Event()
        self.state: ClusterState | None = None

    # -- subscriptions ------------------------------------------------------------

    def subscribe_state(self, cb: StateCallback) -> None:
        self._state_cbs.append(cb)

    def subscribe_log(self, cb: LogCallback) -> None:
        self._log_cbs.append(cb)

    def subscribe_metrics(self, cb: MetricsCallback) -> None:
        self._metric_cbs.append(cb)

    def subscribe_alerts(self, cb: AlertCallback) -> None:
        self._alert_cbs.append(cb)

    def _alert(self, a: Alert) -> None:
        for cb in self._alert_cbs:
            with contextlib.suppress(Exception):
                cb(a)

    def _lines(self, lines: list[str]) -> None:
        for cb in self._log_cbs:
            with contextlib.suppress(Exception):
                cb(lines)

    def _on_state(self, st: ClusterState) -> None:
        if self.watcher is not None:
            ray_job = next((j for j in st.ray.jobs if j.id == self.watcher.job_id), None)
            if ray_job is not None:
                self.watcher.status = ray_job.status
            st.job = self.watcher.job_state()
        for n in st.nodes:
            if not n.reachable and n.name not in self._down and n.error != "connecting":
                self._down.add(n.name)
                self._alert(Alert("error", "probe", f"node {n.name} is down: {n.error}"))
            elif n.reachable and n.name in self._down:
                self._down.discard(n.name)
                self._alert(Alert("info", "probe", f"node {n.name} is back"))
        self.state = st
        for cb in self._state_cbs:
            with contextlib.suppress(Exception):
                cb(st)

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        self.monitor.subscribe(self._on_state)
        await self.monitor.start()
        self._tasks.append(asyncio.create_task(self._job_loop(), name="job-loop"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.watcher is not None:
            await self.watcher.stop()
        await self.monitor.stop()
        await self.pool.close()

    async def _attach(self, job_id: str, status: str) -> None:
        from .core.jobwatch import JobWatcher

        if self.watcher is not None:
            if self.watcher.job_id == job_id:
                return
            await self.watcher.stop()
        w = JobWatcher(self.profile, self.pool, job_id, on_lines=self._lines, on_alert=self._alert)
        w.status = status
        self.watcher = w
        # a re-attach: show what the spool already holds, then follow
        n = w.spool.line_count
        if n:
            self._lines(w.spool.lines(max(0, n - 50_000), n))
        await asyncio.to_thread(w.reattach)
        for a in w.alerts[-20:]:
            self._alert(a)
        w.start()
        self._alert(Alert("info", "ray", f"watching job {job_id}"))

    def all_series(self) -> dict[str, list[tuple[int, float]]]:
        """Every scalar of the watched run (TensorBoard reader or log step lines), for the
        graph screen and its CSV export; empty before a job is attached."""
        if self.watcher is None:
            return {}
        rm = self.watcher.run_metrics()
        return {k: rm.raw_series(k) for k in rm.keys()}

    async def _job_loop(self) -> None:
        from .core.jobwatch import find_job

        refresh = self.profile.monitoring.refresh_s
        last_push = 0.0
        while True:
            try:
                if self.head_up():
                    active = self.watcher is not None and self.watcher.status in ("RUNNING", "PENDING", "UNKNOWN")
                    if not active:
                        found = await find_job(self.profile, self.remote)
                        if found is not None:
                            await self._attach(*found)
                if self.watcher is not None and time.monotonic() - last_push >= refresh:
                    last_push = time.monotonic()
                    rm = self.watcher.run_metrics()
                    summary = to_pane_summary(rm)
                    series = {"reward": rm.series("critic/rewards/mean", 300) or rm.series("critic/score/mean", 300),
                              "throughput": rm.series("throughput_tokens_per_s_per_node", 300),
                              "response_length": rm.series("response_length/mean", 300)}
                    for cb in self._metric_cbs:
                        with contextlib.suppress(Exception):
                            cb(summary, series)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the loop must outlive any one failure
                log.info("job loop: %s", e)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._kick.wait(), timeout=refresh)
            self._kick.clear()

    def head_up(self) -> bool:
        return self.pool.head.connected

    # -- actions ----------------------------------------------------------------------

    async def run_action(self, name: str, **opts: Any) -> AsyncIterator[ActionEvent]:
        if name == "check":
            from .core.checks import run_checks

            yield ActionEvent("check", "start", "preflight checks")
            results = await run_checks(self.profile, remote=self.remote)
            for r in results:
                yield ActionEvent("check", "output", f"{r.id}: {r.message}" + (f" (fix: {r.fix})" if r.fix and r.status != "pass" else ""),
                                  node=r.node, status=r.status, data={"check": r.id, "fix": r.fix})
            nfail = sum(r.status == "fail" for r in results)
            yield ActionEvent("check", "fail" if nfail else "done",
                              f"{nfail} failed, {sum(r.status == 'warn' for r in results)} warnings, "
                              f"{sum(r.status == 'pass' for r in results)} passed")
            return
        from .core.actions.registry import run_action

        async for ev in run_action(name, self.profile, self.remote, **opts):
            if ev.node is None and ev.kind == "fail":
                self._alert(Alert("error", f"action:{name}", ev.message))
            if name == "stop" and ev.kind == "warn" and ev.node:
                self._alert(Alert("warning", "action:stop", f"{ev.node}: {ev.message}"))
            yield ev
        if name in ("submit", "stop"):
            if name == "submit" and self.watcher is not None:
                self.watcher.status = "STOPPED?"  # let the loop look for the new job
            self.monitor.refresh_now()
            self._kick.set()

    def describe_stop(self, cluster: bool = False) -> str:
        w = self.watcher
        if w is not None and w.status in ("RUNNING", "PENDING", "UNKNOWN"):
            js = w.job_state()
            text = f"stop job {w.job_id}"
            if js.step is not None:
                text += f" at step {js.step}"
            text += "; " + (f"last checkpoint at step {js.last_checkpoint}" if js.last_checkpoint is not None
                            else "no checkpoint saved yet: the progress since the start is lost")
        else:
            text = "no job is running: nothing to stop"
        if cluster:
            text += f"; then `ray stop --force` on all {len(self.profile.nodes)} nodes"
        return text

    async def describe_convert(self) -> str | None:
        from .core.actions.model import list_dir, mcore_missing

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
        return await asyncio.to_thread(self.watcher.spool.search, pattern, start_line, backwards)
