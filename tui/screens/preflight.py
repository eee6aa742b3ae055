"""Preflight results: one row per check and node, failures first.

The checks live in the core (`rlconsole check` runs the same ones and prints the same
results); this screen only lists the `CheckResult`s the "check" action streamed, read
back from its events with `core.checks.result_of` (the one event shape there is).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.core.actions.events import ActionEvent
from tui.core.checks import CheckResult, CheckStatus, counts, result_of
from tui.core.safetext import shown

SEVERITY = {CheckStatus.FAIL: 0, CheckStatus.WARN: 1, CheckStatus.SKIP: 2, CheckStatus.PASS: 3}
"""Failures first, then warnings, then what was skipped (each names the failure it waits
on), then passes; within a status the core's order (by check, then node) is kept."""

STYLE = {CheckStatus.FAIL: "bold red", CheckStatus.WARN: "yellow", CheckStatus.SKIP: "dim", CheckStatus.PASS: "green"}


def results_of(events: list[ActionEvent]) -> list[CheckResult]:
    """The results of a "check" run, worst first (stable within a status)."""
    rows = [r for r in (result_of(e) for e in events) if r is not None]
    return sorted(rows, key=lambda r: SEVERITY[r.status])


class PreflightScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    PreflightScreen { align: center middle; }
    PreflightScreen > Vertical {
        width: 95%; height: 80%; border: round $primary; background: $panel;
    }
    PreflightScreen #preflight-summary { padding: 0 1; height: auto; }
    PreflightScreen DataTable { height: 1fr; }
    """
    BINDINGS = [Binding("escape,q,p", "close", "Close")]

    def __init__(self, events: list[ActionEvent], summary: str = "") -> None:
        super().__init__()
        self.rows = results_of(events)
        self.summary = summary

    def compose(self) -> ComposeResult:
        c = counts(self.rows)
        fails, warns = c[CheckStatus.FAIL], c[CheckStatus.WARN]
        with Vertical() as v:
            v.border_title = "Preflight"
            v.border_subtitle = "Esc closes"
            style = "$text-error" if fails else "$text-success"
            # Content, not markup: the summary and the messages quote what nodes printed
            yield Static(Content.assemble((f"{len(self.rows)} checks: {fails} failed, {warns} warnings", style),
                                          ("  " + shown(self.summary) if self.summary else "", "dim")),
                         id="preflight-summary")
            yield DataTable(cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("status", "check", "node", "message", "fix")
        for r in self.rows:
            why = f" (see {r.cause})" if r.cause else ""
            # Text cells: a str cell is parsed as markup, and messages quote node output (so
            # through the one rule for outside text too)
            table.add_row(Text(r.status.value.upper(), style=STYLE[r.status]), Text(shown(r.id)), Text(shown(r.node or "")),
                          Text(shown(r.message + why)),
                          Text(shown(r.fix or "") if r.status is not CheckStatus.PASS else ""))
        table.focus()

    def action_close(self) -> None:
        self.dismiss(None)
