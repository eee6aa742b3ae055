"""Every run of the profile (`R`): the same list as `rlconsole runs`, from the local
history, spools and journals (no SSH). A figure nobody recorded shows as `-`; a resumed
run names the run and step it resumed from. `s` sorts by the next figure (the core's
`sort_runs`, as `rlconsole runs --sort`); j/k move as the arrows do."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.core.job.runs import RUN_COLUMNS, RUN_SORTS, RunSummary, run_cells, sort_runs
from tui.core.safetext import shown


class RunsScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    RunsScreen { align: center middle; }
    RunsScreen > Vertical {
        width: 95%; height: 80%; border: round $accent; background: $panel;
    }
    RunsScreen DataTable { height: 1fr; }
    RunsScreen #runs-empty { padding: 1 2; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,q,R", "close", "Close"), Binding("s", "sort", "Sort"),
                Binding("j", "move(1)", show=False), Binding("k", "move(-1)", show=False)]

    SORTS: tuple[str, ...] = ("newest", *(k for k in RUN_SORTS if k != "started"))
    """What `s` steps through: newest first (the view's order when it opens), then each
    figure biggest first."""

    def __init__(self, runs: list[RunSummary], cards_per_node: float | None = None) -> None:
        super().__init__()
        self.all_runs = list(runs)  # oldest first, as the core lists them
        self.runs = list(reversed(runs))  # newest first
        self.cards_per_node = cards_per_node  # throughput per node, as everywhere
        self.sort = "newest"

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = f"Runs ({len(self.runs)})"
            v.border_subtitle = self._subtitle()
            if not self.runs:
                yield Static("No runs of this profile in the history or the spools.", id="runs-empty")
            else:
                yield DataTable(cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        if not self.runs:
            return
        table = self.query_one(DataTable)
        table.add_columns(*RUN_COLUMNS)
        self._fill(table)
        table.focus()

    def _subtitle(self) -> str:
        order = "newest first" if self.sort == "newest" else f"by {self.sort}, biggest first"
        return f"{order} (s sorts) · from the local history and spools · - : not recorded · Esc closes"

    def _fill(self, table: DataTable) -> None:
        for s in self.runs:
            rid, status, *figures, notes = run_cells(s, self.cards_per_node)
            # Text, not str: ids, names and diagnoses may come from a hand-edited history, or
            # from Ray's dashboard (the job id): the one rule for outside text
            table.add_row(Text(shown(rid)), Text(shown(status)), *figures, Text(shown(notes)))

    def action_sort(self) -> None:
        """The next order; the cursor stays on the row of the run it was on."""
        if not self.runs:
            return
        table = self.query_one(DataTable)
        current = self.runs[table.cursor_row].id if 0 <= table.cursor_row < len(self.runs) else None
        self.sort = self.SORTS[(self.SORTS.index(self.sort) + 1) % len(self.SORTS)]
        self.runs = (list(reversed(self.all_runs)) if self.sort == "newest"
                     else sort_runs(self.all_runs, self.sort))
        table.clear()
        self._fill(table)
        table.move_cursor(row=next((i for i, r in enumerate(self.runs) if r.id == current), 0))
        self.query_one(Vertical).border_subtitle = self._subtitle()

    def action_move(self, delta: int) -> None:
        if self.runs:
            table = self.query_one(DataTable)
            table.move_cursor(row=max(0, min(len(self.runs) - 1, table.cursor_row + delta)))

    def action_close(self) -> None:
        self.dismiss(None)
