"""The simulated `mthreads-gmi`: what a sim node's card tool prints.

It prints the real formats of Moore Threads' tool on an MTT S5000 node (gmi 2.4.1,
driver 5.1.0-server; layouts from `samples/mthreads-gmi/01_*` and `09_*`), so that
everything downstream (parsers, probes, status, the TUI) is exercised on the shapes a
real cluster produces, not on a friendlier invention.

It answers only the invocations the real tool has and the console uses:

    mthreads-gmi                  the plain card table and the process table
    mthreads-gmi -q --json        the JSON query (also `-q -j`, `--query --json`)
    mthreads-gmi -h | --help      usage
    mthreads-gmi -v | --version   version line

Anything else gets a usage error on stdout (where the real tool prints its errors) and
exit code 1. It never pretends to act on a card (the real top-level `-r` resets one).

Honesty contract (the stand-in trainer relies on it): a card is idle (0 %, 0 MiB,
~48 C, ~97 W) unless a simulated job uses it. A card is busy while the file

    $RLCONSOLE_SIM_NODE_DIR/gpu-load/<index>.json

exists with `{"pid": P, "util": 0-100, "mem_mib": N, "name": "process name"}` AND
process P is alive (checked in the node's own PID namespace, where the tool runs). A
dead writer's file is ignored, so a crashed job frees its cards as a real one does. An
optional `"temp_c": T` holds the card at T degrees or hotter (how tests and faults make
a card run hot; `mem_mib` near 81920 makes its memory nearly full). Other writers name
their file `<index>.<writer>.json` (e.g. `6.fault.json`) so they do not overwrite the
job's: the loads of one card add up (memory) or take the maximum (util, temperature).
`"absent": true` leaves the card out of the tool's report, as a card that fell off the bus.

Per-node settings come from `$RLCONSOLE_SIM_NODE_DIR/gmi.json`:
`{"gpus": 8, "node_index": 0, "replay": null}`. With `replay` set (`sim up
--replay-gpu FILE`), every invocation prints that file's content verbatim instead, so
a user's "my cards don't parse" output can be reproduced in one command.

How it runs: a Python start per call would cost 40-150 ms of CPU on a busy machine,
and the console samples every node every refresh (64 nodes x 2 calls per second
would eat the machine the sim runs on). So the sim daemon renders each node's two
outputs into `$RLCONSOLE_SIM_NODE_DIR/gmi/{plain,json}` every `RENDER_INTERVAL_S`
(atomically, `render_node`), and the node's `mthreads-gmi` is a POSIX sh script
(`tool_script`) that prints the matching file or the usage error: the figures are at
most that old, like a real tool's sampling. The load files' PIDs are checked in the
node's namespace through `/proc/<namespace init>/root/proc`. `python -m
tui.sim.gmi` renders directly (no daemon), for tests and debugging.
"""

from __future__ import annotations

# Imports are kept to the cheap ones on purpose: this runs once per sample per node
# (dataclasses/pathlib/typing would triple its start-up time).
import json
import os
import sys
import time
import uuid

GMI_VERSION = "2.4.1"
DRIVER_VERSION = "5.1.0-server"
MTBIOS_VERSION = "4.3.41"
PRODUCT = "MTT S5000"
MEM_TOTAL_MIB = 81920
POWER_LIMIT_W = 950.0
_BUS = ["18", "3a", "4b", "5c", "9a", "ba", "ca", "da"]
_RULE = "-" * 69
_BOX = "+" + "-" * 67 + "+"


class CardLoad:
    """What live load files put on one card."""

    def __init__(self) -> None:
        self.util = 0.0
        self.mem_mib = 0.0
        self.temp_c = 0.0
        self.absent = False
        self.processes: list[tuple[int, str, float]] = []


class Card:
    """One card's values as the tool prints them."""

    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


