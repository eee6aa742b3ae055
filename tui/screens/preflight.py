"""Preflight results: one row per check and result, failures first; the same result on
several nodes is one row naming the nodes (as `rlconsole check` folds it).

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
from tui.core.checks import CheckResult, CheckStatus, result_of, summary
from tui.core.safetext import shown

SEVERITY = {CheckStatus.FAIL: 0, CheckStatus.WARN: 1, CheckStatus.SKIP: 2, CheckStatus.PASS: 3}
"""Failures first, then warnings, then what was skipped (each names the failure it waits
on), then passes; within a status the core's order (by check, then node) is kept."""

STYLE = {CheckStatus.FAIL: "bold red", CheckStatus.WARN: "yellow", CheckStatus.SKIP: "dim", CheckStatus.PASS: "green"}


def results_of(events: list[ActionEvent]) -> list[CheckResult]:
    """The results of a "check" run, worst first (stable within a status)."""
    rows = [r for r in (result_of(e) for e in events) if r is not None]
    return sorted(rows, key=lambda r: SEVERITY[r.status])


def folded(rows: list[CheckResult]) -> list[tuple[CheckResult, list[str]]]:
    """Runs of rows that say the same thing (check, status, message, fix, cause) on
    several nodes, as one (result, nodes): `format_results`' fold, for the table."""
    out: list[tuple[CheckResult, list[str]]] = []
    for r in rows:
        if out and r.node and out[-1][1]:
            prev = out[-1][0]
            if (prev.id, prev.status, prev.message, prev.fix, prev.cause) == (r.id, r.status, r.message, r.fix, r.cause):
                out[-1][1].append(r.node)
                continue
        out.append((r, [r.node] if r.node else []))
    return out


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
        fails = any(r.status is CheckStatus.FAIL for r in self.rows)
        counted = summary(self.rows)
        with Vertical() as v:
            v.border_title = "Preflight"
            v.border_subtitle = "Esc closes"
            style = "$text-error" if fails else "$text-success"
            # the counts once (the action's own message says the same, or more: then that too);
            # Content, not markup: the summary and the messages quote what nodes printed
            extra = "" if not self.summary or self.summary.strip() == counted else "  " + shown(self.summary)
            yield Static(Content.assemble((counted, style), (extra, "dim")), id="preflight-summary")
            yield DataTable(cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("status", "check", "node", "message", "fix")
        for r, nodes in folded(self.rows):
            why = f" (see {r.cause})" if r.cause else ""
            # Text cells: a str cell is parsed as markup, and messages quote node output (so
            # through the one rule for outside text too)
            table.add_row(Text(r.status.value.upper(), style=STYLE[r.status]), Text(shown(r.id)),
                          Text(shown(", ".join(nodes))),
                          Text(shown(r.message + why)),
                          Text(shown(r.fix or "") if r.status is not CheckStatus.PASS else ""))
        table.focus()

    def action_close(self) -> None:
        self.dismiss(None)
