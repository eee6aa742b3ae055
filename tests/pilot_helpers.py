"""Helpers for the Pilot tests (the console driven by its real keys over a backend):
waiting for the app to settle or for a condition, and reading the node grid. Shared by
every tests/test_tui_*.py module."""

from __future__ import annotations

import asyncio

from tui.app import RlconsoleApp
from tui.screens.main import MainScreen
from widgets.confirm import ConfirmationModal
from widgets.log_pane import LogPane
from widgets.node_grid import NodeGrid, NodeRow

SIZE = (100, 30)
"""Medium layout, and ~35% fewer cells to render per frame than 120x40 (a test's cost is
mostly app start-up and repaints). Tests about what fits on screen set their own size."""


async def settle(pilot) -> None:
    """Let message queues and workers run until the app is idle, then flush the log
    buffer (it would otherwise reach the screen on the next 80 ms tick)."""
    await pilot.pause()
    if isinstance(pilot.app.screen, MainScreen):
        pilot.app.screen.query_one(LogPane).flush()
    await pilot.pause()


async def confirm_yes(pilot, names: str = "") -> None:
    """Answer the question a cluster-changing key asks while the demo's job runs (it
    names the job); `names`, when given, must be in the question."""
    await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmationModal))
    assert "raysubmit_8Hk2xQ4vTnB1" in pilot.app.screen.message and names in pilot.app.screen.message
    await pilot.press("y")
    await settle(pilot)


async def until(pilot, cond, timeout: float = 5.0) -> None:
    """Wait until `cond()` holds (a chain of workers and messages may take a few idle
    cycles under load); fail with the condition's source after `timeout`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {cond.__code__.co_filename}:{cond.__code__.co_firstlineno}")
        await pilot.pause(0.01)


def grid(app: RlconsoleApp) -> NodeGrid:
    return app.screen.query_one(NodeGrid)


def row(app: RlconsoleApp, name: str) -> NodeRow:
    return grid(app).row(name)


def visible_text(app: RlconsoleApp) -> str:
    """What the node grid shows on screen right now (its rendered lines)."""
    g = grid(app)
    return "\n".join(g.render_line(y).text for y in range(g.size.height))


async def key_runs(pilot, key: str, action: str, timeout: float = 240.0) -> None:
    """A cluster key's action, run as a user does: the key, its question answered yes where
    one comes, then its end in the Action pane, which must say done (or skipped: nothing
    was left to do)."""
    from widgets.action_panel import ActionPanel

    app = pilot.app
    main = app.main_screen
    panel = main.query_one(ActionPanel)
    runs = panel._run  # the panel counts the actions it began: an action may end before a check sees it run
    await pilot.press(key)
    # the question may wait on a plan (submit's preflight: a dozen commands on the nodes,
    # over 30 s on a loaded CI machine through srun): the same bound as the action's
    await until(pilot, lambda: isinstance(app.screen, ConfirmationModal) or panel._run > runs, timeout)
    if isinstance(app.screen, ConfirmationModal):
        await pilot.press("y")
    await until(pilot, lambda: panel._run > runs and action not in main.running and panel.action == action
                and panel.state != "running", timeout)
    assert panel.state in ("done", "skipped"), f"{action}: {panel.state}: {panel.last_message}"
