"""Pilot tests: the real keys against the console over a StaticBackend.

StaticBackend feeds fixed data and fake actions, so these tests check the console's own
behaviour (keys, confirmations, workers, re-rendering), not the cluster's. Each runs in a
fraction of a second: instead of fixed sleeps they wait for the app to go idle
(`pilot.pause()`), or for the condition they need (`until`), and the log buffer is flushed
explicitly rather than waited for.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from textual.command import CommandList
from textual.widgets import DataTable, Input

from tui.app import RlconsoleApp
from tui.backend.base import Backend
from tui.backend.static import StaticBackend, demo_backend, demo_state
from tui.commands import KEYS
from tui.core.alerts import Alert
from tui.core.checks import CheckResult, CheckStatus
from tui.screens.alerts import AlertsScreen
from tui.screens.help import HelpScreen
from tui.screens.main import MainScreen
from tui.screens.preflight import PreflightScreen
from widgets.action_panel import ActionPanel
from widgets.alerts_bar import AlertsBar
from widgets.confirm import ConfirmationModal
from widgets.log_pane import LogPane

from .pilot_helpers import SIZE, confirm_yes, grid, row, settle, until, visible_text


def test_static_backend_satisfies_protocol() -> None:
    assert isinstance(demo_backend(), Backend)


async def test_first_frame_shows_all_nodes_and_cards() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:  # 4 x 8 fits at once at 120x40
        await settle(pilot)
        assert len(grid(app).rows) == 4
        assert grid(app).card_count == 32
        assert "SIMULATED" in app.sub_title
        hot = row(app, "node71").cells[3]
        assert "-hot" in hot.flags
        full = row(app, "node116").cells[5]
        assert "-memfull" in full.flags
        assert "4/4 up" in str(grid(app).border_title)
        # and drawn: every node's header, the hot card's temperature, the full card's memory
        shown = visible_text(app)
        for name in ("node125", "node71", "node116", "node119"):
            assert name in shown
        assert "88°" in "\n".join(grid(app).block_text("node71"))
        assert "77/80G" in "\n".join(grid(app).block_text("node116"))
        assert len(row(app, "node71").cells[0].history) == 11  # warm-up rounds feed the sparkline


@pytest.mark.parametrize("key,action", [("u", "containers"), ("m", "model"), ("c", "convert"),
                                        ("r", "setup-ray"), ("s", "submit")])
async def test_key_runs_action(key: str, action: str) -> None:
    """Each key runs its action once answered: u/m/c/r ask because the demo's job runs;
    `s` always shows its plan (here one the preflight passes, with no job running)."""
    if key == "s":
        b = demo_backend(check_results=[CheckResult("profile", CheckStatus.PASS, "profile valid")])
        b.state = demo_state(b.profile, job_status="SUCCEEDED", busy=False)
    else:
        b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)
        assert b.calls == []  # asked first
        if key == "s":
            await until(pilot, lambda: isinstance(app.screen, ConfirmationModal))
            await pilot.press("y")
            await settle(pilot)
        else:
            await confirm_yes(pilot)
        await until(pilot, lambda: b.calls != [])
        await settle(pilot)
        assert b.calls == [(action, {})]
        panel = app.screen.query_one(ActionPanel)
        assert panel.action == action and panel.state == "done"


async def test_containers_shows_per_node_progress() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await confirm_yes(pilot)
        panel = app.screen.query_one(ActionPanel)
        assert set(panel.nodes) == {"node125", "node71", "node116", "node119"}
        assert all(st == "ok" for st, _ in panel.nodes.values())


async def test_stop_asks_and_cancel_does_nothing() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        modal = app.screen
        assert isinstance(modal, ConfirmationModal)
        assert "raysubmit_8Hk2xQ4vTnB1" in modal.message
        assert "step 812" in modal.message and "last checkpoint at step 800" in modal.message
        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert b.calls == []
        assert b.state.job is not None and b.state.job.status == "RUNNING"


async def test_stop_confirmed_stops_and_cards_go_idle() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert b.calls == [("stop", {})]
        assert b.state.job is not None and b.state.job.status == "STOPPED"
        cells = list(grid(app).cells())
        assert len(cells) == 32 and all(c.flags == ["-load-idle"] for c in cells)


async def test_enter_on_confirmation_cancels() -> None:
    """Cancel has the focus: a stray Enter must not stop a 20-hour run."""
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert b.calls == []


async def test_stop_cluster_asks_and_names_nodes() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("X")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmationModal)
        assert "ray stop --force" in app.screen.message and "node119" in app.screen.message
        await pilot.press("y")
        await settle(pilot)
        assert b.calls == [("stop", {"cluster": True})]


async def test_convert_offers_force_when_checkpoint_exists() -> None:
    b = demo_backend(convert_exists="/data/datapool/models/Qwen3-8B-MCore holds a checkpoint")
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmationModal)
        assert "--force" in app.screen.title_text
        await pilot.press("n")
        await settle(pilot)
        assert b.calls == []
        await pilot.press("c")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert b.calls == [("convert", {"force": True})]


async def test_node_going_down_rerenders_that_node() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:  # the full grid (dense below ~35 lines)
        await settle(pilot)
        b.push_state(demo_state(b.profile, down=["node71"]))
        await settle(pilot)
        down = row(app, "node71")
        assert down.down
        assert all(c.flags == ["-down"] for c in down.cells)
        assert len(down.cells) == 8  # the cards stay, marked down
        text = grid(app).block_text("node71")
        assert "DOWN" in text[0] and "connection timed out" in text[0]
        assert "7 down" in text[1]
        assert not row(app, "node125").down
        assert "3/4 up" in str(grid(app).border_title)
        # and back up
        b.push_state(demo_state(b.profile))
        await settle(pilot)
        assert not row(app, "node71").down
        assert "DOWN" not in grid(app).block_text("node71")[0]


async def test_unparsed_cards_are_flagged() -> None:
    b = demo_backend()
    st = demo_state(b.profile)
    st.nodes[2].gpu.parsed = False  # type: ignore[union-attr]
    st.nodes[2].gpu.error = "unexpected output"  # type: ignore[union-attr]
    st.nodes[2].gpu.cards = []  # type: ignore[union-attr]
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        b.push_state(st)
        await settle(pilot)
        assert all(c.flags == ["-unparsed"] for c in row(app, "node116").cells)
        assert "cards unparsed" in grid(app).block_text("node116")[0]


async def test_search_finds_a_line_and_steps() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await settle(pilot)
        assert isinstance(app.focused, Input)
        await pilot.press(*"rollout")
        await pilot.press("enter")
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        lines = pane.log_widget.lines
        latest = max(i for i, s in enumerate(lines) if "rollout" in s)
        assert pane.match_abs == latest
        assert not pane.follow  # a search pauses follow so the match stays on screen
        await pilot.press("N")
        await settle(pilot)
        assert pane.match_abs == max(i for i, s in enumerate(lines[:latest]) if "rollout" in s)
        await pilot.press("n")
        await settle(pilot)
        assert pane.match_abs == latest
        assert b.calls == []  # typing in the search box ran no action keys ("s", "r", ...)


async def test_search_reaches_the_spool_beyond_kept_lines() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        pane.log_widget.max_lines = 1_000
        b.push_log(["needle in the old part"] + [f"filler {i}" for i in range(2_000)])
        await settle(pilot)
        assert pane.log_widget.line_count == 1_000
        assert pane.dropped == pane.total - 1_000
        found = await pane.search("needle")
        assert found == 31  # 31 demo lines came first
        assert "older than" in pane.search_note


async def test_follow_toggles() -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        assert pane.follow
        await pilot.press("f")
        assert not pane.follow and not pane.log_widget.auto_scroll
        await pilot.press("f")
        assert pane.follow


async def test_log_keeps_a_bounded_window() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        b.push_log([f"line {i}" for i in range(60_000)])
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        assert pane.log_widget.line_count == 50_000
        assert pane.total == 60_031
        assert pane.log_widget.lines[-1] == "line 59999"


async def test_ansi_and_carriage_returns_are_cleaned() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        b.push_log(["\x1b[36m(TaskRunner pid=1)\x1b[0m step:1", "Progress 1%\rProgress 2%\r"])
        await settle(pilot)
        log = app.screen.query_one(LogPane).log_widget
        lines = log.lines
        # the colour is kept (issue 14: the log's own ANSI colour), drawn, never printed raw
        assert lines[-2:] == ["\x1b[36m(TaskRunner pid=1)\x1b[0m step:1", "Progress 2%"]
        assert log._render_line_strip(log.line_count - 2, log.rich_style).text == "(TaskRunner pid=1) step:1"


async def test_help_screen_opens_and_lists_every_key() -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        for k in KEYS:
            assert k.help.split(":")[0][:20] in text
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_every_key_is_bound_on_the_main_screen() -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        keys = set(app.screen.active_bindings)
        for k in KEYS:
            assert k.key in keys, k


async def test_command_palette_runs_actions() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"Setup Ray")
        # the palette searches in a worker: wait for its hit before pressing Enter
        await until(pilot, lambda: any("Setup Ray" in str(o.prompt) for o in app.screen.query_one(CommandList).options))
        await pilot.press("enter")
        await confirm_yes(pilot)
        await until(pilot, lambda: ("setup-ray", {}) in b.calls)


async def test_preflight_shows_results() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PreflightScreen))
        assert b.calls == [("check", {})]
        assert isinstance(app.screen, PreflightScreen)
        assert app.screen.rows[0].status == "fail"  # failures first
        assert len(app.screen.rows) == 5
        # the core's CheckResult, read back from the action's events: worst first, the fix shown
        assert [r.status.value for r in app.screen.rows] == ["fail", "warn", "pass", "pass", "pass"]
        table = app.screen.query_one(DataTable)
        first = [str(c) for c in table.get_row_at(0)]
        assert first[:2] == ["FAIL", "actor.pipeline_layers"] and "use a PP that divides 36" in first[4]


async def test_alerts_bar_and_list() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        b.push_alert(Alert("error", "log", "RuntimeError: Parent directory /mnt/x does not exist.",
                           line=5, at=1_750_000_000.0))
        await settle(pilot)
        bar = app.screen.query_one(AlertsBar)
        assert bar.has_class("-error")
        assert "Parent directory" in str(bar.render()) and "3 alerts" in str(bar.render())
        await pilot.press("a")
        await settle(pilot)
        assert isinstance(app.screen, AlertsScreen)
        await pilot.press("enter")  # newest first: the log alert, shown whole
        await settle(pilot)
        from tui.screens.alerts import AlertDetail

        assert isinstance(app.screen, AlertDetail)
        assert "RuntimeError: Parent directory /mnt/x does not exist." in str(app.screen.text())
        await pilot.press("enter")  # and from there to its line
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert app.screen.query_one(LogPane).match_abs == 5
        status = str(app.screen.query_one("#log-status").render())
        assert "log: line 6" in status and "None" not in status, status


async def test_telemetry_updates_while_an_action_runs() -> None:
    gate = asyncio.Event()
    b = demo_backend(action_gate=gate)
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await confirm_yes(pilot)
        assert "setup-ray" in app.screen.running
        b.push_state(demo_state(b.profile, down=["node119"]))
        await settle(pilot)
        assert row(app, "node119").down
        await pilot.press("u")  # another action waits its turn
        await confirm_yes(pilot)
        assert [c[0] for c in b.calls] == ["setup-ray"]
        gate.set()
        await settle(pilot)
        assert not app.screen.running


async def test_quit_while_action_running_asks() -> None:
    gate = asyncio.Event()
    b = demo_backend(action_gate=gate)
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await confirm_yes(pilot)
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmationModal)
        assert "containers" in app.screen.title_text
        assert "training job and Ray keep running" in app.screen.message
        await pilot.press("n")
        await settle(pilot)
        assert app.is_running and isinstance(app.screen, MainScreen)
        await pilot.press("q")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
    assert app.return_value == 0
    assert not b.started  # watching stopped
    assert [c[0] for c in b.calls] == ["containers"]  # and no stop was sent


async def test_quit_when_idle_exits_at_once() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await settle(pilot)
    assert app.return_value == 0 and b.calls == []


async def test_failing_action_is_shown_not_raised() -> None:
    class Broken(StaticBackend):
        async def run_action(self, name, **opts):  # type: ignore[override]
            raise ConnectionError("node71: connection refused")
            yield  # pragma: no cover

    base = demo_backend()
    b = Broken(profile=base.profile, state=base.state)
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await confirm_yes(pilot)
        panel = app.screen.query_one(ActionPanel)
        assert panel.state == "failed"
        assert "connection refused" in panel.last_message
        assert app.is_running


@pytest.mark.parametrize("size,cls", [((80, 24), "-narrow"), ((120, 40), None), ((160, 50), "-wide")])
async def test_layout_adapts(size: tuple[int, int], cls: str | None) -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        classes = app.screen.classes
        assert (cls in classes) if cls else not ({"-narrow", "-wide"} & classes)
        g = grid(app)
        if size == (120, 40):  # 4 x 8 fits without scrolling
            assert g.max_scroll_y == 0
        # full three-line cards (with sparklines) from 100 columns; at 80x24 the full grid
        # (two-line cards) would not fit, so it is dense: one line per node, 8 cards each
        if size[0] < 100:
            assert g.dense and g._layout.block_h == 1
            cells = g.block_text("node71")[0].split()[-8:]  # utilisation, `%` or a trouble letter
            assert len(cells) == 8 and all(re.fullmatch(r"\d+[%HM]", c) for c in cells), cells
        else:
            assert g._layout.cell_h == 3
            assert g._layout.per_line == 8
            line = g.block_text("node71")[1]
            assert line.split()[0] == "0" and "7" in line.split()
        # following the log: its last line is in view once the panes above filled in
        log = app.screen.query_one(LogPane).log_widget
        assert log.scroll_y == log.max_scroll_y


async def test_64_nodes_mount_and_scroll() -> None:
    b = demo_backend(nodes=64, gpus=8)
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        g = grid(app)
        assert g.card_count == 512 and len(g.rows) == 64
        assert g.max_scroll_y > 0
        assert "node125" in visible_text(app) and "node263" not in visible_text(app)
        g.scroll_end(animate=False)
        await settle(pilot)
        assert g.scroll_y == g.max_scroll_y
        shown = visible_text(app)
        assert "node263" in shown and "node125" not in shown  # the last node is drawn
        # a new probe round repaints in place; the scroll position survives it
        b.push_state(demo_state(b.profile, step=900, down=["node263"]))
        await settle(pilot)
        assert g.scroll_y == g.max_scroll_y
        assert "DOWN" in visible_text(app)
