"""Remote text on the screen is text, never markup (issue 15, item 4).

An action failure whose output held `[/tmp/...]` was shown in a toast with markup on and
the console exited with a MarkupError. Escaping is not enough either: a trailing
backslash escapes the closing tag of the template around it, and `[$x]` vanishes. Every
place a node's words reach the screen (toasts, the action panel, the preflight table,
the Ray pane, the metrics summary, the graph's scalar names, the log status) is fed
hostile strings here, over a StaticBackend, and must show them verbatim and keep running.
"""

from __future__ import annotations

import dataclasses
from typing import Any, AsyncIterator

from textual.widgets import DataTable, Log, SelectionList, Static
from textual.widgets._toast import Toast

from tui.app import RlconsoleApp
from tui.backend.static import StaticBackend, demo_backend, demo_state
from tui.core.actions.events import ActionEvent
from tui.core.checks import CheckResult, check_event
from tui.core.state import RayJobState
from tui.screens.graph import GraphScreen
from tui.screens.main import MainScreen
from tui.screens.preflight import PreflightScreen
from tui.core.job.metrics import MetricsSummary
from widgets.action_panel import ActionPanel
from widgets.confirm import ConfirmationModal
from widgets.log_pane import LogPane
from widgets.metrics_pane import MetricsPane
from widgets.ray_pane import RayPane

from .pilot_helpers import SIZE, settle, until

HOSTILE = "[/tmp/x] [bold"
TRAILING = "disk full at /data/ckpt \\"
VANISH = "[$x] [@click=app.quit]quit[/]"


class HostileBackend(StaticBackend):
    """A StaticBackend whose actions fail with what a hostile or unlucky node prints."""

    async def run_action(self, name: str, **opts: Any) -> AsyncIterator[ActionEvent]:
        self.calls.append((name, dict(opts)))

        def ev(kind: str, message: str = "", node: str | None = None, status: str | None = None,
               **data: Any) -> ActionEvent:
            return ActionEvent(action=name, kind=kind, message=message, node=node,  # type: ignore[arg-type]
                               status=status, data=data)

        yield ev("start", name)
        node = self.profile.nodes[0].name
        yield ev("node", "running", node=node, status="running")
        yield ev("output", f"{HOSTILE}\n{TRAILING}", node=node)
        yield ev("node", VANISH, node=node, status="failed")
        if name == "check":
            yield check_event(CheckResult(TRAILING, "fail", HOSTILE, fix=VANISH, node=node))
            yield check_event(CheckResult("x", "warn", VANISH + " GITHUB_PAT=Q1234AB"))
        yield ev("fail", f"{name} failed: {HOSTILE} {VANISH} {TRAILING}")


def _hostile_backend() -> HostileBackend:
    d = demo_backend()
    return HostileBackend(**{f.name: getattr(d, f.name) for f in dataclasses.fields(StaticBackend)
                             if not f.name.startswith("_")})


def _plain(w: Static) -> str:
    return w.render().plain  # type: ignore[union-attr]


async def test_failed_action_with_markup_like_text_shows_in_a_toast() -> None:
    b = _hostile_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE, notifications=True) as pilot:  # toasts are off by default
        await settle(pilot)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal))  # the demo's job runs
        await pilot.press("y")
        await until(pilot, lambda: len(app.screen.query(Toast)) > 0)
        await settle(pilot)
        toast = app.screen.query(Toast).last()
        shown = toast.render().plain  # type: ignore[union-attr]
        assert HOSTILE in shown and VANISH in shown and TRAILING in shown
        panel = app.screen.query_one(ActionPanel)
        assert panel.state == "failed"
        head = _plain(panel.query_one("#action-head", Static))
        assert HOSTILE in head and TRAILING in head and VANISH in head
        assert "failed" in _plain(panel.query_one("#action-nodes", Static))
        assert f"[node125] {HOSTILE}" in panel.query_one(Log).lines
        assert app.is_running


async def test_preflight_rows_and_summary_show_remote_text() -> None:
    b = _hostile_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PreflightScreen))
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        cells = [str(c) for r in range(table.row_count) for c in table.get_row_at(r)]
        assert HOSTILE in cells and VANISH in cells and TRAILING in cells
        assert f"{VANISH} GITHUB_PAT=***" in cells  # the one masking rule reaches the table too
        assert HOSTILE in _plain(app.screen.query_one("#preflight-summary", Static))
        assert app.is_running


async def test_ray_pane_and_metrics_summary_show_remote_text() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        st = demo_state(b.profile)
        st.ray.jobs = [RayJobState(id=HOSTILE + TRAILING, status="RUNNING", start_time=1.0)]
        b.push_state(st)
        b.push_metrics(MetricsSummary(on_cluster=False, job_id=VANISH + TRAILING, step=3,
                                      last_checkpoint=HOSTILE), {})  # type: ignore[arg-type] - hostile text
        await settle(pilot)
        assert HOSTILE + TRAILING in _plain(app.screen.query_one(RayPane))
        summary = _plain(app.screen.query_one(MetricsPane).query_one("#metrics-summary", Static))
        assert VANISH + TRAILING in summary and HOSTILE in summary
        st = demo_state(b.profile)
        st.ray.available, st.ray.error = False, f"dashboard said {VANISH} {TRAILING}"
        b.push_state(st)
        await settle(pilot)
        assert f"({st.ray.error})" in _plain(app.screen.query_one(RayPane))
        assert app.is_running and isinstance(app.screen, MainScreen)


async def test_graph_lists_scalar_names_as_text() -> None:
    b = demo_backend()
    b.series = {**b.series, HOSTILE: [(1, 1.0), (2, 2.0)], TRAILING: [(1, 3.0)]}
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, GraphScreen))
        await settle(pilot)
        sl = app.screen.query_one(SelectionList)
        prompts = [str(sl.get_option_at_index(i).prompt) for i in range(sl.option_count)]
        assert HOSTILE in prompts and TRAILING in prompts
        assert app.is_running


async def test_log_lines_on_screen_are_masked_and_literal() -> None:
    """The job log reaches the screen through the one masking rule, and as text."""
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        b.push_log([f"WANDB_KEY='Q12 34' {HOSTILE}", f"curl -H 'Authorization: token Q5678' {TRAILING}"])
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        shown = "\n".join(pane.log_widget.lines[-2:])
        assert "Q12" not in shown and "Q5678" not in shown
        assert "WANDB_KEY=***" in shown and HOSTILE in shown and TRAILING in shown
