"""Issue 36's console minors, each as the user met it."""

from __future__ import annotations

import pytest

from tui.app import RlconsoleApp
from tui.backend.static import demo_backend
from widgets.action_panel import ActionPanel
from widgets.log_pane import LogPane

from .pilot_helpers import confirm_yes, settle, until


async def test_the_action_pane_gives_its_room_back_once_the_action_is_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80x24 the Action pane took 20 of the log's 80 columns for good after one action."""
    monkeypatch.setattr(ActionPanel, "CLOSE_OK_S", 0.2)
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        panel = app.main_screen.query_one(ActionPanel)
        assert not panel.display
        await pilot.press("r")
        await confirm_yes(pilot)
        await until(pilot, lambda: panel.state == "done", 20)
        await until(pilot, lambda: not panel.display, 20)
        await settle(pilot)
        assert app.main_screen.query_one(LogPane).size.width == 80


async def test_preflight_folds_one_result_over_nodes_and_counts_once() -> None:
    """The preflight header said its counts twice and listed one result per node, while
    `check` folds them; the refusal said `1 failed` beside 4 failed rows."""
    from textual.widgets import DataTable, Static

    from tui.backend.static import demo_profile
    from tui.core.actions.plan import build_plan
    from tui.core.checks import CheckResult, CheckStatus, check_event, summary
    from tui.screens.preflight import PreflightScreen

    rows = [CheckResult("containers.images", CheckStatus.FAIL, "image verl:latest missing", "run u", node=f"node{i}")
            for i in range(1, 5)] + [CheckResult("ray.cluster", CheckStatus.PASS, "Ray is up", node=None)]
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await app.push_screen(PreflightScreen([check_event(r) for r in rows], summary(rows)))
        await until(pilot, lambda: isinstance(app.screen, PreflightScreen), 20)
        await settle(pilot)
        head = str(app.screen.query_one("#preflight-summary", Static).render())
        assert head.count("failed") == 1 and "4 failed" in head, head
        table = app.screen.query_one(DataTable)
        assert table.row_count == 2
        assert str(table.get_row_at(0)[2]) == "node1, node2, node3, node4"
    plan = build_plan(demo_profile(), rows, None)
    assert "4 failed (containers.images)" in plan.verdict()


async def test_x_with_no_job_says_so_instead_of_offering_a_stop() -> None:
    from tui.backend.static import demo_state
    from tui.screens.main import MainScreen

    b = demo_backend()
    b.state = demo_state(b.profile, job_status=None, busy=False)
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("x")
        await until(pilot, lambda: any("nothing to stop" in n.message for n in app._notifications), 20)
        assert isinstance(app.screen, MainScreen) and b.calls == []


def test_node_detail_shows_a_containers_start_to_the_second() -> None:
    from tui.screens.node_detail import fmt_started

    assert fmt_started("2026-12-06T02:27:37.123456789Z") == "2026-12-06 02:27:37 UTC"
    assert fmt_started("2026-12-06T02:27:37+02:00") == "2026-12-06 02:27:37 +02:00"
    assert fmt_started("yesterday") == "yesterday"


def test_gpus_zero_used_just_after_submit_says_the_job_is_starting() -> None:
    from tui.backend.static import demo_profile, demo_state
    from widgets.ray_pane import ray_markup

    prof = demo_profile()
    st = demo_state(prof, job_status="PENDING", busy=False)
    st.ray.gpus_used = 0
    text = ray_markup(st, 4, 32).plain
    assert "GPUs  0/32 used (job starting" in text, text
    st = demo_state(prof, job_status=None, busy=False)
    st.ray.gpus_used = 0
    assert "job starting" not in ray_markup(st, 4, 32).plain


async def test_help_wraps_under_its_description_and_lists_the_graph_keys() -> None:
    """At 80 columns help's wrapped lines restarted at column 0; the graph screen's own
    keys were nowhere."""
    from tui.commands import GRAPH_KEYS
    from tui.screens.graph import GraphScreen
    from tui.screens.help import KEY_COL, HelpScreen

    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), 20)
        await settle(pilot)
        box = app.screen.query_one("#help-text")
        lines = [box.render_line(y).text.rstrip() for y in range(box.size.height)]
        body = [ln for ln in lines if ln.strip()]
        assert len(body) > 20
        starts = ("Graphs", "Quitting", "READ-ONLY", "re-attaches")
        bad = [ln for ln in body if not (ln[:KEY_COL + 2].strip() == "" or ln[KEY_COL:KEY_COL + 2] == "  "
                                          or ln.strip().startswith(starts))]
        assert bad == [], bad
        text = "\n".join(lines)
        assert "Graphs (g)" in text and "export every scalar" in text
    # the graph keys listed are the graph screen's
    listed = " ".join(k for k, _ in GRAPH_KEYS)
    names = {"left_square_bracket": "[", "right_square_bracket": "]", "colon": ":"}
    for b in GraphScreen.BINDINGS:
        for key in b.key.split(","):
            assert names.get(key, key) in listed, key


def test_the_key_bar_at_80_columns_labels_the_chain() -> None:
    from tui.commands import offered_keys
    from widgets.key_bar import fit_keys

    got = dict(fit_keys(offered_keys(False), 80))
    assert {k: got[k] for k in "umcrs"} == {"u": "up", "m": "model", "c": "conv", "r": "ray", "s": "run"}
    assert got["?"] == "Help" and got["q"] == "Quit"


async def test_a_changing_key_in_a_read_only_console_says_why_it_does_nothing() -> None:
    from dataclasses import replace

    from tui.core.profile import ConsoleSettings
    from tui.screens.main import MainScreen

    b = demo_backend()
    b.profile = replace(b.profile, console=ConsoleSettings(read_only=True))
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await until(pilot, lambda: any("read-only" in n.message and "Containers" in n.message
                                       for n in app._notifications), 20)
        assert isinstance(app.screen, MainScreen) and b.calls == []


async def test_the_head_before_its_first_connection_is_connecting_not_unreachable_none() -> None:
    from types import SimpleNamespace

    from tui.backend.static import demo_profile
    from tui.core.probes import probe_ray

    head = SimpleNamespace(name="node1", connected=False, reason=None, state="connecting")
    st = await probe_ray(head, demo_profile())  # type: ignore[arg-type]
    assert not st.available and "None" not in st.error and "connecting" in st.error, st.error
    head.reason, head.state = "connection refused", "down"
    st = await probe_ray(head, demo_profile())  # type: ignore[arg-type]
    assert st.error == "head node1 unreachable: connection refused"
