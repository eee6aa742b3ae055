"""The one seam between the Textual app and everything that produces data.

The app never talks to SSH, Ray or event files itself: it takes its data through the
small `Backend` protocol below. `LiveBackend` (tui/backend/live.py) implements it over the
real core (probes, log stream, TensorBoard reader, actions); `StaticBackend`
(tui/backend/static.py) over fixed data, so that snapshot tests, Pilot tests, the README
screenshot and the benchmark are deterministic and need no cluster.

Contract every backend keeps (tests/test_backend_contract.py runs both against it):
- Callbacks are called on the event loop that called `start()` (the app's loop), or
  from another thread only if the callback is thread-safe: the app's callbacks only
  `post_message`, which Textual makes thread-safe, so both work.
- Callbacks must be cheap to call and never block; the app coalesces on its side.
- Log lines are numbered 0, 1, 2, ... in the order they were delivered over the whole
  run; `Alert.line` and `log_search` use that numbering. Watching another job restarts
  the numbering (`subscribe_log_restart` says so first).
- `stop()` stops *watching*. It never stops the training job or Ray: quitting the
  console must leave a 20-hour run alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Protocol, runtime_checkable

from tui.core.actions.events import ActionEvent
from tui.core.alerts import Alert
from tui.core.job.metrics import MetricsSummary
from tui.core.profile import Profile
from tui.core.state import ClusterState, JobStatus

if TYPE_CHECKING:  # the preflight's modules load on first use, not with the app
    from tui.core.actions.plan import SubmitPlan
    from tui.core.job.journal import Entry
    from tui.core.job.runs import RunSummary

Series = dict[str, list[tuple[int, float]]]
# Callbacks' return values are ignored (the app's post a message and return a bool).
StateCallback = Callable[[ClusterState], object]
LogCallback = Callable[[list[str]], object]
MetricsCallback = Callable[[MetricsSummary, Series], object]
AlertCallback = Callable[[Alert], object]
LogRestartCallback = Callable[[str], object]


@runtime_checkable
class FaultInjector(Protocol):
    """Plants a failure in a simulated job (the palette's "Inject a fault"). The app gets
    one from the CLI (tui/cli/console.py) when it watches a running simulated cluster;
    the app and its screens never import the simulator themselves."""

    demo_kind: str
    """The fault the palette offers first (a job failure the alert names)."""

    def kinds(self) -> dict[str, str]:
        """Every fault this cluster takes: kind -> what it does, for the palette."""

    async def inject(self, kind: str) -> str:
        """Plant `kind`; returns what to tell the user. Raises on failure."""


@runtime_checkable
class Backend(Protocol):
    """Everything the console needs from the world. Keep it small: each method here is
    one thing the screen shows or one key the user presses. The app and its screens use
    nothing else of a backend (no `getattr` on one: tests/test_layering.py looks)."""

    profile: Profile
    simulated: bool  # the cluster is the simulator: the header says so
    frame_pace_s: float
    """Draw what changed at most this often (0: draw each change at once). A live
    backend's data arrives at its own moments; paced, one frame carries a refresh."""

    async def start(self) -> None:
        """Begin watching (probes, log, scalars). Returns quickly; data arrives through
        the subscriptions. Called once, after the app subscribed."""

    async def stop(self) -> None:
        """Stop watching and close connections. Never stops the job or Ray."""

    def subscribe_state(self, cb: StateCallback) -> None:
        """`cb(state)` with a whole new ClusterState at every probe round (1-2 Hz)."""

    def subscribe_log(self, cb: LogCallback) -> None:
        """`cb(lines)` with batches of new job log lines (no trailing newlines)."""

    def subscribe_log_restart(self, cb: LogRestartCallback) -> None:
        """`cb(job_id)` when the backend starts watching another job (after a submit, a
        sim down/up): the lines that follow are that job's log from its line 0, and the
        lines delivered before belong to the previous job (the app clears its log pane)."""

    def subscribe_metrics(self, cb: MetricsCallback) -> None:
        """`cb(summary, series)`: the core's `MetricsSummary`, series keyed by
        the plotted series (reward, throughput in tokens/s per node, response_length) as
        (step, value) lists, already thinned to a few hundred points."""

    def subscribe_alerts(self, cb: AlertCallback) -> None:
        """`cb(alert)` once per new alert."""

    def run_action(self, name: str, **opts: Any) -> AsyncIterator[ActionEvent]:
        """Run one of `tui.core.actions.registry.SPECS` (options the app passes:
        convert(force=True), stop(cluster=True)) and stream its progress. It ends with a `done`,
        `fail` or `skip` event; an exception is shown as a failure. For "check" each
        result is one event made by `core.checks.check_event` (`data["check"]` the
        check's id, `status` pass/fail/warn/skip, `data["result"]` the whole
        `CheckResult`, read back by `core.checks.result_of`)."""

    def describe_stop(self, cluster: bool = False) -> str:
        """What `x` (or `X` with cluster=True) would do, named exactly, e.g.
        "stop job raysubmit_8Hk2 at step 812; last checkpoint at step 800"."""

    async def submit_plan(self) -> SubmitPlan:
        """What `s` would launch, with the preflight's verdict (`core.actions.plan`),
        taken now: the app shows it and asks before it submits."""

    async def describe_convert(self) -> str | None:
        """None when converting has nothing in its way; else what already exists, e.g.
        "/data/.../Qwen3-8B-MCore holds a checkpoint (64 .distcp shards)". The app then
        asks before offering convert --force."""

    def all_series(self) -> Series:
        """Every scalar of the watched run (not only the plotted ones), for the graph
        screen and its CSV export; empty before a job is watched."""

    def job_status(self) -> JobStatus | None:
        """The watched job's status now; None when no job is watched."""

    async def dashboard_url(self) -> str:
        """Ray's dashboard for a browser on this machine: a loopback port here forwarded
        through the SSH connection to the head, so the dashboard itself stays bound to the
        head's loopback. Raises RlconsoleError saying why there is none (the head not
        connected, demo data)."""

    def runs(self) -> list[RunSummary]:
        """Every run of the profile, oldest first (`core.job.runs.list_runs`: the local
        history, spools and journals; no SSH). Blocking (it may parse spooled logs): the
        app calls it in a thread."""

    def run_series(self, job_id: str, keys: list[str]) -> list[tuple[int, float]]:
        """Run `job_id`'s series for the first of `keys` it has, from its local spool,
        stitched onto the runs it resumed by step (`core.job.compare`), for the graph
        screen's overlay of other runs (`c`). Blocking: the app calls it in a thread."""

    def journal(self) -> list[Entry]:
        """The watched run's whole journal (`core.job.journal`), oldest first: what every
        console, `watch` and CLI action recorded, not only this session; empty before a
        job is watched."""

    async def log_search(self, pattern: str, start_line: int, backwards: bool) -> int | None:
        """Search the whole run's log (the spool, beyond the lines the screen keeps) for
        a case-insensitive substring, from `start_line` exclusive; the index or None."""
