"""Nodes x cards: the part of the screen an operator looks at most.

One block per node: a header line (name, address, reachable, container state, Ray node
state) and its cards side by side, each showing utilisation, power, memory used/total,
temperature and a utilisation sparkline, coloured by load and by trouble.

The whole grid is ONE Line-API widget (`ScrollView` + `render_line`), not a widget per
card. Mounting ~700 widgets for 64 x 8 cost ~11 s to the first frame and pushed a
keypress to 0.5-2 s (BENCHMARKS.md, before): every widget pays for stylesheet
application, layout and compositing even when off screen. Here a node is a plain
`NodeRow` model; a probe round updates the models (microseconds), and only blocks whose
rendered content changed *and* are visible get repainted, from strips cached per node.
Scrolling 64 x 8 draws only the lines in view.

Colours are component classes (`nodegrid--load-*`, `--hot`, `--memfull`, `--unparsed`,
`--down`, ...) styled with theme variables in DEFAULT_CSS, so every Textual theme works;
the caches are dropped when the theme (stylesheet) changes.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from itertools import islice
from typing import Hashable, Iterable, Iterator

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.color import Color
from textual.events import Click, Resize
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from tui.core.safetext import shown
from tui.core.state import CardLimits, ClusterState, GpuCard, NodeState, RayNodeState

HISTORY = 60
"""Samples of utilisation kept per card for its sparkline (a minute or two)."""

CELL_W = 11
"""Card width when there is room: "3  88% 412W" / "57/80G  71°" / sparkline."""
MIN_CELL_W = 8
"""Narrowest card that still shows utilisation and temperature (80-column screens)."""
GAP = 1
"""Columns between cards."""

SPARK_BARS = "▁▂▃▄▅▆▇█"
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


def fmt_age(s: float) -> str:
    """An age, coarse: "42 s", "5 min", "3 h"."""
    s = max(0, int(s))
    return f"{s} s" if s < 60 else f"{s // 60} min" if s < 3600 else f"{s // 3600} h"


def card_trouble(card: GpuCard | None, node_down: bool, unparsed: bool, limits: CardLimits) -> list[str]:
    """The trouble classes of one card, worst first: a down node hides everything else,
    because its last numbers are stale and must not look current. Hot and memory-full
    are the profile's thresholds (`limits`), the same the alerts apply."""
    if node_down:
        return ["-down"]
    if unparsed:
        return ["-unparsed"]
    if card is None:
        return ["-na"]
    out: list[str] = []
    if limits.is_hot(card):
        out.append("-hot")
    if limits.mem_full(card):
        out.append("-memfull")
    return out


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


# --------------------------------------------------------------------------- models


class CardCell:
    """One card's data and history (a model, not a widget: see the module docstring).

    `flags` are the component-class suffixes that colour it, e.g. ["-load-high", "-hot"].
    """

    __slots__ = ("index", "card", "node_down", "unparsed", "history", "limits")

    def __init__(self, index: int, limits: CardLimits | None = None) -> None:
        self.index = index
        self.limits = limits or CardLimits()
        self.card: GpuCard | None = None
        self.node_down = False
        self.unparsed = False
        self.history: deque[float] = deque(maxlen=HISTORY)

    @property
    def flags(self) -> list[str]:
        """Load bucket and trouble of this card, e.g. ["-load-high", "-hot"]."""
        trouble = card_trouble(self.card, self.node_down, self.unparsed, self.limits)
        if self.node_down or self.card is None:
            return trouble
        return [load_class(self.card.util_pct)] + trouble

    @property
    def kind(self) -> str:
        """The one colour the cell gets: trouble wins over load, the worst thing shows."""
        flags = self.flags
        return next((f for f in flags if f in TROUBLE_CLASSES), flags[0] if flags else "-na")

    def set_card(self, card: GpuCard | None, node_down: bool = False, unparsed: bool = False) -> None:
        """Take a new sample (one per probe round; the sparkline's x axis is rounds)."""
        self.card, self.node_down, self.unparsed = card, node_down, unparsed
        if card is not None and card.util_pct is not None and not node_down:
            self.history.append(card.util_pct)

    def signature(self, spark: int) -> Hashable:
        """Everything the cell's pixels depend on, to skip repainting an unchanged node."""
        c = self.card
        vals = None if c is None else (c.util_pct, c.mem_used_mib, c.mem_total_mib, c.temp_c, c.power_w)
        return (vals, self.node_down, self.unparsed, tuple(islice(reversed(self.history), spark)))


