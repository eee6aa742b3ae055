"""Training metrics: step, ETA, throughput, reward, MFU, response length, checkpoint,
each judged against the profile's expected range, plus plots over steps.

A number alone does not tell a person whether to worry; "742 tok/s/node ✓ 600-900"
does. Ranges come from the profile's `monitoring` section (the seed's own reference
values), never from constants here.
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.widgets import Label, Sparkline, Static

from tui.core.job.metrics import MetricsSummary, fmt_range, fmt_step_time
from tui.core.job.metrics import fmt_duration as fmt_core_duration
from tui.core.profile import Monitoring
from tui.core.safetext import shown
from tui.core.state import JobStatus

PLOTS = (("reward", "reward"), ("throughput", "tok/s/node"), ("response_length", "resp len"))


def fmt_duration(s: float | None) -> str:
    """An ETA as every view says a duration (`core.job.metrics.fmt_duration`: "44s",
    "3m10s", "2h05m", "3d04h"): 44 s left is never "0m"."""
    if s is None or s < 0:
        return "—"
    return fmt_core_duration(s)


def _job_head(summary: MetricsSummary, total: Any) -> str | None:
    """The first line when the job is not running: what it is and where it got to,
    never an ETA. None for a running job (or no status: demo data from before)."""
    step = summary.step
    where = f"step [b]{step}[/]/{total or '?'}" if step is not None else "no steps"
    ck_s = "  checkpoint step $ck" if summary.last_checkpoint is not None else ""
    if summary.on_cluster is False:
        return f"[$text-warning]last run[/] $jid: not on this cluster  {where}{ck_s}"
    if summary.status and summary.status != JobStatus.RUNNING:
        return f"{where}  [b]$status[/]{ck_s}"
    return None


def _content(markup: str, summary: MetricsSummary) -> Content:
    """Markup of our own with the remote-derived values (job id, status, checkpoint)
    as `$variables`: Textual inserts variables as plain text, never as markup."""
    return Content.from_markup(markup, jid=shown(summary.job_id or ""), status=shown(summary.status or ""),
                               ck=shown(summary.last_checkpoint))


def verdict(summary: MetricsSummary, name: str) -> str:
    """✓ inside the expected range, ✗ outside (with the range, in the unit of the value
    beside it), nothing when unknown: the core judged it (`MetricsSummary.judged`); this
    only draws it."""
    j = summary.judged.get(name)
    if j is None:
        return ""
    rng = fmt_range(name, j.low, j.high)
    if j.ok:
        return f" [$text-success]✓[/][dim] {rng}[/]"
    return f" [$text-error]✗ {rng}[/]"


ARROWS = {"rising": " [$text-success]↑[/]", "falling": " [$text-warning]↓[/]", "flat": " →"}


def compact_markup(summary: MetricsSummary, mon: Monitoring) -> Content:
    """Two lines for an 80-column screen: the numbers that answer "is it healthy?"."""
    return _content(_compact(summary, mon), summary)


def summary_markup(summary: MetricsSummary, mon: Monitoring, width: int = 0) -> Content:
    """Four lines: progress, throughput, reward and MFU, response length and checkpoint.
    `width`: the box's; when the first line would wrap there, it leaves out the percentage
    (the step and total say it) rather than push the pane a line taller."""
    made = _content(_summary(summary, mon), summary)
    if width > 0 and cell_len(made.plain.split("\n", 1)[0]) > width:
        made = _content(_summary(summary, mon, pct=False), summary)
    return made


def _compact(summary: MetricsSummary, mon: Monitoring) -> str:
    step = summary.step
    total = summary.total_steps or mon.total_steps
    not_running = _job_head(summary, total)
    if summary.on_cluster is False:
        return not_running or ""
    if step is None:
        return "[dim]no steps yet[/]"
    st = summary.step_time_s
    l1 = not_running or (
        f"step [b]{step}[/]/{total or '?'}  ETA [b]{fmt_duration(summary.eta_s)}[/]"
        + ("" if st is None else f"  {fmt_step_time(st)}{verdict(summary, 'step_time')}"))
    tn, r, mfu = summary.throughput_per_node, summary.reward, summary.mfu_pct
    ck = summary.last_checkpoint
    l2 = ("—" if tn is None else f"[b]{tn:,.0f}[/] tok/s/node{verdict(summary, 'throughput')}")
    l2 += "  reward " + ("—" if r is None else f"[b]{r:.3f}[/]")
    l2 += "  MFU " + ("—" if mfu is None else f"[b]{mfu:.1f}%[/]{verdict(summary, 'mfu')}")
    l2 += "  ckpt " + ("none" if ck is None else "$ck")
    return l1 + "\n" + l2


def _summary(summary: MetricsSummary, mon: Monitoring, pct: bool = True) -> str:
    step = summary.step
    total = summary.total_steps or mon.total_steps
    not_running = _job_head(summary, total)
    if summary.on_cluster is False:
        return not_running or ""
    if not_running is not None:
        head = not_running
    elif step is None:
        head = "[dim]no steps yet[/]"
    else:
        share = f" ({100 * step / total:.1f}%)" if total and pct else ""
        head = f"step [b]{step}[/]/{total or '?'}{share}  ETA [b]{fmt_duration(summary.eta_s)}[/]"
        st = summary.step_time_s
        if st is not None:
            head += f"  {fmt_step_time(st)}{verdict(summary, 'step_time')}"
    tn, tg = summary.throughput_per_node, summary.throughput_per_gpu
    tput = "throughput " + ("—" if tn is None else f"[b]{tn:,.0f}[/] tok/s/node{verdict(summary, 'throughput')}")
    if tg is not None:
        tput += f" · {tg:,.1f} tok/s/GPU"
    r = summary.reward
    arrow = ARROWS.get(summary.reward_trend or "", "")
    mfu = summary.mfu_pct
    third = ("reward " + ("—" if r is None else f"[b]{r:.3f}[/]{arrow}") + "  MFU "
             + ("—" if mfu is None else f"[b]{mfu:.1f}%[/]{verdict(summary, 'mfu')}"))
    rl = summary.response_length
    ck = summary.last_checkpoint
    fourth = ("resp len " + ("—" if rl is None else f"[b]{rl:,.0f}[/] tok") + "  checkpoint "
              + ("[$text-warning]none yet[/]" if ck is None else "step [b]$ck[/]"))
    return "\n".join([head, tput, third, fourth])


class SteadySparkline(Sparkline):
    """Textual's Sparkline, repainted only when its bars would be drawn differently.

    A long run's series gains a point per step, but a plot `w` cells wide draws the max
    of each of `w` buckets: mostly the same bars, step after step. Each repaint renders
    through Rich (profiled: a few ms per plot per frame), so `show` compares what the
    drawing depends on (the width, the range, each bucket's max) and, when equal, only
    keeps the data current (for a later resize) without a repaint."""

    _drawn: Hashable = None

    def look(self, values: Sequence[float]) -> Hashable:
        """Everything the bars depend on for `values` at the current width (None before
        the first layout: always drawn)."""
        width = self.size.width
        if width <= 0:
            return None
        if len(values) < 2:
            return (width, tuple(values))
        bucketer = getattr(SparklineRenderable, "_buckets", None)  # Textual's own bucketing (private)
        if bucketer is None:  # a Textual without it: always drawn, as before
            return None
        buckets = bucketer(list(values), num_buckets=width)
        return (width, min(values), max(values), tuple(self.summary_function(b) for b in buckets))

    def show(self, values: list[float]) -> None:
        look = self.look(values)
        if look is not None and look == self._drawn:
            self.set_reactive(Sparkline.data, values)
            return
        self._drawn = look
        self.data = values


class MetricsPane(Vertical):
    """Summary lines and one sparkline per plotted series."""

    DEFAULT_CSS = """
    MetricsPane { height: auto; }
    MetricsPane > #metrics-summary { height: auto; }
    MetricsPane > #metrics-cause { height: auto; color: $text-error; display: none; }
    MetricsPane > #metrics-cause.-shown { display: block; }
    MetricsPane > Horizontal { height: 1; }
    MetricsPane > Horizontal > Label { width: 11; color: $text-muted; }
    MetricsPane > Horizontal > Sparkline { width: 1fr; }
    MetricsPane > Horizontal > .plot-last { width: 8; text-align: right; }
    """

    def __init__(self, monitoring: Monitoring, **kw) -> None:
        super().__init__(**kw)
        self.monitoring = monitoring
        self.border_title = "Training"
        self._last_text: dict[str, str] = {}
        self._last_summary: tuple[str, tuple[Any, ...]] | None = None

    def compose(self) -> ComposeResult:
        yield Static("[dim]no metrics yet[/]", id="metrics-summary")
        yield Static("", id="metrics-cause")
        for key, label in PLOTS:
            with Horizontal(id=f"plot-{key}"):
                yield Label(label)
                yield SteadySparkline([], id=f"spark-{key}")
                yield Label("", classes="plot-last", id=f"last-{key}")

    COMPACT_BELOW = 100
    """Below this terminal width the summary folds into two lines (the screen also hides
    the plots): at 80x24 every line counts."""

    summary: MetricsSummary | None = None

    def on_resize(self) -> None:
        if self.summary is not None:
            self._last_summary = None  # a new width may wrap the same text differently
            self._show_summary()

    def _show_summary(self) -> None:
        """Redraw the summary only when its text changed: the pane is refreshed every
        couple of seconds for a 20-hour run whose step changes every few minutes, and
        each update costs a layout pass of the whole screen (its height follows its text)."""
        box = self.query_one("#metrics-summary", Static)
        if self.app.size.width < self.COMPACT_BELOW:
            markup = compact_markup(self.summary or MetricsSummary(), self.monitoring)
        else:
            markup = summary_markup(self.summary or MetricsSummary(), self.monitoring, box.content_region.width)
        key = (markup.plain, tuple(markup.spans))  # Content's == compares the text only
        if key == self._last_summary:
            return
        old, self._last_summary = self._last_summary, key
        # Its height follows its text, so a new text may need a layout pass of the whole
        # screen (~40 ms here, profiled); not when it has as many lines as before and none
        # is wider than the box (no new wrap): the ETA or throughput changing, the usual case.
        width = box.content_region.width
        lines = markup.plain.split("\n")
        same_shape = (old is not None and width > 0 and len(lines) == old[0].count("\n") + 1
                      and max(cell_len(line) for line in lines) <= width
                      and max(cell_len(line) for line in old[0].split("\n")) <= width)
        box.update(markup, layout=not same_shape)

    def show_cause(self, cause: str | None) -> None:
        """Why the job ended (the diagnosis and its fix), under the summary; None: none.
        Outside text (a log line's words): drawn as plain text, wrapped, never markup."""
        box = self.query_one("#metrics-cause", Static)
        box.set_class(bool(cause), "-shown")
        box.update(Content("✖ " + shown(cause)) if cause else "")

    def update_metrics(self, summary: MetricsSummary, series: dict[str, list[tuple[int, float]]]) -> None:
        self.summary = summary
        self._show_summary()
        for key, _ in PLOTS:
            pts = series.get(key) or []
            self.query_one(f"#spark-{key}", SteadySparkline).show([v for _, v in pts])
            last = pts[-1][1] if pts else None
            txt = "" if last is None else (f"{last:.3f}" if abs(last) < 10 else f"{last:,.0f}")
            if self._last_text.get(key) != txt:  # an unchanged value costs no layout pass
                self._last_text[key] = txt
                # fixed 8 x 1 cell (CSS): a new value never changes the layout
                self.query_one(f"#last-{key}", Label).update(txt, layout=False)
