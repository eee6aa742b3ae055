"""`rlconsole sim fault`: make the simulated run fail the way a real one does.

A fault is planted as ``<sim state dir>/fault.json``; the stand-in trainer and its workers
(tree/verl/utils/sim_fault.py) read it once a step and, from step `at_step` on, the process
that fails on a real cluster fails there, with the real stack's text: the console then sees
what it would see on hardware (the job FAILED with the error in its log, or RUNNING with no
steps; a card hot or gone from the card tool; a node gone from SSH and Ray) and must name
it. One fault at a time: planting another replaces the file (card files already written stay
until cleared). `sim fault clear` and the next `submit` of a simulated profile undo it: the
file, the card tool's `*.fault.json` files, and a node's stopped sshd. A lost node's raylet
is not restarted: `rlconsole setup-ray` brings Ray back on every node, as after a real loss.

This module is the console side (it writes files, asks the sim daemon); it never imports the
stand-in tree.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.core.state import JobStatus
from tui.sim.cluster import SimError, _control, _read_json, _state_dir, sim_status
from tui.sim.sim_ranges import perf_model

__all__ = ["FAULTS", "Fault", "clear_faults", "clear_for_profile", "fault_list_text", "plant_fault",
           "sim_dir_for_profile"]


@dataclass(frozen=True)
class Fault:
    """One kind of fault: where it acts, what the job does, what must name it."""

    kind: str
    what: str
    on_node: bool          # acts on one node (--node; default the last node)
    job: str               # the job's state after it: FAILED, RUNNING (stalled), RUNNING
    diagnosis: str | None  # the catalog id that names it in the log (None: an alert, no log line)
    alert: str             # the live alert's key (prefix) that opens


_PERF = perf_model()  # the trainer's factors for slow-steps / low-throughput

FAULTS: dict[str, Fault] = {f.kind: f for f in (
    Fault("oom", "one card runs out of memory in the actor update (torch_musa's "
          "`torch.OutOfMemoryError: MUSA out of memory ...`)", True, JobStatus.FAILED, "musa-oom", "job-end"),
    Fault("collective-timeout", "a rank's collective times out (MCCL watchdog: `Watchdog caught "
          "collective operation timeout: WorkMCCL(...)`)", True, JobStatus.FAILED, "collective-timeout", "job-end"),
    Fault("actor-death", "the node's worker process dies (SIGKILL); Ray reports `A worker died or was "
          "killed ...` and the driver gets `ActorDiedError: The actor died unexpectedly ...` (one class, "
          "ray-actor-died when the driver's error is printed first)", True, JobStatus.FAILED,
          "ray-worker-died", "job-end"),
    Fault("driver-killed", "the job's driver is killed (SIGKILL, as by the kernel's OOM killer); "
          "Ray: `Job entrypoint command failed with exit code ...`", False, JobStatus.FAILED, "driver-killed", "job-end"),
    Fault("stall", "the trainer stops making steps, its process alive (a hang); undone by clear",
          False, "RUNNING (stalled)", None, "stall"),
    Fault("slow-steps", f"every step takes {_PERF.SLOW_STEPS_FACTOR:g}x as long (wall clock, and the modelled "
          f"cards: throughput / {_PERF.SLOW_STEPS_FACTOR:g}); the steps stall, then leave the step-time "
          "range; undone by clear", False, "RUNNING (slow)", None, "stall"),
    Fault("low-throughput", f"the modelled cards move {_PERF.LOW_THROUGHPUT_FACTOR:g}x fewer tokens a second: "
          f"each step {_PERF.LOW_THROUGHPUT_FACTOR:g}x as long (wall clock and timing_s), MFU / "
          f"{_PERF.LOW_THROUGHPUT_FACTOR:g}; throughput and MFU leave their ranges; undone by clear",
          False, "RUNNING (slow)", None, "range:throughput"),
    Fault("card-hot", "a card runs hot (93 C) with its memory nearly full (card tool hook)",
          True, JobStatus.RUNNING, None, "card:"),
    Fault("card-mem-lost", "a card drops out of the card tool's report (no memory report)",
          True, JobStatus.RUNNING, None, "card:"),
    Fault("disk-full", "the node's disk is full: its checkpoint shard write fails with "
          "`OSError: [Errno 28] No space left on device` (at the next save_freq step)",
          True, JobStatus.FAILED, "no-space-left", "job-end"),
    Fault("node-lost", "the node is lost: its sshd stops and its raylet dies; Ray's "
          "`(raylet) Raylet is terminated ...` and an actor error fail the job", True, JobStatus.FAILED,
          "raylet-died", "node:"),
)}


DEMO_FAULT = "oom"
"""What the console's "Inject a fault" plants: a failure the log names, at the next step."""


