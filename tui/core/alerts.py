"""Alerts: the few things a person watching a run must not miss.

Diagnosis matches in the log (a known traceback), nodes going down, cards still busy after
a stop. They are plain data so that the core can raise them, the CLI can print them and
the TUI can show the latest one where the eye goes and keep the rest in a list. No
Textual here: the core never imports it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

AlertLevel = Literal["info", "warning", "error"]

LEVEL_ORDER: dict[str, int] = {"info": 0, "warning": 1, "error": 2}
"""Severity rank, so a list can be sorted or filtered by 'at least warning'."""


@dataclass
class Alert:
    """One alert.

    `source` says who raised it ("log", "probe", "ray", "action:<name>") so a person
    knows where to look; `line` is the log line index (0-based, over the whole run, in the
    order lines reached the console) when the alert came from the log, so the console can
    jump there; `at` is a Unix time
    (a field, not a clock read at render time, so tests stay deterministic).
    """

    level: AlertLevel
    source: str
    message: str
    line: int | None = None
    at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def one_line(self) -> str:
        where = f" (log line {self.line + 1})" if self.line is not None else ""
        return f"{self.level.upper()} {self.source}: {self.message}{where}"
