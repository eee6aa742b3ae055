"""Issue 36, major 3 (console): the cause got lost. Reopening the console on a failed job
showed `ℹ watching job` and the cause nowhere on the main screen; the OOM banner was cut
before its fix at 120 columns; the alert list cut the message with no way to read it all.
Now the cause and its fix are in the banner (wrapped) and in the Training pane, and Enter
on an alert shows it whole.

The reopening is LiveBackend's own attach over a spool a previous console left (the
watcher's SSH streams stubbed out: the job is over)."""

from __future__ import annotations

import asyncio

import pytest

from tui.app import RlconsoleApp
from tui.backend.live import LiveBackend
from tui.backend.static import demo_profile
from tui.core.alerts import Alert, OpenAlerts
from tui.core.job.watcher import JobWatcher, spool_dir
from tui.screens.alerts import AlertDetail, AlertsScreen
from tui.screens.main import MainScreen
from widgets.alerts_bar import AlertsBar
from widgets.metrics_pane import MetricsPane

from .pilot_helpers import settle, until

OOM = ("(WorkerDict pid=77, ip=127.0.0.2) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
       "2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.2 GiB is free.")


def test_an_info_event_does_not_hide_an_unseen_error() -> None:
    o = OpenAlerts()
    o.add(Alert("error", "log", "GPU out of memory", at=1))
    o.add(Alert("info", "ray", "watching job raysubmit_x", at=2))
    assert [a.message for a in o.current()] == ["GPU out of memory"]
    o.add(Alert("error", "log", "NCCL timeout", at=3))  # as severe: the newer one
    assert [a.message for a in o.current()] == ["NCCL timeout"]


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, tmp_path) -> LiveBackend:
    monkeypatch.setenv("RLCONSOLE_STATE_DIR", str(tmp_path / "state"))

    async def nothing(self) -> None:
        return None

    monkeypatch.setattr(JobWatcher, "start", lambda self: None)
    monkeypatch.setattr(JobWatcher, "stop", nothing)
    monkeypatch.setattr(LiveBackend, "start", nothing)
    return LiveBackend(demo_profile())


def bar_text(app: RlconsoleApp) -> str:
    bar = app.main_screen.query_one(AlertsBar)
    return "\n".join(bar.render_line(y).text for y in range(bar.size.height))


async def test_reopening_on_a_failed_job_shows_its_cause_and_fix_on_the_main_screen(backend: LiveBackend) -> None:
    b = backend
    d = spool_dir() / "raysubmit_failed"
    d.mkdir(parents=True, exist_ok=True)
    lines = ["(TaskRunner pid=1) Total training steps: 160"]
    lines += [f"(TaskRunner pid=1) step:{s} - critic/rewards/mean:0.{s} - timing_s/step:1.0" for s in range(1, 26)]
    lines += ["(WorkerDict pid=77, ip=127.0.0.2) Traceback (most recent call last):", OOM]
    (d / "driver.log").write_text("\n".join(lines) + "\n")

    app = RlconsoleApp(b, bell=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await asyncio.wait_for(b._attach("raysubmit_failed", "FAILED"), 60)
        await until(pilot, lambda: "raysubmit_failed" in bar_text(app) and "FAILED" in bar_text(app), 20)
        await settle(pilot)
        text = bar_text(app)
        # the banner: the cause and the end of its fix, not `ℹ watching job`
        assert "watching job" not in text and "out of memory" in text.lower(), text
        fixed = next(a for a in app.main_screen.alerts if a.key == "job-end:raysubmit_failed")
        assert fixed.diagnosis and " — " in fixed.message
        fix_tail = " ".join(fixed.message.split()[-3:])
        assert fix_tail in " ".join(text.split()), (fix_tail, text)
        # the Training pane says it too
        cause = app.main_screen.query_one(MetricsPane).query_one("#metrics-cause")
        assert cause.display and "out of memory" in str(cause.render()).lower()
        # the alert list's row is cut; Enter shows it whole
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen), 20)
        app.screen.query_one("DataTable").move_cursor(row=app.screen.alerts.index(fixed))
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AlertDetail), 20)
        assert " ".join(fixed.message.split()) in " ".join(str(app.screen.text()).split())
        await pilot.press("enter")  # to the cause's line
        await until(pilot, lambda: isinstance(app.screen, MainScreen), 20)
        await settle(pilot)
        from widgets.log_pane import LogPane

        pane = app.main_screen.query_one(LogPane)
        assert pane.match_abs == fixed.line and "OutOfMemoryError" in pane.log_widget.lines[pane.log_widget.match_index]
