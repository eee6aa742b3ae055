"""Every run of the profile (`R`): the same list as `rlconsole runs`, from the local
history, spools and journals (no SSH). A figure nobody recorded shows as `-`; a resumed
run names the run and step it resumed from."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.core.job.runs import RUN_COLUMNS, RunSummary, run_cells
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
    BINDINGS = [Binding("escape,q,R", "close", "Close")]

    def __init__(self, runs: list[RunSummary], cards_per_node: float | None = None) -> None:
        super().__init__()
        self.runs = list(reversed(runs))  # newest first
        self.cards_per_node = cards_per_node  # throughput per node, as everywhere

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = f"Runs ({len(self.runs)})"
            v.border_subtitle = "from the local history and spools · - : not recorded · Esc closes"
            if not self.runs:
                yield Static("No runs of this profile in the history or the spools.", id="runs-empty")
            else:
                yield DataTable(cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        if not self.runs:
            return
        table = self.query_one(DataTable)
        table.add_columns(*RUN_COLUMNS)
        for s in self.runs:
            rid, status, *figures, notes = run_cells(s, self.cards_per_node)
            # Text, not str: ids, names and diagnoses may come from a hand-edited history, or
            # from Ray's dashboard (the job id): the one rule for outside text
            table.add_row(Text(shown(rid)), Text(shown(status)), *figures, Text(shown(notes)))
        table.focus()

    def action_close(self) -> None:
        self.dismiss(None)
