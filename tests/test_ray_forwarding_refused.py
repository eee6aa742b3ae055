"""setup-ray when the head's sshd refuses TCP forwarding (issue 39 D11).

setup-ray looks whether anything listens on Ray's GCS port through a direct-tcpip
channel. Under `AllowTcpForwarding no` the head's sshd refuses every such channel
("administratively prohibited", before it tries to connect), which the probe used to
read as "nothing listens": Ray was taken for down without `ray status`, and
`ray stop --force` ran everywhere with no question, killing whatever job was on it. Now
a refused probe says nothing either way: `ray status` is asked; if Ray answers, its
answer stands (a healthy Ray is left alone), else Ray's state is unknown and setup-ray
asks first (the console's confirmation; headless without --yes it refuses in one line).

The nodes are real SSH servers: the built-in one told to refuse forwarding as OpenSSH
does, and OpenSSH's own sshd with `AllowTcpForwarding no`. Only `ray` is simulated (a
script on the node's PATH that records every call, so a `stop` or `start` would show).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_sshd
from tests.test_ray_state_unknown import WAIT_S, _called, _fake_ray, _free_port, _profile_file, listening
from tui.core.actions import ray_setup
from tui.core.profile import load_profile

RAY_UP = """#!/bin/sh
echo "$1" >> {calls}
case "$1" in
  status) cat <<'EOF'
======== Autoscaler status: 2025-09-23 03:00:18.401662 ========
Node status
---------------------------------------------------------------
Active:
 1 node_f2e99af987618864161970a2b891f4e31f4edf2236deb98329cc5a17
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 8.0/96.0 CPU
 8.0/8.0 GPU
 0B/1.91TiB memory
 0B/18.63GiB object_store_memory
EOF
  exit 0 ;;
  *) echo "ok"; exit 0 ;;
esac
"""


@pytest.fixture(autouse=True)
def _short_status_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hanging `ray status` is given up on after 3 s, not a minute (same code path)."""
    monkeypatch.setattr(ray_setup, "STATUS_TIMEOUT_S", 3.0)


def _ray_up(tmp_path: Path) -> tuple[Path, Path]:
    """A `ray` whose status reports this profile's one node with its 8 GPUs."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "ray-calls"
    calls.write_text("")
    ray = bindir / "ray"
    ray.write_text(RAY_UP.format(calls=calls))
    ray.chmod(0o755)
    return bindir, calls


async def _no_forwarding_node(node_server: Any, bindir: Path) -> Any:
    return await node_server(env={"PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"},
                             tcp_forwarding=False)


async def _setup_ray(profile_path: Path) -> list[Any]:
    from tui.core.actions.registry import run_action
    from tui.core.actions.remote import PoolRemote
    from tui.core.ssh import SessionPool

    prof = load_profile(profile_path)
    pool = SessionPool(prof)
    try:
        await asyncio.wait_for(pool.open(), WAIT_S)

        async def go() -> list[Any]:
            return [ev async for ev in run_action("setup-ray", prof, PoolRemote(pool, prof))]
        return await asyncio.wait_for(go(), WAIT_S)
    finally:
        await asyncio.wait_for(pool.close(), WAIT_S)


async def test_the_probe_tells_refused_forwarding_from_a_closed_port(node_server: Any, ssh_kit: Any,
                                                                      tmp_path: Path) -> None:
    """The SSH layer: a closed port is "nothing listens" (False), a refused channel is
    "cannot tell" (None); with forwarding on, a listening port is True."""
    from tui.core.actions.remote import PoolRemote
    from tui.core.ssh import SessionPool

    bindir, _ = _fake_ray(tmp_path, "fails", 1)
    srv = await node_server()
    with listening() as gcs:
        prof = load_profile(_profile_file(tmp_path, srv.port, ssh_kit, gcs))
        pool = SessionPool(prof)
        try:
            await asyncio.wait_for(pool.open(), WAIT_S)
            remote = PoolRemote(pool, prof)
            closed = _free_port()
            assert await asyncio.wait_for(remote.tcp_probe("node1", "127.0.0.1", gcs), WAIT_S) is True
            assert await asyncio.wait_for(remote.tcp_probe("node1", "127.0.0.1", closed), WAIT_S) is False
            srv.tcp_forwarding = False
            assert await asyncio.wait_for(remote.tcp_probe("node1", "127.0.0.1", gcs), WAIT_S) is None
            assert await asyncio.wait_for(remote.tcp_probe("node1", "127.0.0.1", closed), WAIT_S) is None
            assert await asyncio.wait_for(remote.tcp_reachable("node1", "127.0.0.1", gcs), WAIT_S) is False
        finally:
            await asyncio.wait_for(pool.close(), WAIT_S)
    del bindir


@pytest.mark.parametrize("mode", ["hangs", "fails"])
@pytest.mark.parametrize("gcs_listens", [True, False])
async def test_core_setup_ray_asks_when_forwarding_is_refused(node_server: Any, ssh_kit: Any, tmp_path: Path,
                                                              mode: str, gcs_listens: bool) -> None:
    """Forwarding refused and `ray status` without an answer: whether Ray's port has a
    listener or not, the core stops short with the question; nothing stopped or started."""
    with listening() as gcs:
        port = gcs if gcs_listens else _free_port()
        bindir, calls = _fake_ray(tmp_path, mode, port)
        srv = await _no_forwarding_node(node_server, bindir)
        events = await _setup_ray(_profile_file(tmp_path, srv.port, ssh_kit, port))
    last = events[-1]
    lines = [e.one_line() for e in events]
    assert last.kind == "fail" and last.data.get("confirm"), lines
    assert last.data.get("state_unknown") is True, lines
    q = last.data["confirm"]
    assert "state is unknown" in q and "a job may be running" in q and "ray stop --force" in q, q
    assert "AllowTcpForwarding no" in q and f"127.0.0.1:{port}" in q, q
    assert _called(calls) == ["status"]  # asked, and nothing else ran


async def test_a_healthy_ray_behind_a_non_forwarding_sshd_is_left_alone(node_server: Any, ssh_kit: Any,
                                                                        tmp_path: Path) -> None:
    """The worst of it: Ray up as the profile wants, a job on it; the refused probe made
    setup-ray stop it and start it again. Now `ray status` is asked and its answer kept."""
    bindir, calls = _ray_up(tmp_path)
    srv = await _no_forwarding_node(node_server, bindir)
    events = await _setup_ray(_profile_file(tmp_path, srv.port, ssh_kit, _free_port()))
    assert events[-1].kind == "skip" and "Ray already up: 1 nodes, 8 GPUs" in events[-1].message, \
        [e.one_line() for e in events]
    # asked, its whole cluster checked against the GCS's node list (`ray status` lags a
    # lost node), and nothing stopped or started
    assert _called(calls) == ["status", "list"]


@pytest.mark.parametrize("mode", ["hangs", "fails"])
async def test_cli_setup_ray_without_yes_refuses_when_forwarding_is_refused(
        node_server: Any, ssh_kit: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    from tui.cli import main

    port = _free_port()  # nothing listens either: only `ray status` could have told
    bindir, calls = _fake_ray(tmp_path, mode, port)
    srv = await _no_forwarding_node(node_server, bindir)
    p = _profile_file(tmp_path, srv.port, ssh_kit, port)
    rc = await asyncio.wait_for(asyncio.to_thread(main, ["setup-ray", "--profile", str(p)]), WAIT_S)
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert rc == 2, out
    assert len(lines) == 1, lines
    assert "state is unknown" in lines[0] and "refusing without --yes" in lines[0], lines[0]
    assert "AllowTcpForwarding no" in lines[0], lines[0]
    assert "Traceback" not in out.err
    assert "stop" not in _called(calls) and "start" not in _called(calls)


async def test_cli_setup_ray_with_yes_still_sets_up_without_forwarding(node_server: Any, ssh_kit: Any,
                                                                       tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The control: --yes answers the question, so the stop and the start do run."""
    from tui.cli import main

    port = _free_port()
    bindir, calls = _fake_ray(tmp_path, "fails", port)
    srv = await _no_forwarding_node(node_server, bindir)
    p = _profile_file(tmp_path, srv.port, ssh_kit, port)
    await asyncio.wait_for(asyncio.to_thread(main, ["setup-ray", "--profile", str(p), "--yes"]), WAIT_S)
    capsys.readouterr()
    assert "stop" in _called(calls) and "start" in _called(calls)


