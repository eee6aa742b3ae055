"""The main screen: nodes and cards, Ray, training metrics, the job log and the running
action, all at once, driven by single keys.

Layout adapts to the terminal: side by side from 150 columns, stacked below that, and a
compact form (two-line cards, no plots, action panel only while one runs) under 100
columns, so 4 x 8 cards fit at 120x40 and stay readable at 80x24.

Actions run in Textual workers, so the screen keeps taking keys and telemetry keeps
arriving while a bring-up takes minutes.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.events import Key, Resize
from textual.screen import Screen
from textual.widgets import Header
from textual.worker import Worker, WorkerState

from tui.commands import CHANGING_KEY_ACTIONS, KEYS, offered_keys
from tui.core.actions.events import ActionEvent
from tui.core.alerts import Alert
from tui.core.safetext import shown
from tui.core.secrets import mask_secrets
from tui.core.state import ClusterState
from tui.messages import (
    ActionEventReceived,
    ActionFinished,
    AlertRaised,
    AlertsBarClicked,
    LogLinesReceived,
    LogRestarted,
    MetricsUpdated,
    StateUpdated,
)
from tui.oneshot import call_after
from tui.screens.alerts import AlertsScreen
from tui.screens.help import HelpScreen
from tui.screens.node_detail import NodeDetailScreen
from tui.screens.preflight import PreflightScreen
from widgets.action_panel import ActionPanel
from widgets.alerts_bar import AlertsBar
from widgets.confirm import ConfirmationModal
from widgets.key_bar import KeyBar
from widgets.log_pane import LogPane
from widgets.metrics_pane import MetricsPane
from widgets.node_grid import NodeGrid
from widgets.ray_pane import RayPane
from widgets.sim_badge import ReadOnlyBadge, SimBadge

if TYPE_CHECKING:
    from tui.backend.base import Backend

WIDE_COLS = 150
NARROW_COLS = 100
STOP_ACTIONS = ("stop",)
"""Actions allowed while another runs: stopping is the escape hatch."""


class MainScreen(Screen[None]):
    BINDINGS = [
        Binding(k.key, k.action, k.label, show=k.footer, key_display=k.display) for k in KEYS
    ]

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend
        self.read_only = backend.profile.console.read_only
        self.state: ClusterState | None = None
        self.bells = 0
        self.running: dict[str, Worker[Any]] = {}
        self.check_events: list[ActionEvent] = []
        self.series: dict[str, list[tuple[int, float]]] = {}
        self.to_confirm: dict[str, tuple[str, dict[str, Any]]] = {}
        """Actions that stopped to ask (a setup-ray that would stop a running Ray): the
        question and the options to run them again with once the user says yes."""
        self.pace_s: float = float(backend.frame_pace_s or 0.0)
        """Frame pacing (live backends): the cards, the Ray pane, the metrics and the log
        change at their own moments (samplers, the job's log, the scalar poll), and each
        change drawn alone is a frame of Textual's compositor. Paced, what arrived is drawn
        together, at most once per `pace_s` (a change waits at most that long); keys and
        alerts are never paced. 0: each change is drawn as it arrives."""
        self._pace_timer: asyncio.TimerHandle | None = None
        """The pending paced frame (one at a time). Not Textual's `set_timer`: a one-shot
        Textual timer can be skipped for good on a busy machine (tui/oneshot.py), and this
        one being lost froze every paced pane."""
        self._last_frame = float("-inf")
        self._paced_state: ClusterState | None = None
        self._paced_metrics: MetricsUpdated | None = None
        self.log_job: str | None = None
        """The job whose log the pane shows (None: none yet, or a backend of one log)."""
        self._alert_job: dict[int, str | None] = {}
        """id(alert) -> the job whose log its `line` counts (the pane's job when it came)."""

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        prof = self.backend.profile
        yield Header(show_clock=False, icon="◆")
        with Horizontal(id="topbar"):
            yield AlertsBar(id="alerts")
            yield SimBadge(self.backend.simulated, id="sim")
            yield ReadOnlyBadge(self.read_only, id="read-only")
        with Horizontal(id="top"):
            yield NodeGrid(limits=self.backend.profile.monitoring.card_limits(), id="nodes")
            with Horizontal(id="side"):
                yield RayPane(len(prof.nodes), prof.total_gpus, id="ray")
                yield MetricsPane(prof.monitoring, id="metrics")
        with Horizontal(id="bottom"):
            yield LogPane(id="log")
            yield ActionPanel(id="action")
        yield KeyBar(offered_keys(self.read_only))

    def on_mount(self) -> None:
        self.query_one(LogPane).spool_search = self.backend.log_search
        if self.pace_s:
            self.query_one(LogPane).pace_by_screen()
        self.query_one(LogPane).log_widget.focus()

    @property
    def alerts(self) -> list[Alert]:
        """This session's alerts, oldest first: the bar keeps them (one list, not two)."""
        return self.query_one(AlertsBar).alerts

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Read-only mode: the keys that change the cluster are not bound (Textual then
        neither runs them nor shows them; the palette goes through here too)."""
        if self.read_only and action in CHANGING_KEY_ACTIONS:
            return False
        return True

    def on_key(self, event: Key) -> None:
        """Read-only: a key that would change the cluster is not bound, so it reached no
        one and the console said nothing (a watcher pressing `u` in a browser tab). Said now."""
        from textual.widgets import Input

        if not self.read_only or isinstance(self.focused, Input):  # typing in the search box
            return
        k = next((k for k in KEYS if k.changes and k.key == event.key), None)
        if k is not None:
            event.stop()
            self.notify(f"{k.shown_key} ({k.label}) is off: this console is read-only (--read-only / "
                        "console.read_only); it watches, it does not change the cluster", title="read-only",
                        severity="warning", timeout=5, markup=False)

    def on_unmount(self) -> None:
        if self._pace_timer is not None:
            self._pace_timer.cancel()
            self._pace_timer = None

    def on_resize(self, event: Resize) -> None:
        w = event.size.width
        self.set_class(w >= WIDE_COLS, "-wide")
        self.set_class(w < NARROW_COLS, "-narrow")

    # ------------------------------------------------------------------ data in
    async def on_state_updated(self, msg: StateUpdated) -> None:
        self.state = msg.state  # current at once for actions and screens; drawn paced
        if self.pace_s:
            self._paced_state = msg.state
            self._kick()
            return
        await self._draw_state(msg.state)

    async def _draw_state(self, state: ClusterState) -> None:
        await self.query_one(NodeGrid).update_state(state)
        self.query_one(RayPane).update_state(state)

    def on_log_lines_received(self, msg: LogLinesReceived) -> None:
        self.query_one(LogPane).add_lines([mask_secrets(line) for line in msg.lines])
        if self.pace_s:
            self._kick()

    def on_log_restarted(self, msg: LogRestarted) -> None:
        if self.log_job is not None and msg.job_id != self.log_job:
            self.query_one(AlertsBar).another_job()
        self.log_job = msg.job_id
        self.query_one(LogPane).restart(msg.job_id)

    def on_metrics_updated(self, msg: MetricsUpdated) -> None:
        self.series = msg.series  # the graph screen reads the latest
        if self.pace_s:
            self._paced_metrics = msg
            self._kick()
            return
        self.query_one(MetricsPane).update_metrics(msg.summary, msg.series)

    def _kick(self) -> None:
        if self._pace_timer is None:
            delay = max(0.001, self._last_frame + self.pace_s - time.monotonic())
            self._pace_timer = call_after(self, delay, self._draw_paced)

    async def _draw_paced(self) -> None:
        self._pace_timer = None
        if not self.app.is_running or not self.is_attached:
            # the app is closing: the panes close first, and the screen's own Unmount then
            # runs what fell due meanwhile (a Textual timer would have been stopped)
            return
        self._last_frame = time.monotonic()
        state, self._paced_state = self._paced_state, None
        metrics, self._paced_metrics = self._paced_metrics, None
        if state is not None:
            await self._draw_state(state)
        if metrics is not None:
            self.query_one(MetricsPane).update_metrics(metrics.summary, metrics.series)
        self.query_one(LogPane).flush()

    def on_alert_raised(self, msg: AlertRaised) -> None:
        a = msg.alert
        if a.line is not None:
            self._alert_job[id(a)] = self.log_job
        if a.source == "job" and a.key is not None and a.key.startswith("job-end"):
            # a job's end and its cause, in the Training pane too while it holds
            cause = None if a.ends or a.level != "error" else a.message
            if cause is not None and cause.startswith("job ") and ": " in cause:
                cause = "FAILED: " + cause.split(": ", 1)[1]  # the pane names the job already
            self.query_one(MetricsPane).show_cause(cause)
        self.query_one(AlertsBar).add_alert(msg.alert)
        if msg.alert.level == "error" and not msg.alert.ends and getattr(self.app, "bell_on", False):
            self.bells += 1  # counted, so a test can see it rang (headless apps make no sound)
            self.app.bell()

    def on_alerts_bar_clicked(self, msg: AlertsBarClicked) -> None:
        self.action_alerts()

    # ------------------------------------------------------------------ actions
    def start_action(self, name: str, **opts: Any) -> bool:
        """Run `name` in a worker unless something else runs (stop is always allowed)."""
        from tui.core.actions.registry import read_only_refusal

        refused = read_only_refusal(name, self.backend.profile)
        if refused is not None:  # the backend would refuse it too; say so without a panel
            self.notify(refused, title="read-only", severity="error")
            return False
        busy = [n for n in self.running if n not in STOP_ACTIONS]
        if name in self.running or (busy and name not in STOP_ACTIONS):
            self.notify(f"{', '.join(busy) or name} is still running; wait for it, or stop with x/X",
                        severity="warning", markup=False)
            return False
        self.query_one(ActionPanel).begin(name)
        self.running[name] = self.run_worker(self._action(name, opts), name=name, group="actions",
                                             exit_on_error=False)
        return True

    async def _action(self, name: str, opts: dict[str, Any]) -> None:
        ok: bool | None = True
        message = ""
        events: list[ActionEvent] = []
        try:
            async for ev in self.backend.run_action(name, **opts):
                events.append(ev)
                self.post_message(ActionEventReceived(ev))
                if ev.kind == "fail":
                    ok, message = False, ev.message
                    if ev.data.get("confirm") and name == "setup-ray":
                        self.to_confirm[name] = (str(ev.data["confirm"]), {**opts, "stop_confirmed": True})
                elif ev.kind in ("done", "skip"):
                    message = ev.message
        except Exception as e:  # noqa: BLE001 - shown, not raised: a failed action must not kill the console
            ok, message = False, mask_secrets(f"{name}: {type(e).__name__}: {e}")
        finally:
            if name == "check":
                self.check_events = events
        self.post_message(ActionFinished(name, ok, message))

    def on_action_event_received(self, msg: ActionEventReceived) -> None:
        self.query_one(ActionPanel).add_event(msg.event)

    def on_action_finished(self, msg: ActionFinished) -> None:
        self.running.pop(msg.name, None)
        self.query_one(ActionPanel).finish(msg.ok, msg.message)
        if msg.name == "check":
            self.app.push_screen(PreflightScreen(self.check_events, msg.message))
        elif msg.name in self.to_confirm:
            question, opts = self.to_confirm.pop(msg.name)
            self.ask_then_run(msg.name, question, opts)
        elif msg.ok is False:
            # markup=False: the message carries what a node printed (`[/tmp/x]` once
            # ended the console with a MarkupError)
            self.notify(msg.message or f"{msg.name} failed", title=msg.name, severity="error", markup=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        w = event.worker
        if w.group == "actions" and event.state == WorkerState.CANCELLED and w.name in self.running:
            self.running.pop(w.name, None)
            self.query_one(ActionPanel).finish(None, f"{w.name} cancelled")

    def running_job(self) -> str | None:
        """The training job on the cluster as questions name it, or None."""
        from tui.core.actions.plan import running_job_text

        return running_job_text(self.state)

    async def _ask_if_job_runs(self, name: str, title: str, confirm_label: str) -> bool:
        """Keys that change the cluster act at once, unless a training job runs on it:
        then the action table's question (which names the job and the risk) is asked."""
        from tui.core.actions.registry import describe

        job = self.running_job()
        if job is None:
            return True
        yes = await self.app.push_screen_wait(ConfirmationModal(
            title, describe(name, self.backend.profile, running_job=job), confirm_label=confirm_label))
        if not yes:
            self.notify(f"{name} cancelled: the cluster is left as it is", timeout=4, markup=False)
        return bool(yes)

    @work(group="dialogs", exclusive=True)
    async def action_containers(self) -> None:
        prof = self.backend.profile
        if prof.cluster.slurm and self.running_job() is None:
            from tui.core.actions.registry import describe
            from tui.core.slurm import known_job

            if known_job(prof) is None:  # a new allocation is a job in a shared queue: asked first
                if not await self.app.push_screen_wait(ConfirmationModal(
                        "Ask Slurm for the nodes?", describe("containers", prof), confirm_label="Allocate")):
                    self.notify("containers cancelled: no allocation asked for", timeout=4, markup=False)
                    return
                self.start_action("containers")
                return
        if await self._ask_if_job_runs("containers", "Containers up while a job runs?", "Containers up"):
            self.start_action("containers")

    @work(group="dialogs", exclusive=True)
    async def action_model(self) -> None:
        if await self._ask_if_job_runs("model", "Download the model while a job runs?", "Download"):
            self.start_action("model")

    @work(group="dialogs", exclusive=True)
    async def action_setup_ray(self) -> None:
        if await self._ask_if_job_runs("setup-ray", "Set up Ray while a job runs?", "Set up Ray"):
            self.start_action("setup-ray")

    @work(group="dialogs", exclusive=True)
    async def action_submit(self) -> None:
        """Show what will be launched and the preflight's verdict, then ask. A plan that
        submit would refuse (a failed check, a job already running) offers its checks,
        never the submit."""
        from tui.core.checks import check_event, summary

        self.notify("preflight checks before submit...", timeout=3)
        try:
            plan = await self.backend.submit_plan()
        except Exception as e:  # noqa: BLE001 - shown, not raised
            self.notify(mask_secrets(f"submit: could not check first: {type(e).__name__}: {e}"),
                        title="submit", severity="error", markup=False)
            return
        text = "\n".join(plan.lines())
        if not plan.ok:
            show = await self.app.push_screen_wait(ConfirmationModal(
                "Submit would be refused", text, confirm_label="Show checks", cancel_label="Close",
                destructive=False))
            if show:
                results = list(plan.results)
                self.app.push_screen(PreflightScreen([check_event(r) for r in results], summary(results)))
            return
        if plan.finished:
            # a resume would end at once: the one thing worth offering is a fresh start,
            # which writes over the old run's checkpoints as it goes (so it asks as such)
            from tui.core.actions.registry import describe

            fresh = await self.app.push_screen_wait(ConfirmationModal(
                f"{plan.run_name} finished at step {plan.resume_step}",
                text + "\n\n" + describe("submit", self.backend.profile, fresh=True),
                confirm_label="Start fresh", destructive=True))
            if fresh:
                self.start_action("submit", fresh=True)
            return
        yes = await self.app.push_screen_wait(ConfirmationModal(
            f"Submit {plan.run_name}?", text, confirm_label="Submit", destructive=False))
        if yes:
            self.start_action("submit")

    def action_preflight(self) -> None:
        self.start_action("check")

    @work(group="dialogs", exclusive=True)
    async def action_convert(self) -> None:
        exists = await self.backend.describe_convert()
        if exists is None:
            if await self._ask_if_job_runs("convert", "Convert while a job runs?", "Convert"):
                self.start_action("convert")
            return
        from tui.core.actions.registry import describe

        question = describe("convert", self.backend.profile, force=True, running_job=self.running_job())
        yes = await self.app.push_screen_wait(ConfirmationModal(
            "Convert again with --force?", f"{exists}.\n{question}", confirm_label="Delete and convert"))
        if yes:
            self.start_action("convert", force=True)

    @work(group="dialogs", exclusive=True)
    async def ask_then_run(self, name: str, question: str, opts: dict[str, Any]) -> None:
        """An action stopped short of something destructive: ask, and on yes run it
        again with the confirmation in its options."""
        yes = await self.app.push_screen_wait(ConfirmationModal(
            "Stop Ray on every node?", question, confirm_label="Stop Ray and set up"))
        if yes:
            self.start_action(name, **opts)
        else:
            self.notify(f"{name} cancelled: Ray left as it is", timeout=4, markup=False)

    @work(group="dialogs", exclusive=True)
    async def action_stop_job(self) -> None:
        from tui.core.state import JobStatus

        if self.backend.job_status() not in (JobStatus.RUNNING, JobStatus.PENDING, JobStatus.UNKNOWN):
            # nothing to stop: said, not asked (a "Stop job" button that stops nothing)
            self.notify("no job is running: nothing to stop (X stops the Ray cluster)", timeout=4, markup=False)
            return
        what = self.backend.describe_stop(cluster=False)
        yes = await self.app.push_screen_wait(ConfirmationModal(
            "Stop the training job?", what[:1].upper() + what[1:] + ".", confirm_label="Stop job"))
        if yes:
            self.start_action("stop")

    @work(group="dialogs", exclusive=True)
    async def action_stop_cluster(self) -> None:
        what = self.backend.describe_stop(cluster=True)
        yes = await self.app.push_screen_wait(ConfirmationModal(
            "Stop the Ray cluster?", what[:1].upper() + what[1:] + ".", confirm_label="Stop Ray"))
        if yes:
            self.start_action("stop", cluster=True)

    # ------------------------------------------------------------------ view keys
    def action_focus_logs(self) -> None:
        self.query_one(LogPane).log_widget.focus()

    def action_toggle_follow(self) -> None:
        self.query_one(LogPane).toggle_follow()

    def action_toggle_dense(self) -> None:
        dense = self.query_one(NodeGrid).toggle_dense()
        self.notify("dense grid: one line per node" if dense else "full grid", timeout=2)

    def action_filter(self) -> None:
        self.query_one(LogPane).open_filter()

    def action_filter_source(self) -> None:
        src = self.query_one(LogPane).cycle_source()
        self.notify(f"log: only {src}" if src else "log: all lines", timeout=2)

    def action_toggle_wrap(self) -> None:
        self.query_one(LogPane).toggle_wrap()

    def action_graph(self) -> None:
        # Imported on first use: plotext is only needed once the graph opens.
        from tui.screens.graph import GraphScreen, metrics_source

        job = self.state.job.id if self.state is not None and self.state.job is not None else "run"
        self.app.push_screen(GraphScreen(metrics_source(self), self.backend.profile.monitoring,
                                         run_name=f"{self.backend.profile.name}-{job}",
                                         runs=self.backend.runs, run_series=self.backend.run_series,
                                         job_id=None if job == "run" else job))

    def action_detail(self) -> None:
        node = self.query_one(NodeGrid).cursor_node
        if node is not None:
            self.app.push_screen(NodeDetailScreen(node))

    def on_node_grid_selected(self, msg: NodeGrid.Selected) -> None:
        self.app.push_screen(NodeDetailScreen(msg.node, msg.card))

    def action_search(self) -> None:
        self.query_one(LogPane).open_search()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.read_only))

    def action_alerts(self) -> None:
        def jump(chosen: Alert | int | None) -> None:
            if chosen is None:
                return
            if isinstance(chosen, Alert):
                line, job = chosen.line, self._alert_job.get(id(chosen), self.log_job)
            else:  # a journal entry's line: the watched run's
                line, job = chosen, self.log_job
            if line is None:
                return
            pane = self.query_one(LogPane)
            if job != self.log_job:
                self.notify(f"log line {line + 1} is in job {job}'s log, not the one shown; "
                            f"see `rlconsole logs {job}`", markup=False)
                return
            rel = line - pane.dropped
            if 0 <= rel < pane.log_widget.line_count:
                what = f"{chosen.source}: " if isinstance(chosen, Alert) else ""
                pane._jump(line, note=f"{what}line {line + 1}")
            else:
                self.notify(f"log line {line + 1} is no longer on screen; see `rlconsole logs`", markup=False)

        self.query_one(AlertsBar).seen()
        self.app.push_screen(AlertsScreen(self.alerts, self.backend.journal()), jump)

    @work(group="dashboard", exclusive=True)
    async def action_dashboard(self) -> None:
        """Ray's dashboard URL, shown and copied (OSC 52: works over SSH and in tmux with
        set-clipboard on); opening a browser is left to the user, whose browser may well
        be on another machine than this console."""
        import asyncio

        try:
            url = await asyncio.wait_for(self.backend.dashboard_url(), 15)
        except Exception as e:  # noqa: BLE001 - the head down, the demo, sshd refusing the forward: say so, never crash
            self.notify(f"Ray dashboard: none: {shown(str(e)) or type(e).__name__}", severity="warning", markup=False)
            return
        self.app.copy_to_clipboard(url.split()[0])
        self.notify(f"Ray dashboard: {url}\nforwarded through the SSH connection to "
                    f"{self.backend.profile.head.name} while the console runs; copied", markup=False, timeout=20)

    def action_copy_job(self) -> None:
        job = self.log_job or (self.state.job.id if self.state is not None and self.state.job is not None else None)
        if job is None:
            self.notify("no job is watched: nothing to copy", severity="warning", markup=False)
            return
        self.app.copy_to_clipboard(job)
        self.notify(f"copied the job id {shown(job)}", markup=False)  # Ray's id: outside text

    @work(group="dialogs", exclusive=True)
    async def action_runs(self) -> None:
        import asyncio

        from tui.screens.runs import RunsScreen

        # the list may parse spooled logs: off the event loop
        runs = await asyncio.to_thread(self.backend.runs)
        p = self.backend.profile
        self.app.push_screen(RunsScreen(runs, p.total_gpus / len(p.nodes) if p.nodes else None))

    @work(group="dialogs", exclusive=True)
    async def action_quit(self) -> None:
        """Quit; ask first while an action runs. The training job is never touched."""
        if self.running:
            names = ", ".join(self.running)
            yes = await self.app.push_screen_wait(ConfirmationModal(
                f"Quit while {names} runs?",
                f"{names} is still running: quitting abandons it mid-way (commands already sent "
                "may still finish on the nodes). The training job and Ray keep running.",
                confirm_label="Quit"))
            if not yes:
                return
        self.app.exit(0)
