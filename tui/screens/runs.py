"""Every run of the profile (`R`): the same list as `rlconsole runs`, from the local
history, spools and journals (no SSH). A figure nobody recorded shows as `-`; a resumed
run names the run and step it resumed from."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.core.job.runs import RunSummary
from tui.core.safetext import shown


def _cell(x: object, fmt: str = "{}") -> str:
    return "-" if x is None else fmt.format(x)


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

    def __init__(self, runs: list[RunSummary]) -> None:
        super().__init__()
        self.runs = list(reversed(runs))  # newest first

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
        table.add_columns("run", "status", "steps", "started", "wall", "GPU-h", "reward", "best", "tok/s", "notes")
        for s in self.runs:
            started = time.strftime("%m-%d %H:%M", time.localtime(s.started_at)) if s.started_at else "-"
            notes = "; ".join(n for n in (s.resumed_text, f"diagnosis: {s.diagnosis}" if s.diagnosis else None) if n)
            # Text, not str: ids, names and diagnoses may come from a hand-edited history, or
            # from Ray's dashboard (the job id): the one rule for outside text
            table.add_row(Text(shown(s.id)), Text(shown(s.status)), f"{_cell(s.step)}/{_cell(s.total_steps)}", started,
                          _cell(s.wall_s and s.wall_s / 3600, "{:.1f}h"), _cell(s.gpu_hours, "{:.1f}"),
                          _cell(s.last_reward, "{:.3f}"), _cell(s.best_reward, "{:.3f}"),
                          _cell(s.mean_throughput, "{:.0f}"), Text(shown(notes)))
        table.focus()

    def action_close(self) -> None:
        self.dismiss(None)
