"""SVG snapshots of the main screen (pytest-textual-snapshot).

Deterministic by construction: StaticBackend data (fixed timestamps, formula-made card
values, no randomness), no clock in the header, and the screenshot is taken only after
the log flush and the footer have settled. Regenerate after an intended visual change:
    pytest tests/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from tui.app import RlconsoleApp
from tui.backend.static import demo_backend, demo_state


async def _settle(pilot) -> None:
    await pilot.pause(0.3)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 50)], ids=["80x24", "120x40", "160x50"])
def test_main_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(RlconsoleApp(demo_backend()), terminal_size=size, run_before=_settle)


def test_main_screen_node_down_120x40(snap_compare) -> None:
    """A node down and its cards marked down, with the action panel mid-bring-up."""
    b = demo_backend()

    async def run_before(pilot) -> None:
        await _settle(pilot)
        b.push_state(demo_state(b.profile, down=["node116"]))
        await pilot.press("u")
        await _settle(pilot)
        await pilot.press("y")  # the demo's job runs: containers up asks first
        await _settle(pilot)

    assert snap_compare(RlconsoleApp(b), terminal_size=(120, 40), run_before=run_before)


def test_main_screen_dense_16_nodes_120x40(snap_compare) -> None:
    """16 nodes at 120x40: the grid goes one line per node on its own, nothing scrolls."""
    assert snap_compare(RlconsoleApp(demo_backend(nodes=16)), terminal_size=(120, 40), run_before=_settle)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 50)], ids=["80x24", "120x40", "160x50"])
def test_node_detail_screen(snap_compare, size: tuple[int, int]) -> None:
    """The drill-down of node116 card 5 (the nearly full one): container, Ray, processes."""
    from tui.screens.node_detail import NodeDetailScreen

    async def run_before(pilot) -> None:
        await _settle(pilot)
        pilot.app.push_screen(NodeDetailScreen("node116", 5))
        await _settle(pilot)

    assert snap_compare(RlconsoleApp(demo_backend()), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 50)], ids=["80x24", "120x40", "160x50"])
def test_graph_screen(snap_compare, size: tuple[int, int]) -> None:
    """`g`: the five preselected scalars with axes, smoothing 0.8 and the expected bands."""

    async def run_before(pilot) -> None:
        await _settle(pilot)
        await pilot.press("g")
        await _settle(pilot)

    assert snap_compare(RlconsoleApp(demo_backend()), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 50)], ids=["80x24", "120x40", "160x50"])
def test_log_filter(snap_compare, size: tuple[int, int]) -> None:
    """`&` filter mode: only the worker lines of 127.0.0.3, levels coloured."""
    b = demo_backend()

    async def run_before(pilot) -> None:
        await _settle(pilot)
        b.push_log(["(WorkerDict pid=5077, ip=127.0.0.3) WARNING: KV cache 97% full",
                    "(WorkerDict pid=5077, ip=127.0.0.3) Traceback (most recent call last):",
                    '(WorkerDict pid=5077, ip=127.0.0.3)   File "sglang/srt/managers/scheduler.py", line 42',
                    "(WorkerDict pid=5077, ip=127.0.0.3) RuntimeError: [bold]not markup[/]"])
        await pilot.press("ampersand", *"ip=127", "enter")
        await _settle(pilot)

    assert snap_compare(RlconsoleApp(b), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_graph_compare_overlay(snap_compare, size: tuple[int, int]) -> None:
    """`g`, then `c`: the first (failed) run's reward overlaid on this run's, a legend."""
    from tui.screens.graph import GraphScreen

    async def run_before(pilot) -> None:
        await _settle(pilot)
        await pilot.press("g")
        await _settle(pilot)
        await pilot.press("c")
        await _settle(pilot)
        await pilot.press("space", "enter")
        for _ in range(50):
            g = pilot.app.screen
            if isinstance(g, GraphScreen) and ("raysubmit_demo0001", "reward") in g.overlay:
                break
            await pilot.pause(0.05)
        await _settle(pilot)

    assert snap_compare(RlconsoleApp(demo_backend()), terminal_size=size, run_before=run_before)
