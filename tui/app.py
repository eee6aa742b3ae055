"""The Textual application: `rlconsole` (live) and `rlconsole demo` (on the simulator).

The app is a thin shell: it subscribes to a `Backend` (tui/backend/static.py), turns every
callback into a typed message for the main screen, and runs actions in workers. All
knowledge of SSH, Ray, logs and scalars stays in the core behind the backend, which is
why the same screens run against the live cluster, the simulator and fixed test data.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from textual.app import App

from .commands import RlconsoleCommands
from .messages import AlertRaised, LogLinesReceived, MetricsUpdated, StateUpdated
from .screens.main import MainScreen
from .core.alerts import Alert
from .core.state import JobStatus

if TYPE_CHECKING:
    from tui.backend.base import Backend
    from .core.profile import Profile

log = logging.getLogger("rlconsole.app")

STOP_TIMEOUT_S = 5.0
"""How long quitting waits for the backend to close its connections."""


class RlconsoleApp(App[int]):
    """The console over one backend. Quitting stops watching, never the job."""

    CSS_PATH = "app.tcss"
    TITLE = "rlconsole"
    COMMANDS = App.COMMANDS | {RlconsoleCommands}

    def __init__(self, backend: Backend, bell: bool | None = None, notices: list[str] | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.backend = backend
        # what the start said on stderr (permissions tightened, a profile from ./profiles
        # that runs commands): the console's screen hides stderr, so each is an alert too
        self.notices = list(notices or [])
        # the terminal bell on error alerts: the profile's `console.bell` unless told
        self.bell_on = backend.profile.console.bell if bell is None else bell
        # watch only: the keys, help and palette offer no action that changes the cluster,
        # and the backend refuses them (profile `console.read_only`, `--read-only`)
        self.read_only = backend.profile.console.read_only
        self.main_screen = MainScreen(backend)
        self.sub_title = backend.profile.name + (" · SIMULATED" if backend.simulated else "") + \
            (" · READ-ONLY" if self.read_only else "")

    def get_default_screen(self) -> MainScreen:
        return self.main_screen

    def on_mount(self) -> None:
        post = self.main_screen.post_message  # thread-safe: callbacks may come from anywhere
        self.backend.subscribe_state(lambda s: post(StateUpdated(s)))
        self.backend.subscribe_log(lambda lines: post(LogLinesReceived(lines)))
        self.backend.subscribe_metrics(lambda summary, series: post(MetricsUpdated(summary, series)))
        self.backend.subscribe_alerts(lambda a: post(AlertRaised(a)))
        self.notifier = None
        if self.backend.profile.notify.to:
            # `notify:` in the profile: the console sends what `rlconsole watch` would
            from .core.notify import Notifier

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

    def fault_kinds(self) -> list[str]:
        """The faults the palette offers: those of `rlconsole sim fault` when this console
        watches a running simulated cluster's profile, else none."""
        if not self.backend.simulated:
            return []
        from tui.sim.faults import FAULTS, sim_dir_for_profile

        return list(FAULTS) if sim_dir_for_profile(self.backend.profile.path) is not None else []

    def inject_fault(self, kind: str) -> None:
        """Plant `kind` in the simulated job (palette: "Inject a fault"), in a worker."""
        self.run_worker(self._inject_fault(kind), name=f"inject-{kind}", group="faults")

    async def _inject_fault(self, kind: str) -> None:
        from tui.sim.faults import FAULTS, plant_fault, sim_dir_for_profile

        d = sim_dir_for_profile(self.backend.profile.path)
        watcher = getattr(self.backend, "watcher", None)
        if watcher is None or watcher.status != JobStatus.RUNNING:
            # a fault waits for a job's next step, and a submit clears it: nothing to show yet
            self.notify("no job is running on the simulated cluster: submit one (s), then inject the "
                        "fault", severity="warning", timeout=10)
            return
        try:
            body = await asyncio.to_thread(plant_fault, kind, None, None, None, d)
        except Exception as e:  # noqa: BLE001 - say why, keep the console up
            self.notify(f"could not inject {kind}: {e}", severity="error", timeout=10)
            return
        where = f" on {body['node']}" if body["node"] else ""
        f = FAULTS[kind]
        then = ("the job fails at its next step; the alert names the cause" if f.job == JobStatus.FAILED
                else "watch the alerts")
        self.notify(f"fault {kind} injected{where}: {then} (undo: `rlconsole sim fault clear`, "
                    "or the next submit)", timeout=10)

    async def action_quit(self) -> None:
        """ctrl+q goes through the same question as `q` while an action runs."""
        if self.screen is self.main_screen:
            self.run_main_action("quit")
        else:
            self.exit(0)


STATIC_BACKEND_ENV = "RLCONSOLE_STATIC_BACKEND"
"""Set to 1 to run the console on fixed demo data instead of the live cluster: lets the
tmux smoke test drive the real terminal path (driver, keys, screen) without a cluster."""


def static_backend(profile: Profile) -> Backend:
    """A StaticBackend over `profile` with the deterministic demo data (see
    tui/backend/static.py `demo_backend`, which builds the same for the packaged profile)."""
    from tui.backend.static import StaticBackend, demo_log, demo_metrics, demo_state
    from .core.alerts import AlertRules

    step = 812
    summary, series = demo_metrics(profile, step)
    return StaticBackend(profile=profile, state=demo_state(profile, step), log_lines=demo_log(step),
                         summary=summary, series=series, rules=AlertRules.for_profile(profile),
                         warmup=[demo_state(profile, s) for s in range(step - 10, step)])


def run_app(profile: Profile, bell: bool | None = None, notices: list[str] | None = None) -> int:
    """`rlconsole [--profile P] [--no-bell]`: the console on the live cluster (or on fixed
    demo data when RLCONSOLE_STATIC_BACKEND=1). `bell` None: the profile decides."""
    if os.environ.get(STATIC_BACKEND_ENV) == "1":
        return int(RlconsoleApp(static_backend(profile), bell=bell, notices=notices).run() or 0)
    try:
        from tui.backend.live import LiveBackend
    except ImportError as e:
        print(f"rlconsole: the live console cannot start: {e} "
              "(`rlconsole status` and the other subcommands still work)", file=sys.stderr)
        return 1
    app = RlconsoleApp(LiveBackend(profile), bell=bell, notices=notices)
    rc = app.run()
    return int(rc or 0)


def run_demo(nodes: int = 4, gpus: int = 8, bell: bool | None = None) -> int:
    """`rlconsole demo`: start the simulated cluster, open the console on it, and on
    exit ask whether to keep the sim (a later `rlconsole` re-attaches) or stop it."""
    from .core.profile import load_profile
    from tui.sim.cluster import sim_down, sim_up

    path = sim_up(nodes, gpus)
    rc = run_app(load_profile(path), bell=bell)
    try:
        answer = input("Stop the simulated cluster? [Y/n] (n keeps it; `rlconsole sim down` stops it later) ")
    except EOFError:
        answer = "n"
        print()
    if answer.strip().lower() in ("", "y", "yes"):
        stopped = sim_down()
        print("simulated cluster stopped" if stopped else "no simulated cluster was running")
    else:
        print("simulated cluster kept running; `rlconsole` re-attaches, `rlconsole sim down` stops it")
    return rc
