"""Progress of the running action: one status row per node (containers, setup-ray) and
the action's output lines.

Actions take minutes (Ray bring-up, a model conversion); a person needs to see which
node is slow or failed while the rest of the screen keeps showing telemetry. The panel
only renders events; it never runs anything.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Log, Static

from tui.core.actions.events import ActionEvent
from tui.core.safetext import shown
from tui.oneshot import call_after

STATUS_MARK = {
    "pending": ("○ pending", "$text-muted"), "running": ("◐ running", "$text-primary"),
    "ok": ("● ok", "$text-success"), "failed": ("✖ failed", "$text-error"),
    "skipped": ("– skipped", "$text-muted"),
}
OUTPUT_KEEP = 2_000


class ActionPanel(Vertical):
    """Title (action + state), per-node rows, output log."""

    DEFAULT_CSS = """
    ActionPanel { height: 1fr; }
    ActionPanel > #action-head { height: auto; }
    ActionPanel > #action-nodes { height: auto; max-height: 10; }
    ActionPanel > Log { height: 1fr; background: $surface; display: none; }
    ActionPanel.-active > Log { display: block; }
    """

    CLOSE_OK_S = 8.0
    """A finished action's panel gives its room back to the log after this long (done,
    skipped); a failed or cancelled one after `CLOSE_FAILED_S` (its alert or toast says
    why too). At 80x24 the idle panel took a quarter of the log's row for good."""
    CLOSE_FAILED_S = 30.0

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._run = 0  # which action a close timer was set for (a newer one keeps the panel)
        self.action: str | None = None
        self.state = "idle"  # idle, running, done, failed, skipped, cancelled
        self.last_message = ""
        self.nodes: dict[str, tuple[str, str]] = {}  # node -> (status, message)
        self.border_title = "Action"

    def compose(self) -> ComposeResult:
        yield Static("[dim]no action yet — u c r s run the chain, p checks, ? help[/]", id="action-head")
        yield Static("", id="action-nodes")
        yield Log(max_lines=OUTPUT_KEEP, auto_scroll=True)

    def begin(self, name: str) -> None:
        """A new action starts: forget the previous one's rows and output."""
        self.action, self.state, self.last_message = name, "running", ""
        self.nodes = {}
        self._run += 1
        self.query_one(Log).clear()
        self.add_class("-active")
        self._refresh_view()

    def add_event(self, ev: ActionEvent) -> None:
        if ev.action != self.action:
            self.begin(ev.action)
        msg = shown(ev.message, lines=True)  # made so at the source too (ActionEvent): the one rule
        if ev.node and ev.status:
            self.nodes[ev.node] = (ev.status, msg if ev.kind != "node" else "")
        if ev.kind == "output":
            prefix = f"[{ev.node}] " if ev.node else ""
            self.query_one(Log).write_lines([prefix + line for line in msg.splitlines() or [""]])
            if ev.node and ev.node in self.nodes:
                st, _ = self.nodes[ev.node]
                self.nodes[ev.node] = (st, msg.splitlines()[-1] if msg else "")
        elif ev.kind in ("step", "warn", "start"):
            self.last_message = msg
            if ev.kind != "start":
                self.query_one(Log).write_line(f"{'! ' if ev.kind == 'warn' else '» '}{msg}")
        elif ev.kind in ("done", "fail", "skip"):
            self.state = {"done": "done", "fail": "failed", "skip": "skipped"}[ev.kind]
            self.last_message = msg
            self.query_one(Log).write_line(f"{ev.kind}: {msg}")
        self._refresh_view()

    def finish(self, ok: bool | None, message: str = "") -> None:
        """The worker ended; an exception or cancellation may not have sent an event."""
        if self.state == "running":
            self.state = "cancelled" if ok is None else ("done" if ok else "failed")
            if message:  # an exception's text may quote a node or a peer: the one rule
                self.last_message = shown(message, lines=True)
                self.query_one(Log).write_line(self.last_message)
        self._refresh_view()
        run = self._run
        delay = self.CLOSE_OK_S if self.state in ("done", "skipped") else self.CLOSE_FAILED_S
        call_after(self, delay, lambda: self._close(run))  # not set_timer: see tui/oneshot.py

    def _close(self, run: int) -> None:
        if run == self._run and self.state != "running":
            self.remove_class("-active")

    def _refresh_view(self) -> None:
        st_style = {"running": "$text-primary", "done": "$text-success", "failed": "$text-error",
                    "skipped": "$text-muted", "cancelled": "$text-warning"}.get(self.state, "$text-muted")
        # Content pieces, not markup: messages carry what nodes printed, and escaping
        # markup is not enough (a trailing backslash escapes the closing tag).
        head = Content.assemble((self.action or "", "bold"), " ", (self.state, st_style),
                                "  " + self.last_message if self.last_message else "")
        self.query_one("#action-head", Static).update(head)
        rows: list[Content | str | tuple[str, str]] = []
        for n, (s, m) in self.nodes.items():
            if rows:
                rows.append("\n")
            rows += [f"{n:<10} ", STATUS_MARK.get(s, (s, "")), " ", (m, "dim")]
        self.query_one("#action-nodes", Static).update(Content.assemble(*rows))
        self.border_title = f"Action · {self.action}" if self.action else "Action"