def fault_list_text() -> str:
    """`sim fault --list`."""
    lines = ["KIND                NODE  JOB AFTER          NAMED BY",
             "------------------  ----  -----------------  ------------------"]
    for f in FAULTS.values():
        named = f"diagnosis {f.diagnosis}" if f.diagnosis else f"alert {f.alert}"
        lines.append(f"{f.kind:<18}  {'yes' if f.on_node else '-':<4}  {f.job:<17}  {named}")
        lines.append(f"    {f.what}")
    lines.append("")
    lines.append("rlconsole sim fault KIND [--node NODE] [--at-step S] [--card C]   plant one "
                 "(NODE: default the last node; S: default the next step)")
    lines.append("rlconsole sim fault clear   undo it (so does the next submit)")
    return "\n".join(lines) + "\n"


def _running_state(state_dir: str | Path | None) -> tuple[Path, dict]:
    d = _state_dir(state_dir)
    st = sim_status(d)
    if not st.running:
        raise SimError(f"no simulated cluster is running in {d} (rlconsole sim up)")
    state = _read_json(d / "state.json") or {}
    return d, state


def plant_fault(kind: str, node: str | None = None, at_step: int | None = None,
                card: int | None = None, state_dir: str | Path | None = None) -> dict:
    """Write the fault for the running job; returns what was written."""
    f = FAULTS.get(kind)
    if f is None:
        raise SimError(f"unknown fault {kind!r}; `rlconsole sim fault --list` names them")
    d, state = _running_state(state_dir)
    names = [n["name"] for n in state.get("nodes", [])]
    if f.on_node:
        node = node or (names[-1] if names else None)
        if node not in names:
            raise SimError(f"no node named {node!r} in the sim ({', '.join(names)})")
    elif node is not None:
        raise SimError(f"fault {kind} acts on the job's driver (the head), not on a node: drop --node")
    gpus = int(state.get("gpus") or 8)
    if card is not None and not 0 <= card < gpus:
        raise SimError(f"--card {card}: the sim's nodes have cards 0-{gpus - 1}")
    if at_step is not None and at_step < 0:
        raise SimError("--at-step must be 0 or more")
    body = {"kind": kind, "node": node if f.on_node else None, "at_step": at_step or 0, "card": card}
    tmp = d / "fault.json.tmp"
    tmp.write_text(json.dumps(body))
    os.replace(tmp, d / "fault.json")
    return body


def clear_faults(state_dir: str | Path | None = None) -> list[str]:
    """Undo every planted fault; returns what was undone (one phrase each)."""
    d = _state_dir(state_dir)
    done: list[str] = []
    p = d / "fault.json"
    if p.exists():
        with contextlib.suppress(ValueError, OSError):
            done.append(f"fault {json.loads(p.read_text()).get('kind')} removed")
        p.unlink(missing_ok=True)
    for card_file in sorted(d.glob("nodes/*/gpu-load/*.fault.json")):
        card_file.unlink(missing_ok=True)
        done.append(f"{card_file.parent.parent.name} card {card_file.name.split('.')[0]} restored")
    st = sim_status(d)
    if st.running:
        state = _read_json(d / "state.json") or {}
        for n in st.nodes:
            if n.sshd == "stopped":
                _control(state, {"op": "start-node", "node": n.name})
                done.append(f"{n.name} SSH server started (Ray rejoins with `rlconsole setup-ray`)")
    return done


def sim_dir_for_profile(profile_path: str | Path | None) -> Path | None:
    """The state dir of the sim whose profile this is (`sim up` writes it there), or None."""
    if not profile_path:
        return None
    d = Path(profile_path).expanduser().resolve().parent
    return d if (d / "state.json").is_file() else None


def submit_hook(profile: Any) -> list[str]:
    """Registered with the core's submit (`add_submit_hook`) by the faces that run
    actions: a simulated profile's new job starts on a cluster without planted faults."""
    if not getattr(profile, "simulated", False):
        return []
    return [f"sim: {what}" for what in clear_for_profile(getattr(profile, "path", None))]


def install_submit_hook() -> None:
    from tui.core.actions.jobs import add_submit_hook

    add_submit_hook(submit_hook)


def clear_for_profile(profile_path: str | Path | None) -> list[str]:
    """The submit hook: a simulated profile lives in its sim's state dir; clear that sim."""
    d = sim_dir_for_profile(profile_path)
    return clear_faults(d) if d is not None else []