def _pid_alive(pid: int, proc_root: str = "/proc") -> bool:
    """Is `pid` (as numbered in the namespace whose /proc is `proc_root`) a live,
    non-zombie process?"""
    if pid <= 0:
        return False
    try:
        with open(f"{proc_root}/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


RENDER_INTERVAL_S = 1.0
"""The sim profile's own refresh: a sample reads figures at most this old, as a real
tool's are its sampling period old. At 0.5 s the render of 4 idle nodes was about half
of an idle sim's daemon (~1.2% of a core), twice per sample the console took."""


def read_loads(node_dir: str, gpus: int, proc_root: str = "/proc") -> dict[int, CardLoad]:
    """The live `gpu-load/<index>.json` files of this node (see the module doc)."""
    loads: dict[int, CardLoad] = {}
    d = os.path.join(str(node_dir), "gpu-load")
    try:
        names = os.listdir(d)
    except OSError:
        return loads
    for fname in names:
        if not fname.endswith(".json"):
            continue
        try:
            idx = int(fname.split(".", 1)[0])  # <index>.json, or <index>.<writer>.json
            with open(os.path.join(d, fname)) as fh:
                data = json.load(fh)
            pid = int(data["pid"])
        except (ValueError, KeyError, TypeError, OSError):
            continue
        if not 0 <= idx < gpus or not _pid_alive(pid, proc_root):
            continue
        util = max(0.0, min(100.0, float(data.get("util", 0) or 0)))
        mem = max(0.0, min(float(MEM_TOTAL_MIB), float(data.get("mem_mib", 0) or 0)))
        load = loads.setdefault(idx, CardLoad())
        load.util = max(load.util, util)
        load.mem_mib = min(float(MEM_TOTAL_MIB), load.mem_mib + mem)
        load.temp_c = max(load.temp_c, max(0.0, min(150.0, float(data.get("temp_c", 0) or 0))))
        load.absent = load.absent or data.get("absent") is True
        load.processes.append((pid, str(data.get("name") or "python3"), mem))
    return loads


def cards(node_index: int, gpus: int, loads: dict) -> list:
    """Card values: fixed per-card idle figures (like real idle cards, a degree or a
    watt apart) plus what the live loads add."""
    out = []
    for i in range(gpus):
        load = loads.get(i, CardLoad())
        if load.absent:
            continue
        bus = _BUS[i % len(_BUS)] if gpus <= len(_BUS) else f"{(0x18 + i * 0x11) % 256:02x}"
        idle_temp = 48 + ((node_index * 7 + i * 5) % 3)
        idle_power = 96.5 + ((node_index * 13 + i * 5) % 10) / 10
        out.append(Card(
            index=i,
            bus_id=f"00000000:{bus}:00.0",
            uuid=str(uuid.uuid5(uuid.NAMESPACE_OID, f"rlconsole-sim/{node_index}/{i}")),
            serial=f"MY10YL225BF{node_index % 100:02d}{i:03d}",
            util=load.util,
            mem_used=load.mem_mib,
            temp=max(idle_temp + round(load.util * 0.32), round(load.temp_c)),
            power=idle_power + load.util * 5.5,
            processes=load.processes,
        ))
    return out


def _timestamp(now: float | None = None) -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now))


def _num(v: float) -> str:
    return f"{int(v)}" if float(v).is_integer() else f"{v:g}"


def render_plain(cs: list, now: float | None = None) -> str:
    """Bare `mthreads-gmi` (gmi 2.4.1 on S5000: with the ECC Mode row)."""
    lines = [
        _timestamp(now),
        _RULE,
        f"    mthreads-gmi:{GMI_VERSION}           Driver Version:{DRIVER_VERSION}",
        _RULE,
        "ID   Name                 |PCIe                |%GPU  Mem",
        "     Device Type   Perf   |Pcie Lane Width     |Temp  MPC Capable",
        "                                               |      ECC Mode",
    ]
    for c in cs:
        lines.append(_BOX)
        mem = f"{_num(c.mem_used)}MiB({MEM_TOTAL_MIB}MiB)"
        lines.append(f"{c.index:<5}{PRODUCT:<21}|{c.bus_id:<20}|{_num(c.util) + '%':<6}{mem}")
        lines.append(f"     {'Physical':<14}{'P0':<7}|{'16x(16x)':<20}|{_num(c.temp) + 'C':<6}YES")
        lines.append(" " * 47 + "|      On-die, EDC")
    lines += [_RULE, "", _RULE, "Processes:",
              "ID   PID           Process name                           GPU Memory",
              "                                                               Usage",
              _BOX]
    procs = [(c.index, p) for c in cs for p in c.processes]
    if not procs:
        lines.append("   No running processes found")
    for idx, (pid, name, mem) in procs:
        lines.append(f"{idx:<5}{pid:<14}{name:<39}{_num(mem)}MiB")
    lines.append(_RULE)
    return "\n".join(lines) + "\n"


