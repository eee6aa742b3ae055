"""`?`: every key and what it does, generated from the same table as the footer and the
command palette so the three never disagree."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.commands import EXTRA_KEYS, offered_keys


def help_markup(read_only: bool = False) -> str:
    rows = [f"[b $text-accent]{escape(k.shown_key):>7}[/]  {escape(k.help)}" for k in offered_keys(read_only)]
    rows.append("")
    rows += [f"[b $text-accent]{escape(key):>7}[/]  {escape(text)}" for key, text in EXTRA_KEYS]
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
            yield Static(help_markup(self.read_only), id="help-text")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