@dataclass(frozen=True)
class HeaderInfo:
    """What a node's header line shows; compared to skip repaints."""

    name: str
    address: str
    head: bool
    reachable: bool
    error: str
    container: str
    ray: str  # alive | dead | absent | none (Ray itself not answering)
    unparsed_error: str | None
    stale_age: str = ""  # a down node: container and Ray are last known, this old


class NodeRow:
    """One node: header data, its cards, and its rendered strips (cached until its data
    or the grid's layout changes)."""

    def __init__(self, name: str, cards: int = 0, pos: int = 0, limits: CardLimits | None = None) -> None:
        self.node_name = name
        self.pos = pos  # block index in the grid: the node's lines start at pos * block_h
        self.header: HeaderInfo | None = None
        self.limits = limits or CardLimits()
        self.cells: list[CardCell] = [CardCell(j, self.limits) for j in range(cards)]
        self.down = False
        self.strips: list[Strip] | None = None
        self._sig: Hashable = None

    def update(self, node: NodeState, ray: RayNodeState | None, ray_available: bool, spark: int) -> bool:
        """Apply one probe round. Returns True when what the node looks like changed."""
        self.down = not node.reachable
        # the error, the container's state and the card tool's error are the node's (or the
        # SSH peer's) words: drawn as segments straight to the terminal, so through the one rule
        self.header = HeaderInfo(
            name=node.name, address=node.address, head=node.role == "head", reachable=node.reachable,
            error=shown(node.error or ""), container=shown(node.container.status) if node.container else "unknown",
            ray=("alive" if ray.alive else "dead") if ray is not None else ("absent" if ray_available else "none"),
            unparsed_error=shown(node.gpu.error or "") if node.gpu is not None and not node.gpu.parsed else None,
            stale_age=fmt_age(time.time() - node.stale_since) if not node.reachable and node.stale_since else "")
        cards = {c.index: c for c in node.gpus}
        unparsed = bool(node.gpu is not None and not node.gpu.parsed)
        want = max([len(self.cells)] + [i + 1 for i in cards])
        self.cells.extend(CardCell(j, self.limits) for j in range(len(self.cells), want))
        for cell in self.cells:
            cell.set_card(cards.get(cell.index), node_down=self.down, unparsed=unparsed)
        sig = (self.header, tuple(c.signature(spark) for c in self.cells))
        if sig == self._sig:
            return False
        self._sig = sig
        self.strips = None
        return True


