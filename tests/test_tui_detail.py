"""Drill-down (issue 14 item 3): Enter or a click on a node or card opens its detail:
processes per card with memory, utilisation history, container state / exit code / OOM,
the Ray node id and its last error."""

from __future__ import annotations

from dataclasses import replace

from tui.app import RlconsoleApp
from tui.backend.static import demo_backend, demo_state
from tui.core.probes import ray_state_from_api
from tui.core.state import ContainerState
from tui.screens.node_detail import NodeDetailScreen
from widgets.node_grid import NodeGrid

from .pilot_helpers import settle, until


def _detail(app: RlconsoleApp) -> str:
    return str(app.screen.query_one("#detail-text").render())


async def test_enter_on_grid_opens_node_detail_and_esc_returns() -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        grid = app.screen.query_one(NodeGrid)
        grid.focus()
        await pilot.press("down", "enter")
        await until(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.query("#detail-text"))
        await until(pilot, lambda: "card" in _detail(app))
        assert app.screen.node_name == "node71"
        text = _detail(app)
        assert "node71" in text and "train-rl" in text and "running" in text
        assert "01010101" in text and "ALIVE" in text  # the Ray node id
        assert "sglang::scheduler" in text and "9000 MiB" in text  # processes with memory
        assert "(11 samples)" in text  # the grid's utilisation history
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main_screen)


async def test_click_on_a_card_opens_that_card() -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        grid = app.screen.query_one(NodeGrid)
        lay = grid._layout
        assert not lay.dense
        # node116's block, card 5 (first card line of the block)
        x = 5 * (lay.cell_w + 1) + 2
        y = 2 * lay.block_h + 1
        assert grid.hit(x, y) == ("node116", 5)
        await pilot.click(NodeGrid, offset=(x, y))
        await until(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.query("#detail-text"))
        await until(pilot, lambda: "card" in _detail(app))
        assert (app.screen.node_name, app.screen.card) == ("node116", 5)
        text = _detail(app)
        assert "▶ card 5" in text
        assert text.index("card 5") < text.index("card 0")  # the clicked card comes first


async def test_detail_shows_exit_code_oom_and_ray_error_live() -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.push_screen(NodeDetailScreen("node116"))
        await until(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.query("#detail-text"))
        await until(pilot, lambda: "OOM killed" in _detail(app))
        assert "OOM killed —" in _detail(app)
        st = demo_state(b.profile)
        node = next(n for n in st.nodes if n.name == "node116")
        node.container = ContainerState(name="train-rl", status="exited", exit_code=137, oom_killed=True)
        st.ray.nodes = [replace(r, alive=False, error="[bold]health check failed[/]")
                        if r.address == node.address else r for r in st.ray.nodes]
        b.push_state(st)
        await until(pilot, lambda: "137" in _detail(app), timeout=10)
        text = _detail(app)
        assert "exited" in text and "OOM killed YES" in text
        assert "DEAD" in text and "[bold]health check failed[/]" in text  # shown as text, not markup


def test_ray_node_last_error_parsed_and_bounded() -> None:
    doc = {"data": {"result": {"result": [
        {"node_id": "dd", "node_ip": "127.0.0.5", "state": "DEAD",
         "state_message": "Unexpected termination: health check failed " + "x" * 2000},
        {"node_id": "ee", "node_ip": "127.0.0.6", "state": "ALIVE", "state_message": None},
        {"node_id": "ff", "node_ip": "127.0.0.7", "state": "ALIVE", "state_message": {"not": "text"}},
    ]}}}
    st = ray_state_from_api(doc, {}, [])
    dead, ok, odd = st.nodes
    assert dead.error.startswith("Unexpected termination") and len(dead.error) == 500
    assert ok.error is None and odd.error is None


async def test_j_and_k_move_the_grid_cursor_and_scroll_the_log() -> None:
    """j/k as k9s and less users expect: down and up in the grid (Enter opens the node j
    reached, as with the arrows), and down/up a line in the focused log."""
    from widgets.log_pane import LogPane, SearchLog

    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        grid = app.screen.query_one(NodeGrid)
        grid.focus()
        start = grid.cursor
        await pilot.press("j", "j", "k")
        await settle(pilot)
        assert grid.cursor == start + 1
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
        assert app.screen.node_name == "node71"  # what `down` reached in the test above
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main_screen)
        pane = app.screen.query_one(LogPane)
        pane.add_lines([f"line {i}" for i in range(500)])
        pane.flush()
        log = pane.query_one(SearchLog)
        log.focus()
        await settle(pilot)
        bottom = log.scroll_offset.y
        assert bottom > 0
        await pilot.press("k", "k", "k")
        await settle(pilot)
        assert log.scroll_offset.y == bottom - 3
        await pilot.press("j")
        await settle(pilot)
        assert log.scroll_offset.y == bottom - 2


async def test_a_worker_that_rejoined_ray_reads_alive_in_its_row_and_its_detail() -> None:
    """Ray keeps a rejoined worker's old records (DEAD, old node ids) beside the new one,
    in no promised order: the row and the detail show the ALIVE one."""
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        st = demo_state(b.profile)
        node = next(n for n in st.nodes if n.name == "node116")
        new = next(r for r in st.ray.nodes if r.address == node.address)
        assert new.alive
        st.ray.nodes.insert(0, replace(new, node_id="0ld1", alive=False, error="raylet died"))
        st.ray.nodes.append(replace(new, node_id="0ld2", alive=False, error="raylet died"))
        node.container = replace(node.container, status="paused")  # to know the push is drawn
        b.push_state(st)
        grid = app.screen.query_one(NodeGrid)
        await until(pilot, lambda: grid.row("node116").header.container == "paused", timeout=10)
        assert grid.row("node116").header.ray == "alive"
        app.push_screen(NodeDetailScreen("node116"))
        await until(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.query("#detail-text"))
        await until(pilot, lambda: "paused" in _detail(app), timeout=10)
        text = _detail(app)
        assert "ALIVE" in text and new.node_id in text and "0ld" not in text
