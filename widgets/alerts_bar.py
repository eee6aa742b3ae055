"""The state now, one line, where the eye goes (just under the header): the most severe
open alert (a node that is down, a hot card, a failed job) or the newest event not yet
looked at, with how many are open; the full history is a screen away (`a`, or a click).

A message longer than the bar wraps onto up to four lines (three under 100 columns): a
failed job's cause ends with its fix, which a one-line bar cut off at 120 columns.

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
    AlertsBar { height: auto; max-height: 4; width: 1fr; padding: 0 1; background: $panel; color: $text-muted; }
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

    def another_job(self) -> None:
        """The watched job changed: the previous job's log event leaves the banner."""
        self.now.another_job()
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
        if top.source == "job" and top.message.startswith("job "):  # "job: job X FAILED" says it twice
            t.append(shown(top.message), style="")
            t.append(where)
        else:
            t.append(shown(top.source), style="bold")  # outside text: the one rule (tui/core/safetext.py)
            t.append(f": {shown(top.message)}{where}")
        k = len(current) - 1
        suffix = f"  {f'{k} more open · ' if k else ''}{history}"
        width = self.content_region.width
        if width and t.cell_len <= width < t.cell_len + len(suffix):
            # the alert fits one line, the counts do not: they shrink (or go) rather than
            # grow the bar a line; a longer alert wraps with them after it
            shorter = [f"  {f'+{k} open · ' if k else ''}{n} alerts", f"  {n} alerts", ""]
            suffix = next(x for x in shorter if t.cell_len + len(x) <= width)
        t.append(suffix, style="dim")
        self.update(t)

    def on_resize(self) -> None:
        self._show()

    def on_click(self, event: Click) -> None:
        self.post_message(self.Clicked())
