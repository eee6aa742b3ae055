"""Read-only mode (`--read-only`, `console: {read_only: true}`): a console that can be
handed to a colleague. The keys, help and palette offer nothing that changes the
cluster, the header says READ-ONLY, and the action API refuses changing actions even
when called directly: through the StaticBackend, the live registry over a real SSH
server (which must see no command at all), and the CLI.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from textual.command import CommandList

from tests.conftest import make_node
from tui.app import RlconsoleApp
from tui.backend.static import demo_backend, demo_profile
from tui.cli import main
from tui.commands import KEYS, offered_keys
from tui.core.actions.registry import CHANGING_ACTIONS, read_only_refusal, run_action
from tui.core.profile import ConsoleSettings, SshSettings, load_profile, packaged_profiles_dir
from tui.screens.help import HelpScreen
from tui.screens.main import MainScreen
from widgets.key_bar import KeyBar
from widgets.sim_badge import ReadOnlyBadge

SIZE = (120, 40)
WAIT_S = 60.0


def read_only_backend():
    b = demo_backend()
    b.profile = replace(b.profile, console=ConsoleSettings(read_only=True))
    return b


async def settle(pilot) -> None:
    await pilot.pause()
    await pilot.pause()


def test_changing_keys_are_exactly_the_changing_actions() -> None:
    changing = {k.key for k in KEYS if k.changes}
    assert changing == {"u", "m", "c", "r", "s", "x", "X"}
    assert {k.key for k in offered_keys(True)} == {k.key for k in KEYS} - changing
    assert set(CHANGING_ACTIONS) == {"containers", "model", "convert", "setup-ray", "submit", "stop"}


async def test_read_only_console_offers_no_changing_key_and_says_so() -> None:
    b = read_only_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "READ-ONLY" in app.sub_title
        assert app.screen.query_one(ReadOnlyBadge).display
        bar = app.screen.query_one(KeyBar)
        shown = {k.key for k in bar.keys}
        assert not shown & {"u", "m", "c", "r", "s", "x", "X"}
        assert {"p", "g", "a", "q", "question_mark"} <= shown
        bar_text = bar.render().plain if hasattr(bar.render(), "plain") else str(bar.render())
        assert "Submit" not in bar_text and "Help" in bar_text
        for key in ("u", "m", "c", "r", "s", "x", "X"):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, MainScreen), f"{key} opened {app.screen}"
        assert b.calls == []
        # the preflight only reads: still offered and runs
        await pilot.press("p")
        await pilot.pause()
        for _ in range(100):
            if b.calls:
                break
            await pilot.pause(0.02)
        assert b.calls == [("check", {})]
        await settle(pilot)
        if not isinstance(app.screen, MainScreen):  # the preflight's result screen
            await pilot.press("escape")
            await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        assert "READ-ONLY" in text
        assert "Submit the training job" not in text and "Graphs" in text


async def test_read_write_console_still_offers_everything() -> None:
    """The control: the same checks fail without read-only (the test can fail)."""
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "READ-ONLY" not in app.sub_title
        assert not app.screen.query_one(ReadOnlyBadge).display
        assert {"u", "s", "x"} <= {k.key for k in app.screen.query_one(KeyBar).keys}


async def test_palette_offers_no_changing_entry() -> None:
    b = read_only_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"Graph")
        loop = asyncio.get_running_loop()
        end = loop.time() + 5
        while not any("Graph" in str(o.prompt) for o in app.screen.query_one(CommandList).options):
            assert loop.time() < end, "the palette never offered Graph"
            await pilot.pause(0.02)
        for q in ("Submit", "Setup Ray", "Stop", "Containers"):
            inp = app.screen.query_one("CommandInput")
            inp.value = q
            await settle(pilot)
            await pilot.pause(0.1)
            prompts = [str(o.prompt) for o in app.screen.query_one(CommandList).options]
            assert not any(q in p for p in prompts), (q, prompts)
        # even if the main screen is asked directly (as the palette would), nothing runs
        await app.main_screen.run_action("submit")
        await settle(pilot)
        assert b.calls == []


async def test_static_backend_refuses_when_called_directly() -> None:
    b = read_only_backend()
    for name in CHANGING_ACTIONS:
        events = [ev async for ev in b.run_action(name)]
        assert len(events) == 1 and events[0].kind == "fail"
        assert "read-only" in events[0].message and events[0].message.startswith(name)
    assert b.calls == []


async def test_live_registry_refuses_and_the_node_sees_no_command(node_server, ssh_kit) -> None:
    """The live path (registry -> PoolRemote -> SessionPool) over a real SSH server: the
    refused actions send nothing. The control run without read-only does reach it."""
    from tui.core.actions.remote import PoolRemote
    from tui.core.ssh import SessionPool
    from tui.backend.live import LiveBackend

    srv = await node_server()
    node = make_node("node1", "127.0.0.1", srv.port, ssh_kit.client_key)
    base = replace(demo_profile(1, 8), nodes=[node],
                   ssh=SshSettings(known_hosts=str(ssh_kit.known_hosts), connect_timeout_s=10))
    ro = replace(base, console=ConsoleSettings(read_only=True))

    backend = LiveBackend(ro)  # the console's own action API, not started: no probes
    try:
        assert (await asyncio.wait_for(backend.pool.open(), WAIT_S)) == {"node1": True}
        for name in CHANGING_ACTIONS:
            events = await asyncio.wait_for(_collect(backend.run_action(name, cluster=True)), WAIT_S)
            assert [e.kind for e in events] == ["fail"], (name, events)
            assert events[0].message == read_only_refusal(name, ro)
        assert srv.commands == 0
    finally:
        await asyncio.wait_for(backend.stop(), WAIT_S)

    pool = SessionPool(base)
    try:
        await asyncio.wait_for(pool.open(), WAIT_S)
        events = await asyncio.wait_for(_collect(run_action("containers", base, PoolRemote(pool, base))), WAIT_S)
        assert not any("read-only" in e.message for e in events)
        assert srv.commands > 0
    finally:
        await asyncio.wait_for(pool.close(), WAIT_S)


async def _collect(gen) -> list:
    return [ev async for ev in gen]


def _loopback_profile(tmp_path: Path, read_only: bool | None) -> Path:
    data = yaml.safe_load((packaged_profiles_dir() / "qwen3-8b-grpo-32gpu.yaml").read_text())
    for i, n in enumerate(data["nodes"]):
        n["address"] = f"127.0.0.{i + 2}"
        n.pop("ssh", None)
    data.setdefault("ssh", {})["port"] = 1  # nothing listens: a leak would fail, not connect
    if read_only is not None:
        data["console"] = {"read_only": read_only}
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def test_profile_key_and_its_error(tmp_path: Path) -> None:
    assert load_profile(_loopback_profile(tmp_path, True)).console.read_only is True
    assert load_profile(_loopback_profile(tmp_path, None)).console.read_only is False
    p = _loopback_profile(tmp_path, True)
    p.write_text(p.read_text().replace("read_only: true", "read_only: maybe"))
    with pytest.raises(Exception) as e:
        load_profile(p)
    assert "console.read_only: expected true or false" in str(e.value) and f"{p}:" in str(e.value)


@pytest.mark.parametrize("how", ["flag", "profile"])
def test_cli_action_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str) -> None:
    p = _loopback_profile(tmp_path, True if how == "profile" else None)
    argv = ["submit", "--profile", str(p), "--yes"] + (["--read-only"] if how == "flag" else [])
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "submit: refused, the console is read-only" in err
