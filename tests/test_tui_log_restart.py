"""Issue 36, major 2: after a sim down/up the console first found the previous run (from
the run history) and showed its 242 lines; the new job's lines then followed them, so the
new job's alert for its line 106 jumped into the old run's log, and the status read
`/None: line 106`. The live backend now says when it watches another job, and the log
pane shows that job's log only, numbered from its own line 0.

Driven through LiveBackend's own attach (the one a sim down/up takes: the history's run
first, then the submitted one), with the watcher's SSH streams stubbed out."""

from __future__ import annotations

import asyncio

import pytest

from tui.app import RlconsoleApp
from tui.backend.live import LiveBackend
from tui.backend.static import demo_profile
from tui.core.alerts import Alert
from tui.core.job.watcher import JobWatcher
from tui.screens.alerts import AlertDetail, AlertsScreen
from tui.screens.main import MainScreen
from widgets.log_pane import LogPane

from .pilot_helpers import SIZE, settle, until


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, tmp_path) -> LiveBackend:
    monkeypatch.setenv("RLCONSOLE_STATE_DIR", str(tmp_path / "state"))

    async def nothing(self) -> None:
        return None

    monkeypatch.setattr(JobWatcher, "start", lambda self: None)
    monkeypatch.setattr(JobWatcher, "stop", nothing)
    monkeypatch.setattr(LiveBackend, "start", nothing)
    return LiveBackend(demo_profile())


def status(app: RlconsoleApp) -> str:
    return str(app.main_screen.query_one("#log-status").render())


async def test_the_log_pane_shows_the_watched_job_only_and_alerts_jump_into_it(backend: LiveBackend) -> None:
    b = backend
    app = RlconsoleApp(b, bell=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = app.main_screen.query_one(LogPane)
        await asyncio.wait_for(b._attach("raysubmit_previous_sim", "FAILED"), 30)  # from the history
        b._lines([f"old run line {i}" for i in range(242)])
        b._alert(Alert("error", "log", "old run: CUDA out of memory", line=200))
        await until(pilot, lambda: pane.total == 242, 20)
        await asyncio.wait_for(b._attach("raysubmit_new", "PENDING", fresh=True), 30)  # the submit
        b._lines([f"new run line {i}" for i in range(120)])
        b._alert(Alert("error", "job", "job raysubmit_new RUNNING -> FAILED: out of memory", line=105))
        await until(pilot, lambda: pane.total == 120, 20)
        await settle(pilot)
        assert pane.log_widget.lines[0] == "new run line 0" and pane.dropped == 0
        assert "raysubmit_new" in pane.border_title
        assert "old run" not in "\n".join(pane.log_widget.lines)

        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen), 20)
        await pilot.press("enter")  # newest first: the new run's FAILED
        await until(pilot, lambda: isinstance(app.screen, AlertDetail), 20)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MainScreen), 20)
        await settle(pilot)
        assert pane.match_abs == 105
        assert pane.log_widget.lines[pane.log_widget.match_index] == "new run line 105"
        assert "line 106" in status(app) and "None" not in status(app), status(app)

        # the old run's alert points into a log no longer shown: said, not jumped into
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen), 20)
        table = app.screen.query_one("DataTable")
        old = next(i for i, a in enumerate(app.screen.alerts) if a.message.startswith("old run"))
        table.move_cursor(row=old)
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AlertDetail), 20)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MainScreen), 20)
        await settle(pilot)
        assert pane.match_abs == 105  # not moved into the new log's line 201
        assert any("raysubmit_previous_sim" in n.message for n in app._notifications), \
            [n.message for n in app._notifications]
