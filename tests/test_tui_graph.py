"""The graph screen (issue 14 item 1): `g` opens plots of the preselected scalars,
smoothing and the step range change what is drawn, `e` exports every scalar to CSV."""

from __future__ import annotations

import csv
import io

from textual_plotext import PlotextPlot

from tui.app import RlconsoleApp
from tui.backend.static import demo_backend
from tui.core.job.series import ema, in_range, to_csv
from tui.screens.graph import GraphScreen, expected_band, preselected

from .pilot_helpers import settle, until


def test_ema_is_debiased_and_zero_weight_is_raw() -> None:
    pts = [(1, 10.0), (2, 10.0), (3, 10.0)]
    assert ema(pts, 0.0) == pts
    assert [round(v, 9) for _, v in ema(pts, 0.9)] == [10.0, 10.0, 10.0]  # no pull towards 0
    sm = ema([(1, 0.0), (2, 1.0)], 0.5)
    assert sm[0] == (1, 0.0) and abs(sm[1][1] - (0.5 * 1.0) / (1 - 0.25)) < 1e-12
    assert ema([(1, float("nan")), (2, 4.0)], 0.5)[1] == (2, 4.0)


def test_range_and_csv() -> None:
    pts = [(s, float(s)) for s in range(1, 11)]
    assert in_range(pts, 3, 5) == [(3, 3.0), (4, 4.0), (5, 5.0)]
    text = to_csv({"b": [(1, 0.5), (3, 1.5)], "a": [(2, 2.0)]})
    rows = list(csv.reader(io.StringIO(text)))
    assert rows == [["step", "a", "b"], ["1", "", "0.5"], ["2", "2.0", ""], ["3", "", "1.5"]]


def test_preselection_and_bands() -> None:
    names = ["actor/entropy", "critic/score/mean", "perf/mfu/actor", "response_length/mean",
             "throughput", "timing_s/step"]
    assert preselected(names) == ["critic/score/mean", "throughput", "response_length/mean",
                                  "timing_s/step", "perf/mfu/actor"]
    prof = demo_backend().profile
    mon = prof.monitoring
    lo, hi = expected_band("timing_s/step", [(1, 1000.0)], mon)
    assert (lo, hi) == (mon.step_time_min[0] * 60, mon.step_time_min[1] * 60)
    assert expected_band("perf/mfu/actor", [(1, 0.31)], mon) == (mon.mfu_pct[0] / 100, mon.mfu_pct[1] / 100)
    assert expected_band("actor/entropy", [(1, 0.4)], mon) is None


async def test_g_opens_plots_smoothing_range_and_export(tmp_path) -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, GraphScreen) and len(app.screen.query(PlotextPlot)) == 5)
        g: GraphScreen = app.screen  # type: ignore[assignment]
        assert g.selected == ["reward", "throughput", "response_length", "timing_s/step", "perf/mfu/actor"]
        assert "actor/pg_loss" in g.series  # every scalar the backend has, not just the pane's three
        before = g.smoothing
        await pilot.press("right_square_bracket")
        assert g.smoothing > before
        await pilot.press("w")
        assert g.window == 50
        g.export_dir = tmp_path
        await pilot.press("e")
        await until(pilot, lambda: g.last_export is not None)
        rows = list(csv.reader(io.StringIO(g.last_export.read_text())))
        assert rows[0][0] == "step" and "actor/entropy" in rows[0] and "reward" in rows[0]
        assert rows[-1][0] == "812" and len(rows) == 241
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main_screen)


def test_parse_range() -> None:
    from tui.screens.graph import parse_range

    assert parse_range("100:500") == (100, 500)
    assert parse_range("300:") == (300, None) and parse_range(":20") == (None, 20)
    assert parse_range("") is None
    assert parse_range("abc") is False and parse_range("5:1") is False and parse_range("7") is False


async def test_colon_sets_an_explicit_step_range() -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, GraphScreen) and len(app.screen.query(PlotextPlot)) == 5)
        g: GraphScreen = app.screen  # type: ignore[assignment]
        await pilot.press("colon", *"700:750")
        await settle(pilot)
        # the prompt is on screen, above the key bar (issue 36: the bar covered it)
        from textual.widgets import Input

        box, keys = g.query_one("#graph-range", Input), g.query_one("#graph-keys")
        assert box.region.height == 1 and box.region.y < keys.region.y, (box.region, keys.region)
        assert g.get_widget_at(box.region.x + 2, box.region.y)[0] is box
        await pilot.press("enter")
        await until(pilot, lambda: g.step_range == (700, 750))
        assert "steps 700:750" in str(g.query_one("#graph-keys").render())
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main_screen)


