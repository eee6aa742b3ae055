"""The console's side of alerts on the static backend (the same rules the live one feeds):
the banner shows what holds now and forgets what ended, the list keeps the history, the
bell rings on error alerts unless switched off, and alert text is never markup."""

from __future__ import annotations

import asyncio

from tui.app import RlconsoleApp
from tui.backend.static import demo_backend, demo_state
from tui.cli import build_parser
from tui.core.alerts import Alert
from tui.screens.alerts import AlertsScreen
from tui.screens.main import MainScreen
from widgets.alerts_bar import AlertsBar

SIZE = (120, 40)


async def until(pilot, cond, what: str, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


def bar_text(app: RlconsoleApp) -> str:
    return str(app.main_screen.query_one(AlertsBar).render())


async def test_banner_shows_the_state_now_and_the_list_keeps_history() -> None:
    b = demo_backend()
    app = RlconsoleApp(b, bell=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "2 alerts" in bar_text(app), "the demo's two card alerts")
        assert "node71 card 3 at 88°C" in bar_text(app)  # from the rules, fed the demo state
        b.push_state(demo_state(b.profile, down=["node116"]))
        await until(pilot, lambda: "node node116 is down" in bar_text(app), "node down in the banner")
        bar = app.main_screen.query_one(AlertsBar)
        assert bar.has_class("-error") and "more open" in bar_text(app)
        assert app.main_screen.bells == 2  # node down, and Ray lost it: both errors
        b.push_state(demo_state(b.profile))
        await until(pilot, lambda: "is down" not in bar_text(app), "the banner to drop the ended episode")
        assert not bar.has_class("-error") and "Ray lost" not in bar_text(app)
        assert app.main_screen.bells == 2  # an end never rings
        msgs = [a.message for a in app.main_screen.alerts]
        assert "node node116 is back" in msgs and "node node116 is down: ssh: connection timed out" in msgs
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen), "the alert list")
        assert len(app.screen.alerts) == len(msgs) == 6


async def test_job_end_is_an_alert_and_stays_while_true() -> None:
    b = demo_backend()
    app = RlconsoleApp(b, bell=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "2 alerts" in bar_text(app), "the demo's alerts")
        st = demo_state(b.profile, job_status="FAILED", busy=False)
        b.push_state(st)
        await until(pilot, lambda: "RUNNING -> FAILED" in bar_text(app), "job failed in the banner")
        assert app.main_screen.bells == 0  # switched off
        b.push_state(st)
        await pilot.pause(0.1)
        assert sum("-> FAILED" in a.message for a in app.main_screen.alerts) == 1


async def test_alert_text_is_not_markup() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "2 alerts" in bar_text(app), "the demo's alerts")
        b.push_alert(Alert("error", "log", "bad [bold]x[/bold] [link=file:///etc]y[/link] [/]", line=3))
        await until(pilot, lambda: "3 alerts" in bar_text(app), "the pushed alert")
        assert "bad [bold]x[/bold] [link=file:///etc]y[/link] [/]" in bar_text(app)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen), "the alert list")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen), "back on the main screen")
        # the user saw the event: the banner goes back to the open episodes
        assert "bad [bold]" not in bar_text(app) and "node71 card 3" in bar_text(app)


def test_no_bell_flag() -> None:
    p = build_parser()
    assert p.parse_args(["--no-bell"]).no_bell is True
    assert p.parse_args(["demo", "--no-bell"]).no_bell is True
    assert not hasattr(p.parse_args([]), "no_bell")
