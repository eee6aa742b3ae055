"""The console's runs view (`R`) and the alert list's whole-run journal (`a`, then `j`),
over the StaticBackend (issue 30, items 1 and 3)."""

from __future__ import annotations

from textual.widgets import DataTable

from tui.app import RlconsoleApp
from tui.backend.static import demo_backend
from tui.core.job.journal import Entry
from tui.screens.alerts import AlertsScreen
from tui.screens.main import MainScreen
from tui.screens.runs import RunsScreen
from widgets.log_pane import LogPane

from .pilot_helpers import SIZE, settle, until


def _rows(app: RlconsoleApp) -> list[list[str]]:
    t = app.screen.query_one(DataTable)
    return [[str(c) for c in t.get_row_at(i)] for i in range(t.row_count)]


async def test_R_lists_every_run_newest_first_with_gpu_hours_and_resume_link() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen))
        await settle(pilot)
        rows = _rows(app)
        assert [r[0] for r in rows] == ["raysubmit_demo0002", "raysubmit_demo0001"]
        assert rows[0][1] == "RUNNING" and rows[0][2] == "812/1000" and float(rows[0][5]) > 0
        assert "resumed from step 400 of raysubmit_demo0001" in rows[0][9]
        assert rows[1][1] == "FAILED" and "diagnosis: nccl-timeout" in rows[1][9]
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_the_alert_list_shows_the_whole_runs_journal_and_jumps_to_its_lines() -> None:
    b = demo_backend()
    b.journal_entries.append(Entry("alert", "ERROR log: [bold]CUDA out of memory", key="once:log:5", at=1.0,
                                   who="watch", data={"line": 5, "diagnosis": "cuda-oom"}))
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen))
        await pilot.press("j")
        await settle(pilot)
        rows = _rows(app)
        assert len(rows) == len(b.journal_entries)
        assert rows[-1][1] == "action" and "submitted raysubmit_demo0002" in rows[-1][3]
        assert rows[0][2] == "watch" and rows[0][3] == "ERROR log: [bold]CUDA out of memory" and rows[0][4] == "6"
        await pilot.press("enter")  # the newest entry points at log line 6
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert app.screen.query_one(LogPane).match_abs == 5