def render_json(cs: list, now: float | None = None) -> str:
    """`mthreads-gmi -q --json`: values carry units, "Power Draw " has a trailing
    space, the driver version is top-level (as in the real tool)."""
    gpus: list = []
    for c in cs:
        bus = c.bus_id.split(":")[1]
        gpus.append({
            "Index": str(c.index),
            "Product Name": PRODUCT,
            "Product Brand": "MTT",
            "GPU UUID": c.uuid,
            "Serial Number": c.serial,
            "MTBios Version": MTBIOS_VERSION,
            "PCI": {
                "Bus": f"0x{bus.upper()}",
                "Bus ID": c.bus_id,
                "Vendor ID": "0x1ED5",
                "Device ID": "0x0400",
                "GPU Link Info": {
                    "PCIe Generation": {"Max": "5", "Current": "5"},
                    "Link Width": {"Max": "16x", "Current": "16x"},
                },
            },
            "FB Memory Usage": {
                "Total": f"{MEM_TOTAL_MIB}MiB",
                "Used": f"{_num(c.mem_used)}MiB",
                "Free": f"{_num(MEM_TOTAL_MIB - c.mem_used)}MiB",
            },
            "Utilization": {
                "Gpu": f"{_num(c.util)}%",
                "Memory": f"{round(100 * c.mem_used / MEM_TOTAL_MIB)}%",
            },
            "Temperature": {"GPU Current Temp": f"{_num(c.temp)}C"},
            "Power Readings": {
                "Power Draw ": f"{c.power:.2f}W",
                "Current Power Limit": f"{POWER_LIMIT_W:.2f}W",
            },
            "Clocks": {"Graphics": "1600MHz" if c.util else "400MHz", "Memory": "3200MHz"},
            "ECC Mode": {"Current": "On-die, EDC"},
        })
    doc = {
        "Timestamp": _timestamp(now),
        "Driver Version": DRIVER_VERSION,
        "Attached GPUs": str(len(cs)),
        "GPU": gpus,
    }
    return json.dumps(doc, indent=4) + "\n"


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def render_node(node_dir: str, proc_root: str = "/proc", now: float | None = None) -> None:
    """Render this node's `gmi/plain` and `gmi/json` (what its tool prints now)."""
    try:
        with open(os.path.join(node_dir, "gmi.json")) as fh:
            cfg = json.load(fh)
    except (OSError, ValueError):
        cfg = {}
    out = os.path.join(node_dir, "gmi")
    os.makedirs(out, exist_ok=True)
    replay = cfg.get("replay")
    if replay:
        try:
            with open(replay, errors="replace") as fh:
                text = fh.read()
        except OSError as exc:
            text = f"Failed to read replay file {replay}: {exc.strerror}\n"
        plain = js = text
    else:
        gpus = int(cfg.get("gpus", 8))
        cs = cards(int(cfg.get("node_index", 0)), gpus, read_loads(node_dir, gpus, proc_root))
        plain, js = render_plain(cs, now), render_json(cs, now)
    _write_atomic(os.path.join(out, "plain"), plain)
    _write_atomic(os.path.join(out, "json"), js)
    if not os.path.exists(os.path.join(out, "usage")):
        _write_atomic(os.path.join(out, "usage"), USAGE)


def tool_script(node_dir: str) -> str:
    """The node's `mthreads-gmi`: a POSIX sh script printing what `render_node` wrote
    (only for the real tool's invocations; anything else is a usage error on stdout)."""
    d = os.path.join(node_dir, "gmi")
    return f"""#!/bin/sh
# Simulated mthreads-gmi (rlconsole sim): prints what the sim daemon rendered for this
# node at most {RENDER_INTERVAL_S:g}s ago. See tui/sim/gmi.py.
d='{d}'
case "$#:$*" in
  0:) exec cat "$d/plain" ;;
  "2:-q --json"|"2:--json -q"|"2:-q -j"|"2:-j -q"|"2:--query --json"|"2:--json --query"|"2:--query -j"|"2:-j --query")
    exec cat "$d/json" ;;
  1:-h|1:--help) exec cat "$d/usage" ;;
  1:-v|1:--version) echo "mthreads-gmi version: {GMI_VERSION}"; exit 0 ;;
esac
bad=""
for a in "$@"; do
  case "$a" in -q|--query|-j|--json) ;; *) bad="$a"; break ;; esac
done
if [ -n "$bad" ]; then echo "Invalid option: $bad"; else echo "Invalid combination of input arguments."; fi
echo "Please run 'mthreads-gmi -h' for help."
exit 1
"""


USAGE = f"""mthreads-gmi version: {GMI_VERSION}

Usage: mthreads-gmi [OPTION]...

    -h, --help          Print usage information and exit.
    -v, --version       Print the version and exit.
    -q, --query         Display GPU information.
    -j, --json          Use with -q: print the query as JSON.
"""


def main(argv: list[str] | None = None, node_dir: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    nd = node_dir or os.environ.get("RLCONSOLE_SIM_NODE_DIR") or "."
    try:
        with open(os.path.join(nd, "gmi.json")) as fh:
            cfg = json.load(fh)
    except (OSError, ValueError):
        cfg = {}
    replay = cfg.get("replay")
    if replay:
        try:
            with open(replay, errors="replace") as fh:
                sys.stdout.write(fh.read())
        except OSError as exc:
            sys.stdout.write(f"Failed to read replay file {replay}: {exc.strerror}\n")
            return 1
        return 0
    gpus = int(cfg.get("gpus", 8))
    node_index = int(cfg.get("node_index", 0))
    if argv in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return 0
    if argv in (["-v"], ["--version"]):
        sys.stdout.write(f"mthreads-gmi version: {GMI_VERSION}\n")
        return 0
    cs = cards(node_index, gpus, read_loads(nd, gpus))
    if not argv:
        sys.stdout.write(render_plain(cs))
        return 0
    if sorted(argv) in (sorted(["-q", "--json"]), sorted(["-q", "-j"]), sorted(["--query", "--json"]),
                        sorted(["--query", "-j"])):
        sys.stdout.write(render_json(cs))
        return 0
    bad = next((a for a in argv if a not in ("-q", "--query", "-j", "--json")), None)
    if bad is not None:
        sys.stdout.write(f"Invalid option: {bad}\n")
    else:
        sys.stdout.write("Invalid combination of input arguments.\n")
    sys.stdout.write("Please run 'mthreads-gmi -h' for help.\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
