"""Read a hostfile into nodes: one host per line, MPI's `host slots=N`, or `ip gpus`.

The first host is the head unless a line is marked (`head`, `role=head` or `# head`).
Comments and blank lines are skipped; the line number of each host is kept so the
profile can say where each node came from.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass


@dataclass
class Host:
    address: str
    gpus: int | None
    head: bool
    line: int


def parse_hostfile(text: str) -> tuple[list[Host], list[tuple[int, str]]]:
    hosts: list[Host] = []
    notes: list[tuple[int, str]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        marked = bool(re.search(r"#\s*head\b", raw))
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        addr = parts[0]
        gpus: int | None = None
        for p in parts[1:]:
            m = re.fullmatch(r"(slots|gpus|max_slots|max-slots)[=:]([0-9]{1,6})", p)
            if m and gpus is None:
                gpus = int(m.group(2))
            elif re.fullmatch(r"[0-9]{1,6}", p) and gpus is None:
                gpus = int(p)
            elif p.lower() in ("head", "role=head"):
                marked = True
            elif not m:
                notes.append((n, f"hostfile: {p!r} not understood; ignored"))
        if "@" in addr:
            addr = addr.split("@", 1)[1]
        if ":" in addr and not _is_ip(addr):
            addr, _, slots = addr.partition(":")
            if re.fullmatch(r"[0-9]{1,6}", slots) and gpus is None:
                gpus = int(slots)
        hosts.append(Host(addr, gpus, marked, n))
    heads = [h for h in hosts if h.head]
    if len(heads) > 1:
        notes.append((heads[1].line, f"hostfile: more than one head marked; {heads[0].address} is the head"))
        for h in heads[1:]:
            h.head = False
    if hosts and not heads:
        hosts[0].head = True
    seen: dict[str, int] = {}
    for h in hosts:
        if h.address in seen:
            notes.append((h.line, f"hostfile: {h.address} listed twice (also line {seen[h.address]})"))
        seen.setdefault(h.address, h.line)
    return hosts, notes


def _is_ip(s: str) -> bool:
    try:
        ipaddress.ip_address(s)
        return True
    except ValueError:
        return False


def node_names(hosts: list[Host]) -> list[str]:
    """`node125` from 10.10.142.125 when the last octets are unique, else the short host
    name, else node1..N."""
    if hosts and all(_is_ip(h.address) and ":" not in h.address for h in hosts):
        names = ["node" + h.address.rsplit(".", 1)[1] for h in hosts]
        if len(set(names)) == len(names):
            return names
    names = [re.sub(r"[^A-Za-z0-9_.\-]", "-", h.address.split(".")[0]) or f"node{i + 1}"
             for i, h in enumerate(hosts)]
    if len(set(names)) == len(names) and not any(_is_ip(h.address) for h in hosts):
        return names
    return [f"node{i + 1}" for i in range(len(hosts))]
