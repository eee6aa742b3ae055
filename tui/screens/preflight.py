"""Preflight results: one row per check, failures first.

The checks themselves live in the core (`rlconsole check` runs the same ones); this
screen only lists the results the "check" action streamed: events carrying
`data["check"]` and a `status` of pass/fail/warn/skip.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from ..core.actions.events import ActionEvent

ORDER = {"fail": 0, "failed": 0, "warn": 1, "pass": 2, "ok": 2, "skip": 3, "skipped": 3}


def results_of(events: list[ActionEvent]) -> list[ActionEvent]:
    """The result events of a "check" run, worst first (stable within a status)."""
    rows = [e for e in events if "check" in e.data or (e.status and e.kind not in ("node", "start"))]
    return sorted(rows, key=lambda e: ORDER.get(e.status or "", 4))


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
        fails = sum(1 for r in self.rows if r.status in ("fail", "failed"))
        warns = sum(1 for r in self.rows if r.status == "warn")
        with Vertical() as v:
            v.border_title = "Preflight"
            v.border_subtitle = "Esc closes"
            style = "$text-error" if fails else "$text-success"
            yield Static(Content.assemble((f"{len(self.rows)} checks: {fails} failed, {warns} warnings", style),
                                          ("  " + self.summary if self.summary else "", "dim")),
                         id="preflight-summary")
            yield DataTable(cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("status", "check", "node", "message")
        for e in self.rows:
            # Text cells: a str cell is parsed as markup, and messages quote node output
            table.add_row(Text((e.status or "").upper()), Text(str(e.data.get("check", ""))),
                          Text(e.node or ""), Text(e.message))
        table.focus()

    def action_close(self) -> None:
        self.dismiss(None)
