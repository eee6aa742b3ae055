"""The job's streamed log: follow on/off, `/` search with n/N, bounded memory.

Lines arrive in bursts (a training step prints hundreds; Ray repeats lines across the
cluster). `Log.write_line` one at a time manages ~8k lines/s, `Log.write_lines` in a batch
~0.8M/s (measured), so incoming lines are buffered and flushed every ~80 ms. The widget
keeps the last `KEEP_LINES`; the core spools the whole run, and a search that runs off
the top of the kept window asks the backend's spool (`spool_search`).

Line numbers shown to the user are absolute over the whole run (1-based), so that "line
812345" means the same thing here, in an alert and in `rlconsole logs`.
"""

from __future__ import annotations

import re
from collections import deque
from math import ceil
from typing import TYPE_CHECKING, Awaitable, Callable, Hashable, Iterable

from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widgets import Input, Log, Static

from tui.core.safetext import shown_log

if TYPE_CHECKING:
    from typing_extensions import Self

_SGR = re.compile(r"\x1b\[[0-9;]*m")
"""Colour/attribute sequences: the only escapes a line keeps (drawn, never executed)."""


def keep_colour(line: str) -> str:
    """A raw log line as the pane stores it: what a terminal would show after carriage
    returns (tqdm redraws), with its colour sequences kept and every other escape and
    control character (7- or 8-bit) dropped: the core's rule for a log shown on a terminal
    (`safetext.shown_log`, also `rlconsole logs`). Lines without any take one C-level scan."""
    return shown_log(line)


def plain(line: str) -> str:
    """The text of a stored line without its colour sequences (search, filter, width)."""
    return _SGR.sub("", line) if "\x1b" in line else line

VIEW_CACHE = 2_000
"""Lines of the log kept as shown (a few screens): cleared whole when full."""
KEEP_LINES = 50_000
"""Lines the widget holds (a few MB): enough scroll-back for the screen, bounded."""
FLUSH_S = 0.08
"""Buffer flush period: fast enough to feel live, slow enough to batch a 10k lines/s log."""

SpoolSearch = Callable[[str, int, bool], Awaitable["int | None"]]

SOURCE_RE = re.compile(r"^\((?P<actor>[\w.:-]+) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9a-fA-F.:]+))?\)")
"""Ray's prefix on a worker's line: `(WorkerDict pid=5077, ip=127.0.0.3)`; the driver's
own actors print without ip (`(TaskRunner pid=48211)`)."""


class LevelHighlighter(Highlighter):
    """Colour for levels, tracebacks and Ray's source prefix. Applied by the Log widget at
    draw time to the lines in view only (so a 10k lines/s flood costs nothing extra), on
    plain text: a remote line can never inject markup."""

    RULES: tuple[tuple[re.Pattern[str], Style], ...] = (
        (re.compile(r"^\([\w.:-]+ pid=\d+(?:, ip=[0-9a-fA-F.:]+)?\)"), Style(color="cyan", dim=True)),
        (re.compile(r"\bstep:\d+"), Style(bold=True)),
        (re.compile(r"\b(WARNING|WARN|Warning)\b.*"), Style(color="yellow")),
        (re.compile(r"(\b(ERROR|CRITICAL|FATAL)\b|^Traceback \(most recent call last\):|^\s+File \"|"
                    r"\b\w*(Error|Exception): ).*"), Style(color="red")),
    )

    def highlight(self, text: Text) -> None:
        plain = text.plain
        for rx, style in self.RULES:
            for m in rx.finditer(plain):
                text.stylize(style, m.start(), m.end())


def source_of(line: str) -> str | None:
    """`Actor ip` of a line with Ray's prefix (`WorkerDict 127.0.0.3`, `TaskRunner`)."""
    m = SOURCE_RE.match(line)
    if m is None:
        return None
    return f"{m['actor']} {m['ip']}" if m["ip"] else m["actor"]


