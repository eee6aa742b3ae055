"""The state now, one line, where the eye goes (just under the header): the most severe
open alert (a node that is down, a hot card, a failed job) or the newest event not yet
looked at, with how many are open; the full history is a screen away (`a`, or a click).

It shows what holds *now*: an episode's end (`Alert.ends`) removes it (tui/core/alerts.py
`OpenAlerts`), so "node node3 is down" goes away when node3 is back. Alert text comes
from nodes and logs, so it is drawn as Rich Text, never parsed as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.events import Click
from textual.message import Message
from textual.widgets import Static

from tui.core.alerts import Alert, OpenAlerts
from tui.core.safetext import shown

ICON = {"info": "ℹ", "warning": "▲", "error": "✖"}


class AlertsBar(Static):
    """Shows the most severe open alert and how many are open."""

    class Clicked(Message):
        """The bar was clicked: the screen opens the alert list (the widget only says so)."""

    DEFAULT_CSS = """
    AlertsBar { height: 1; width: 1fr; padding: 0 1; background: $panel; color: $text-muted; }
    AlertsBar.-warning { background: $warning-muted; color: $text; }
    AlertsBar.-error { background: $error-muted; color: $text; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("no alerts", **kw)
        self.alerts: list[Alert] = []
        self.now = OpenAlerts()

    def add_alert(self, alert: Alert) -> None:
        self.alerts.append(alert)
        self.now.add(alert)
        self._show()

    def seen(self) -> None:
        """The user looked at the list: events stop showing; open episodes stay."""
        self.now.seen()
        self._show()

    def _show(self) -> None:
        current = self.now.current()
        n = len(self.alerts)
        history = f"{n} alert{'s' if n != 1 else ''} · a: list"
        if not current:
            self.set_class(False, "-warning")
            self.set_class(False, "-error")
            self.update(Text(f"no open alerts · {history}" if n else "no alerts", style="dim" if n else ""))
            return
        top = current[0]
        self.set_class(top.level == "warning", "-warning")
        self.set_class(top.level == "error", "-error")
        where = f" (log line {top.line + 1})" if top.line is not None else ""
        t = Text()
        t.append(f"{ICON.get(top.level, '•')} ")
        t.append(shown(top.source), style="bold")  # outside text: the one rule (tui/core/safetext.py)
        t.append(f": {shown(top.message)}{where}")
        more = f" · {len(current) - 1} more open" if len(current) > 1 else ""
        t.append(f"  {more.lstrip(' ·') + ' · ' if more else ''}{history}", style="dim")
        self.update(t)

    def on_click(self, event: Click) -> None:
        self.post_message(self.Clicked())
