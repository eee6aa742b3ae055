"""All alerts, newest first (the history: raised and ended episodes, events). Enter on one
shows it whole (`AlertDetail`, as k9s' describe: level, source, time, the full message,
its log line); Enter there dismisses with the alert so the main screen can jump the log
to its line.
`j` switches to the watched run's whole journal (every session's alerts, actions, state
changes and checkpoints, `tui/core/job/journal.py`) and back."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.core.alerts import Alert
from tui.core.job.journal import Entry
from tui.core.safetext import shown


def fmt_time(at: float) -> str:
    """Local wall-clock time; alerts of a multi-day run need the date too after a day."""
    return time.strftime("%m-%d %H:%M:%S", time.localtime(at))


class AlertDetail(ModalScreen[bool]):
    """One alert, whole: the table cuts a long message (a diagnosis and its fix) at the
    column's width; here it wraps. Enter: jump to its log line (True); Esc: back."""

    DEFAULT_CSS = """
    AlertDetail { align: center middle; }
    AlertDetail > VerticalScroll {
        width: 90%; height: auto; max-height: 80%; border: round $accent; background: $panel; padding: 0 1;
    }
    AlertDetail Static { width: 1fr; }
    """
    BINDINGS = [Binding("escape,q", "back", "Back"), Binding("enter", "jump", "Jump to log line")]

    def __init__(self, alert: Alert) -> None:
        super().__init__()
        self.alert = alert

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text(), id="alert-detail")

    def text(self) -> Text:
        a = self.alert
        t = Text()
        rows = [("level", "ended" if a.ends else a.level), ("source", shown(a.source)), ("time", fmt_time(a.at))]
        if a.diagnosis:
            rows.append(("diagnosis", shown(a.diagnosis)))
        rows.append(("log line", "-" if a.line is None else str(a.line + 1)))
        for k, v in rows:
            t.append(f"{k:<10} ", style="bold")
            t.append(f"{v}\n")
        t.append("\n")
        t.append(shown(a.message, lines=True))  # Text: outside text is never markup
        return t

    def on_mount(self) -> None:
        v = self.query_one(VerticalScroll)
        v.border_title = "Alert"
        v.border_subtitle = ("Enter: jump to its log line · " if self.alert.line is not None else "") + "Esc: back"

    def action_back(self) -> None:
        self.dismiss(False)

    def action_jump(self) -> None:
        self.dismiss(self.alert.line is not None)


class AlertsScreen(ModalScreen["Alert | int | None"]):
    DEFAULT_CSS = """
    AlertsScreen { align: center middle; }
    AlertsScreen > Vertical {
        width: 95%; height: 80%; border: round $warning; background: $panel;
    }
    AlertsScreen DataTable { height: 1fr; }
    AlertsScreen #alerts-empty { padding: 1 2; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,q,a", "close", "Close"),
                Binding("j", "toggle_journal", "Whole run")]

    def __init__(self, alerts: list[Alert], journal: list[Entry] | None = None) -> None:
        super().__init__()
        self.alerts = list(reversed(alerts))
        self.entries = list(reversed(journal or []))
        self.show_journal = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("No alerts.", id="alerts-empty")
            yield DataTable(cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self._fill()

    def _fill(self) -> None:
        v = self.query_one(Vertical)
        table = self.query_one(DataTable)
        table.clear(columns=True)
        rows = self.entries if self.show_journal else self.alerts
        if self.show_journal:
            v.border_title = f"Run journal ({len(self.entries)}): every session"
            v.border_subtitle = "Enter: jump to log line · j: this session's alerts · Esc closes"
            table.add_columns("time", "kind", "by", "what", "log line")
            for e in self.entries:
                line = e.data.get("line")
                # the journal is a file on disk, its text from nodes and logs: the one rule
                table.add_row(fmt_time(e.at), Text(shown(e.kind)), Text(shown(e.who or "-")), Text(shown(e.message)),
                              str(line + 1) if isinstance(line, int) else "")
        else:
            v.border_title = f"Alerts ({len(self.alerts)})"
            v.border_subtitle = "Enter: the whole alert · j: the whole run's journal · Esc closes"
            table.add_columns("time", "level", "source", "message", "log line")
            for a in self.alerts:
                # Text, not str: a str cell is parsed as markup, and this text comes from nodes
                # (so through the one rule for outside text too: no control character drawn)
                table.add_row(fmt_time(a.at), "ended" if a.ends else a.level, Text(shown(a.source)), Text(shown(a.message)),
                              "" if a.line is None else str(a.line + 1))
        empty = self.query_one("#alerts-empty", Static)
        empty.update("No journal entries for this run." if self.show_journal else "No alerts.")
        empty.display = not rows
        table.display = bool(rows)
        if rows:
            table.focus()

    def action_toggle_journal(self) -> None:
        self.show_journal = not self.show_journal
        self._fill()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if self.show_journal:
            line = self.entries[event.cursor_row].data.get("line")
            self.dismiss(line if isinstance(line, int) else None)
            return
        alert = self.alerts[event.cursor_row]

        def back(jump: bool | None) -> None:
            if jump:
                self.dismiss(alert)

        self.app.push_screen(AlertDetail(alert), back)

    def action_close(self) -> None:
        self.dismiss(None)
