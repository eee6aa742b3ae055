"""setup-ray when Ray's state is unknown (issue 27, medium 4).

Something listens on Ray's GCS port, but `ray status` hangs or fails: Ray may well be up
with a job on it. setup-ray used to take that for "Ray is not running" and ran
`ray stop --force` everywhere without asking. Now an unknown state counts as "a job may
be running": the core stops short with the question, the console shows it in the
confirmation modal, and the headless CLI refuses without --yes, naming the unknown state.

The node is a real in-process SSH server; Ray's port is a real listening socket on a
free loopback port. Only `ray` is simulated: a script on the node's PATH whose `status`
sleeps or exits 1, and which records every call (so a `stop` or `start` would show).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import socket
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tui.core.actions import ray_setup
from tui.core.profile import load_profile, packaged_profiles_dir

WAIT_S = 120.0

FAKE_RAY = """#!/bin/sh
echo "$1" >> {calls}
case "$1" in
  status)
    if [ "{mode}" = hangs ]; then exec sleep 300; fi
    echo "ConnectionError: GCS at {gcs} did not answer in time" >&2; exit 1 ;;
  *) echo "ok"; exit 0 ;;
esac
"""


@contextlib.contextmanager
def listening() -> Iterator[int]:
    """A real socket listening on a free loopback port: Ray's port "answers"."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fake_ray(tmp_path: Path, mode: str, gcs_port: int) -> tuple[Path, Path]:
    """A bin dir holding `ray`, and the file its calls are recorded in."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "ray-calls"
    calls.write_text("")
    ray = bindir / "ray"
    ray.write_text(FAKE_RAY.format(calls=calls, mode=mode, gcs=f"127.0.0.1:{gcs_port}"))
    ray.chmod(0o755)
    return bindir, calls


def _profile_file(tmp_path: Path, ssh_port: int, ssh_kit: Any, gcs_port: int) -> Path:
    """The packaged profile cut to one head node on the test's SSH server, with commands
    run in its own shell (`direct`), Ray's port the listening socket."""
    data = yaml.safe_load((packaged_profiles_dir() / "qwen3-8b-grpo-32gpu.yaml").read_text())
    data["nodes"] = [{"name": "node1", "address": "127.0.0.1", "gpus": 8, "role": "head",
                      "ssh": {"port": ssh_port, "user": getpass.getuser(), "identity": str(ssh_kit.client_key)}}]
    data["ssh"] = {"known_hosts": str(ssh_kit.known_hosts), "connect_timeout_s": 10}
    data["container"]["access"] = "direct"
    ray = data.setdefault("ray", {})
    ray.update({"binary": "ray", "head_port": gcs_port, "dashboard_host": "127.0.0.1",
                "dashboard_port": _free_port(), "stop_before_start": True, "join_timeout_s": 5})
    p = tmp_path / "unknown.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


async def _node(node_server: Any, bindir: Path) -> Any:
    return await node_server(env={"PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"})


def _called(calls: Path) -> list[str]:
    return calls.read_text().split()


@pytest.fixture(autouse=True)
def _short_status_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hanging `ray status` is given up on after 3 s, not a minute (same code path)."""
    monkeypatch.setattr(ray_setup, "STATUS_TIMEOUT_S", 3.0)


@pytest.mark.parametrize("mode", ["hangs", "fails"])
async def test_core_setup_ray_stops_short_when_state_is_unknown(node_server, ssh_kit, tmp_path: Path,
                                                                 mode: str) -> None:
    from tui.core.actions.registry import run_action
    from tui.core.actions.remote import PoolRemote
    from tui.core.ssh import SessionPool

    with listening() as gcs:
        bindir, calls = _fake_ray(tmp_path, mode, gcs)
        srv = await _node(node_server, bindir)
        prof = load_profile(_profile_file(tmp_path, srv.port, ssh_kit, gcs))
        pool = SessionPool(prof)
        try:
            await asyncio.wait_for(pool.open(), WAIT_S)

            async def go() -> list[Any]:
                return [ev async for ev in run_action("setup-ray", prof, PoolRemote(pool, prof))]
            events = await asyncio.wait_for(go(), WAIT_S)
        finally:
            await asyncio.wait_for(pool.close(), WAIT_S)
    last = events[-1]
    assert last.kind == "fail" and last.data.get("confirm"), [e.one_line() for e in events]
    assert last.data.get("state_unknown") is True
    assert "state is unknown" in last.data["confirm"] and "a job may be running" in last.data["confirm"]
    assert f"127.0.0.1:{gcs}" in last.data["confirm"] and "ray stop --force" in last.data["confirm"]
    assert "status" in _called(calls)
    assert "stop" not in _called(calls) and "start" not in _called(calls)


@pytest.mark.parametrize("mode", ["hangs", "fails"])
async def test_cli_setup_ray_without_yes_refuses_naming_the_unknown_state(node_server, ssh_kit, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str],
                                                                           mode: str) -> None:
    from tui.cli import main

    with listening() as gcs:
        bindir, calls = _fake_ray(tmp_path, mode, gcs)
        srv = await _node(node_server, bindir)
        p = _profile_file(tmp_path, srv.port, ssh_kit, gcs)
        # main() runs its own event loop: in a thread, as a user's shell would run it
        rc = await asyncio.wait_for(asyncio.to_thread(main, ["setup-ray", "--profile", str(p)]), WAIT_S)
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert rc == 2, out
    assert len(lines) == 1, lines
    assert "state is unknown" in lines[0] and "refusing without --yes" in lines[0], lines[0]
    assert "Traceback" not in out.err
    assert "status" in _called(calls)
    assert "stop" not in _called(calls) and "start" not in _called(calls)


async def test_cli_setup_ray_with_yes_still_sets_up(node_server, ssh_kit, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The control: --yes answers the question, so the stop and the start do run."""
    from tui.cli import main

    with listening() as gcs:
        bindir, calls = _fake_ray(tmp_path, "fails", gcs)
        srv = await _node(node_server, bindir)
        p = _profile_file(tmp_path, srv.port, ssh_kit, gcs)
        await asyncio.wait_for(asyncio.to_thread(main, ["setup-ray", "--profile", str(p), "--yes"]), WAIT_S)
    capsys.readouterr()
    assert "stop" in _called(calls) and "start" in _called(calls)


async def test_tui_r_asks_when_ray_state_is_unknown(node_server, ssh_kit, tmp_path: Path) -> None:
    """`r` in the console on the live backend: the confirmation modal, naming the
    unknown state; "n" leaves Ray alone (no stop, no start on the node)."""
    from tui.app import RlconsoleApp
    from tui.backend.live import LiveBackend
    from widgets.confirm import ConfirmationModal

    from .pilot_helpers import SIZE, settle, until

    with listening() as gcs:
        bindir, calls = _fake_ray(tmp_path, "fails", gcs)
        srv = await _node(node_server, bindir)
        prof = load_profile(_profile_file(tmp_path, srv.port, ssh_kit, gcs))
        app = RlconsoleApp(LiveBackend(prof))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("r")
            await until(pilot, lambda: isinstance(app.screen, ConfirmationModal), timeout=WAIT_S)
            message = app.screen.message
            assert "state is unknown" in message and "a job may be running" in message, message
            await pilot.press("n")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmationModal)
    assert "status" in _called(calls)
    assert "stop" not in _called(calls) and "start" not in _called(calls)
