"""An alert, the type: what the core raises and the CLI and the console show.

Kept apart from the rule set that raises most of them (tui/core/alerts.py) because the
diagnosis catalog (tui/core/diagnosis.py) raises them too, and the rule set asks the
catalog for a failed job's cause: with the type here, neither imports the other in both
directions. `tui.core.alerts` re-exports these names.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from tui.core.safetext import shown
from tui.core.secrets import mask_secrets

AlertLevel = Literal["info", "warning", "error"]

LEVEL_ORDER: dict[str, int] = {"info": 0, "warning": 1, "error": 2}
"""Severity rank, so a list can be sorted or filtered by 'at least warning'."""


MAX_MESSAGE_CHARS = 500
"""Cap on an alert message built from remote text (an error string, a log line)."""


@dataclass
class Alert:
    """One alert.

    `source` says who raised it ("log", "probe", "ray", "job", "action:<name>") so a
    person knows where to look; `line` is the log line index (0-based, over the whole run,
    in the order lines reached the console) when the alert points into the log, so the
    console can jump there; `at` is a Unix time (a field, not a clock read at render time,
    so tests stay deterministic). `key` names the episode this alert opens (None: a one-off
    event); `ends` marks the alert that closes episode `key`.
    """

    level: AlertLevel
    source: str
    message: str
    line: int | None = None
    at: float = field(default_factory=time.time)
    key: str | None = None
    ends: bool = False
    diagnosis: str | None = None
    """The diagnosis catalog's id of the failure this alert names (a log finding, or the
    finding a job's end was put down to), so tools and tests need not parse the message."""

    def __post_init__(self) -> None:
        # masked at the source, like an ActionEvent: a message built from a log line or
        # an error's text may quote a credential, and every place an alert goes (the
        # console's list, `status`, `watch`'s lines, a notification) shows this one; for
        # the same reason its control characters are made visible here (the one rule for
        # outside text, tui/core/safetext.py): a log line's escapes reach no terminal
        self.message = shown(mask_secrets(self.message))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def one_line(self) -> str:
        where = f" (log line {self.line + 1})" if self.line is not None else ""
        return f"{self.level.upper()} {self.source}: {self.message}{where}"


class OpenAlerts:
    """The state now: open episodes by key, plus the newest event not yet seen.

    Feed it every alert in delivery order (`add`); `current()` is what a banner shows.
    An episode's end removes it; an event stays until `seen()` (the user opened the list)
    or a newer event at least as severe replaces it.
    """

    def __init__(self) -> None:
        self.open: dict[str, Alert] = {}
        self.event: Alert | None = None

    def add(self, a: Alert) -> None:
        if a.key is None:
            # a newer event replaces the unseen one unless it is less severe: "watching
            # job X" (info) must not hide the error the job's log just told
            if self.event is None or LEVEL_ORDER.get(a.level, 0) >= LEVEL_ORDER.get(self.event.level, 0):
                self.event = a
        elif a.ends:
            self.open.pop(a.key, None)
        else:
            self.open[a.key] = a

    def seen(self) -> None:
        self.event = None

    def another_job(self) -> None:
        """The console watches another job now: an unseen event from the previous job's
        log (its line is a line of that log) leaves the banner; the list keeps it."""
        if self.event is not None and self.event.source == "log":
            self.event = None

    def current(self) -> list[Alert]:
        """Open episodes and the unseen event, most severe first, newest first within a
        level."""
        items = list(self.open.values()) + ([self.event] if self.event is not None else [])
        return sorted(items, key=lambda a: (-LEVEL_ORDER.get(a.level, 0), -a.at))
