"""`?`: every key and what it does, generated from the same table as the footer and the
command palette so the three never disagree."""

from __future__ import annotations

import textwrap

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.commands import EXTRA_KEYS, GRAPH_KEYS, offered_keys

KEY_COL = 7
"""Width of the key column; a description's wrapped lines start after it."""


def _row(key: str, text: str, width: int) -> str:
    """One key and its description; a description longer than the line wraps with its
    continuation lines under the description, not at column 0."""
    room = max(20, width - KEY_COL - 2) if width else 0
    lines = textwrap.wrap(text, room) if room else [text]
    pad = " " * (KEY_COL + 2)
    return f"[b $text-accent]{escape(key):>{KEY_COL}}[/]  " + f"\n{pad}".join(escape(x) for x in lines or [""])


def help_markup(read_only: bool = False, width: int = 0) -> str:
    """The help's text; `width`: the columns it is drawn in (0: no wrapping of our own)."""
    rows = [_row(k.shown_key, k.help, width) for k in offered_keys(read_only)]
    rows.append("")
    rows += [_row(key, text, width) for key, text in EXTRA_KEYS]
    rows += ["", "[b]Graphs[/] (g)"]
    rows += [_row(key, text, width) for key, text in GRAPH_KEYS]
    rows += ["", "[dim]Quitting leaves the training job and Ray running; `rlconsole` re-attaches.[/]"]
    if read_only:
        rows += ["[b $warning]READ-ONLY[/]: the keys that change the cluster are off "
                 "(--read-only / console.read_only)."]
    return "\n".join(rows)


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; background: $background; }
    HelpScreen > VerticalScroll {
        width: 96; max-width: 100%; height: auto; max-height: 90%;
        border: round $primary; background: $panel; padding: 0 1;
    }
    """
    BINDINGS = [Binding("escape,q,question_mark", "dismiss_help", "Close")]

    def __init__(self, read_only: bool = False) -> None:
        super().__init__()
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        with VerticalScroll() as vs:
            vs.border_title = "rlconsole keys"
            vs.border_subtitle = "Esc closes"
            yield Static(help_markup(self.read_only, self._width()), id="help-text")

    def _width(self) -> int:
        """The text's columns: the box (96, or the screen) less its border, padding and
        scrollbar."""
        return min(96, self.app.size.width) - 7

    def on_resize(self) -> None:
        self.query_one("#help-text", Static).update(help_markup(self.read_only, self._width()))

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
