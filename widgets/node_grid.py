"""Nodes x cards: the part of the screen an operator looks at most.

One row per node (name, address, reachable, container state, Ray node state) and one
small `CardCell` widget per card. Each cell redraws only itself when its card changes, at
the probe rate (1-2 Hz); a DataTable would re-render every visible row per update (~40 ms
a frame for 32x10, measured), which does not scale to 64 nodes x 8 cards.

Colours come from CSS classes on the cells (`-load-*`, `-hot`, `-memfull`, `-unparsed`,
`-down`) styled with theme variables in the widget's DEFAULT_CSS, so every Textual theme
works.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.color import Color
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import Static

from tui.core.state import ClusterState, GpuCard, NodeState, RayNodeState

HOT_C = 85.0
"""Temperature from which a card is flagged hot."""
MEM_FULL_PCT = 95.0
"""Memory use from which a card is flagged nearly full (an OOM is next)."""
HISTORY = 60
"""Samples of utilisation kept per card for its sparkline (a minute or two)."""

SPARK_BARS = "▁▂▃▄▅▆▇█"
LOAD_CLASSES = ("-load-idle", "-load-low", "-load-mid", "-load-high")
TROUBLE_CLASSES = ("-hot", "-memfull", "-unparsed", "-down", "-na")


def load_class(util: float | None) -> str:
    """Bucket utilisation so a glance tells idle from busy: idle < 10 <= low < 50 <= mid
    < 85 <= high."""
    if util is None or util < 10:
        return "-load-idle"
    if util < 50:
        return "-load-low"
    if util < 85:
        return "-load-mid"
    return "-load-high"


def card_trouble(card: GpuCard | None, node_down: bool, unparsed: bool) -> list[str]:
    """The trouble classes of one card, worst first."""
    if node_down:
        return ["-down"]
    if unparsed:
        return ["-unparsed"]
    if card is None:
        return ["-na"]
    out: list[str] = []
    if card.temp_c is not None and card.temp_c >= HOT_C:
        out.append("-hot")
    if mem_pct(card) is not None and (mem_pct(card) or 0) >= MEM_FULL_PCT:
        out.append("-memfull")
    return out


def mem_pct(card: GpuCard) -> float | None:
    if card.mem_used_mib is None or not card.mem_total_mib:
        return None
    return 100.0 * card.mem_used_mib / card.mem_total_mib


def _gib(mib: float | None) -> str:
    return "?" if mib is None else f"{mib / 1024:.0f}"


def _fit(parts: Iterable[str], width: int) -> str:
    """Join the parts that fit in `width`, most important first: a narrow cell drops
    power before it drops utilisation."""
    out = ""
    for p in parts:
        cand = f"{out} {p}" if out else p
        if len(cand) > width:
            break
        out = cand
    return out


class CardCell(Widget):
    """One card: utilisation, power; memory used/total, temperature; a sparkline of
    utilisation. Three lines, or two (no sparkline) when the screen is narrow.

    Load and trouble colours are component classes painted in `render`, not CSS classes
    toggled on the widget: changing a widget's classes re-applies the stylesheet to it
    (~10 ms each, measured), which at 512 cards and 1-2 Hz would eat the event loop; a
    repaint of one 11x3 cell costs microseconds.
    """

    COMPONENT_CLASSES = {
        "cardcell--load-idle", "cardcell--load-low", "cardcell--load-mid", "cardcell--load-high",
        "cardcell--hot", "cardcell--memfull", "cardcell--unparsed", "cardcell--down", "cardcell--na",
        "cardcell--spark-min", "cardcell--spark-max", "cardcell--alarm",
    }

    DEFAULT_CSS = """
    CardCell { width: 11; height: 3; margin-right: 1; background: $boost; color: $text; }
    CardCell > .cardcell--load-idle { background: $boost; }
    CardCell > .cardcell--load-low { background: $primary 12%; }
    CardCell > .cardcell--load-mid { background: $primary 25%; }
    CardCell > .cardcell--load-high { background: $primary 40%; }
    CardCell > .cardcell--hot, CardCell > .cardcell--memfull { background: $warning-muted; }
    CardCell > .cardcell--unparsed { background: $error-muted; }
    CardCell > .cardcell--down { background: $error-muted; color: $text-muted; }
    CardCell > .cardcell--na { background: $boost; color: $text-muted; }
    CardCell > .cardcell--spark-min { color: $primary 40%; }
    CardCell > .cardcell--spark-max { color: $primary; }
    CardCell > .cardcell--alarm { color: $text-warning; text-style: bold; }
    """

    def __init__(self, index: int, **kw) -> None:
        super().__init__(**kw)
        self.index = index
        self.card: GpuCard | None = None
        self.node_down = False
        self.unparsed = False
        self.history: deque[float] = deque(maxlen=HISTORY)

    @property
    def flags(self) -> list[str]:
        """Load bucket and trouble of this card, e.g. ["-load-high", "-hot"] (the
        component class suffixes that colour it)."""
        trouble = card_trouble(self.card, self.node_down, self.unparsed)
        if self.node_down or self.card is None:
            return trouble
        return [load_class(self.card.util_pct)] + trouble

    def set_card(self, card: GpuCard | None, node_down: bool = False, unparsed: bool = False) -> None:
        """Take a new sample and repaint this cell only."""
        self.card, self.node_down, self.unparsed = card, node_down, unparsed
        if card is not None and card.util_pct is not None and not node_down:
            self.history.append(card.util_pct)
        self.refresh()

    def render(self) -> RenderResult:
        w = max(1, self.size.width)
        h = self.size.height
        flags = self.flags
        # Trouble colours win over load colours: the worst thing is what shows.
        kind = next((f for f in flags if f in TROUBLE_CLASSES), flags[0] if flags else "-na")
        base = self.get_component_rich_style(f"cardcell-{kind}")
        alarm = self.get_component_rich_style("cardcell--alarm", partial=True)
        c = self.card
        if self.node_down:
            lines = [Text(_fit([f"{self.index}", "down"], w)), Text("—")]
        elif self.unparsed and c is None:
            lines = [Text(_fit([f"{self.index}", "??"], w)), Text("unparsed"[:w])]
        elif c is None:
            lines = [Text(_fit([f"{self.index}", "—"], w)), Text("")]
        else:
            util = "?%" if c.util_pct is None else f"{c.util_pct:.0f}%"
            power = "?W" if c.power_w is None else f"{c.power_w:.0f}W"
            temp = "?°" if c.temp_c is None else f"{c.temp_c:.0f}°"
            mem = f"{_gib(c.mem_used_mib)}/{_gib(c.mem_total_mib)}G"
            l1 = Text(_fit([f"{self.index}", f"{util:>4}", power], w))
            l2 = Text()
            pct = mem_pct(c)
            l2.append(mem, alarm if pct is not None and pct >= MEM_FULL_PCT else "")
            t_style = alarm if c.temp_c is not None and c.temp_c >= HOT_C else ""
            if len(mem) + 1 + len(temp) > w:
                mem = f"{_gib(c.mem_used_mib)}G"  # narrow: used only, keep the temperature
            l2 = Text()
            l2.append(mem, alarm if pct is not None and pct >= MEM_FULL_PCT else "")
            if len(mem) + 1 + len(temp) <= w:
                l2.append(" " * (w - len(mem) - len(temp)))
                l2.append(temp, t_style)
            lines = [l1, l2]
        if h >= 3 and not self.node_down:
            lines.append(self._spark(w, base))
        out = Text()
        for i, line in enumerate(lines[:max(1, h)]):
            line.truncate(w, pad=True)
            if i:
                out.append("\n")
            out.append_text(line)
        out.stylize_before(base)
        return out

    def _spark(self, width: int, base: Style) -> Text:
        """Utilisation history on a fixed 0-100 scale. Textual's Sparkline rescales to the
        data's own min..max, which would draw a card steady at 99% like an idle one; here
        the bar height is the utilisation itself, coloured min->max like Sparkline."""
        bg = Color.from_rich_color(base.bgcolor) if base.bgcolor else self.background_colors[1]
        lo = bg + self.get_component_styles("cardcell--spark-min").color
        hi = bg + self.get_component_styles("cardcell--spark-max").color
        data = list(self.history)[-width:]
        text = Text(" " * (width - len(data)))
        for v in data:
            f = min(1.0, max(0.0, v / 100.0))
            text.append(SPARK_BARS[min(7, int(f * 8))], Style(color=lo.blend(hi, f).rich_color))
        return text


class NodeHeader(Static):
    """The node's one-line identity and health."""

    DEFAULT_CSS = """
    NodeHeader { height: 1; width: 1fr; }
    """


