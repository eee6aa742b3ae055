"""Every key of the console, in one table, and the command-palette provider over it.

The footer, the `?` help screen and the command palette (ctrl+p) are three views of
`KEYS`: the action keys come from the core's action table (`ACTION_TABLE`, with the
CLI's sub-commands), the view keys are listed here; so the faces cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.core.actions.registry import ACTION_TABLE

if TYPE_CHECKING:
    from tui.app import RlconsoleApp


SHORT_LABELS = {"u": "up", "m": "model", "c": "conv", "r": "ray", "s": "run"}
"""The bring-up chain's keys keep a word on an 80-column key bar, in the chain's order."""


@dataclass(frozen=True)
class KeyAction:
    key: str  # Textual key name
    action: str  # action method on the main screen (action_<name>)
    label: str  # footer label
    help: str  # one line for help and palette
    display: str | None = None  # how the key is shown when its name is not the key itself
    footer: bool = True
    changes: bool = False  # changes the cluster: not offered in read-only mode
    short: str = ""  # a label of a few letters for a narrow key bar (80 columns): the chain's keys

    def __post_init__(self) -> None:
        if not self.short and self.key in SHORT_LABELS:
            object.__setattr__(self, "short", SHORT_LABELS[self.key])

    @property
    def shown_key(self) -> str:
        return self.display or self.key


ACTION_KEYS: tuple[KeyAction, ...] = tuple(
    KeyAction(k.key, k.method, k.label, k.help, changes=spec.changes_cluster)
    for spec in ACTION_TABLE for k in spec.keys)
"""The keys that run actions: declared with the actions themselves (the core's table)."""

KEYS: tuple[KeyAction, ...] = ACTION_KEYS + (
    KeyAction("l", "focus_logs", "Logs", "Focus the job log (arrows or j/k, PgUp/PgDn scroll)"),
    KeyAction("f", "toggle_follow", "Follow", "Follow the log on/off"),
    KeyAction("slash", "search", "Search", "Search the log (latest match first); then n newer, N older", display="/"),
    KeyAction("ampersand", "filter", "Filter",
              "Filter the log: only lines matching a regex (empty shows all again)", display="&", footer=False),
    KeyAction("o", "filter_source", "Source",
              "Log of one Ray actor/node only: each press the next `(Actor pid=N, ip=...)` source, then all", footer=False),
    KeyAction("w", "toggle_wrap", "Wrap",
              "Wrap long log lines on/off (search turns wrap and filter off: its line numbers are the log's)", footer=False),
    KeyAction("g", "graph", "Graph", "Graphs: any scalar against step, EMA smoothing, step range, expected band; e exports CSV"),
    KeyAction("d", "toggle_dense", "Dense", "Dense grid on/off: one line per node (automatic when the full grid does not fit)"),
    KeyAction("enter", "detail", "Detail",
              "Detail of the grid's selected node: containers, Ray, card processes "
              "(Tab to the grid, then up/down or j/k; a click on a card opens it)", display="Enter", footer=False),
    KeyAction("a", "alerts", "Alerts", "List all alerts; Enter on one with a log line jumps there; "
              "j there shows the whole run's journal (every session)"),
    KeyAction("R", "runs", "Runs", "Every run of the profile: steps, wall time, GPU-hours, rewards, "
              "resumed from (local history and spools); s there sorts by each figure", footer=False),
    KeyAction("D", "dashboard", "Dashboard",
              "Ray's dashboard in your browser: its URL on this machine (a port forwarded through the SSH "
              "connection to the head), shown and copied", footer=False),
    KeyAction("y", "copy_job", "Copy job id", "Copy the watched job's id (to paste in `ray job logs`, "
              "`rlconsole journal`)", footer=False),
    KeyAction("question_mark", "help", "Help", "This help", display="?"),
    KeyAction("q", "quit", "Quit", "Quit (asks while an action runs; never stops the training job)"),
)

CHANGING_KEY_ACTIONS = frozenset(k.action for k in KEYS if k.changes)
"""Main-screen actions that change the cluster (refused and hidden in read-only mode)."""


def offered_keys(read_only: bool) -> tuple[KeyAction, ...]:
    """The keys the key bar, help and palette offer: all, or in read-only mode only those
    that watch (the backend refuses the others anyway; hiding them is the courtesy)."""
    return tuple(k for k in KEYS if not (read_only and k.changes))


EXTRA_KEYS: tuple[tuple[str, str], ...] = (
    ("n / N", "next newer / older search match (log focused)"),
    ("Esc", "close the search box or a dialog"),
    ("y / n", "answer a confirmation"),
    ("Tab", "move focus between panes"),
    ("ctrl+p", "command palette: every action by name"),
)


GRAPH_KEYS: tuple[tuple[str, str], ...] = (
    ("space", "pick or drop the scalar under the cursor (the list on the left)"),
    ("[ / ]", "less / more smoothing (EMA weight 0 .. 0.99; the raw curve stays drawn faintly)"),
    ("w", "step window: all / last 50 / 200 / 1000 steps"),
    (":", "explicit step range FROM:TO (either may be empty)"),
    ("c", "overlay other runs of this profile (pick them, Enter)"),
    ("t", "x axis: step or training time (the sum of step times)"),
    ("e", "export every scalar of the run to CSV"),
    ("Esc q g", "back to the main screen"),
)
"""The graph screen's own keys (`g`), for the help screen; tests/test_tui_minors.py holds
them to the screen's bindings."""


class RlconsoleCommands(Provider):
    """Command palette entries: one per key, running the same main-screen action; on a
    simulated cluster also "Inject a fault" (`rlconsole sim fault`), palette-only: it is
    for seeing what a failure looks like, not a key anyone should hit by accident."""

    def _entries(self) -> list[tuple[str, str, Callable[[], None]]]:
        app: RlconsoleApp = self.app  # type: ignore[assignment]
        read_only = app.read_only
        out: list[tuple[str, str, Callable[[], None]]] = [
            (f"{k.label} ({k.shown_key})", k.help, partial(app.run_main_action, k.action))
            for k in offered_keys(read_only)]
        kinds = app.fault_kinds()
        if not read_only and kinds and app.faults is not None:  # a fault changes the cluster: not in read-only
            demo = app.faults.demo_kind
            out.append(("Inject a fault", f"Simulated cluster: {kinds.get(demo, demo)}; the job fails "
                        "at its next step and the alert names the cause", partial(app.inject_fault, demo)))
            for kind, what in kinds.items():
                out.append((f"Inject a fault: {kind}", f"Simulated cluster: {what}",
                            partial(app.inject_fault, kind)))
        return out

    async def discover(self) -> Hits:
        for name, help, run in self._entries():
            yield DiscoveryHit(name, run, help=help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help, run in self._entries():
            score = max(matcher.match(name), matcher.match(help) * 0.8)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=help)
