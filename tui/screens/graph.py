"""`g`: plots with axes of any scalar of the run against step (textual-plotext).

Several at once (pick them in the list; space toggles), TensorBoard-style EMA smoothing
(`[` / `]` step the weight 0 .. 0.99, the raw curve stays drawn faintly), a step range
(`w` cycles all / last 50 / 200 / 1000 steps; `:` takes an explicit FROM:TO), and the profile's expected range drawn as
a band (two dashed lines) on the scalars the profile judges. `e` writes every scalar of
the run to a CSV file under the state directory. `c` picks other runs of the profile to
overlay on the same axes (each in its own colour, with a legend; a resumed run's curve
continues its parent's, stitched by step: `core.job.compare`); `t` switches the x axis
between step and wall time (hours: the sum of the runs' step times).

The data: the series the backend pushes with each metrics update, plus every scalar the
backend holds when it offers `all_series()` (the TensorBoard reader / the log's step
lines on the live backend, demo data on the static one).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from rich.segment import Segment
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.strip import Strip
from textual.widgets import Input, SelectionList, Static
from textual.widgets.option_list import OptionDoesNotExist
from textual.widgets.selection_list import Selection
from textual_plotext import PlotextPlot

from tui.core.job.compare import STEP_TIME_KEYS, by_wall_time
from tui.core.job.metrics import fmt_duration, fmt_range
from tui.core.job.series import Point, ema, in_range, to_csv
from tui.core.safetext import shown

if TYPE_CHECKING:
    from tui.core.job.runs import RunSummary
    from tui.core.profile import Monitoring
    from tui.screens.main import MainScreen

PRESET: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward", ("reward", "critic/rewards/mean", "critic/score/mean")),
    ("throughput per node", ("throughput", "throughput_tokens_per_s_per_node")),
    ("response length", ("response_length", "response_length/mean")),
    ("step time", ("timing_s/step", "step_time_s", "step_time")),
    ("MFU", ("perf/mfu/actor", "mfu/actor", "mfu_pct", "mfu")),
)
"""Preselected plots: the first name the data has of each group."""
SMOOTHING = (0.0, 0.3, 0.6, 0.8, 0.9, 0.95, 0.99)
WINDOWS: tuple[int | None, ...] = (None, 50, 200, 1000)
REFRESH_S = 2.0
OVERLAY_COLOURS = ("orange", "magenta", "green+", "yellow", "blue+", "red+")
"""The compared runs' curves, in pick order (the watched run is cyan)."""


def key_candidates(name: str) -> list[str]:
    """`name` then the other names of its PRESET group: another run's log may call the
    reward `critic/score/mean` where this one's says `reward`."""
    group = next((c for _, c in PRESET if name in c), ())
    return [name, *(c for c in group if c != name)]


def short_id(job_id: str) -> str:
    """A legend label that fits an 80-column plot: the id's distinctive tail."""
    tail = shown(job_id.rsplit("_", 1)[-1])
    return tail if len(tail) <= 12 else "…" + tail[-11:]


def preselected(names: list[str]) -> list[str]:
    """The scalars plotted on opening: one per PRESET group that the data has."""
    have = set(names)
    return [next(c for c in cands if c in have) for _, cands in PRESET if any(c in have for c in cands)]


def parse_range(text: str) -> tuple[int | None, int | None] | None | bool:
    """`FROM:TO` -> (from, to) with either side optional; empty -> None (all steps);
    anything else -> False."""
    text = text.strip()
    if not text:
        return None
    lo, sep, hi = text.partition(":")
    try:
        a = int(lo) if lo.strip() else None
        b = int(hi) if hi.strip() else None
    except ValueError:
        return False
    if not sep or (a is not None and b is not None and a > b):
        return False
    return a, b


