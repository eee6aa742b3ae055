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

from typing import Awaitable, Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.strip import Strip
from textual.widgets import Input, Log, Static

from tui.backend import clean_line

KEEP_LINES = 50_000
"""Lines the widget holds (a few MB): enough scroll-back for the screen, bounded."""
FLUSH_S = 0.08
"""Buffer flush period: fast enough to feel live, slow enough to batch a 10k lines/s log."""

SpoolSearch = Callable[[str, int, bool], Awaitable["int | None"]]


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
    ]

    match_index: int | None = None
    """Index into `lines` of the highlighted match (kept in sync when lines are pruned)."""

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

    def _pane(self) -> "LogPane | None":
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
        self.border_title = "Job log"

    def compose(self) -> ComposeResult:
        yield SearchLog(max_lines=self.keep_lines, auto_scroll=True)
        yield Static("", id="log-status")
        yield Input(placeholder="search the log (Enter: latest match; n newer, N older; Esc closes)",
                    id="log-search")

    def on_mount(self) -> None:
        self.set_interval(FLUSH_S, self.flush)
        self._update_status()

    @property
    def log_widget(self) -> SearchLog:
        return self.query_one(SearchLog)

    @property
    def dropped(self) -> int:
        """Lines delivered but no longer held by the widget (pruned from the top)."""
        return self.total - len(self._pending) - self.log_widget.line_count

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
        batch = [clean_line(s) for s in self._pending]
        self._pending = []
        log = self.log_widget
        log.write_lines(batch, scroll_end=self.follow)
        self._sync_match()
        self._update_status()

    # -- follow
    def set_follow(self, on: bool) -> None:
        self.follow = on
        self.log_widget.auto_scroll = on
        if on:
            self.log_widget.scroll_end(animate=False)
        self._update_status()

    def toggle_follow(self) -> None:
        self.set_follow(not self.follow)

    # -- search
    def open_search(self) -> None:
        box = self.query_one(Input)
        box.add_class("-open")
        box.value = self.pattern or ""
        box.focus()

    def action_close_search(self) -> None:
        box = self.query_one(Input)
        if box.has_class("-open"):
            box.remove_class("-open")
            self.log_widget.focus()

    @on(Input.Submitted, "#log-search")
    async def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one(Input).remove_class("-open")
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
            if p in lines[i].lower():
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

    def _jump(self, abs_index: int) -> None:
        log = self.log_widget
        self.match_abs = abs_index
        rel = abs_index - self.dropped
        log.match_index = rel
        if self.follow:
            self.set_follow(False)  # otherwise the next flush scrolls the match away
        log.scroll_to(y=max(0, rel - log.size.height // 2), animate=False, immediate=True)
        log.refresh()
        self.search_note = f"/{self.pattern}: line {abs_index + 1}"
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
        follow = "[b $text-success]FOLLOW[/]" if self.follow else "[b $text-warning]PAUSED[/]"
        kept = f" (last {self.log_widget.line_count:,} kept)" if self.dropped > 0 else ""
        note = f" · {self.search_note}" if self.search_note else ""
        from textual.markup import escape

        # layout=False: the status line is one row at the pane's width, so its size never
        # changes; a layout pass per flush (12.5 Hz) re-arranged the whole screen (profiled).
        self.query_one("#log-status", Static).update(
            f"{follow} f · {self.total:,} lines{kept}{escape(note)}", layout=False)
