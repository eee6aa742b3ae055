"""Issue 37: 200 nodes from one console, one connection per node, their start-up paced.

OpenSSH's `MaxStartups` drops new connections once too many are unauthenticated on one
sshd (default 10:30:100): a pool opens at most `connect_concurrency` at once. Real parts:
OpenSSH's own sshd with a tight `MaxStartups`, many sessions to it at once.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_node, require_sshd
from tui.core.profile import load_profile
from tui.core.ssh import CONNECT_CONCURRENCY, NodeSession, SessionPool
from tui.sim.opensshd import PRIVSEP_DIR, descendants, sshd_config

DATA = Path(__file__).resolve().parent / "data"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _banner(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    try:
        return sock.recv(4)
    except OSError:
        return b""


LIMIT = 4
"""The sshd's MaxStartups: it refuses a connection while this many are unauthenticated."""


def _settled(pid: int) -> None:
    """Wait until sshd `pid` has no connection left (each one is a child process), so
    that none still counts against MaxStartups. Bounded; not a measurement."""
    deadline = time.monotonic() + 30
    while descendants(pid):
        assert time.monotonic() < deadline, "sshd kept connections that were closed"
        time.sleep(0.05)


@pytest.fixture
def tight_sshd(ssh_kit: Any, tmp_path: Path) -> Any:
    """One OpenSSH sshd on loopback that refuses a connection while LIMIT others are
    unauthenticated (`MaxStartups LIMIT:100:LIMIT`). Yields (port, pid); stopped by its PID."""
    sshd = require_sshd()
    port = _free_port()
    ssh_kit.host_key.chmod(0o600)
    home = tmp_path / "home"
    home.mkdir()
    cfg = tmp_path / "sshd_config"
    cfg.write_text(sshd_config(address="127.0.0.1", port=port, host_key=ssh_kit.host_key,
                               authorized_keys=ssh_kit.client_pub, env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                               user=getpass.getuser())
                   + f"MaxStartups {LIMIT}:100:{LIMIT}\n")
    if os.geteuid() == 0 and not PRIVSEP_DIR.exists():
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    log = (tmp_path / "sshd.log").open("ab")
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(cfg)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30  # a bound on start-up, not a measurement
        while True:
            with socket.socket() as s:
                s.settimeout(2)
                if s.connect_ex(("127.0.0.1", port)) == 0 and _banner(s).startswith(b"SSH-"):
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"sshd did not start: {(tmp_path / 'sshd.log').read_text()[-2000:]}")
            time.sleep(0.1)
        ssh_kit.trust("127.0.0.1", port)
        _settled(proc.pid)
        yield port, proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the sshd and its children
        proc.wait(timeout=30)
        log.close()


def _pool(ssh_kit: Any, port: int, nodes: int, concurrency: int) -> SessionPool:
    prof = load_profile(DATA / "good_profile.yaml")
    prof.nodes = [make_node(f"n{i}", "127.0.0.1", port, ssh_kit.client_key, role="head" if i == 0 else "worker")
                  for i in range(nodes)]
    prof.ssh.known_hosts = str(ssh_kit.known_hosts)
    prof.ssh.connect_timeout_s = 30
    return SessionPool(prof, connect_concurrency=concurrency, backoff_initial_s=0.2, backoff_max_s=1.0)


@pytest.mark.integration
async def test_many_nodes_connect_without_hitting_maxstartups(ssh_kit: Any, tight_sshd: tuple[int, int]) -> None:
    port, pid = tight_sshd
    # the limit is real: LIMIT connections that have not logged in make sshd drop the next
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(LIMIT)]
    try:
        assert all(_banner(s).startswith(b"SSH-") for s in held)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as extra:
            # refused: closed at once, or after sshd's "Exceeded MaxStartups" line
            assert not _banner(extra).startswith(b"SSH-"), "sshd accepted one connection too many"
    finally:
        for s in held:
            s.close()
    await asyncio.to_thread(_settled, pid)

    pool = _pool(ssh_kit, port, 16, concurrency=LIMIT // 2)
    downs: list[str] = []

    def seen(sess: NodeSession) -> None:
        if sess.state == "down":
            downs.append(f"{sess.name}: {sess.reason}")

    for sess in pool:
        sess.on_state_change(seen)
    try:
        up = await asyncio.wait_for(pool.open(), 120)
        assert all(up.values()), up
        assert downs == [], downs  # no connection was dropped by MaxStartups
        assert all(s.connects == 1 for s in pool)
        r = await asyncio.wait_for(pool.session("n15").run("echo ok"), 60)
        assert r.stdout.strip() == "ok"
    finally:
        await asyncio.wait_for(pool.close(), 60)


def test_the_default_bound_is_under_openssh_default_maxstartups() -> None:
    assert 0 < CONNECT_CONCURRENCY < 10  # MaxStartups 10:30:100 starts dropping at 10
