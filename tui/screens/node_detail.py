"""Enter (or a click) on a node or a card: what is behind the grid's numbers.

The container's state, exit code and OOM flag (from `docker inspect`), the Ray node's id
and its last error (Ray's state_message), and per card: utilisation, memory, temperature,
power, the utilisation history the grid keeps, and the processes on the card with their
memory. It follows the live state (re-read every second from the main screen), so a card
that fills up or a container that dies shows here as it happens.

Everything a node sent is drawn as Rich `Text`, never markup, and through the one rule for
outside text (`shown`: its control characters made visible, never sent to the terminal).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static

from tui.core.safetext import shown
from tui.core.state import ClusterState, ContainerState, GpuCard, NodeState, RayNodeState

if TYPE_CHECKING:
    from widgets.node_grid import NodeRow

SPARK = "▁▂▃▄▅▆▇█"
REFRESH_S = 1.0


_ISO = re.compile(r"^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:?\d\d)?$")


def fmt_started(at: str) -> str:
    """Docker's start time to the second (`2026-12-06T02:27:37.123456789Z` ->
    `2026-12-06 02:27:37 UTC`): nanoseconds are noise here. Anything else as it is."""
    m = _ISO.match(at.strip())
    if m is None:
        return at
    zone = m[3] or ""
    return f"{m[1]} {m[2]}" + (" UTC" if zone in ("Z", "+00:00", "+0000") else f" {zone}" if zone else "")


def _spark(values: Iterable[float], width: int) -> str:
    """Utilisation on a fixed 0-100 scale (as the grid draws it)."""
    vals = list(values)[-width:]
    return "".join(SPARK[min(len(SPARK) - 1, int(max(0.0, min(100.0, v)) / 100 * len(SPARK)))] for v in vals)


def _num(v: float | None, fmt: str, unit: str = "") -> str:
    return "?" if v is None else f"{v:{fmt}}{unit}"


def _header_part(t: Text, node: NodeState) -> None:
    t.append(node.name, style="bold")
    t.append(f"  {node.address}  {node.role}  ")
    t.append("reachable" if node.reachable else "DOWN", style="green" if node.reachable else "bold red")
    if node.error:
        t.append(f"  {shown(node.error)}", style="red")
    t.append("\n\n")


def _container_part(t: Text, c: ContainerState | None) -> None:
    t.append("Container  ", style="bold")
    if c is None:
        t.append("not inspected\n", style="dim")
        return
    t.append(f"{shown(c.name)}  ")
    t.append(shown(c.status), style="green" if c.status == "running" else "yellow")
    if c.image:
        t.append(f"  image {shown(c.image)}", style="dim")
    if c.started_at:
        t.append(f"  started {shown(fmt_started(c.started_at))}", style="dim")
    t.append("\n           exit code ")
    t.append("—" if c.exit_code is None else str(c.exit_code),
             style="bold red" if c.exit_code not in (None, 0) else "")
    t.append("  OOM killed ")
    t.append({None: "—", True: "YES", False: "no"}[c.oom_killed],
             style="bold red" if c.oom_killed else "")
    if c.error:
        t.append(f"  error: {shown(c.error)}", style="red")
    t.append("\n")


def _ray_part(t: Text, ray: RayNodeState | None, ray_available: bool) -> None:
    t.append("Ray node   ", style="bold")
    if ray is None:
        t.append("Ray not answering\n" if not ray_available else "not in the Ray cluster\n",
                 style="dim" if not ray_available else "yellow")
        return
    t.append(shown(ray.node_id or "?"))
    t.append("  ")
    t.append("ALIVE" if ray.alive else "DEAD", style="green" if ray.alive else "bold red")
    t.append(f"  GPUs {ray.gpus_used:.0f}/{ray.gpus_total:.0f}{'  head' if ray.is_head else ''}")
    t.append("\n           last error ")
    t.append(shown(ray.error or "—"), style="red" if ray.error else "dim")
    t.append("\n")


def _card_part(t: Text, g: GpuCard, marked: bool, hist: list[float], spark_width: int) -> None:
    t.append(f"{'▶' if marked else ' '} card {g.index:<2} ", style="bold" if marked else "")
    t.append(f"util {_num(g.util_pct, '>3.0f', '%')}  "
             f"mem {_num(None if g.mem_used_mib is None else g.mem_used_mib / 1024, '.1f')}"
             f"/{_num(None if g.mem_total_mib is None else g.mem_total_mib / 1024, '.0f')} GiB  "
             f"{_num(g.temp_c, '.0f', '°C')}  {_num(g.power_w, '.0f', 'W')}")
    if g.name:
        t.append(f"  {shown(g.name)}", style="dim")
    t.append("\n         history ")
    t.append(_spark(hist, spark_width) or "—", style="cyan")
    t.append(f"  ({len(hist)} samples)\n", style="dim")
    if not g.processes:
        t.append("         no processes\n", style="dim")
    for p in g.processes:
        mem = _num(None if p.mem_used_mib is None else p.mem_used_mib, '.0f', ' MiB')
        t.append(f"         pid {p.pid:<8} {mem:>10}  ")
        t.append(shown(p.name or "?"))
        t.append("\n")


def node_detail_text(node: NodeState, ray: RayNodeState | None, ray_available: bool,
                     history: dict[int, list[float]], card: int | None = None,
                     spark_width: int = 40) -> Text:
    """The whole detail as one Text (also what tests read). `card` puts that card first
    and marks it."""
    t = Text()
    _header_part(t, node)
    _container_part(t, node.container)
    _ray_part(t, ray, ray_available)
    t.append("\n")
    gpu = node.gpu
    if gpu is not None:
        t.append(f"Cards ({shown(gpu.tool)}{', simulated telemetry' if gpu.simulated else ''}"
                 f"{', driver ' + shown(gpu.driver_version) if gpu.driver_version else ''})\n", style="bold")
        if not gpu.parsed:
            t.append(f"  unparsed: {shown(gpu.error or '')}\n", style="red")
    cards: list[GpuCard] = sorted(node.gpus, key=lambda g: (g.index != card, g.index))
    if not cards:
        t.append("  no card data\n", style="dim")
    for g in cards:
        _card_part(t, g, g.index == card, history.get(g.index, []), spark_width)
    return t


class NodeDetailScreen(Screen[None]):
    """One node, or one card of it, in full. Esc or q goes back."""

    DEFAULT_CSS = """
    NodeDetailScreen > VerticalScroll { border-top: hkey $primary 50%; border-title-color: $text-primary; padding: 0 1; }
    NodeDetailScreen #detail-keys { dock: bottom; height: 1; background: $footer-background; color: $footer-foreground; }
    """
    BINDINGS = [Binding("escape,q,enter", "close", "Back")]

    def __init__(self, node: str, card: int | None = None) -> None:
        super().__init__()
        self.node_name = node
        self.card = card
        self._seen: object = None

    def compose(self) -> ComposeResult:
        with VerticalScroll() as vs:
            vs.border_title = f"{self.node_name}" + (f" · card {self.card}" if self.card is not None else "")
            yield Static(id="detail-text")
        yield Static(Text.assemble((" Esc ", "bold"), "back  ", (" ↑↓ ", "bold"), "scroll"), id="detail-keys")

    def on_mount(self) -> None:
        self._refresh()
        self.set_interval(REFRESH_S, self._refresh)

    def _sources(self) -> tuple[ClusterState | None, NodeRow | None]:
        main = getattr(self.app, "main_screen", None)
        state = getattr(main, "state", None)
        row = None
        if main is not None:
            from widgets.node_grid import NodeGrid

            try:
                row = main.query_one(NodeGrid).rows.get(self.node_name)
            except NoMatches:  # main screen not composed (cannot happen once shown)
                row = None
        return state, row

    def _refresh(self) -> None:
        state, row = self._sources()
        hist = {c.index: list(c.history) for c in row.cells} if row is not None else {}
        key = (id(state), tuple((k, len(v), v[-1] if v else None) for k, v in hist.items()))
        if key == self._seen:
            return
        self._seen = key
        node = next((n for n in state.nodes if n.name == self.node_name), None) if state else None
        out = self.query_one("#detail-text", Static)
        if node is None:
            out.update(Text(f"{self.node_name}: no data yet", style="dim"))
            return
        ray = state.ray.node_at(node.address) if state else None
        out.update(node_detail_text(node, ray, bool(state and state.ray.available), hist, self.card,
                                    spark_width=max(10, min(60, self.size.width - 30))))

    def action_close(self) -> None:
        self.dismiss(None)
