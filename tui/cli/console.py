"""`rlconsole` and `rlconsole demo`: the CLI's way into the Textual console.

The app (tui/app.py) runs over any `Backend`; choosing which one (the live cluster, or
fixed demo data for the terminal smoke test), starting the simulated cluster for `demo`,
and handing the app a fault injector when it watches a simulated cluster all happen
here, so the app and its screens never import the simulator.
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import sys
from typing import TYPE_CHECKING

from tui.core.state import JobStatus

if TYPE_CHECKING:
    from tui.backend.base import Backend, FaultInjector
    from tui.core.profile import Profile

STATIC_BACKEND_ENV = "RLCONSOLE_STATIC_BACKEND"
"""Set to 1 to run the console on fixed demo data instead of the live cluster: lets the
tmux smoke test drive the real terminal path (driver, keys, screen) without a cluster."""

EXIT_WATCHDOG_S = 30.0
"""Quitting must end the process. Once the console starts to close, a process still there
this long after is stuck in something that will not end: faulthandler prints every
thread's stack on stderr (what the next report needs) and ends it with exit 1. Seen once,
in CI under load: after `q` the screen had closed and the backend's stop had overrun its
5 s, and the process was still up 90 s later. A normal exit takes well under a second."""


def arm_exit_watchdog() -> None:
    """Start EXIT_WATCHDOG_S's countdown (`faulthandler`: a C thread, it needs no event
    loop and no Python thread to be free)."""
    faulthandler.dump_traceback_later(EXIT_WATCHDOG_S, exit=True)


def disarm_exit_watchdog() -> None:
    """The console closed and the CLI goes on (the demo's question): no countdown."""
    faulthandler.cancel_dump_traceback_later()


class SimFaults:
    """`rlconsole sim fault` for the console's palette: plants a fault in the running
    simulated cluster whose state directory serves `profile`."""

    def __init__(self, profile: Profile) -> None:
        from tui.sim.faults import DEMO_FAULT

        self.profile = profile
        self.demo_kind = DEMO_FAULT

    def kinds(self) -> dict[str, str]:
        from tui.sim.faults import FAULTS

        return {kind: f.what for kind, f in FAULTS.items()}

    async def inject(self, kind: str) -> str:
        from tui.sim.faults import FAULTS, plant_fault, sim_dir_for_profile

        d = sim_dir_for_profile(self.profile.path)
        body = await asyncio.to_thread(plant_fault, kind, None, None, None, d)
        where = f" on {body['node']}" if body["node"] else ""
        then = ("the job fails at its next step; the alert names the cause"
                if FAULTS[kind].job == JobStatus.FAILED else "watch the alerts")
        return f"fault {kind} injected{where}: {then} (undo: `rlconsole sim fault clear`, or the next submit)"


def sim_faults_for(profile: Profile) -> FaultInjector | None:
    """An injector when `profile` is served by a running simulated cluster, else None
    (a real cluster's console offers no faults)."""
    if not profile.simulated:
        return None
    from tui.sim.faults import sim_dir_for_profile

    return SimFaults(profile) if sim_dir_for_profile(profile.path) is not None else None


def static_backend(profile: Profile) -> Backend:
    """A StaticBackend over `profile` with the deterministic demo data (see
    tui/backend/static.py `demo_backend`, which builds the same for the packaged profile)."""
    from tui.backend.static import StaticBackend, demo_log, demo_metrics, demo_state
    from tui.core.alerts import AlertRules

    step = 812
    summary, series = demo_metrics(profile, step)
    return StaticBackend(profile=profile, state=demo_state(profile, step), log_lines=demo_log(step),
                         summary=summary, series=series, rules=AlertRules.for_profile(profile),
                         warmup=[demo_state(profile, s) for s in range(step - 10, step)])


def run_app(profile: Profile, bell: bool | None = None, notices: list[str] | None = None) -> int:
    """`rlconsole [--profile P] [--no-bell]`: the console on the live cluster (or on fixed
    demo data when RLCONSOLE_STATIC_BACKEND=1). `bell` None: the profile decides;
    `notices` what the start printed on stderr, shown as alerts too."""
    from tui.app import RlconsoleApp

    if os.environ.get(STATIC_BACKEND_ENV) == "1":
        return int(RlconsoleApp(static_backend(profile), bell=bell, notices=notices,
                                on_closing=arm_exit_watchdog).run() or 0)
    try:
        from tui.backend.live import LiveBackend
    except ImportError as e:
        print(f"rlconsole: the live console cannot start: {e} "
              "(`rlconsole status` and the other subcommands still work)", file=sys.stderr)
        return 1
    app = RlconsoleApp(LiveBackend(profile), bell=bell, faults=sim_faults_for(profile), notices=notices,
                       on_closing=arm_exit_watchdog)
    rc = app.run()
    return int(rc or 0)  # the countdown runs on: what is left is the interpreter's own exit


def run_demo(nodes: int = 4, gpus: int = 8, bell: bool | None = None) -> int:
    """`rlconsole demo`: start the simulated cluster, open the console on it, and on
    exit ask whether to keep the sim (a later `rlconsole` re-attaches) or stop it."""
    from tui.core.profile import load_profile
    from tui.sim.cluster import sim_down, sim_up

    notices: list[str] = []

    def notice(text: str) -> None:  # said on stderr now, and as an alert in the console
        print(f"rlconsole: warning: {text}", file=sys.stderr)
        notices.append(text)

    path = sim_up(nodes, gpus, notice=notice)
    rc = run_app(load_profile(path), bell=bell, notices=notices)
    disarm_exit_watchdog()  # the question waits for the user
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
    arm_exit_watchdog()
    return rc