def test_step_ticks_are_whole_steps() -> None:
    from tui.screens.graph import int_ticks

    assert int_ticks(573, 870) == [600, 700, 800]
    assert int_ticks(1, 3) == [1, 2, 3]
    assert int_ticks(5, 5) == [5]
    for lo, hi in ((0, 2710), (17, 23), (573, 632), (1, 10_000)):
        ticks = int_ticks(lo, hi)
        assert ticks and all(isinstance(t, int) and lo <= t <= hi for t in ticks) and len(ticks) <= 6


def _text_lines(widget, height: int) -> list[str]:
    return ["".join(seg.text for seg in widget.render_line(y)) for y in range(height)]


async def _open_graphs(pilot) -> GraphScreen:
    """`g` on the demo's main screen: the graph screen once its five plots are drawn."""
    app = pilot.app
    await settle(pilot)
    await pilot.press("g")
    await until(pilot, lambda: isinstance(app.screen, GraphScreen) and len(app.screen.query(PlotextPlot)) == 5)
    await pilot.pause()
    return app.screen  # type: ignore[return-value]


async def test_graph_draws_integer_step_labels_and_a_picker_that_reads_without_colour(monkeypatch) -> None:
    """The step axis says `600 700 800`, never `573.0 632.8`; a picked scalar reads `[x]`
    and an unpicked one `[ ]` with NO_COLOR (Textual's toggle draws `X` for both)."""
    import re

    from tui.screens.graph import PickList

    monkeypatch.setenv("NO_COLOR", "1")
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(160, 50)) as pilot:
        g = await _open_graphs(pilot)
        picker = g.query_one(PickList)
        rows = [line for line in _text_lines(picker, picker.size.height) if line.strip()]
        picked = [r for r in rows if r.startswith("[x] ")]
        unpicked = [r for r in rows if r.startswith("[ ] ")]
        assert [r[4:].strip() for r in picked] == g.selected, rows
        assert unpicked and len(picked) + len(unpicked) == len(rows), rows
        assert not any("X" in r[:4] for r in rows)
        plot = g.query_one("#plot-0", PlotextPlot)
        lines = re.sub(r"\x1b\[[0-9;]*m", "", plot.plt.build()).splitlines()
        axis = lines[next(i for i, line in enumerate(lines) if line.strip() == "step") - 1]  # above the x label
        labels = re.findall(r"[\d.]+", axis)
        assert labels and all(re.fullmatch(r"\d+", lab) for lab in labels), axis


def test_value_ticks_are_round_and_cover_the_values() -> None:
    from tui.screens.graph import value_ticks

    lo, hi, ticks, labels = value_ticks(727.0, 993.3, 5)
    assert (lo, hi, labels) == (700, 1000, ["700", "800", "900", "1000"])
    lo, hi, ticks, labels = value_ticks(0.2, 0.42, 5)
    assert labels == ["0.2", "0.3", "0.4", "0.5"] and lo <= 0.2 and hi >= 0.42
    assert value_ticks(29.8, 29.8, 5)[3] == ["28", "29", "30", "31", "32"]  # one value: a band around it
    for a, b in ((-0.05, 0.03), (0.1, 7.99998), (1e-7, 3e-7), (12345, 98765)):
        lo, hi, ticks, labels = value_ticks(a, b, 6)
        assert lo <= a and hi >= b and 2 <= len(ticks) <= 7, (a, b, labels)
        assert len(set(labels)) == len(labels), labels  # distinct labels: enough decimals


async def test_y_labels_name_the_value_of_their_row() -> None:
    """The y axis is labelled with round values at their own rows (plotext's row-centre
    labels put `727` beside a line at 993.3): the row of the last point is the row whose
    label is nearest its value."""
    import re

    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(160, 50)) as pilot:
        g = await _open_graphs(pilot)
        plot = g.query_one("#plot-0", PlotextPlot)
        lines = re.sub(r"\x1b\[[0-9;]*m", "", plot.plt.build()).splitlines()
        labelled = [(i, float(m.group(1))) for i, line in enumerate(lines)
                    if (m := re.match(r"\s*(-?[\d.]+)\s*[┤│]", line))]
        assert len(labelled) >= 2, lines
        values = [v for _, v in labelled]
        gaps = {round(a - b, 9) for a, b in zip(values, values[1:])}
        assert len(gaps) == 1, labelled  # evenly spaced round values, top to bottom
        gap = gaps.pop()
        assert all(abs(v / gap - round(v / gap)) < 1e-6 for v in values), labelled