class NodeRow(Vertical):
    """One node: its header line, then its cards side by side."""

    DEFAULT_CSS = """
    NodeRow { height: auto; width: 1fr; }
    NodeRow > Horizontal { height: auto; width: 1fr; }
    NodeRow.-down NodeHeader { background: $error-muted; }
    """

    def __init__(self, name: str, cards: int, **kw) -> None:
        super().__init__(**kw)
        self.node_name = name
        self._ncards = cards
        self._header = ""

    def compose(self) -> ComposeResult:
        yield NodeHeader(escape(self.node_name))
        with Horizontal():
            for j in range(self._ncards):
                yield CardCell(j)

    def update_node(self, node: NodeState, ray: RayNodeState | None, ray_available: bool) -> None:
        down = not node.reachable
        self.set_class(down, "-down")
        markup = node_header_markup(node, ray, ray_available)
        if markup != self._header:  # an unchanged header must not cost a layout pass
            self._header = markup
            self.query_one(NodeHeader).update(markup)
        cells = list(self.query(CardCell))
        cards = {c.index: c for c in node.gpus}
        unparsed = bool(node.gpu is not None and not node.gpu.parsed)
        want = max([len(cells)] + [i + 1 for i in cards])
        if want > len(cells):
            strip = self.query_one(Horizontal)
            new = [CardCell(j) for j in range(len(cells), want)]
            strip.mount_all(new)
            cells.extend(new)
        for cell in cells:
            cell.set_card(cards.get(cell.index), node_down=down, unparsed=unparsed)


