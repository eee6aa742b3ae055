"""The log viewer (issue 14 item 2): `&` filter mode (regex), `o` one Ray actor/node at
a time from the `(Actor pid=N, ip=...)` prefixes, colour for levels and tracebacks drawn
from plain text (remote text is never markup)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Input

from tui.app import RlconsoleApp
from tui.backend.static import demo_backend
from widgets.log_pane import LevelHighlighter, LogPane, source_filter, source_of

from .pilot_helpers import settle, until


def test_source_of_ray_prefixes() -> None:
    assert source_of("(WorkerDict pid=5077, ip=127.0.0.3) [rollout] x") == "WorkerDict 127.0.0.3"
    assert source_of("(TaskRunner pid=48211) step:1") == "TaskRunner"
    assert source_of("Training Progress: 5%") is None
    import re

    rx = re.compile(source_filter("WorkerDict 127.0.0.3"))
    assert rx.search("(WorkerDict pid=1, ip=127.0.0.3) a")
    assert not rx.search("(WorkerDict pid=1, ip=127.0.0.31) a")
    assert not rx.search("(TaskRunner pid=1) a")


def test_highlighter_colours_levels_and_tracebacks_without_markup() -> None:
    h = LevelHighlighter()
    t = h(Text("ERROR [bold]boom[/] in worker"))
    assert t.plain == "ERROR [bold]boom[/] in worker"  # the brackets stay text
    assert any(str(s.style.color.name) == "red" for s in t.spans if hasattr(s.style, "color") and s.style.color)
    tb = h(Text("Traceback (most recent call last):"))
    assert tb.spans
    assert not h(Text("plain line")).spans


async def test_filter_mode_shows_only_matching_lines_and_clears() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        total = pane.log_widget.line_count
        await pilot.press("ampersand")
        box = app.screen.query_one("#log-filter", Input)
        await until(pilot, lambda: box.has_focus)
        await pilot.press(*"step:81[02]", "enter")
        await until(pilot, lambda: pane.filter is not None)
        lines = [str(x) for x in pane.log_widget.lines]
        assert len(lines) == 2 and all("step:81" in x for x in lines)
        b.push_log(["(TaskRunner pid=1) step:812 again", "unrelated line"])
        await settle(pilot)
        assert pane.log_widget.line_count == 3  # new lines are filtered too
        # a bad regex says so and keeps the filter
        assert pane.set_filter("step:(") is not None and pane.filter.pattern == "step:81[02]"
        pane.set_filter("")
        assert pane.filter is None and pane.log_widget.line_count == total + 2


async def test_o_cycles_through_actors_and_nodes() -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        assert pane.sources()[0] == "TaskRunner"
        await pilot.press("o")
        await until(pilot, lambda: pane.filter is not None)
        assert all(str(x).startswith("(TaskRunner pid=") for x in pane.log_widget.lines)
        await pilot.press("o")
        await until(pilot, lambda: pane.filter is not None and "WorkerDict" in pane.filter.pattern)
        assert all("ip=127.0.0.3)" in str(x) for x in pane.log_widget.lines)
        await pilot.press("o")
        await until(pilot, lambda: pane.filter is None)


def test_keep_colour_keeps_sgr_only() -> None:
    from widgets.log_pane import keep_colour, plain

    raw = "\x1b[31mERROR\x1b[0m \x1b]0;title\x07x\x1b[2Jy\x07 [b]z[/b]"
    kept = keep_colour(raw)
    assert kept == "\x1b[31mERROR\x1b[0m xy [b]z[/b]"
    assert plain(kept) == "ERROR xy [b]z[/b]"
    assert keep_colour("a\rprogress 5%") == "progress 5%"


async def test_log_keeps_its_own_colour_and_search_ignores_codes() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        b.push_log(["\x1b[32mgreen [bold]text[/bold]\x1b[0m done"])
        await settle(pilot)
        log = pane.log_widget
        y = log.line_count - 1
        strip = log._render_line_strip(y, log.rich_style)
        assert strip.text == "green [bold]text[/bold] done"  # markup-looking text stays text
        assert any(seg.style is not None and seg.style.color is not None
                   and seg.style.color.number == 2 for seg in strip)  # ANSI green
        assert await pane.search("green [bold]") == pane.total - 1
        pane.set_filter("text.*done")
        assert log.line_count == 1


async def test_w_wraps_long_lines_and_back() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        b.push_log(["x" * 300 + "END"])
        await settle(pilot)
        before = pane.log_widget.line_count
        await pilot.press("w")
        await until(pilot, lambda: pane.wrap)
        lines = [str(x) for x in pane.log_widget.lines]
        assert lines[-1].rstrip().endswith("END") and len(pane.log_widget.lines) > before
        assert all(len(x) <= pane.log_widget.size.width for x in lines)
        b.push_log(["y" * 200])
        await settle(pilot)
        assert str(pane.log_widget.lines[-1]).strip().startswith("y")  # new lines wrap too
        assert pane.dropped == 0
        await pilot.press("w")
        await until(pilot, lambda: not pane.wrap)
        assert pane.log_widget.line_count == before + 1