async def test_c_overlays_another_run_with_a_legend() -> None:
    """`c` lists the profile's other runs; the picked one is drawn on the same axes in
    its own colour, labelled in a legend, the resumed run stitched onto its parent."""
    import re

    from tui.screens.graph import ComparePicker

    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, GraphScreen) and len(app.screen.query(PlotextPlot)) == 5)
        g: GraphScreen = app.screen  # type: ignore[assignment]
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ComparePicker))
        picker: ComparePicker = app.screen  # type: ignore[assignment]
        assert [r.id for r in picker.runs] == ["raysubmit_demo0001", "raysubmit_demo0002"]
        await pilot.press("down", "space", "enter")  # the second row: the resumed run
        await until(pilot, lambda: app.screen is g and ("raysubmit_demo0002", "reward") in g.overlay)
        stitched = g.overlay[("raysubmit_demo0002", "reward")]
        first = b.run_series("raysubmit_demo0001", ["reward"])
        own = b.all_series()["reward"]
        assert stitched == [p for p in first if p[0] < own[0][0]] + own and first[0][0] == 1
        assert "compare (1)" in str(g.query_one("#graph-keys").render())
        plot = g.query_one("#plot-0", PlotextPlot)
        text = re.sub(r"\x1b\[[0-9;]*m", "", plot.plt.build())
        assert "this run" in text and "demo0002" in text  # the legend
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main_screen)


def test_wall_time_axis_sums_step_times() -> None:
    from tui.core.job.compare import by_wall_time

    times = [(2, 7200.0), (1, 3600.0), (3, 1800.0)]
    assert by_wall_time([(1, 0.1), (3, 0.3), (4, 0.4)], times) == [(1.0, 0.1), (3.5, 0.3)]


async def test_t_plots_runs_against_hours() -> None:
    """`t`: this run and the overlaid one against hours of training (summed step times)."""
    import re

    from tui.screens.graph import ComparePicker

    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, GraphScreen) and len(app.screen.query(PlotextPlot)) == 5)
        g: GraphScreen = app.screen  # type: ignore[assignment]
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ComparePicker))
        await pilot.press("space", "enter")
        await pilot.press("t")
        await until(pilot, lambda: ("raysubmit_demo0001", "timing_s/step") in g.overlay)
        await pilot.pause()
        assert g.by_time and "x: time" in str(g.query_one("#graph-keys").render())
        text = re.sub(r"\x1b\[[0-9;]*m", "", g.query_one("#plot-0", PlotextPlot).plt.build())
        assert "training time (sum of step times)" in text and "demo0001" in text
        # 412 steps of ~1000 s and 240 of ~1050 s: the axis reaches past 100 hours, not step 812,
        # labelled as durations (issue 36 major 6: no fractional hours)
        axis = text.splitlines()[next(i for i, line in enumerate(text.splitlines()) if "training time" in line) - 1]
        assert re.search(r"\b[1-8]d\d\dh\b", axis), axis
        assert not re.search(r"\d\.\d", axis), axis


async def test_graphs_use_the_panes_units() -> None:
    """Issue 36 major 6: MFU in percent as the training pane says it (VeRL logs a
    fraction), the step-time band as durations, not `0.1-7.99998`."""
    import re

    from tui.core.profile import Monitoring

    series = {"perf/mfu/actor": [(s, 0.2 + s / 1000) for s in range(1, 100)],
              "timing_s/step": [(s, 6.0) for s in range(1, 100)]}
    mon = Monitoring(mfu_pct=(20.0, 42.0), step_time_min=(0.1, 7.99998))
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        g = GraphScreen(lambda: series, mon)
        await app.push_screen(g)
        await until(pilot, lambda: len(g.query(PlotextPlot)) == 2)
        await settle(pilot)
        titles = {}
        for i, name in enumerate(g.selected):
            text = re.sub(r"\x1b\[[0-9;]*m", "", g.query_one(f"#plot-{i}", PlotextPlot).plt.build())
            titles[name] = text.splitlines()[0]
        mfu, st = titles["perf/mfu/actor"], titles["timing_s/step"]
        assert "[20-42%]" in mfu and "29.9%" in mfu, mfu
        assert "7.99998" not in st and "[6 s-8 min]" in st and "6 s" in st, st