async def test_openssh_with_allow_tcp_forwarding_no(ssh_kit: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The same on OpenSSH's own sshd, its config saying `AllowTcpForwarding no`: its
    refusal is what the probe reads as "cannot tell"; setup-ray asks, runs no stop."""
    sshd = require_sshd()
    import tui.sim.opensshd as ossh

    written: list[str] = []

    def no_forwarding(**kw: Any) -> str:
        text = original(**kw)
        assert "AllowTcpForwarding local\n" in text
        written.append(text.replace("AllowTcpForwarding local\n", "AllowTcpForwarding no\n"))
        return written[-1]

    original = ossh.sshd_config
    monkeypatch.setattr(ossh, "sshd_config", no_forwarding)
    port = _free_port()
    bindir, calls = _fake_ray(tmp_path, "fails", port)
    home = tmp_path / "home"
    home.mkdir()
    ssh_kit.host_key.chmod(0o600)
    node = ossh.OpenSshNode("node1", "127.0.0.1", ssh_kit.host_key, ssh_kit.client_pub,
                            {"PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(home),
                             "LANG": "C.UTF-8"}, tmp_path / "sshd", sshd)
    await asyncio.wait_for(node.start(), WAIT_S)
    try:
        ssh_kit.trust("127.0.0.1", node.port)
        assert written and "AllowTcpForwarding no" in (tmp_path / "sshd" / "sshd_config").read_text()
        events = await _setup_ray(_profile_file(tmp_path, node.port, ssh_kit, port))
    finally:
        await asyncio.wait_for(node.stop(), WAIT_S)
    last = events[-1]
    assert last.kind == "fail" and last.data.get("state_unknown") is True, [e.one_line() for e in events]
    assert "AllowTcpForwarding no" in last.data["confirm"]
    assert "stop" not in _called(calls) and "start" not in _called(calls)


async def test_tui_r_asks_when_forwarding_is_refused(node_server: Any, ssh_kit: Any, tmp_path: Path) -> None:
    """`r` in the console on the live backend, the head refusing TCP forwarding (the
    console's own dashboard tunnel fails too): the confirmation modal names the unknown
    state; "n" leaves Ray alone (no stop, no start on the node)."""
    from tests.pilot_helpers import SIZE, settle, until
    from tui.app import RlconsoleApp
    from tui.backend.live import LiveBackend
    from widgets.confirm import ConfirmationModal

    port = _free_port()
    bindir, calls = _fake_ray(tmp_path, "fails", port)
    srv = await _no_forwarding_node(node_server, bindir)
    prof = load_profile(_profile_file(tmp_path, srv.port, ssh_kit, port))
    app = RlconsoleApp(LiveBackend(prof))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal), timeout=WAIT_S)
        modal = app.screen
        assert isinstance(modal, ConfirmationModal)
        message = modal.message
        assert "state is unknown" in message and "AllowTcpForwarding no" in message, message
        await pilot.press("n")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmationModal)
    assert "stop" not in _called(calls) and "start" not in _called(calls)
