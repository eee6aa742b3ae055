"""Which bind addresses reach beyond this machine: the one rule for every listener the
console starts or checks (Ray's dashboard in preflight and setup-ray, `rlconsole
serve`). A bind that is not loopback is reachable from the network, whether it names
every interface (0.0.0.0, ::) or one of them (the head's 10.x address)."""

from __future__ import annotations

import ipaddress

WILDCARDS = ("0.0.0.0", "::", "[::]", "")
"""Binds that name every interface: they are not an address anyone can connect to."""


def is_loopback(host: str) -> bool:
    """Whether a bind address is reachable from this machine only."""
    host = host.strip()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to, probably not loopback


def is_wildcard(host: str) -> bool:
    """Whether a bind names every interface (connect to something else instead)."""
    return host.strip() in WILDCARDS


def exposed(host: str) -> bool:
    """Whether a listener bound to `host` can be reached from the network."""
    return not is_loopback(host)