def source_filter(source: str) -> str:
    """The filter regex that keeps the lines of one `source_of` value."""
    actor, _, ip = source.partition(" ")
    return rf"^\({re.escape(actor)} pid=\d+" + (rf", ip={re.escape(ip)}\)" if ip else r"\)")


class SteadyScrollBar(ScrollBar):
    """The log's scrollbar, repainted only when its thumb moves by a drawn step.

    Every flush grows the log and scrolls it to the end, which sets the bar's size and
    position and repaints it (profiled: a tenth of a frame, the bar being drawn through
    Rich line by line). While following a long log the thumb sits at the bottom, a cell
    high, and looks the same after each flush: such a repaint is skipped. Anything else
    (a resize, hover, a drag, a style change, an explicit region) repaints as before."""

    _drawn: Hashable = None

    def look(self) -> Hashable:
        """What the bar's pixels depend on: its size and state, and the thumb's ends in
        eighths of a cell, computed as `ScrollBarRender.render_bar` does."""
        size = self.size.height if self.vertical else self.size.width
        virtual = ceil(self.window_virtual_size)
        window = ceil(self.window_size if self.window_size < self.window_virtual_size else 0)
        thumb: tuple[int, int] | None = None
        if window and size and virtual and size != virtual:
            thumb_size = max(1, window / (virtual / size))
            start = int((size - thumb_size) * (self.position / (virtual - window)) * 8)
            thumb = (start, start + ceil(thumb_size * 8))
        return (self.size, self.thickness, self.mouse_over, self.grabbed, thumb)

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Self:
        if regions or layout or recompose or not repaint:
            self._drawn = None
            return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        # A flush sets the size, then the position (each a repaint request): the look is
        # compared once they are all set, not in between (where it differs both times).
        if not self._check_pending:
            self._check_pending = True
            self.call_later(self._repaint_if_changed)
        return self

    _check_pending = False

    def _repaint_if_changed(self) -> None:
        self._check_pending = False
        look = self.look()
        if look != self._drawn:
            self._drawn = look
            super().refresh()

    def notify_style_update(self) -> None:
        self._drawn = None  # colours are not in `look`
        super().notify_style_update()


