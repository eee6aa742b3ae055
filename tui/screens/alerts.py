"""All alerts, newest first (the history: raised and ended episodes, events). Choosing one
that came from the log dismisses with its line so the main screen can jump the log there."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.core.alerts import Alert


def fmt_time(at: float) -> str:
    """Local wall-clock time; alerts of a multi-day run need the date too after a day."""
    return time.strftime("%m-%d %H:%M:%S", time.localtime(at))


class AlertsScreen(ModalScreen["int | None"]):
    DEFAULT_CSS = """
    AlertsScreen { align: center middle; }
    AlertsScreen > Vertical {
        width: 95%; height: 80%; border: round $warning; background: $panel;
    }
    AlertsScreen DataTable { height: 1fr; }
    AlertsScreen #alerts-empty { padding: 1 2; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,q,a", "close", "Close")]

    def __init__(self, alerts: list[Alert]) -> None:
        super().__init__()
        self.alerts = list(reversed(alerts))

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = f"Alerts ({len(self.alerts)})"
            v.border_subtitle = "Enter: jump to log line · Esc closes"
            if not self.alerts:
                yield Static("No alerts.", id="alerts-empty")
            else:
                yield DataTable(cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        if not self.alerts:
            return
        table = self.query_one(DataTable)
        table.add_columns("time", "level", "source", "message", "log line")
        for a in self.alerts:
            # Text, not str: a str cell is parsed as markup, and this text comes from nodes
            table.add_row(fmt_time(a.at), "ended" if a.ends else a.level, Text(a.source), Text(a.message),
                          "" if a.line is None else str(a.line + 1))
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        alert = self.alerts[event.cursor_row]
        self.dismiss(alert.line)

    def action_close(self) -> None:
        self.dismiss(None)
