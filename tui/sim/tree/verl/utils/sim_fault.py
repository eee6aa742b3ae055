"""SIMULATION: a fault planted by `rlconsole sim fault`, acted out by the job's own processes.

`rlconsole sim fault KIND` writes ``$RLCONSOLE_SIM_DIR/fault.json``::

    {"kind": "oom", "node": "node2", "at_step": 3, "card": 5}

The stand-in trainer loop and the `WorkerDict` actors read it once per step and, from step
`at_step` on (0: the next step), the process that would fail on a real cluster fails the way
it does there, so that the console sees the real sequence: the same exception text in the
job log, the job turning FAILED (or staying RUNNING with no steps), the card tool's report
changing, a node dropping out of SSH and Ray. The texts are the real stack's (sources cited
where each is raised). `sim fault clear` and the next `submit` remove the file and undo what
can be undone (card files, a stopped sshd); see tui/sim/faults.py.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

__all__ = ["active", "OutOfMemoryError", "DistBackendError", "oom_error", "watchdog_error",
           "disk_full_error", "act_on_node", "kill_node"]

_TEMP_HOT_C = 93
_MEM_NEAR_FULL_MIB = 80600


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError (what torch_musa's caching allocator raises)."""


OutOfMemoryError.__module__ = "torch"


class DistBackendError(RuntimeError):
    """torch.distributed.DistBackendError (what a timed-out collective raises)."""


DistBackendError.__module__ = "torch.distributed"


def _sim_dir() -> Path | None:
    d = os.environ.get("RLCONSOLE_SIM_DIR")
    if d:
        return Path(d)
    nd = os.environ.get("RLCONSOLE_SIM_NODE_DIR")
    return Path(nd).parent.parent if nd else None


def my_node() -> str:
    return os.environ.get("RLCONSOLE_SIM_NODE", "")


def active(step: int, kinds: tuple[str, ...], node: str | None = None) -> dict[str, Any] | None:
    """The planted fault if it is one of `kinds`, due at `step` and (with `node`) on it."""
    d = _sim_dir()
    if d is None:
        return None
    try:
        f = json.loads((d / "fault.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(f, dict) or f.get("kind") not in kinds:
        return None
    if node is not None and f.get("node") not in (None, node):
        return None
    if step < int(f.get("at_step") or 0):
        return None
    return f


def oom_error(card: int) -> OutOfMemoryError:
    """torch_musa's message (csrc/core/MUSACachingAllocator.cpp, the format of torch's
    c10/cuda/CUDACachingAllocator.cpp with MUSA for CUDA)."""
    return OutOfMemoryError(
        f"MUSA out of memory. Tried to allocate 2.32 GiB. GPU {card} has a total capacity of "
        "79.92 GiB of which 1.06 GiB is free. Of the allocated memory 71.84 GiB is allocated by "
        "PyTorch, and 5.21 GiB is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_MUSA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.")


def watchdog_error(rank: int, seq: int) -> DistBackendError:
    """torch_musa's ProcessGroupMCCL.cpp watchdog (the form of torch's ProcessGroupNCCL.cpp)."""
    return DistBackendError(
        f"[Rank {rank}] Watchdog caught collective operation timeout: WorkMCCL(SeqNum={seq}, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 "
        "milliseconds before timing out.")


def disk_full_error(path: str) -> OSError:
    """The kernel's ENOSPC as Python raises it: ``[Errno 28] No space left on device: 'p'``."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def act_on_node(fault: dict[str, Any], node_dir: Path | None, gpu_ids: list[int]) -> None:
    """Card faults: hold a card hot (memory nearly full) or drop it from the tool's report.

    The file is the card tool's documented hook (`<card>.fault.json`, see gmi.py); its pid is
    1, the node's init, alive as long as the node, so the fault lasts until it is cleared.
    """
    if node_dir is None:
        return
    card = int(fault["card"]) if fault.get("card") is not None else (gpu_ids[-1] if gpu_ids else 0)
    if fault["kind"] == "card-hot":
        body: dict[str, Any] = {"pid": 1, "util": 100, "mem_mib": _MEM_NEAR_FULL_MIB,
                                "temp_c": _TEMP_HOT_C, "name": "sim fault"}
    else:
        body = {"pid": 1, "absent": True}
    p = node_dir / "gpu-load" / f"{card}.fault.json"
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(body))
        os.replace(tmp, p)


def _control(request: dict[str, Any]) -> None:
    """Ask the sim daemon (its control socket, named in state.json) to do `request`."""
    d = _sim_dir()
    if d is None:
        return
    try:
        sock_path = json.loads((d / "state.json").read_text())["control"]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(sock_path)
            s.sendall(json.dumps(request).encode() + b"\n")
            s.recv(4096)
        finally:
            s.close()
    except (OSError, ValueError, KeyError):
        pass


def _raylet_pid() -> int | None:
    """This worker's raylet: the nearest ancestor named raylet."""
    pid = os.getppid()
    for _ in range(8):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                return pid
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if pid <= 1:
            return None
    return None


def kill_node(node: str) -> None:
    """The node is lost: its sshd goes (the daemon stops it) and its raylet dies with it."""
    _control({"op": "stop-node", "node": node})
    raylet = _raylet_pid()
    if raylet is not None:
        os.kill(raylet, signal.SIGKILL)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)
