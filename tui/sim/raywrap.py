"""The `ray` a simulated node sees when the sim runs without PID namespaces.

With one PID namespace per node (root, `unshare`), `ray stop --force` on a node sees only
that node's processes, as on a real cluster. Without them (a non-root user, or
`sim_up(namespaces=False)`) every simulated node shares the machine's process table, and
Ray's own `ray stop` kills every Ray process it may signal: one node's stop would stop
every node (LAB.md). So, on such a sim, each node's bin dir (first on its PATH) holds this
`ray`: for `ray stop` it runs Ray's own stop command (the same signals, grace period and
output) on a process list narrowed to this node's processes; every other command goes
to the real `ray` unchanged. The product itself always runs the real `ray stop --force`
(tui/core/actions/ray_setup.py), on real clusters as here.

Every simulated node's `ray` (with or without namespaces) also takes turns for `ray start`:
at most START_SLOTS starts run at once on the machine, whichever sims they belong to. A real
node starts its Ray on its own CPUs; here every node's GCS, raylet, dashboard and agents
import Ray on the same two cores, and Ray gives a raylet 30 s to register (hard-coded in
`ray._private.node`): two clusters starting at once under a loaded test run went past it
("The current node timed out during startup"). Taking turns costs a few seconds of
bring-up and never times out a start behind other starts. `ray start --block` (a Slurm
script's form, which never returns) does not take a turn.

A node's processes: those whose environment says they were started on this node
(`RLCONSOLE_SIM_NODE_DIR=<node dir>`, which every command of the node inherits, through
`docker exec` too) or whose command line names this node's Ray temp dir, and every
descendant of those (Ray's workers are children of the node's raylet).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tui.sim.simdocker import _ancestors


def node_processes(node_dir: str, temp_dir: str) -> set[int]:
    """PIDs of the processes of one simulated node (see the module's docstring)."""
    env_needle = f"RLCONSOLE_SIM_NODE_DIR={node_dir}".encode()
    tmp = temp_dir.rstrip("/").encode()
    marked: set[int] = set()
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            parent[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if _names_dir(cmd, tmp):
            marked.add(pid)
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if env.startswith(env_needle + b"\0") or b"\0" + env_needle + b"\0" in env:
            marked.add(pid)
    found = set(marked)
    grew = True
    while grew:
        grew = False
        for pid, pp in parent.items():
            if pp in found and pid not in found:
                found.add(pid)
                grew = True
    return found - _ancestors()


def _names_dir(cmdline: bytes, d: bytes) -> bool:
    """The command line names `d` itself or a path below it (node1's dir is not node10's)."""
    start = cmdline.find(d)
    while start >= 0:
        end = start + len(d)
        if end == len(cmdline) or cmdline[end:end + 1] in (b"/", b"\0", b" ", b"'", b'"', b","):
            return True
        start = cmdline.find(d, start + 1)
    return False


START_SLOTS = 2
"""`ray start`s that may run at once on the machine (see the module's docstring)."""


def start(real_ray: str, argv: list[str], lock_dir: str | None = None) -> int:
    """`ray ARGV` (a `ray start`, global options and all) once one of the machine's START_SLOTS is free (a lock file each,
    held by this process until the start returns; the kernel frees it if it dies)."""
    import fcntl
    import subprocess
    import tempfile
    import time

    if "--block" in argv:
        return subprocess.call([real_ray, *argv])
    d = Path(lock_dir or os.path.join(tempfile.gettempdir(), f"rlconsole-sim-ray-start-{os.getuid()}"))
    d.mkdir(mode=0o700, exist_ok=True)
    held = None
    while held is None:
        for i in range(START_SLOTS):
            f = open(d / f"slot{i}.lock", "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                continue
            held = f
            break
        else:
            time.sleep(0.2)
    try:
        return subprocess.call([real_ray, *argv])
    finally:
        held.close()


def stop(node_dir: str, temp_dir: str, argv: list[str]) -> int:
    """Ray's own `ray stop ARGV` over this node's processes only."""
    from ray.scripts import scripts  # first: Ray puts its own psutil on sys.path

    psutil = scripts.psutil
    mine = node_processes(node_dir, temp_dir)
    every = psutil.process_iter

    def only_this_node(*a: Any, **kw: Any) -> Any:
        return (p for p in every(*a, **kw) if p.pid in mine)

    psutil.process_iter = only_this_node
    sys.argv = ["ray", *argv]
    try:
        scripts.main()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


CALLS_FILE = "ray-calls"
"""A node's record of its `ray` commands, one line each (arguments joined by spaces), in
the node's dir: the sim's account of what was asked of Ray (`ray_calls`)."""


def ray_calls(node_dir: str | Path) -> list[str]:
    """The `ray` commands a simulated node ran so far, oldest first (see CALLS_FILE)."""
    try:
        return (Path(node_dir) / CALLS_FILE).read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def wrapper_script(node: str, node_dir: str, temp_dir: str, real_ray: str, python: str, repo_root: str,
                   narrow_stop: bool = True) -> str:
    """The node's `ray`: `ray start` when a slot is free, `ray stop` through `stop` above
    (`narrow_stop`: no PID namespaces), anything else the real `ray`."""
    stop_line = (f"""    stop) exec '{python}' -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from tui.sim.raywrap import stop; n, t = sys.argv.pop(1), sys.argv.pop(1); sys.exit(stop(n, t, sys.argv[1:]))' '{repo_root}' '{node_dir}' '{temp_dir}' "$@" ;;
""" if narrow_stop else "")  # noqa: E501 - one exec line of a generated shell script
    return f"""#!/bin/sh
# This node's ray (rlconsole sim, node {node}): `ray start` takes a turn (at most
# {START_SLOTS} at once on this machine){"; `ray stop` stops only this node's Ray (processes started on " + node + " or under its temp dir " + temp_dir + ")" if narrow_stop else ""};
# every other command is the real {real_ray}. See tui/sim/raywrap.py.
# Each call is recorded ({CALLS_FILE}: what the console asked of this node's Ray, for tests).
{{ printf '%s\\n' "$*" >> '{node_dir}/{CALLS_FILE}'; }} 2>/dev/null
for a in "$@"; do
  case "$a" in
    -*) ;;
{stop_line}    start) exec '{python}' -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from tui.sim.raywrap import start; r = sys.argv.pop(1); sys.exit(start(r, sys.argv[1:]))' '{repo_root}' '{real_ray}' "$@" ;;
    *) break ;;
  esac
done
exec '{real_ray}' "$@"
"""  # noqa: E501 - one exec line of a generated shell script