@dataclass(frozen=True)
class GridLayout:
    """Card geometry for one width: computed on resize, shared by every node."""

    width: int
    cell_w: int
    cell_h: int  # 3 lines with a sparkline, 2 when compact
    per_line: int  # cards side by side (wraps when a node has more)
    block_h: int  # header + card lines (1 when dense)
    dense: bool = False

    @classmethod
    def dense_for(cls, width: int, cards: int) -> GridLayout:
        """One line per node: the header shortened and each card's utilisation."""
        return cls(width, 0, 0, max(1, cards), 1, dense=True)

    @classmethod
    def for_width(cls, width: int, cards: int) -> GridLayout:
        """Full-size cards when they all fit; narrower two-line cards otherwise (80
        columns); wrap onto more lines only when even those do not fit."""
        cards = max(1, cards)
        if width <= 0:  # not laid out yet: assume room, the resize fixes it
            return cls(width, CELL_W, 3, cards, 4)
        cell_w = max(MIN_CELL_W, min(CELL_W, (width + GAP) // cards - GAP))
        cell_h = 3 if cell_w >= CELL_W else 2
        per_line = max(1, min(cards, (width + GAP) // (cell_w + GAP)))
        rows = -(-cards // per_line)
        return cls(width, cell_w, cell_h, per_line, 1 + rows * cell_h)


# --------------------------------------------------------------------------- widget


class NodeGrid(ScrollView, can_focus=True):
    """All nodes, one block each; scrolls when they do not fit (64 nodes x 8 cards).

    A cursor picks a node (up/down while focused, its name drawn reversed); Enter or a
    click posts `Selected` (a click on a card names the card) for the drill-down."""

    BINDINGS = [Binding("up,k", "cursor(-1)", show=False), Binding("down,j", "cursor(1)", show=False),
                Binding("enter", "select", show=False)]

    class Selected(Message):
        """A node (and maybe one of its cards) was picked for its detail screen."""

        def __init__(self, node: str, card: int | None = None) -> None:
            super().__init__()
            self.node = node
            self.card = card

    COMPONENT_CLASSES = {
        "nodegrid--load-idle", "nodegrid--load-low", "nodegrid--load-mid", "nodegrid--load-high",
        "nodegrid--hot", "nodegrid--memfull", "nodegrid--unparsed", "nodegrid--down", "nodegrid--na",
        "nodegrid--spark-min", "nodegrid--spark-max", "nodegrid--alarm",
        "nodegrid--ok", "nodegrid--bad", "nodegrid--warn", "nodegrid--muted", "nodegrid--name",
        "nodegrid--down-header",
    }

    DEFAULT_CSS = """
    NodeGrid {
        height: auto; overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1;
    }
    NodeGrid > .nodegrid--load-idle { background: $boost; }
    NodeGrid > .nodegrid--load-low { background: $primary 12%; }
    NodeGrid > .nodegrid--load-mid { background: $primary 25%; }
    NodeGrid > .nodegrid--load-high { background: $primary 40%; }
    NodeGrid > .nodegrid--hot, NodeGrid > .nodegrid--memfull { background: $warning-muted; }
    NodeGrid > .nodegrid--unparsed { background: $error-muted; }
    NodeGrid > .nodegrid--down { background: $error-muted; color: $text-muted; }
    NodeGrid > .nodegrid--na { background: $boost; color: $text-muted; }
    NodeGrid > .nodegrid--spark-min { color: $primary 40%; }
    NodeGrid > .nodegrid--spark-max { color: $primary; }
    NodeGrid > .nodegrid--alarm { color: $text-warning; text-style: bold; }
    NodeGrid > .nodegrid--ok { color: $text-success; }
    NodeGrid > .nodegrid--bad { color: $text-error; }
    NodeGrid > .nodegrid--warn { color: $text-warning; }
    NodeGrid > .nodegrid--muted { color: $text-muted; }
    NodeGrid > .nodegrid--name { text-style: bold; }
    NodeGrid > .nodegrid--down-header { background: $error-muted; }
    """

    def __init__(self, limits: CardLimits | None = None, **kw) -> None:
        super().__init__(**kw)
        self.limits = limits or CardLimits()
        """When a card is drawn hot or memory-full: the profile's rule, as the alerts'."""
        self.rows: dict[str, NodeRow] = {}
        self._order: list[NodeRow] = []
        self._layout = GridLayout.for_width(0, 8)
        self._styles: dict[str, Style] = {}
        self._spark_styles: dict[str, list[Style]] = {}
        self.cursor = 0
        self.dense_forced: bool | None = None
        """None: dense when the full grid does not fit (automatic); True/False: the `d` key."""

    # ------------------------------------------------------------------ data in
    async def update_state(self, state: ClusterState) -> None:
        """Apply one probe round: update the node models, repaint only the visible nodes
        whose look changed. New nodes are appended, so scrolling position and focus
        survive. (Async for the screen's `await`; nothing here awaits.)"""
        grew = False
        for node in state.nodes:
            if node.name not in self.rows:
                row = NodeRow(node.name, len(node.gpus), pos=len(self._order), limits=self.limits)
                self.rows[node.name] = row
                self._order.append(row)
                grew = True
        by_addr = state.ray.by_address()
        spark = self._layout.cell_w
        changed: list[int] = []
        for node in state.nodes:
            row = self.rows[node.name]
            before = len(row.cells)
            if row.update(node, by_addr.get(node.address), state.ray.available, spark):
                changed.append(row.pos)
            grew = grew or len(row.cells) != before
        if grew:
            self._relayout()
        else:
            for i in changed:
                self._refresh_block(i)
        up = sum(1 for n in state.nodes if n.reachable)
        cards = sum(len(n.gpus) for n in state.nodes)
        title = f"Nodes {up}/{len(state.nodes)} up · {cards} cards"
        r = state.ray
        # Ray's own count is repeated here: on a narrow screen the Ray pane is hidden.
        title += (f" · Ray {r.nodes_alive}/{len(state.nodes)} nodes, {r.gpus_used:.0f}/{r.gpus_total:.0f} GPUs"
                  if r.available else " · Ray down")
        if title != self.border_title:
            self.border_title = title

    def row(self, name: str) -> NodeRow:
        """The model of node `name` (KeyError if it never reported)."""
        return self.rows[name]

    def cells(self) -> Iterator[CardCell]:
        """Every card of every node, in display order."""
        for row in self._order:
            yield from row.cells

    @property
    def card_count(self) -> int:
        return sum(len(r.cells) for r in self._order)

    # ------------------------------------------------------------------ geometry
    def _max_cards(self) -> int:
        return max((len(r.cells) for r in self._order), default=8)

    def _card_width(self) -> int:
        """Columns for cards: the scrollbar's column is always kept free, so that the
        scrollbar appearing (64 nodes) neither covers a card nor changes the layout
        (which could flip it back off: `scrollbar-gutter: stable` would do the same but
        adds a blank row to an auto-height widget)."""
        return max(0, self.size.width - self.styles.scrollbar_size_vertical)

    # ------------------------------------------------------------------ selection
    @property
    def cursor_node(self) -> str | None:
        """The node under the cursor (None before the first probe round)."""
        return self._order[self.cursor].node_name if 0 <= self.cursor < len(self._order) else None

    def _move_cursor(self, to: int) -> None:
        if not self._order:
            return
        old, self.cursor = self.cursor, max(0, min(len(self._order) - 1, to))
        for i in {old, self.cursor}:
            if 0 <= i < len(self._order):
                self._order[i].strips = None
                self._refresh_block(i)
        h = self._layout.block_h
        self.scroll_to_region(Region(0, self.cursor * h, 1, h), animate=False)

    def action_cursor(self, delta: int) -> None:
        self._move_cursor(self.cursor + delta)

    def action_select(self) -> None:
        if self.cursor_node is not None:
            self.post_message(self.Selected(self.cursor_node))

    def hit(self, x: int, y: int) -> tuple[str, int | None] | None:
        """The node, and the card when (x, y) is on one, at a point in widget coordinates."""
        lay = self._layout
        block, line = divmod(self.scroll_offset.y + y, lay.block_h)
        if not 0 <= block < len(self._order):
            return None
        row = self._order[block]
        if lay.dense or line == 0:
            return row.node_name, None
        k, off = divmod(x, lay.cell_w + GAP)
        if off >= lay.cell_w or k >= lay.per_line:
            return row.node_name, None
        idx = ((line - 1) // lay.cell_h) * lay.per_line + k
        return row.node_name, (idx if idx < len(row.cells) else None)

    def on_click(self, event: Click) -> None:
        got = self.hit(event.x, event.y)
        if got is not None:
            self._move_cursor(self._order.index(self.rows[got[0]]))
            self.post_message(self.Selected(*got))

    def on_focus(self) -> None:
        self._move_cursor(self.cursor)

    def on_blur(self) -> None:
        self._move_cursor(self.cursor)

    def _name_style(self, row: NodeRow, base: Style) -> Style:
        st = base + self._style("name", partial=True)
        if self.has_focus and self._order and self._order[self.cursor] is row:
            st += Style(reverse=True)
        return st

    def _height_limit(self) -> int | None:
        """Lines the grid may take (its max-height, resolved; None when unbounded)."""
        mh = self.styles.max_height
        if mh is None or not self.is_attached:
            return None
        try:
            parent = self.parent.size if isinstance(self.parent, Widget) else self.app.size
            return max(1, int(mh.resolve(parent, self.app.size)) - self.styles.gutter.height)
        except Exception:  # noqa: BLE001 - unusual units: never let a layout question break the grid
            return None

    def _compute_layout(self) -> GridLayout:
        """The full layout, or the dense one when toggled on or when the full grid would
        need scrolling and the dense one would not (4 nodes at 80x24, 16 at 120x40)."""
        width, cards = self._card_width(), self._max_cards()
        full = GridLayout.for_width(width, cards)
        dense = self.dense_forced
        if dense is None:
            limit = self._height_limit()
            n = len(self._order)
            dense = limit is not None and n * full.block_h > limit
        return GridLayout.dense_for(width, cards) if dense else full

    @property
    def dense(self) -> bool:
        """Whether nodes are drawn one line each right now."""
        return self._layout.dense

    def toggle_dense(self) -> bool:
        """The `d` key: flip between the full and the dense grid (leaving automatic mode).
        Returns the new state."""
        self.dense_forced = not self.dense
        self._relayout()
        return self.dense

    def _relayout(self) -> None:
        """Recompute card geometry for the current width; drop every cached strip."""
        self._layout = self._compute_layout()
        for row in self._order:
            row.strips = None
        self.virtual_size = Size(self._card_width(), len(self._order) * self._layout.block_h)
        # An explicit height (max-height still caps it): with `height: auto` the stacked
        # containers above kept the height measured before the grid switched to dense.
        want = len(self._order) * self._layout.block_h + self.styles.gutter.height
        if self._order and self.styles.height != want:
            self.styles.height = want
        self.refresh(layout=True)

    def on_resize(self, event: Resize) -> None:
        # render_line may have adopted the new width already; the virtual size tells.
        if (self._card_width() != self._layout.width or self.virtual_size.width != self._layout.width
                or self._compute_layout() != self._layout):
            self._relayout()

    def notify_style_update(self) -> None:
        """A theme or stylesheet change: colours are baked into the cached strips."""
        super().notify_style_update()
        if hasattr(self, "_styles"):  # also called while the widget is being constructed
            self._styles.clear()
            self._spark_styles.clear()
        for row in getattr(self, "_order", ()):
            row.strips = None

    def _refresh_block(self, i: int) -> None:
        """Repaint node `i`'s lines if any are on screen (off-screen ones repaint, from
        fresh data, when scrolled to)."""
        h = self._layout.block_h
        top = i * h - self.scroll_offset.y
        if top + h > 0 and top < self.size.height:
            self.refresh(Region(0, top, max(1, self.size.width), h))

    def block_text(self, name: str) -> list[str]:
        """The plain text of node `name`'s block as drawn now (for tests and debugging)."""
        row = self.rows[name]
        return [s.text for s in self._strips(row)]

    # ------------------------------------------------------------------ drawing
    def render_line(self, y: int) -> Strip:
        scroll_y = self.scroll_offset.y
        width = self.size.width
        if self._card_width() != self._layout.width:  # resized; the Resize event is yet to come
            self._layout = self._compute_layout()
            for row in self._order:
                row.strips = None
        base = self._base_style()
        block, line = divmod(scroll_y + y, self._layout.block_h)
        if block >= len(self._order):
            return Strip.blank(width, base)
        strips = self._strips(self._order[block])
        return strips[line] if line < len(strips) else Strip.blank(width, base)

    def _base_style(self) -> Style:
        """The widget's own style, cached: `Widget.rich_style` walks every ancestor's
        background on each call, which profiled as the grid's largest cost."""
        st = self._styles.get("")
        if st is None:
            st = self._styles[""] = self.rich_style
        return st

    def _style(self, name: str, partial: bool = False) -> Style:
        key = f"{name}{'~' if partial else ''}"
        st = self._styles.get(key)
        if st is None:
            st = self.get_component_rich_style(f"nodegrid--{name}", partial=partial)
            self._styles[key] = st
        return st

    def _strips(self, row: NodeRow) -> list[Strip]:
        if row.strips is None:
            row.strips = self._draw(row)
        return row.strips

    def _draw(self, row: NodeRow) -> list[Strip]:
        """Render one node block at the current layout: header, then card lines."""
        lay = self._layout
        width = max(1, self.size.width)
        base = self._base_style()
        if lay.dense:
            return [self._dense_strip(row, base, width)]
        out = [self._header_strip(row, base, width)]
        blank = Segment(" " * GAP, base)
        for start in range(0, max(1, len(row.cells)), lay.per_line):
            chunk = row.cells[start:start + lay.per_line]
            lines: list[list[Segment]] = [[] for _ in range(lay.cell_h)]
            for k, cell in enumerate(chunk):
                cell_lines = self._cell(cell, lay.cell_w, lay.cell_h)
                for i in range(lay.cell_h):
                    if k:
                        lines[i].append(blank)
                    lines[i].extend(cell_lines[i])
            used = max(0, len(chunk) * (lay.cell_w + GAP) - GAP)  # cards are exactly cell_w wide
            for segs in lines:  # one Strip per line at its known length: Strips are not free
                if used <= width:
                    if used < width:
                        segs.append(Segment(" " * (width - used), base))
                    out.append(Strip(segs, width))
                else:
                    out.append(Strip(segs, used).crop(0, width))
        return out

    def _header_strip(self, row: NodeRow, base: Style, width: int) -> Strip:
        """Name, address, reachability, container and Ray state, coloured by health."""
        h = row.header
        if h is None:
            return Strip([Segment(row.node_name, base)]).crop_extend(0, width, base)
        if not h.reachable:
            base = base + self._style("down-header", partial=False)
        ok, bad, warn, muted = (base + self._style(n, partial=True) for n in ("ok", "bad", "warn", "muted"))
        dim = base + Style(dim=True)
        segs = [Segment("●", ok if h.reachable else bad), Segment(" "),
                Segment(h.name, self._name_style(row, base))]
        if h.head:
            segs += [Segment(" "), Segment("head", dim)]
        segs += [Segment(" "), Segment(h.address, dim)]
        if not h.reachable:
            segs += [Segment("  "), Segment("DOWN", bad), Segment(" "), Segment(h.error, dim)]
        ctr_style = {"running": ok, "unknown": muted}.get(h.container, warn)
        if h.stale_age:
            ctr_style = muted  # last known values get no health colours
        segs += [Segment("  ctr "), Segment(h.container, ctr_style), Segment("  ray ")]
        segs.append({"alive": Segment("alive", ok), "dead": Segment("dead", bad),
                     "absent": Segment("absent", warn)}.get(h.ray, Segment("—", muted)))
        if h.stale_age:
            segs[-1] = Segment(segs[-1].text, muted)
            segs += [Segment(f" (last known, {h.stale_age} ago)", dim)]
        if h.unparsed_error is not None:
            segs += [Segment("  "), Segment("cards unparsed", bad), Segment(" "), Segment(h.unparsed_error, dim)]
        segs = [s if s.style is not None else Segment(s.text, base) for s in segs]
        return Strip(segs).crop_extend(0, width, base)

    def _dense_strip(self, row: NodeRow, base: Style, width: int) -> Strip:
        """A node on one line: dot, name, container and Ray in a word each, then every
        card's utilisation coloured like its full cell (load, hot, memory full, down)."""
        h = row.header
        name_w = max((len(r.node_name) for r in self._order), default=8)
        ok, bad, warn, muted = (base + self._style(n, partial=True) for n in ("ok", "bad", "warn", "muted"))
        segs: list[Segment] = []
        if h is None:
            segs.append(Segment(f"  {row.node_name:<{name_w}}", base))
        else:
            segs += [Segment("●", ok if h.reachable else bad), Segment(" "),
                     Segment(f"{h.name:<{name_w}}", self._name_style(row, base)), Segment(" ")]
            if not h.reachable:
                segs += [Segment("DOWN", bad), Segment(" ")]
            else:
                ctr = {"running": ("ctr", ok), "unknown": ("ctr?", muted)}.get(h.container, (f"ctr:{h.container}", warn))
                ray = {"alive": ("ray", ok), "dead": ("ray✗", bad), "absent": ("ray?", warn)}.get(h.ray, ("ray—", muted))
                segs += [Segment(ctr[0], ctr[1]), Segment(" "), Segment(ray[0], ray[1]), Segment(" ")]
        used = sum(len(s.text) for s in segs)
        room = width - used
        cw = 4 if len(row.cells) * 5 <= room else 3
        for cell in row.cells:
            kind = cell.kind  # worked out once a cell: it runs the card's limits
            st = self._style(kind[1:])
            c = cell.card
            if cell.node_down:
                txt = "—"
            elif c is None or c.util_pct is None:
                txt = "?"
            else:
                # trouble in a letter as well as the colour (NO_COLOR, a monochrome
                # terminal): H hot, M memory full, in place of the % sign
                mark = {"-hot": "H", "-memfull": "M"}.get(kind, "")  # the worst trouble, as the colour
                if cw == 4:
                    txt = f"{c.util_pct:.0f}{mark or '%'}"
                else:
                    txt = f"{min(99 if mark else 999, c.util_pct):.0f}{mark}"
            segs += [Segment(" ", base), Segment(f"{txt:>{cw}}", st)]
        if h is not None and not h.reachable and h.error:
            segs += [Segment("  "), Segment(h.error, base + Style(dim=True))]
        if h is not None and h.unparsed_error is not None:
            segs += [Segment(" "), Segment("cards unparsed", bad)]
        segs = [s if s.style is not None else Segment(s.text, base) for s in segs]
        return Strip(segs).crop_extend(0, width, base)

    def _cell(self, cell: CardCell, w: int, h: int) -> list[list[Segment]]:
        """One card as `h` lines of exactly `w` cells: utilisation and power; memory and
        temperature; the sparkline (three-line cards only)."""
        kind = cell.kind
        st = self._style(kind[1:])
        alarm = st + self._style("alarm", partial=True)
        c = cell.card
        if cell.node_down:
            lines = [[(_fit([f"{cell.index}", "down"], w), st)], [("—", st)]]
        elif cell.unparsed and c is None:
            lines = [[(_fit([f"{cell.index}", "??"], w), st)], [("unparsed"[:w], st)]]
        elif c is None:
            lines = [[(_fit([f"{cell.index}", "—"], w), st)], [("", st)]]
        else:
            util = "?%" if c.util_pct is None else f"{c.util_pct:.0f}%"
            power = "?W" if c.power_w is None else f"{c.power_w:.0f}W"
            temp = "?°" if c.temp_c is None else f"{c.temp_c:.0f}°"
            mem = f"{_gib(c.mem_used_mib)}/{_gib(c.mem_total_mib)}G"
            if len(mem) + 1 + len(temp) > w:
                mem = f"{_gib(c.mem_used_mib)}G"  # narrow: used only, keep the temperature
            l2 = [(mem, alarm if cell.limits.mem_full(c) else st)]
            if len(mem) + 1 + len(temp) <= w:
                l2.append((" " * (w - len(mem) - len(temp)), st))
                l2.append((temp, alarm if cell.limits.is_hot(c) else st))
            lines = [[(_fit([f"{cell.index}", f"{util:>4}", power], w), st)], l2]
        if h >= 3:
            lines.append(self._spark(cell, w, kind, st) if not cell.node_down else [("", st)])
        out: list[list[Segment]] = []
        for parts in lines[:h]:
            segs: list[Segment] = []
            used = 0
            for text, style in parts:
                text = text[: w - used]
                if text:
                    segs.append(Segment(text, style))
                    used += len(text)
            if used < w:
                segs.append(Segment(" " * (w - used), st))
            out.append(segs)
        return out

    def _spark(self, cell: CardCell, width: int, kind: str, st: Style) -> list[tuple[str, Style]]:
        """Utilisation history on a fixed 0-100 scale. Textual's Sparkline rescales to the
        data's own min..max, which would draw a card steady at 99% like an idle one; here
        the bar height is the utilisation itself, coloured min->max like Sparkline."""
        styles = self._spark_styles.get(kind)
        if styles is None:
            bg = Color.from_rich_color(st.bgcolor) if st.bgcolor else self.background_colors[1]
            lo = bg + self.get_component_styles("nodegrid--spark-min").color
            hi = bg + self.get_component_styles("nodegrid--spark-max").color
            styles = [st + Style(color=lo.blend(hi, i / (len(SPARK_BARS) - 1)).rich_color)
                      for i in range(len(SPARK_BARS))]
            self._spark_styles[kind] = styles
        data = list(islice(reversed(cell.history), width))[::-1]
        out: list[tuple[str, Style]] = [(" " * (width - len(data)), st)] if len(data) < width else []
        # Runs of equal bars are one segment: the grid is most of the screen's segments,
        # and every segment costs again when a modal dims the screen behind it.
        run, level = "", -1
        for v in data:
            i = min(len(SPARK_BARS) - 1, int(min(1.0, max(0.0, v / 100.0)) * len(SPARK_BARS)))
            if i != level and run:
                out.append((run, styles[level]))
                run = ""
            run += SPARK_BARS[i]
            level = i
        if run:
            out.append((run, styles[level]))
        return out
