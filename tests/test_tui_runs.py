"""The console's runs view (`R`) and the alert list's whole-run journal (`a`, then `j`),
over the StaticBackend (issue 30, items 1 and 3)."""

from __future__ import annotations

from typing import Any

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


async def _open_runs(app: RlconsoleApp, pilot: Any) -> None:
    await settle(pilot)
    await pilot.press("R")
    await until(pilot, lambda: isinstance(app.screen, RunsScreen))
    await settle(pilot)


async def test_R_lists_every_run_newest_first_with_gpu_hours_and_resume_link() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await _open_runs(app, pilot)
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


async def test_runs_view_sorts_with_s_and_moves_with_j_and_k() -> None:
    """`s` in the runs view steps through the orders `rlconsole runs --sort` has (newest
    first, then each figure biggest first), the title says which, and the cursor stays on
    its run; j/k move the cursor as the arrows do (issue 36, nice to have)."""
    from tui.core.job.runs import RunSummary

    b = demo_backend()
    first = min(r.started_at or 0 for r in b.run_list)
    # the oldest run, with the best reward and no GPU-hours: first by reward, last by GPU-hours
    b.run_list.insert(0, RunSummary(id="raysubmit_old_best", status="SUCCEEDED", started_at=first - 3600,
                                    last_reward=9.0, best_reward=9.0))
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await _open_runs(app, pilot)
        screen = app.screen
        table = screen.query_one(DataTable)

        def subtitle() -> str:
            return str(screen.query_one("Vertical").border_subtitle)

        newest = ["raysubmit_demo0002", "raysubmit_demo0001", "raysubmit_old_best"]
        assert [r[0] for r in _rows(app)] == newest
        assert "newest first" in subtitle()
        await pilot.press("j", "j")
        await settle(pilot)
        assert table.cursor_row == 2
        await pilot.press("k")
        await settle(pilot)
        assert table.cursor_row == 1  # on raysubmit_demo0001
        await pilot.press("s")
        await settle(pilot)
        assert "by reward, biggest first" in subtitle()
        rows = _rows(app)
        assert rows[0][0] == "raysubmit_old_best"
        assert [float(r[6]) for r in rows] == sorted((float(r[6]) for r in rows), reverse=True)
        assert rows[table.cursor_row][0] == "raysubmit_demo0001"  # the cursor kept its run
        while "gpu-hours" not in subtitle():
            await pilot.press("s")
            await settle(pilot)
        assert _rows(app)[-1][0] == "raysubmit_old_best" and _rows(app)[-1][5] == "-"  # none recorded: last
        for _ in range(len(RunsScreen.SORTS)):
            if "newest first" in subtitle():
                break
            await pilot.press("s")
            await settle(pilot)
        assert [r[0] for r in _rows(app)] == newest


async def test_D_on_demo_data_says_there_is_no_dashboard_and_y_copies_the_job_id() -> None:
    """`D` where no Ray runs (the StaticBackend's demo data) says so instead of showing a URL
    that leads nowhere; `y` copies the watched job's id (the live path: test_tui_live_reopen)."""
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("D")
        await until(pilot, lambda: any("Ray dashboard" in n.message for n in app._notifications))
        note = next(n.message for n in app._notifications if "Ray dashboard" in n.message)
        assert "demo data" in note and "http" not in note and app.clipboard == ""
        await pilot.press("y")
        await until(pilot, lambda: app.clipboard == b.state.job.id)
        assert app.clipboard.startswith("raysubmit_")
