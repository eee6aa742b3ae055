"""The latest alert, one line, where the eye goes (just under the header), with the
count of all alerts; the full list is a screen away (`a`, or a click)."""

from __future__ import annotations

from textual.events import Click
from textual.markup import escape
from textual.widgets import Static

from tui.core.alerts import LEVEL_ORDER, Alert
from tui.messages import AlertsBarClicked

ICON = {"info": "ℹ", "warning": "▲", "error": "✖"}


class AlertsBar(Static):
    """Shows the newest of the most severe recent alerts and how many there are."""

    DEFAULT_CSS = """
    AlertsBar { height: 1; width: 1fr; padding: 0 1; background: $panel; color: $text-muted; }
    AlertsBar.-warning { background: $warning-muted; color: $text; }
    AlertsBar.-error { background: $error-muted; color: $text; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("no alerts", **kw)
        self.alerts: list[Alert] = []

    def add_alert(self, alert: Alert) -> None:
        self.alerts.append(alert)
        self._show()

    def _show(self) -> None:
        if not self.alerts:
            self.update("no alerts")
            return
        # The newest alert, unless a more severe one arrived in the last few: an error
        # must not be hidden by the info line that followed it.
        recent = self.alerts[-5:]
        top = max(reversed(recent), key=lambda a: LEVEL_ORDER.get(a.level, 0))
        self.set_class(top.level == "warning", "-warning")
        self.set_class(top.level == "error", "-error")
        n = len(self.alerts)
        where = f" (log line {top.line + 1})" if top.line is not None else ""
        self.update(f"{ICON.get(top.level, '•')} [b]{escape(top.source)}[/]: {escape(top.message)}"
                    f"{escape(where)}  [dim]· {n} alert{'s' if n != 1 else ''} · a: list[/]")

    def on_click(self, event: Click) -> None:
        self.post_message(AlertsBarClicked())