def node_header_markup(node: NodeState, ray: RayNodeState | None, ray_available: bool) -> str:
    """Name, address, reachability, container and Ray state, coloured by health."""
    dot = "[$text-success]●[/]" if node.reachable else "[$text-error]●[/]"
    role = " [dim]head[/]" if node.role == "head" else ""
    parts = [f"{dot} [b]{escape(node.name)}[/]{role} [dim]{escape(node.address)}[/]"]
    if not node.reachable:
        parts.append(f"[$text-error]DOWN[/] [dim]{escape(node.error or '')}[/]")
    ctr = node.container.status if node.container else "unknown"
    ctr_style = {"running": "$text-success", "unknown": "$text-muted"}.get(ctr, "$text-warning")
    parts.append(f"ctr [{ctr_style}]{escape(ctr)}[/]")
    if ray is not None:
        parts.append("ray [$text-success]alive[/]" if ray.alive else "ray [$text-error]dead[/]")
    else:
        parts.append("ray [$text-muted]—[/]" if not ray_available else "ray [$text-warning]absent[/]")
    if node.gpu is not None and not node.gpu.parsed:
        parts.append(f"[$text-error]cards unparsed[/] [dim]{escape(node.gpu.error or '')}[/]")
    return "  ".join(parts)


class NodeGrid(VerticalScroll):
    """All nodes; scrolls when they do not fit (64 nodes x 8 cards)."""

    DEFAULT_CSS = """
    NodeGrid { height: auto; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._rows: dict[str, NodeRow] = {}

    async def update_state(self, state: ClusterState) -> None:
        """Apply one probe round. New nodes are mounted in one batch; existing rows update
        in place, so scrolling position and focus survive."""
        new_rows: list[NodeRow] = []
        for node in state.nodes:
            if node.name not in self._rows:
                row = NodeRow(node.name, len(node.gpus) or 0)
                self._rows[node.name] = row
                new_rows.append(row)
        if new_rows:
            await self.mount_all(new_rows)
        self._apply(state)
        up = sum(1 for n in state.nodes if n.reachable)
        cards = sum(len(n.gpus) for n in state.nodes)
        title = f"Nodes {up}/{len(state.nodes)} up · {cards} cards"
        r = state.ray
        # Ray's own count is repeated here: on a narrow screen the Ray pane is hidden.
        title += (f" · Ray {r.nodes_alive}/{len(state.nodes)} nodes, {r.gpus_used:.0f}/{r.gpus_total:.0f} GPUs"
                  if r.available else " · Ray down")
        self.border_title = title

    def _apply(self, state: ClusterState) -> None:
        by_addr = {r.address: r for r in state.ray.nodes}
        for node in state.nodes:
            row = self._rows.get(node.name)
            if row is not None and row.is_mounted:
                row.update_node(node, by_addr.get(node.address), state.ray.available)