class SearchLog(Log):
    """A `Log` that highlights the current search match and binds n/N."""

    COMPONENT_CLASSES = {"searchlog--match"}
    DEFAULT_CSS = """
    SearchLog { background: $surface; scrollbar-size-horizontal: 0; }
    SearchLog > .searchlog--match { background: $accent 40%; text-style: bold; }
    """
    BINDINGS = [
        Binding("n", "search_next", "Next match", show=False),
        Binding("N", "search_prev", "Prev match", show=False),
        Binding("j", "scroll_down", show=False),  # as in less, k9s, lazygit
        Binding("k", "scroll_up", show=False),
    ]

    match_index: int | None = None
    """Index into `lines` of the highlighted match (kept in sync when lines are pruned)."""

    virtual_size = Reactive(Size(0, 0), layout=False)
    """New lines grow the log's scrollable size, never its size on screen; Widget's
    `virtual_size` asks for a layout pass of the whole screen on every change, which
    was most of the console's CPU while a job logs (profiled: two passes a second, tens
    of ms each). Here the scrollbars are updated in place, and a layout is asked for
    only when one appears or disappears."""

    def watch_virtual_size(self, new: Size) -> None:
        shown = (self.show_vertical_scrollbar, self.show_horizontal_scrollbar)
        self._refresh_scrollbars()
        if (self.show_vertical_scrollbar, self.show_horizontal_scrollbar) != shown:
            self.refresh(layout=True)
        else:
            self._scroll_update(new)

    def __init__(self, **kw) -> None:
        super().__init__(highlight=True, **kw)
        self.highlighter = LevelHighlighter()
        self._view_cache: dict[int, tuple[Strip, int, int, Strip]] = {}
        """Line index -> (its rendered strip, scroll x, width, the strip as shown)."""

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        """Textual's scrollbar, but one that repaints only when it would look different."""
        if self._vertical_scrollbar is None:
            bar = SteadyScrollBar(vertical=True, name="vertical", thickness=self.scrollbar_size_vertical)
            bar.display = False
            self._vertical_scrollbar = bar
            self.app._start_widget(self, bar)
        return self._vertical_scrollbar

    @classmethod
    def _process_line(cls, line: str) -> str:
        """Width and selection see the text without its colour sequences."""
        return super()._process_line(plain(line))

    def _render_line_strip(self, y: int, rich_style: Style) -> Strip:
        """A line with the log's own colour: its SGR sequences become Rich styles
        (`Text.from_ansi` never reads markup), then levels are highlighted on top.
        Plain lines take Textual's own path."""
        if self.text_selection is not None:
            return super()._render_line_strip(y, rich_style)
        # Cached here for every line: Textual's Log (5.x-8.x) stores a plain line in its
        # cache only while a selection exists, so without this every repaint (a flush
        # scrolls the view) re-rendered and re-highlighted every visible line (profiled:
        # the largest part of the console's CPU while a job logs).
        cached = self._render_line_cache.get(y)
        if cached is not None:
            return cached
        raw = self._lines[y]
        if "\x1b" not in raw:
            strip = super()._render_line_strip(y, rich_style)
            self._render_line_cache[y] = strip
            return strip
        text = Text.from_ansi(raw.expandtabs(), no_wrap=True, end="")
        text.stylize_before(rich_style)
        if self.highlight:
            text = self.highlighter(text)
        strip = Strip(text.render(self.app.console), text.cell_len)
        self._render_line_cache[y] = strip
        return strip

    def _render_line(self, y: int, scroll_x: int, width: int) -> Strip:
        """A line cropped to the view, from a cache while its rendered strip is the same
        object: a flush scrolls the view, so every visible line is asked for again each
        frame, and Textual's Log recomputes the widget's style (a walk over every
        ancestor's background) and crops and offsets the strip anew for each (profiled:
        most of the log's share of a frame). Textual drops a line's rendered strip when
        the line, the styles or the selection change, so a new strip means a new line."""
        if self.text_selection is None:
            base = self._render_line_cache.get(y)
            hit = self._view_cache.get(y)
            if base is not None and hit is not None and hit[0] is base and hit[1] == scroll_x and hit[2] == width:
                return hit[3]
        line = super()._render_line(y, scroll_x, width)
        base = self._render_line_cache.get(y) if self.text_selection is None else None
        if base is not None:
            if len(self._view_cache) > VIEW_CACHE:
                self._view_cache.clear()
            self._view_cache[y] = (base, scroll_x, width, line)
        return line

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        if self.match_index is not None and self.scroll_offset.y + y == self.match_index:
            strip = strip.apply_style(self.get_component_rich_style("searchlog--match"))
        return strip

    def on_resize(self) -> None:
        """Follow means the newest line is in view. When the pane shrinks (the node grid or
        the metrics above it filled in after the first lines were written), scroll back to
        the end now rather than at the next write, which on a quiet log may never come."""
        if self.auto_scroll:
            self.scroll_end(animate=False, immediate=True)

    def action_search_next(self) -> None:
        pane = self._pane()
        if pane is not None:
            self.run_worker(pane.search_step(backwards=False), group="log-search", exclusive=True)

    def action_search_prev(self) -> None:
        pane = self._pane()
        if pane is not None:
            self.run_worker(pane.search_step(backwards=True), group="log-search", exclusive=True)

    def _pane(self) -> LogPane | None:
        for anc in self.ancestors:
            if isinstance(anc, LogPane):
                return anc
        return None


