"""The Textual application: `rlconsole` (live) and `rlconsole demo` (on the simulator).

The app is a thin shell: it subscribes to a `Backend` (tui/backend/static.py), turns every
callback into a typed message for the main screen, and runs actions in workers. All
knowledge of SSH, Ray, logs and scalars stays in the core behind the backend, which is
why the same screens run against the live cluster, the simulator and fixed test data.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable

from textual.app import App

from tui.commands import RlconsoleCommands
from tui.core.alerts import Alert
from tui.core.safetext import shown
from tui.core.state import JobStatus
from tui.messages import AlertRaised, LogLinesReceived, LogRestarted, MetricsUpdated, StateUpdated
from tui.screens.main import MainScreen

if TYPE_CHECKING:
    from tui.backend.base import Backend, FaultInjector

log = logging.getLogger("rlconsole.app")

STOP_TIMEOUT_S = 5.0
"""How long quitting waits for the backend to close its connections."""


class RlconsoleApp(App[int]):
    """The console over one backend. Quitting stops watching, never the job."""

    CSS_PATH = "app.tcss"
    TITLE = "rlconsole"
    COMMANDS = App.COMMANDS | {RlconsoleCommands}

    def __init__(self, backend: Backend, bell: bool | None = None, faults: FaultInjector | None = None,
                 notices: list[str] | None = None, on_closing: Callable[[], None] | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.backend = backend
        self.on_closing = on_closing
        """Called as the console starts to close: the CLI arms its exit watchdog there."""
        self.faults = faults
        """Fault injection on a simulated cluster (the palette), given by the CLI."""
        # what the start said on stderr (permissions tightened, a profile from ./profiles
        # that runs commands): the console's screen hides stderr, so each is an alert too
        self.notices = list(notices or [])
        # the terminal bell on error alerts: the profile's `console.bell` unless told
        self.bell_on = backend.profile.console.bell if bell is None else bell
        # watch only: the keys, help and palette offer no action that changes the cluster,
        # and the backend refuses them (profile `console.read_only`, `--read-only`)
        self.read_only = backend.profile.console.read_only
        self.main_screen = MainScreen(backend)
        # what is simulated besides the cards: the VeRL config, and the containers when no dockerd runs them
        sim_parts = [backend.profile.sim_verl,
                     f"containers: {backend.profile.sim_containers}" if backend.profile.sim_containers else ""]
        sim_what = ", ".join(x for x in sim_parts if x)
        self.sub_title = backend.profile.name + \
            ((f" · SIMULATED ({sim_what})" if sim_what else " · SIMULATED") if backend.simulated else "") + \
            (" · READ-ONLY" if self.read_only else "")

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast (the screens' `notify` lands here) through the one rule for outside
        text: an action's failure or an exception quotes what a node or a peer sent."""
        super().notify(shown(message, lines=True), title=shown(title), severity=severity, timeout=timeout,
                       markup=markup)

    def get_default_screen(self) -> MainScreen:
        return self.main_screen

    def on_mount(self) -> None:
        post = self.main_screen.post_message  # thread-safe: callbacks may come from anywhere
        self.backend.subscribe_state(lambda s: post(StateUpdated(s)))
        self.backend.subscribe_log(lambda lines: post(LogLinesReceived(lines)))
        self.backend.subscribe_log_restart(lambda job_id: post(LogRestarted(job_id)))
        self.backend.subscribe_metrics(lambda summary, series: post(MetricsUpdated(summary, series)))
        self.backend.subscribe_alerts(lambda a: post(AlertRaised(a)))
        self.notifier = None
        if self.backend.profile.notify.to:
            # `notify:` in the profile: the console sends what `rlconsole watch` would
            from tui.core.notify import Notifier

            self.notifier = Notifier(self.backend.profile.notify.to, self.backend.profile.notify.level)
            self.notifier.start()
            self.backend.subscribe_alerts(self._notify)
        for text in self.notices:
            post(AlertRaised(Alert("warning", "console", text)))
        # In a worker: a slow connect must not delay the first frame.
        self.run_worker(self._start_backend(), name="backend-start", group="backend")

    def _notify(self, a: Any) -> None:
        st = self.main_screen.state
        job = st.job if st is not None else None
        if self.notifier is not None:
            self.notifier.offer(a, self.backend.profile.name, job.id if job else None, job.step if job else None)

    async def _start_backend(self) -> None:
        try:
            await self.backend.start()
        except Exception as e:  # the screen stays up and says why
            log.exception("backend start failed")
            self.notify(f"could not start monitoring: {e}", severity="error", timeout=30, markup=False)

    async def on_unmount(self) -> None:
        if self.on_closing is not None:
            self.on_closing()
        if self.notifier is not None:
            await self.notifier.drain(2.0)
            await self.notifier.close()
        try:
            await asyncio.wait_for(self.backend.stop(), STOP_TIMEOUT_S)
        except Exception:  # quitting must always work
            log.exception("backend stop failed")

    def run_main_action(self, action: str) -> None:
        """Run a main-screen action by name (command palette, app-level quit)."""
        self.call_later(self.main_screen.run_action, action)

    def fault_kinds(self) -> dict[str, str]:
        """The faults the palette offers (kind -> what it does): those of `rlconsole sim
        fault` when the CLI handed this console an injector (a running simulated cluster's
        profile), else none."""
        return self.faults.kinds() if self.faults is not None else {}

    def inject_fault(self, kind: str) -> None:
        """Plant `kind` in the simulated job (palette: "Inject a fault"), in a worker."""
        self.run_worker(self._inject_fault(kind), name=f"inject-{kind}", group="faults")

    async def _inject_fault(self, kind: str) -> None:
        if self.faults is None:
            return
        if self.backend.job_status() != JobStatus.RUNNING:
            # a fault waits for a job's next step, and a submit clears it: nothing to show yet
            self.notify("no job is running on the simulated cluster: submit one (s), then inject the "
                        "fault", severity="warning", timeout=10)
            return
        try:
            said = await self.faults.inject(kind)
        except Exception as e:  # noqa: BLE001 - say why, keep the console up
            self.notify(f"could not inject {kind}: {e}", severity="error", timeout=10, markup=False)
            return
        self.notify(said, timeout=10, markup=False)

    async def action_quit(self) -> None:
        """ctrl+q goes through the same question as `q` while an action runs."""
        if self.screen is self.main_screen:
            self.run_main_action("quit")
        else:
            self.exit(0)