def int_ticks(lo: int, hi: int, most: int = 6) -> list[int]:
    """At most `most` whole steps from `lo` to `hi`, at a round spacing (1, 2, 5 x 10^k):
    a step axis labelled "573.0 632.8" reads as if there were fractional steps."""
    if hi <= lo:
        return [lo]
    span = hi - lo
    raw = span / max(1, most - 1)
    mag = 10 ** max(0, math.floor(math.log10(raw))) if raw >= 1 else 1
    gap = next((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), 10 * mag)
    first = -(-lo // gap) * gap
    return list(range(first, hi + 1, gap)) or [lo]


def value_ticks(lo: float, hi: float, most: int = 5) -> tuple[float, float, list[float], list[str]]:
    """The y axis as a person reads it: limits widened to a round spacing (1, 2, 5 x
    10^k) and a label at each multiple of it, so that a label names the value of its own
    row (plotext's own labels are row centres: `727` beside a line at 993.3 read wrong).
    Returns (low limit, high limit, ticks, labels)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return lo, hi, [], []
    if hi <= lo:
        pad = abs(lo) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, most - 1)
    mag = 10 ** math.floor(math.log10(raw))
    gap = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first, last = math.floor(lo / gap + 1e-9), math.ceil(hi / gap - 1e-9)
    ticks = [k * gap for k in range(first, last + 1)]
    decimals = max(0, -math.floor(math.log10(gap) + 1e-9))
    labels = [f"{t:.{decimals}f}" for t in ticks]
    return ticks[0], ticks[-1], ticks, labels


class PickList(SelectionList[str]):
    """The scalar picker: a picked row reads `[x]`, the others `[ ]`, in any colour scheme
    (Textual's toggle draws the same `X` for both, told apart by colour only, which
    NO_COLOR and a monochrome terminal lose)."""

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        segs = list(strip)
        if len(segs) < 4 or len(segs[1].text) != 1:
            return strip
        try:
            value = self.get_option_at_index(self.scroll_offset.y + y).value
        except OptionDoesNotExist:  # a line below the last option
            return strip
        picked = value in self._selected
        base = segs[3].style
        return Strip([Segment("[", (base or segs[0].style)), Segment("x" if picked else " ", segs[1].style),
                      Segment("]", (base or segs[2].style)), *segs[3:]])


def is_step_time(name: str) -> bool:
    return name in ("timing_s/step", "step_time_s") or name in STEP_TIME_KEYS


def shown_scale(name: str, points: list[Point]) -> float:
    """The factor a scalar is drawn with so it has the training pane's unit: MFU in
    percent (VeRL logs a fraction, the pane and the profile say `29.8%`); else 1."""
    if "mfu" in name.lower() and points:
        finite = [abs(v) for _, v in points if math.isfinite(v)]
        if finite and max(finite) <= 1.5:
            return 100.0
    return 1.0


def time_ticks(lo_h: float, hi_h: float, n: int) -> tuple[list[float], list[str]]:
    """x ticks of the time axis (hours of training) labelled as durations ("3m10s",
    "2h05m"), never fractional hours."""
    if hi_h <= lo_h:
        return [lo_h], [fmt_duration(lo_h * 3600)]
    step = (hi_h - lo_h) / max(1, n - 1)
    xs = [lo_h + i * step for i in range(n)]
    return xs, [fmt_duration(x * 3600) for x in xs]


def expected_band(name: str, points: list[Point], mon: Monitoring | None) -> tuple[float, float] | None:
    """The profile's expected range for scalar `name`, in the scalar's own units."""
    if mon is None:
        return None
    if name in ("throughput", "throughput_tokens_per_s_per_node"):
        return mon.throughput_tokens_per_s_per_node
    if name in ("timing_s/step", "step_time_s") and mon.step_time_min:
        lo, hi = mon.step_time_min
        return lo * 60.0, hi * 60.0
    if "mfu" in name and mon.mfu_pct:
        lo, hi = mon.mfu_pct
        fraction = bool(points) and max(abs(v) for _, v in points if math.isfinite(v)) <= 1.5
        return (lo / 100.0, hi / 100.0) if fraction else (lo, hi)
    if "memory_reserved_gb" in name and mon.mem_gib_per_card:
        return mon.mem_gib_per_card
    return None


class ComparePicker(ModalScreen["list[str] | None"]):
    """`c`: the profile's other runs; space picks, Enter overlays the picked, Esc cancels."""

    DEFAULT_CSS = """
    ComparePicker { align: center middle; }
    ComparePicker > SelectionList { width: 90%; max-width: 100; height: auto; max-height: 80%;
                                    border: round $primary; }
    """
    BINDINGS = [Binding("enter", "apply", "Overlay", priority=True), Binding("escape", "cancel", "Cancel")]

    def __init__(self, runs: list[RunSummary], picked: list[str]) -> None:
        super().__init__()
        self.runs = runs
        self.picked = picked

    def compose(self) -> ComposeResult:
        rows = []
        for r in self.runs:
            label = f"{r.id}  {r.name or ''}  {r.status}  step {r.step if r.step is not None else '?'}"
            if r.resumed_text:
                label += f"  ({r.resumed_text})"
            # a run's id is Ray's, its name the run's: the one rule for outside text
            rows.append(Selection(Content(shown(label)), r.id, r.id in self.picked))
        sl = PickList(*rows, id="compare-runs")
        sl.border_title = "Overlay runs (space picks, Enter overlays, Esc cancels)"
        yield sl

    def action_apply(self) -> None:
        sl = self.query_one(PickList)
        self.dismiss([r.id for r in self.runs if r.id in sl.selected])

    def action_cancel(self) -> None:
        self.dismiss(None)


class GraphScreen(Screen[None]):
    DEFAULT_CSS = """
    GraphScreen > Horizontal { height: 1fr; }
    GraphScreen SelectionList { width: 34; height: 1fr; border-top: hkey $primary 50%; }
    GraphScreen.-narrow SelectionList { width: 24; }
    GraphScreen #plots { width: 1fr; height: 1fr; layout: grid; grid-size: 1; grid-gutter: 0; }
    GraphScreen.-wide #plots { grid-size: 2; }
    GraphScreen PlotextPlot { height: 100%; }
    GraphScreen #graph-bottom { dock: bottom; height: auto; }
    GraphScreen #graph-range { display: none; height: 1; border: none; padding: 0 1; }
    GraphScreen #graph-range.-open { display: block; }
    GraphScreen #graph-keys { height: 1; background: $footer-background; color: $footer-foreground; }
    """
    BINDINGS = [
        Binding("q,g", "close", "Back"),
        Binding("left_square_bracket", "smooth(-1)", "Less smoothing"),
        Binding("right_square_bracket", "smooth(1)", "More smoothing"),
        Binding("w", "window", "Last N steps"),
        Binding("colon", "range", "Step range"),
        Binding("e", "export", "Export CSV"),
        Binding("c", "compare", "Compare runs"),
        Binding("t", "time_axis", "Step / wall time"),
    ]

    def __init__(self, source: Callable[[], dict[str, list[Point]]], monitoring: Monitoring | None = None,
                 export_dir: Path | None = None, run_name: str = "run",
                 runs: Callable[[], list[RunSummary]] | None = None,
                 run_series: Callable[[str, list[str]], list[Point]] | None = None,
                 job_id: str | None = None) -> None:
        super().__init__()
        self.source = source
        self.monitoring = monitoring
        self.export_dir = export_dir
        self.run_name = run_name
        self.series: dict[str, list[Point]] = {}
        self.smoothing_i = 3  # 0.8: a visible but faithful default
        self.window_i = 0
        self.step_range: tuple[int | None, int | None] | None = None
        """An explicit `from:to` range (the `:` key); overrides the `w` window."""
        self.selected: list[str] = []
        self.last_export: Path | None = None
        self.runs_source = runs
        self.run_series = run_series
        self.job_id = job_id
        self.compare: list[str] = []
        """The runs overlaid (`c`), in pick order."""
        self.overlay: dict[tuple[str, str], list[Point]] = {}
        self.by_time = False
        """x axis: step (False) or hours of training (`t`)."""
        """(run, scalar) -> that run's stitched series, loaded off the event loop."""

    @property
    def smoothing(self) -> float:
        return SMOOTHING[self.smoothing_i]

    @property
    def window(self) -> int | None:
        return WINDOWS[self.window_i]

    def compose(self) -> ComposeResult:
        self.series = self._load()
        names = sorted(self.series)
        self.selected = preselected(names)
        first = self.selected + [n for n in names if n not in self.selected]
        with Horizontal():
            # the names are TensorBoard tags and log keys (outside text): shown by the one rule,
            # kept as they are as the values
            sl = PickList(*(Selection(Content(shown(n)), n, n in self.selected) for n in first), id="scalars")
            sl.border_title = f"Scalars ({len(names)})"
            yield sl
            yield VerticalScroll(id="plots")
        # one bottom dock: the prompt sits above the key bar (two docks overlapped, and the
        # key bar, drawn last, covered the prompt)
        with Vertical(id="graph-bottom"):
            yield Input(placeholder="step range FROM:TO (either may be empty; empty: all steps; Esc cancels)",
                        id="graph-range")
            yield Static(id="graph-keys")

    async def on_mount(self) -> None:
        self.set_class(self.app.size.width >= 150, "-wide")
        self.set_class(self.app.size.width < 100, "-narrow")
        await self._rebuild()
        self.set_interval(REFRESH_S, self._reload)

    def _load(self) -> dict[str, list[Point]]:
        try:
            return {k: list(v) for k, v in (self.source() or {}).items() if v}
        except Exception as e:  # noqa: BLE001 - the screen stays up and says why
            self.notify(f"metrics unavailable: {e}", severity="warning", markup=False)
            return {}

    def _reload(self) -> None:
        new = self._load()
        if new != self.series:
            self.series = new
            self._replot()

    def _keys_text(self) -> str:
        win = "all steps" if self.window is None else f"last {self.window} steps"
        if self.step_range is not None:
            lo, hi = self.step_range
            win = f"steps {'' if lo is None else lo}:{'' if hi is None else hi}"
        axis = "time" if self.by_time else "step"
        if self.has_class("-narrow"):  # every key still on screen at 80 columns, in fewer words
            cmp = f"[b]c[/] runs {len(self.compare)}  " if self.run_series is not None else ""
            return (f" [b]space[/] pick  [b][ ][/] {self.smoothing:.2f}  [b]w[/]/[b]:[/] {win}  "
                    f"{cmp}[b]t[/] x: {axis}  [b]e[/] CSV  [b]Esc[/] back")
        cmp = f"[b]c[/] compare ({len(self.compare)})  " if self.run_series is not None else ""
        return (f" [b]space[/] pick  [b][ ][/] smoothing {self.smoothing:.2f}  [b]w[/]/[b]:[/] {win}  "
                f"{cmp}[b]t[/] x: {axis}  [b]e[/] export CSV  [b]Esc[/] back")

    async def _rebuild(self) -> None:
        """Mount one plot per selected scalar, then draw them."""
        plots = self.query_one("#plots", VerticalScroll)
        await plots.remove_children()
        n = len(self.selected)
        cols = 2 if self.has_class("-wide") and n > 1 else 1
        rows = max(1, -(-n // cols))
        avail = max(8, self.app.size.height - 2)
        self._plot_h = max(8, avail // rows)  # a plot's rows before layout has sized it
        plots.set_styles(f"grid-size: {cols}; grid-rows: {self._plot_h};")
        await plots.mount_all([PlotextPlot(id=f"plot-{i}") for i in range(n)])
        if not n:
            await plots.mount(Static("[dim]no scalar picked: space on a name in the list[/]"))
        self._replot()

    def _replot(self) -> None:
        self.query_one("#graph-keys", Static).update(self._keys_text())
        for i, name in enumerate(self.selected):
            try:
                w = self.query_one(f"#plot-{i}", PlotextPlot)
            except NoMatches:  # its plot not mounted yet: drawn on the next refresh
                continue
            self._draw(w, name)
        self._load_overlay()

    def _load_overlay(self) -> None:
        """Fetch the compared runs' series not loaded yet (in a thread: a spool may be
        large), then draw again."""
        if self.run_series is None:
            return
        names = [*self.selected, *([STEP_TIME_KEYS[0]] if self.by_time else [])]
        want = [(j, n) for j in self.compare for n in names if (j, n) not in self.overlay]
        if not want:
            return
        fetch = self.run_series

        def work() -> None:
            got: dict[tuple[str, str], list[Point]] = {}
            for j, n in want:
                try:
                    got[(j, n)] = [p for p in fetch(j, key_candidates(n)) if math.isfinite(p[1])]
                except Exception as e:  # noqa: BLE001 - one unreadable spool costs only its curve
                    got[(j, n)] = []
                    self.app.call_from_thread(self.notify, f"run {j}: {e}", severity="warning", markup=False)
            self.app.call_from_thread(self._got_overlay, got)

        self.run_worker(work, thread=True, group="overlay", exclusive=True)

    def _got_overlay(self, got: dict[tuple[str, str], list[Point]]) -> None:
        self.overlay.update(got)
        self._replot()

    def _draw(self, w: PlotextPlot, name: str) -> None:
        plt = w.plt
        plt.clear_data()
        plt.clear_figure()
        pts = [p for p in self.series.get(name, []) if math.isfinite(p[1])]
        scale = shown_scale(name, pts)
        if scale != 1.0:  # the pane's unit (MFU in %), for this run and the overlaid ones
            pts = [(s, v * scale) for s, v in pts]
        unit = "%" if scale == 100.0 else " s" if is_step_time(name) else ""
        if self.step_range is not None:
            pts = in_range(pts, *self.step_range)
        elif pts and self.window is not None:
            pts = in_range(pts, pts[-1][0] - self.window + 1, None)
        title = shown(name)
        others: list[tuple[str, str, list[Point]]] = []
        for j, colour in zip(self.compare, OVERLAY_COLOURS):
            o = self.overlay.get((j, name), [])
            o_scale = shown_scale(name, o)
            if o_scale != 1.0:
                o = [(s, v * o_scale) for s, v in o]
            if self.step_range is not None:
                o = in_range(o, *self.step_range)
            elif pts and self.window is not None:
                o = in_range(o, pts[-1][0] - self.window + 1, None)
            if o:
                others.append((short_id(j), colour, o))
        mine_t = next((self.series[k] for k in STEP_TIME_KEYS if self.series.get(k)), [])

        def x_of(run: str | None, curve: list[Point]) -> list[float]:
            if not self.by_time:
                return [float(s) for s, _ in curve]
            times = mine_t if run is None else self.overlay.get((run, STEP_TIME_KEYS[0]), [])
            return [x for x, _ in by_wall_time(curve, times)]

        def y_of(run: str | None, curve: list[Point]) -> list[float]:
            if not self.by_time:
                return [v for _, v in curve]
            times = mine_t if run is None else self.overlay.get((run, STEP_TIME_KEYS[0]), [])
            have = {s for s, _ in times}
            return [v for s, v in curve if s in have]

        xs_all: list[float] = []
        ys_all: list[float] = []
        for (label, colour, o), j in zip(others, self.compare):
            ox = x_of(j, o)
            oy = y_of(j, ema(o, self.smoothing) if self.smoothing > 0 else o)
            if ox:
                plt.plot(ox, oy, color=colour, marker="braille", label=label)
                xs_all += ox
                ys_all += oy
        mine = {"label": "this run"} if others else {}
        if pts:
            xs = x_of(None, pts)
            xs_all += xs
            band = expected_band(name, pts, self.monitoring)
            if band is not None and xs:
                lo, hi = band
                plt.plot([xs[0], xs[-1]], [lo, lo], color="green", marker="-")
                plt.plot([xs[0], xs[-1]], [hi, hi], color="green", marker="-")
                ys_all += [lo, hi]
                band_unit = "%" if scale == 100.0 else ""  # a step time's range names its own units
                title += f"  [{fmt_range('step_time' if is_step_time(name) else name, lo, hi)}{band_unit}]"
            if self.smoothing > 0:
                plt.plot(xs, y_of(None, pts), color="gray", marker="braille")
                sm = ema(pts, self.smoothing)
                plt.plot(xs, y_of(None, sm), color="cyan", marker="braille", **mine)
                title += f"  {pts[-1][1]:.4g}{unit} (smoothed {sm[-1][1]:.4g}{unit})"
            else:
                plt.plot(xs, y_of(None, pts), color="cyan", marker="braille", **mine)
                title += f"  {pts[-1][1]:.4g}{unit}"
            ys_all += y_of(None, pts)
        else:
            title += "  (no points)"
        if ys_all:
            # the canvas has the widget's rows less the title, the frame, the x ticks and
            # label; a label every other row at most, so that none is dropped
            rows = max(2, (w.size.height or getattr(self, "_plot_h", 20)) - 5)
            for most in range(6, 1, -1):
                y_lo, y_hi, yt, yl = value_ticks(min(ys_all), max(ys_all), most)
                if len(yt) <= max(2, (rows + 1) // 2):
                    break
            if yt:
                plt.ylim(y_lo, y_hi)
                plt.yticks(yt, yl)
        width = w.size.width or 60
        plt.title(title if len(title) <= width - 2 else title[: width - 3] + "…")  # plotext drops a too-long title
        if xs_all and not self.by_time:
            ticks = int_ticks(int(min(xs_all)), int(max(xs_all)), max(2, min(6, (width - 12) // 10)))
            plt.xticks([float(t) for t in ticks], [str(t) for t in ticks])
        elif xs_all:
            plt.xticks(*time_ticks(min(xs_all), max(xs_all), max(2, min(5, (width - 12) // 12))))
        plt.xlabel("training time (sum of step times)" if self.by_time else "step")
        w.refresh()

    async def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        chosen = set(event.selection_list.selected)
        keep = [n for n in self.selected if n in chosen]
        self.selected = keep + sorted(chosen - set(keep))
        await self._rebuild()

    def action_smooth(self, d: int) -> None:
        self.smoothing_i = max(0, min(len(SMOOTHING) - 1, self.smoothing_i + d))
        self._replot()

    def action_window(self) -> None:
        self.step_range = None
        self.window_i = (self.window_i + 1) % len(WINDOWS)
        self._replot()

    def action_range(self) -> None:
        box = self.query_one("#graph-range", Input)
        box.add_class("-open")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        rng = parse_range(event.value)
        if rng is False:
            self.notify(f"step range {event.value!r}: want FROM:TO, e.g. 100:500 or 300:", severity="warning",
                        markup=False)
            return
        self.step_range = rng  # type: ignore[assignment]
        event.input.remove_class("-open")
        self.query_one(SelectionList).focus()
        self._replot()

    def key_escape(self) -> None:
        box = self.query_one("#graph-range", Input)
        if box.has_class("-open"):
            box.remove_class("-open")
            self.query_one(SelectionList).focus()
        else:
            self.dismiss(None)

    def action_export(self) -> None:
        if self.export_dir is None:
            from tui.core.locations import exports_dir

            self.export_dir = exports_dir()
        self.export_dir.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.run_name)[:80] or "run"
        path = self.export_dir / f"{safe}-metrics-{time.strftime('%Y%m%d-%H%M%S')}.csv"
        path.write_text(to_csv(self.series), encoding="utf-8")
        self.last_export = path
        self.notify(f"{len(self.series)} scalars written to {path}", title="export", timeout=8, markup=False)

    async def action_compare(self) -> None:
        if self.runs_source is None or self.run_series is None:
            self.notify("this console cannot list runs", severity="warning")
            return
        import asyncio

        try:
            runs = await asyncio.to_thread(self.runs_source)
        except Exception as e:  # noqa: BLE001 - the screen stays up and says why
            self.notify(f"runs unavailable: {e}", severity="warning", markup=False)
            return
        others = [r for r in runs if r.id != self.job_id]
        if not others:
            self.notify("no other run of this profile to compare with (see `rlconsole runs`)")
            return
        self.app.push_screen(ComparePicker(others, self.compare), self._picked)

    def action_time_axis(self) -> None:
        self.by_time = not self.by_time
        self._replot()

    def _picked(self, chosen: list[str] | None) -> None:
        if chosen is None:
            return
        self.compare = chosen[: len(OVERLAY_COLOURS)]
        self.overlay = {}  # picking again reads the runs afresh (another run may still be training)
        self._replot()

    def action_close(self) -> None:
        self.dismiss(None)


def metrics_source(main: MainScreen) -> Callable[[], dict[str, list[Point]]]:
    """The graph's data: the main screen's last pushed series, plus every scalar the
    backend holds (`Backend.all_series`)."""

    def get() -> dict[str, list[Point]]:
        out: dict[str, list[Point]] = dict(main.series or {})
        out.update(main.backend.all_series() or {})
        return out

    return get
