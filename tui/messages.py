"""Typed Textual messages: how data crosses from backend callbacks into the widget tree.

Backend callbacks may fire on any thread and at any rate; they only post one of these
messages (post_message is thread-safe), and the screen's handlers update widgets on the
UI thread. One class per kind of news keeps handlers explicit and greppable, in the
style of harlequin's messages module.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from .core.actions.events import ActionEvent
from .core.alerts import Alert
from .core.state import ClusterState
from widgets.alerts_bar import AlertsBar


class StateUpdated(Message):
    """A new whole-cluster snapshot from the probes."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__()
        self.state = state


class LogLinesReceived(Message):
    """A batch of new job log lines."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines


class MetricsUpdated(Message):
    """New metrics summary and plot series (one per training step, at most)."""

    def __init__(self, summary: dict[str, Any], series: dict[str, list[tuple[int, float]]]) -> None:
        super().__init__()
        self.summary = summary
        self.series = series


class AlertRaised(Message):
    """One new alert."""

    def __init__(self, alert: Alert) -> None:
        super().__init__()
        self.alert = alert


class ActionEventReceived(Message):
    """One progress event of a running action (from its worker)."""

    def __init__(self, event: ActionEvent) -> None:
        super().__init__()
        self.event = event


class ActionFinished(Message):
    """A running action ended: `ok` False on fail or exception, None when cancelled."""

    def __init__(self, name: str, ok: bool | None, message: str = "") -> None:
        super().__init__()
        self.name = name
        self.ok = ok
        self.message = message


AlertsBarClicked = AlertsBar.Clicked  # the widget owns its message; the name stays for handlers
