"""Listening ports for a simulated cluster's servers, reserved machine-wide while it lives.

A sim draws its Ray ports (GCS, dashboard, each node's raylet and agents) and its Slurm
ports at `sim up`, writes them into its profile, and binds them only later, at every
setup-ray. Checking a port free when it is drawn does not keep it free: two sims up at
once (two pytest-xdist workers, the non-root user's sim beside root's, a demo beside a
test) drew from the same range independently, about 28 ports each out of some 12,800,
so a pair of them shared a port about once in sixteen. The sim that bound it second
then failed in a way that repeats on every retry and says nothing of ports: a worker's
raylet that cannot bind its node-manager port never registers, and `ray start` reports
only Ray's 30 s start-up deadline (CI: three starts of one worker in a row); a head
whose dashboard port is held answers no HTTP.

So the range is cut into slots of SLOT ports, and a sim holds the slots its ports come
from for as long as its daemon lives. A slot is held by binding an abstract Unix socket
named for it: Linux keeps that namespace per network namespace (every sim shares the
machine's loopback), across users (root's sims and an unprivileged user's), with no file
to leave behind, and releases the name when the holder exits, however it exits. Where
abstract sockets do not exist (not Linux), ports are drawn as before, unreserved.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import sys
from pathlib import Path

log = logging.getLogger(__name__)

LISTEN_PORTS_FROM = 20000
"""Lowest port the sim hands to a server (Ray's GCS, dashboard, agents): above Ray's own
default range for its workers (10002-19999), which it refuses to overlap."""

SLOT = 32
"""Ports per reserved slot: a 4-node sim's 27 Ray ports fit one."""

SLOT_NAME = "rlconsole-sim-ports-{start}"
"""The abstract socket name that holds the slot starting at `start` (a port number, so
two processes that cut the range alike name a slot alike)."""


def ephemeral_low() -> int:
    """Where the kernel's range for outgoing connections' local ports starts."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class PortReservation:
    """n distinct ports, free when drawn, and the slot holds that keep every other sim's
    draw away from them until `close()` (or the process's exit)."""

    def __init__(self, ports: list[int], holds: list[socket.socket]) -> None:
        self.ports = ports
        self._holds = holds

    @property
    def reserved(self) -> bool:
        """False when the ports were drawn unreserved (no abstract sockets here)."""
        return bool(self._holds)

    def close(self) -> None:
        for s in self._holds:
            s.close()
        self._holds = []


def _hold(start: int) -> socket.socket | None:
    """The slot starting at `start`, held; None when another process holds it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind("\0" + SLOT_NAME.format(start=start))
    except OSError:
        s.close()
        return None
    return s


def abstract_sockets() -> bool:
    """Whether this machine has Linux's abstract socket namespace."""
    return sys.platform.startswith("linux") and hasattr(socket, "AF_UNIX")


def _bindable(port: int, host: str) -> socket.socket | None:
    s = socket.socket()
    try:
        s.bind((host, port))
    except OSError:
        s.close()
        return None
    return s


def reserve_ports(n: int, host: str = "0.0.0.0") -> PortReservation:
    """n distinct free TCP ports from [LISTEN_PORTS_FROM, the ephemeral range), in
    consecutive slots that no other live sim holds (see the module's docstring).

    They are drawn below the kernel's ephemeral range: a port the kernel picks (bind to
    0) is one it may give any outgoing connection's local end meanwhile, and on a busy
    machine one did, minutes later (Ray's GCS failed with "Address already in use").
    Each port is checked free by binding it, all held open together so none repeats."""
    low, high = LISTEN_PORTS_FROM, ephemeral_low()
    slots = list(range(low, high - SLOT + 1, SLOT))
    rng = random.SystemRandom()
    if abstract_sockets() and slots:
        first = rng.randrange(len(slots))  # random, so that sims rarely contend for a slot
        for k in range(len(slots)):  # then every slot in turn: a free run is found if any
            got = _draw_reserved(n, host, slots, (first + k) % len(slots))
            if got is not None:
                return got
        log.warning("no %d free ports in unheld slots of %d-%d: drawn unreserved", n, low, high)
    return PortReservation(_draw_unreserved(n, host, low, high, rng), [])


def _draw_reserved(n: int, host: str, slots: list[int], i: int) -> PortReservation | None:
    """From slot i on, hold consecutive slots and take their free ports until n; None
    (nothing kept) when a slot on the way is held by another sim or the range ends."""
    holds: list[socket.socket] = []
    taken: list[socket.socket] = []
    try:
        while len(taken) < n:
            if i >= len(slots):
                return None
            h = _hold(slots[i])
            if h is None:
                return None
            holds.append(h)
            for port in range(slots[i], slots[i] + SLOT):
                if len(taken) == n:
                    break
                s = _bindable(port, host)
                if s is not None:
                    taken.append(s)
            i += 1
        ports = [s.getsockname()[1] for s in taken]
        kept, holds = holds, []
        return PortReservation(ports, kept)
    finally:
        for s in taken:
            s.close()
        for h in holds:  # not kept: this draw failed
            h.close()


def _draw_unreserved(n: int, host: str, low: int, high: int, rng: random.SystemRandom) -> list[int]:
    """Random free ports in [low, high), the kernel's own pick as the fallback."""
    socks: list[socket.socket] = []
    try:
        tries = 0
        while len(socks) < n:
            tries += 1
            port = rng.randrange(low, high) if high - low > 4 * n and tries < 50 * n else 0
            s = _bindable(port, host)
            if s is not None:
                socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