class LogPane(Vertical):
    """Log + a one-line status (follow, line count, search result) + a search box."""

    DEFAULT_CSS = """
    LogPane { height: 1fr; }
    LogPane > SearchLog { height: 1fr; }
    LogPane > #log-status { height: 1; background: $panel; color: $text-muted; padding: 0 1; }
    LogPane > Input { display: none; height: 1; border: none; padding: 0 1; }
    LogPane > Input.-open { display: block; }
    """
    BINDINGS = [Binding("escape", "close_search", "Close search", show=False)]

    def __init__(self, keep_lines: int = KEEP_LINES, **kw) -> None:
        super().__init__(**kw)
        self.keep_lines = keep_lines
        self._pending: list[str] = []
        self.total = 0  # lines delivered over the whole run
        self.follow = True
        self.pattern: str | None = None
        self.match_abs: int | None = None  # absolute line index of the current match
        self.search_note = ""
        self.spool_search: SpoolSearch | None = None
        self.filter: re.Pattern[str] | None = None
        """Filter mode (`&`): only lines matching this regex are shown."""
        self.wrap = False
        self._wrap_width = 0
        self._kept: deque[str] = deque(maxlen=keep_lines)
        """Every kept line, filtered or not, so clearing the filter restores them."""
        self.border_title = "Job log"

    def compose(self) -> ComposeResult:
        yield SearchLog(max_lines=self.keep_lines, auto_scroll=True)
        yield Static("", id="log-status")
        yield Input(placeholder="search the log (Enter: latest match; n newer, N older; Esc closes)",
                    id="log-search")
        yield Input(placeholder="filter: regex, only matching lines are shown (empty: all lines; Esc closes)",
                    id="log-filter")

    def on_mount(self) -> None:
        self._flush_timer = self.set_interval(FLUSH_S, self.flush)
        self._update_status()

    def pace_by_screen(self) -> None:
        """The screen paces its frames and calls `flush` itself, with the other panes'
        changes, so new lines cost no frame (nor timer tick) of their own."""
        self._flush_timer.pause()
        self.paced = True

    paced = False

    @property
    def log_widget(self) -> SearchLog:
        return self.query_one(SearchLog)

    @property
    def dropped(self) -> int:
        """Lines delivered but no longer held by the widget (pruned from the top)."""
        held = self.log_widget.line_count if not self.transformed else len(self._kept)
        return self.total - len(self._pending) - held

    # -- lines
    def add_lines(self, lines: list[str]) -> None:
        """Queue lines; they reach the screen at the next flush."""
        self._pending.extend(lines)
        self.total += len(lines)
        if len(self._pending) > self.keep_lines:
            # a re-attach delivers the whole run's log: only the last window is kept
            # anyway, so the older lines are dropped here, before any work on them
            del self._pending[: len(self._pending) - self.keep_lines]

    def flush(self) -> None:
        if not self._pending:
            return
        batch = [keep_colour(s) for s in self._pending]
        self._pending = []
        self._kept.extend(batch)
        log = self.log_widget
        if self.transformed:
            batch = self._display(batch)
        log.write_lines(batch, scroll_end=self.follow)
        self._sync_match()
        self._update_status()

    def restart(self, job: str) -> None:
        """Another job is watched: its log replaces this one's (numbered from line 0);
        the previous job's lines stay in its spool (`rlconsole logs`)."""
        self._pending = []
        self._kept.clear()
        self.total = 0
        self.pattern, self.match_abs, self.search_note = None, None, ""
        log = self.log_widget
        log.match_index = None
        log.clear()
        self.border_title = f"Job log · {job}"
        self.set_follow(True)

    # -- follow
    def set_follow(self, on: bool) -> None:
        self.follow = on
        self.log_widget.auto_scroll = on
        if on:
            self.log_widget.scroll_end(animate=False)
        self._update_status()

    def toggle_follow(self) -> None:
        self.set_follow(not self.follow)

    # -- filter
    def open_filter(self) -> None:
        box = self.query_one("#log-filter", Input)
        box.add_class("-open")
        box.value = self.filter.pattern if self.filter is not None else ""
        box.focus()

    def set_filter(self, pattern: str | None) -> str | None:
        """Show only lines matching `pattern` (None or empty: all). Returns an error
        message for a bad regex (the filter is then unchanged)."""
        self.flush()
        if pattern:
            try:
                rx: re.Pattern[str] | None = re.compile(pattern)
            except re.error as e:
                self.search_note = f"&{pattern}: bad regex ({e})"
                self._update_status()
                return str(e)
        else:
            rx = None
        self.filter = rx
        self.pattern, self.match_abs = None, None  # search indexes assume every line is shown
        log = self.log_widget
        log.match_index = None
        log.clear()
        log.write_lines(self._display(self._kept), scroll_end=True)
        self.search_note = ""  # the status's FILTER part says it
        self._update_status()
        return None

    @property
    def transformed(self) -> bool:
        """Whether the widget shows something other than the kept lines one to one
        (filtered or wrapped): line numbers then count `_kept`, not the widget."""
        return self.filter is not None or self.wrap

    def _display(self, lines: Iterable[str]) -> list[str]:
        """Kept lines as the widget shows them: filtered, then wrapped to the width
        (a wrapped coloured line is shown plain: a cut would split its colour codes)."""
        rx = self.filter
        out = [ln for ln in lines if rx.search(plain(ln))] if rx is not None else list(lines)
        if not self.wrap:
            return out
        w = max(20, self.log_widget.size.width - 1)
        wrapped: list[str] = []
        for ln in out:
            if len(ln) <= w:
                wrapped.append(ln)
                continue
            p = plain(ln)
            if len(p) <= w:
                wrapped.append(ln)
                continue
            wrapped.append(p[:w])
            wrapped.extend("  " + p[i:i + w - 2] for i in range(w, len(p), w - 2))
        return wrapped

    def toggle_wrap(self) -> bool:
        """`w`: long lines wrap onto continuation lines (indented) or run off the edge."""
        self.wrap = not self.wrap
        self._wrap_width = self.log_widget.size.width
        self._redisplay()
        return self.wrap

    def _redisplay(self) -> None:
        self.flush()
        self.pattern, self.match_abs = None, None  # search indexes assume lines one to one
        log = self.log_widget
        log.match_index = None
        log.clear()
        log.write_lines(self._display(self._kept), scroll_end=True)
        self._update_status()

    def on_resize(self) -> None:
        if self.wrap and self.log_widget.size.width != self._wrap_width:
            self._wrap_width = self.log_widget.size.width
            self._redisplay()

    def sources(self) -> list[str]:
        """The Ray actors/nodes seen in the kept lines (for the `o` filter)."""
        seen: dict[str, None] = {}
        for ln in self._kept:
            if ln.startswith("(") or ln.startswith("\x1b"):
                src = source_of(plain(ln))
                if src is not None:
                    seen.setdefault(src)
        return sorted(seen)

    def cycle_source(self) -> str | None:
        """`o`: filter to the next actor/node in turn (then back to all lines)."""
        srcs = self.sources()
        current = self.filter.pattern if self.filter is not None else None
        pats = [source_filter(x) for x in srcs]
        i = pats.index(current) + 1 if current in pats else 0
        if i >= len(pats):
            self.set_filter(None)
            return None
        self.set_filter(pats[i])
        self.search_note = f"only {srcs[i]}: {self.log_widget.line_count:,} lines (o: next, & to edit)"
        self._update_status()
        return srcs[i]

    @on(Input.Submitted, "#log-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.set_filter(event.value) is None:
            self.query_one("#log-filter", Input).remove_class("-open")
            self.log_widget.focus()

    # -- search
    def open_search(self) -> None:
        if self.filter is not None:
            self.set_filter(None)  # line numbers are over the whole log
        if self.wrap:
            self.toggle_wrap()
        box = self.query_one("#log-search", Input)
        box.add_class("-open")
        box.value = self.pattern or ""
        box.focus()

    def action_close_search(self) -> None:
        for box in self.query(Input):
            if box.has_class("-open"):
                box.remove_class("-open")
                self.log_widget.focus()

    @on(Input.Submitted, "#log-search")
    async def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#log-search", Input).remove_class("-open")
        self.log_widget.focus()
        if event.value:
            await self.search(event.value)

    async def search(self, pattern: str) -> int | None:
        """Find the latest match at or above the bottom of the view; jump to it."""
        self.flush()
        self.pattern = pattern
        log = self.log_widget
        if self.follow:  # the view is (about to be) at the end: newest first
            bottom = log.line_count
        else:
            bottom = min(log.line_count, log.scroll_offset.y + log.size.height)
        start_abs = self.dropped + bottom  # search strictly above this line
        return await self._find(start_abs, backwards=True)

    async def search_step(self, backwards: bool) -> int | None:
        """n / N: the next newer / older match from the current one."""
        if not self.pattern:
            self.search_note = "no search yet: press /"
            self._update_status()
            return None
        if self.match_abs is None:
            start = self.dropped + self.log_widget.line_count if backwards else self.dropped - 1
        else:
            start = self.match_abs
        return await self._find(start, backwards)

    async def _find(self, start_abs: int, backwards: bool) -> int | None:
        assert self.pattern is not None
        p = self.pattern.lower()
        lines = self.log_widget.lines
        n = self.log_widget.line_count
        off = self.dropped
        rel = start_abs - off
        rng = range(min(rel, n) - 1, -1, -1) if backwards else range(max(rel + 1, 0), n)
        for i in rng:
            if p in plain(lines[i]).lower():
                self._jump(off + i)
                return off + i
        if backwards and off > 0 and self.spool_search is not None:
            found = await self.spool_search(self.pattern, min(start_abs, off), True)
            if found is not None:
                self.match_abs = found
                self.search_note = (f"/{self.pattern}: line {found + 1} is older than the "
                                    f"{self.keep_lines:,} lines kept here (rlconsole logs)")
                self._update_status()
                return found
        self.search_note = f"/{self.pattern}: no {'older' if backwards else 'newer'} match"
        self._update_status()
        return None

    def _jump(self, abs_index: int, note: str | None = None) -> None:
        """Show line `abs_index` (0-based) highlighted mid-view; the status says what
        found it (`note`, else the search)."""
        log = self.log_widget
        self.match_abs = abs_index
        rel = abs_index - self.dropped
        log.match_index = rel
        if self.follow:
            self.set_follow(False)  # otherwise the next flush scrolls the match away
        log.scroll_to(y=max(0, rel - log.size.height // 2), animate=False, immediate=True)
        log.refresh()
        self.search_note = note or (f"/{self.pattern}: line {abs_index + 1}" if self.pattern
                                    else f"line {abs_index + 1}")
        self._update_status()

    def _sync_match(self) -> None:
        """Keep the highlight on its line when the widget prunes old lines."""
        log = self.log_widget
        if self.match_abs is None:
            log.match_index = None
            return
        rel = self.match_abs - self.dropped
        log.match_index = rel if 0 <= rel < log.line_count else None

    def _update_status(self) -> None:
        follow = ("FOLLOW", "b $text-success") if self.follow else ("PAUSED", "b $text-warning")

        kept = f" (last {len(self._kept):,} kept)" if self.dropped > 0 else ""
        if self.filter is not None:
            kept += f" · FILTER {self.filter.pattern!r}: {self.log_widget.line_count:,} lines shown (& edits)"
        if self.wrap:
            kept += " · WRAP w"
        note = f" · {self.search_note}" if self.search_note else ""

        # layout=False: the status line is one row at the pane's width, so its size never
        # changes; a layout pass per flush (12.5 Hz) re-arranged the whole screen (profiled).
        self.query_one("#log-status", Static).update(
            Content.assemble(follow, f" f · {self.total:,} lines{kept}{note}"), layout=False)
