"""Issue 36, major 6 and a minor (console): one unit per quantity, durations as people
read them. `ETA 0m` with 44 steps left (the pane floored to minutes) is `ETA 44s`; the
pane's durations are the core's (`3m10s`, `2h05m`), as `runs` has them."""

from __future__ import annotations

from tui.backend.static import demo_profile
from tui.core.job.metrics import MetricsSummary
from widgets.metrics_pane import compact_markup, fmt_duration, summary_markup


def test_eta_under_a_minute_is_not_zero_minutes() -> None:
    assert fmt_duration(44.0) == "44s"
    assert fmt_duration(190.0) == "3m10s"
    assert fmt_duration(7500.0) == "2h05m"
    assert fmt_duration(None) == "—"
    mon = demo_profile().monitoring
    s = MetricsSummary(status="RUNNING", on_cluster=True, step=116, total_steps=160, step_time_s=1.0, eta_s=44.0)
    for made in (summary_markup(s, mon), compact_markup(s, mon)):
        assert "ETA 44s" in made.plain and "0m" not in made.plain, made.plain
