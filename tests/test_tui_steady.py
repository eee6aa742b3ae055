"""Repaints skipped when nothing would look different (issue 29 item 3: the console's
cost in a real terminal). Each skip is checked from the other side too: when the
content does change, the screen shows the new content, never a stale cached line."""

from __future__ import annotations

from textual.geometry import Region

from tui.app import RlconsoleApp
from tui.backend.static import demo_backend
from widgets.log_pane import LogPane, SteadyScrollBar

from .pilot_helpers import SIZE, settle


def _bar_lines(bar: SteadyScrollBar) -> list[tuple[str, str]]:
    """The bar as the compositor would draw it now (from its cache where it has one)."""
    strips = bar.render_lines(Region(0, 0, bar.size.width, bar.size.height))
    return [(s.text, repr([seg.style for seg in s])) for s in strips]


def _fresh_bar_lines(bar: SteadyScrollBar) -> list[tuple[str, str]]:
    bar._styles_cache.clear()
    return _bar_lines(bar)


async def test_log_scrollbar_repaints_when_its_thumb_moves_and_skips_when_it_does_not() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        log = pane.log_widget
        b.push_log([f"(TaskRunner pid=1) line {i}" for i in range(60)])
        await settle(pilot)
        bar = log.vertical_scrollbar
        assert isinstance(bar, SteadyScrollBar) and bar.display
        before = _bar_lines(bar)
        # a short log: every batch of lines moves the thumb; the screen must follow
        b.push_log([f"(TaskRunner pid=1) more {i}" for i in range(40)])
        await settle(pilot)
        now = _bar_lines(bar)
        assert now != before, "the thumb moved but the bar kept its old picture"
        assert now == _fresh_bar_lines(bar)

        # a long log: the thumb is one cell at the bottom and stays there
        b.push_log([f"(TaskRunner pid=1) long {i}" for i in range(3000)])
        await settle(pilot)
        look = bar.look()
        repaints = []
        orig = type(bar).__mro__[1].refresh

        def counting(self, *a, **k):  # noqa: ANN001, ANN002, ANN003
            repaints.append(1)
            return orig(self, *a, **k)

        type(bar).__mro__[1].refresh = counting  # the ScrollBar's own repaint, under ours
        try:
            for i in range(5):
                b.push_log([f"(TaskRunner pid=1) tail {i}"])
                await settle(pilot)
        finally:
            type(bar).__mro__[1].refresh = orig
        assert bar.look() == look
        assert repaints == [], "an unchanged bar was repainted"
        assert _bar_lines(bar) == _fresh_bar_lines(bar)


async def test_log_lines_shown_from_the_view_cache_follow_pruning_and_theme() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        log = pane.log_widget
        log.max_lines = 50
        b.push_log([f"(TaskRunner pid=1) first {i}" for i in range(50)])
        await settle(pilot)
        h = log.size.height
        shown = [log.render_line(y).text.rstrip() for y in range(h)]
        assert shown[-1].endswith("first 49")
        # asked again (a scroll repaints every visible line): the same strips, and the
        # widget's style (a walk over every ancestor) is not computed again for each
        again = [log.render_line(y) for y in range(h)]
        styled = []
        cls = type(log)
        orig = cls.rich_style

        def counting(self):  # noqa: ANN001, ANN202
            styled.append(1)
            return orig.fget(self)

        cls.rich_style = property(counting)  # type: ignore[method-assign,assignment]
        try:
            assert all(a is b_ for a, b_ in zip(again, [log.render_line(y) for y in range(h)]))
        finally:
            cls.rich_style = orig  # type: ignore[method-assign]
        assert styled == []
        # 20 more: the top 20 are pruned, every index moves; the view must show the new tail
        b.push_log([f"(TaskRunner pid=1) second {i}" for i in range(20)])
        await settle(pilot)
        shown = [log.render_line(y).text.rstrip() for y in range(h)]
        assert shown[-1].endswith("second 19") and shown[-2].endswith("second 18")
        # a theme change restyles every line: nothing from before may be shown
        before = [log.render_line(y) for y in range(h)]
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await settle(pilot)
        after = [log.render_line(y) for y in range(h)]
        assert [s.text for s in after] == [s.text for s in before]
        assert all(a is not b_ for a, b_ in zip(after, before))
        assert {seg.style for s in after for seg in s} != {seg.style for s in before for seg in s}


async def test_sparkline_repaints_when_its_bars_change_and_skips_a_point_that_changes_none() -> None:
    from widgets.metrics_pane import SteadySparkline

    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        spark = app.screen.query_one("#spark-reward", SteadySparkline)
        width = spark.size.width
        assert width > 10
        summary = b.summary
        flat = [(s, 0.5) for s in range(1, 40 * width)]  # a long, flat series: one bar height
        b.push_metrics(summary, {**b.series, "reward": flat})
        await settle(pilot)

        def drawn() -> str:
            strip = spark.render_lines(Region(0, 0, width, 1))[0]
            return strip.text + repr([seg.style for seg in strip])

        def fresh() -> str:
            spark._styles_cache.clear()
            return drawn()

        before = drawn()
        assert before == fresh()
        # a rise at the end: the last bar changes, and the screen must show it
        rise = flat + [(len(flat) + 1, 0.9)]
        b.push_metrics(summary, {**b.series, "reward": rise})
        await settle(pilot)
        assert drawn() != before and drawn() == fresh()
        assert list(spark.data or []) == [v for _, v in rise]

        # one more point equal to its bucket's max: no bar changes, no repaint, but the
        # data stays current (a resize draws the latest)
        calls = []
        orig = spark._set_dirty

        def dirty(*regions):  # noqa: ANN002, ANN202
            calls.append(regions)
            return orig(*regions)

        spark._set_dirty = dirty  # type: ignore[method-assign]
        more = rise + [(len(rise) + 1, 0.5)]
        b.push_metrics(summary, {**b.series, "reward": more})
        await settle(pilot)
        del spark._set_dirty
        assert calls == [], "an unchanged plot was repainted"
        assert list(spark.data or []) == [v for _, v in more]
        assert drawn() == fresh()
