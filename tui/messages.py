"""Typed Textual messages: how data crosses from backend callbacks into the widget tree.

Backend callbacks may fire on any thread and at any rate; they only post one of these
messages (post_message is thread-safe), and the screen's handlers update widgets on the
UI thread. One dataclass per kind of news keeps handlers explicit and greppable (harlequin's
and toolong's messages modules are the model). A newer metrics summary replaces one still
waiting in the queue (`can_replace`): a screen that falls behind draws the latest, never a
backlog. Cluster states are not replaced: each one is a point of every card's history (the
sparklines, the detail screen's utilisation), and the monitor already coalesces them
before they are posted (`ClusterMonitor.notify_delay_s`).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from tui.core.actions.events import ActionEvent
from tui.core.alerts import Alert
from tui.core.job.metrics import MetricsSummary
from tui.core.state import ClusterState
from widgets.alerts_bar import AlertsBar


@dataclass
class StateUpdated(Message):
    """A new whole-cluster snapshot from the probes."""

    state: ClusterState


@dataclass
class LogLinesReceived(Message):
    """A batch of new job log lines (never coalesced: every line is numbered)."""

    lines: list[str]


@dataclass
class LogRestarted(Message):
    """The backend watches another job: its log follows, numbered from 0 again."""

    job_id: str


@dataclass
class MetricsUpdated(Message):
    """New metrics summary and plot series (one per training step, at most)."""

    summary: MetricsSummary
    series: dict[str, list[tuple[int, float]]]

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, MetricsUpdated)


@dataclass
class AlertRaised(Message):
    """One new alert."""

    alert: Alert


@dataclass
class ActionEventReceived(Message):
    """One progress event of a running action (from its worker)."""

    event: ActionEvent


@dataclass
class ActionFinished(Message):
    """A running action ended: `ok` False on fail or exception, None when cancelled."""

    name: str
    ok: bool | None
    message: str = ""


AlertsBarClicked = AlertsBar.Clicked  # the widget owns its message; the name stays for handlers
