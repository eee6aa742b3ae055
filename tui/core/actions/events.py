"""Progress events: the one vocabulary every action speaks, and every face renders."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from tui.core.safetext import shown, shown_log
from tui.core.secrets import mask_secrets

EventKind = Literal["start", "step", "output", "node", "warn", "done", "fail", "skip"]


@dataclass
class ActionEvent:
    """One thing an action wants the user to know.

    `node` is None for cluster-wide events. `kind`:
    start (the action began), step (a phase began), output (a line a remote command
    printed), node (a node's own status changed: `status` says to what), warn, skip (nothing
    to do: already in the wanted state), done (finished well), fail (finished badly; the
    message is the one-line error).
    """

    action: str
    kind: EventKind
    message: str = ""
    node: str | None = None
    status: str | None = None  # per-node: pending, running, ok, failed, skipped
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        # Every face (screen, headless CLI, --json) shows events, and messages carry what
        # nodes printed (an `env`, a failing command line): masked here, once, at the source,
        # and made safe to show (the one rule, tui/core/safetext.py): a command's output
        # lines as a terminal would show them without colour, any other message with its
        # control characters made visible.
        message = mask_secrets(self.message)
        if self.kind == "output":
            message = "\n".join(shown_log(line, colour=False) for line in message.split("\n"))
        self.message = shown(message, lines=True)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def one_line(self) -> str:
        where = f"[{self.node}] " if self.node else ""
        return f"{self.action}: {where}{self.message}"
