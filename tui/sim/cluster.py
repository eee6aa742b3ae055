"""The simulated cluster: `rlconsole sim up|down|status`.

`sim_up` starts a background daemon (`python -m tui.sim.cluster daemon DIR`,
its own session, PID file in the state dir) that runs, for N nodes:

* one in-process SSH server per node (`server.SimNodeServer`) on its own loopback
  address (node i on 127.0.0.(i+2)), a free port, its own host key; one user key; a
  known_hosts file listing every node's key;
  with `sim up --sshd openssh`, one OpenSSH `sshd` process per node instead
  (`opensshd.OpenSshNode`: same address, key and environment; PIDs in the state);
* where root and `unshare` allow, one PID + mount namespace per node (`unshare --pid
  --fork --mount-proc`, init = tini or a tiny reaper) that every command of that node
  enters with `nsenter`, so `ray stop --force` or a crash on one node stays there
  (LAB.md), while the node's daemons (ray) outlive the SSH command that started them;
* per-node bin dir first on PATH: the simulated `mthreads-gmi` (`gmi.py`) and a `docker`:
  where a `dockerd` exists and the sim runs as root, a wrapper onto ONE private dockerd
  for the sim that maps the profile's container name to `<name>-<node>` (`dockerwrap.py`);
  elsewhere (no dockerd, not root, `docker=False`) the sim's own container runtime,
  state in the node's dir, labelled "containers: simulated (no dockerd)" (`simdocker.py`);
  without PID namespaces also a `ray` whose `ray stop` stops only that node's Ray
  (`raywrap.py`);
* a profile modelled on the seed's (`profiles/qwen3-8b-grpo-32gpu.yaml`): the same
  overrides with small sizes, sim paths under a shared dir standing in for
  /data/datapool, and Ray settings that let 4 raylets share one machine (own
  `--temp-dir` and ports per node, small object store).

`sim_down` stops every process the sim started, by PID (the daemon, dockerd, each
namespace's init, which takes the node's whole process tree with it, and any process
still carrying the sim's paths), and removes the state. Two sims (or two pytest-xdist
workers) with different state dirs never collide: ports are picked free from slots each
live sim holds (`ports.py`), sockets and Ray temp dirs live in a short per-sim dir under /tmp.

The state dir: $RLCONSOLE_SIM_DIR, else platformdirs' user_state_dir("rlconsole")/sim.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from tui.core.errors import RlconsoleError
from tui.sim.ports import PortReservation, reserve_ports

log = logging.getLogger("rlconsole.sim")

MARKER = "rlconsole-sim"
DEFAULT_NODES = 4
DEFAULT_GPUS = 8
MAX_NODES = 200

__all__ = [
    "SSH_SERVERS",
    "SimError",
    "SimRequirementError",
    "SimStatus",
    "default_state_dir",
    "running_profile",
    "sim_down",
    "sim_node",
    "sim_status",
    "sim_up",
]


class SimError(RlconsoleError):
    exit_code = 1


class SimRequirementError(SimError):
    """Something the requested sim needs is not installed (OpenSSH's sshd): exit 2."""

    exit_code = 2


SSH_SERVERS = ("builtin", "openssh")
"""`sim up --sshd`: the built-in asyncssh server (in the daemon) or OpenSSH's sshd."""


# --------------------------------------------------------------------------- paths


def default_state_dir() -> Path:
    from tui.core.locations import sim_dir

    return sim_dir()


def _state_dir(state_dir: str | Path | None) -> Path:
    return Path(state_dir).expanduser().resolve() if state_dir else default_state_dir().resolve()


def short_dir(state_dir: Path) -> Path:
    """Unix sockets (dockerd, control) and Ray temp dirs need short paths (108-byte
    socket limit); a pytest tmp dir is too long. One per state dir."""
    h = hashlib.sha1(str(state_dir).encode()).hexdigest()[:10]
    return Path("/tmp") / f"rlcsim-{h}"


def node_address(i: int) -> str:
    return f"127.0.0.{i + 2}"


BASTION_ADDRESS = "127.0.0.254"
"""`sim up --bastion`: the jump host's own loopback address (nodes use 127.0.0.2..201);
behind it the nodes' SSH servers accept only peers from this address."""


def node_name(i: int) -> str:
    return f"node{i + 1}"


def _repo_root() -> Path:
    import tui

    return Path(tui.__file__).resolve().parent.parent


def _read_json(p: Path) -> dict[str, Any] | None:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _write_json(p: Path, data: dict[str, Any]) -> None:
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(p)


def _pid_alive(pid: int | None) -> bool:
    from tui.sim.dockerd import pid_alive

    return bool(pid) and pid_alive(int(pid))  # type: ignore[arg-type]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# --------------------------------------------------------------------------- status


@dataclass
class SimNodeInfo:
    name: str
    address: str
    port: int
    sshd: str = "unknown"  # "running" / "stopped" / "unknown"
    ns_pid: int | None = None


@dataclass
class SimStatus:
    state_dir: str
    running: bool
    pid: int | None = None
    profile: str | None = None
    nodes: list[SimNodeInfo] = field(default_factory=list)
    gpus: int | None = None
    docker: str | None = None  # "running" (a private dockerd) / "simulated (no dockerd)" (simdocker.RUNTIME)
    docker_why: str | None = None  # why the containers are simulated (no dockerd installed, not root, asked)
    namespaces: bool | None = None
    replay_gpu: str | None = None
    error: str | None = None
    stale: bool = False
    ssh_server: str | None = None  # "builtin" (asyncssh, in the daemon) / "openssh" (one sshd per node)
    verl: str | None = None  # which VeRL config the stand-in trainer composes (a real release's, or the stand-in's)
    slurm: str | None = None  # `sim up --slurm`: the Slurm config (slurm.conf) its nodes run under

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def to_text(self) -> str:
        if not self.running:
            if self.stale:
                return f"simulated cluster in {self.state_dir}: NOT running (stale state; run `rlconsole sim down`)"
            return f"no simulated cluster running (state dir {self.state_dir})"
        lines = [
            f"simulated cluster: running (daemon pid {self.pid}), {len(self.nodes)} nodes x {self.gpus} cards",
            f"  profile:    {self.profile}",
            f"  docker:     {self.docker}" + (f" - {self.docker_why}" if self.docker_why else ""),
            f"  verl:       {self.verl or 'unknown'}",
            f"  namespaces: {'one PID namespace per node' if self.namespaces else 'off (shared PID space)'}",
        ]
        if self.replay_gpu:
            lines.append(f"  card tool:  replaying {self.replay_gpu}")
        if self.slurm:
            lines.append(f"  slurm:      slurmctld + one slurmd a node (SLURM_CONF={self.slurm})")
        up = sum(1 for n in self.nodes if n.sshd == "running")
        kind = " (OpenSSH sshd)" if self.ssh_server == "openssh" else ""
        lines.append(f"  sshd:       {up}/{len(self.nodes)} running{kind}")
        for n in self.nodes[:8]:
            lines.append(f"    {n.name:<8} {n.address}:{n.port:<6} {n.sshd}")
        if len(self.nodes) > 8:
            lines.append(f"    ... {len(self.nodes) - 8} more")
        return "\n".join(lines)


def _control(state: dict[str, Any], request: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    sock_path = state.get("control")
    if not sock_path:
        raise SimError("the simulated cluster has no control socket (is it running?)")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        raise SimError(f"cannot reach the sim daemon at {sock_path}: {e}") from None
    finally:
        s.close()
    reply = json.loads(data or b"{}")
    if not reply.get("ok"):
        raise SimError(reply.get("error") or "sim daemon refused the request")
    return reply


def sim_status(state_dir: str | Path | None = None) -> SimStatus:
    """What is running: the daemon, its nodes' sshd, docker, namespaces."""
    d = _state_dir(state_dir)
    st = _read_json(d / "state.json")
    if not st:
        return SimStatus(str(d), False)
    pid = st.get("pid")
    alive = pid is not None and _pid_alive(pid) and _is_daemon(_cmdline(int(pid)))
    status = SimStatus(
        state_dir=str(d), running=bool(alive and st.get("status") == "ready"), pid=pid,
        profile=st.get("profile"), gpus=st.get("gpus"), docker=st.get("docker"), docker_why=st.get("docker_why"),
        namespaces=st.get("namespaces_enabled"), replay_gpu=st.get("replay_gpu"), error=st.get("error"),
        ssh_server=st.get("ssh_server", "builtin"), verl=(st.get("verl") or {}).get("label"),
        slurm=(st.get("slurm") or {}).get("conf"),
        nodes=[SimNodeInfo(n["name"], n["address"], n["port"], "unknown", n.get("ns_pid")) for n in st.get("nodes", [])],
    )
    if not status.running:
        status.stale = True
        return status
    with contextlib.suppress(SimError, ValueError):
        reply = _control(st, {"op": "status"}, timeout=5)
        running = reply.get("nodes", {})
        for n in status.nodes:
            n.sshd = "running" if running.get(n.name) else "stopped"
    return status


def running_profile(state_dir: str | Path | None = None) -> str | None:
    """The running sim's profile path, or None (for `--profile` defaults)."""
    st = sim_status(state_dir)
    return st.profile if st.running else None


def sim_node(action: str, node: str, state_dir: str | Path | None = None) -> None:
    """Stop or start one node's SSH server ("stop" drops its connections at once,
    like a crashed sshd; "start" listens again on the same port with the same key)."""
    if action not in ("stop", "start"):
        raise SimError(f"unknown node action {action!r} (stop, start)")
    d = _state_dir(state_dir)
    st = _read_json(d / "state.json")
    if not st:
        raise SimError(f"no simulated cluster in {d}")
    _control(st, {"op": f"{action}-node", "node": node})


# --------------------------------------------------------------------------- up


def sim_up(
    nodes: int = DEFAULT_NODES,
    gpus: int = DEFAULT_GPUS,
    replay_gpu: str | Path | None = None,
    state_dir: str | Path | None = None,
    *,
    docker: bool | None = None,
    namespaces: bool | None = None,
    timeout: float = 90.0,
    bastion: bool = False,
    sshd: str = "builtin",
    verl: str | None = None,
    notice: Callable[[str], None] | None = None,
    slurm: bool = False,
) -> Path:
    """Start the simulated cluster in the background and return its profile's path.

    `docker=None`: a private dockerd when one is installed and this runs as root (dockerd
    needs root), else the sim's own container runtime (`simdocker.py`: "containers:
    simulated (no dockerd)"); False: the sim's runtime; True: a private dockerd or an
    error. `namespaces=None`: one PID namespace per node when root and `unshare` allow;
    without them each node's `ray stop` is kept to that node (`raywrap.py`). Idempotent:
    an already running sim with the same shape returns its profile; a different shape is
    an error (run sim_down first). `bastion`: add a
    jump host; the nodes then accept SSH only from it and the profile says `ssh.jump`.
    `sshd="openssh"`: each node served by OpenSSH's own sshd instead of the built-in
    asyncssh server (opensshd.py); SimRequirementError when sshd is not installed.
    `verl`: the VeRL release whose config the trainer composes (default DEFAULT_VERL); when
    the default cannot be had (offline, nothing cached) the stand-in config is used and
    `notice` is told so in one line; a release asked for by name that cannot be had is an error.
    `slurm`: the nodes run by a real Slurm (tui/sim/slurm.py; root only): slurmctld plus
    one slurmd a node, and the profile is a Slurm one (`cluster.scheduler: slurm`, srun)."""
    _check_shape(nodes, gpus, sshd)
    if slurm:
        from tui.sim.slurm import requirement_problem

        problem = requirement_problem()
        if problem:
            raise SimRequirementError(problem)
    d = _state_dir(state_dir)
    replay = None
    if replay_gpu is not None:
        rp = Path(replay_gpu).expanduser()
        if not rp.is_file():
            raise SimError(f"--replay-gpu: no such file: {replay_gpu}")
        replay = str(rp.resolve())
    current = sim_status(d)
    running = _running_profile(d, current, nodes, gpus, replay, bastion, sshd, verl)
    if running is not None:
        if bool((_read_json(d / "config.json") or {}).get("slurm")) == slurm:
            return running
        raise SimError(f"a simulated cluster is already running in {d} "
                       f"{'without' if slurm else 'with'} Slurm: run `rlconsole sim down` first")
    verl_cfg = _verl_config(verl, notice)
    _prepare_state_dir(d, current)
    config = {
        "marker": MARKER, "nodes": nodes, "gpus": gpus, "replay_gpu": replay,
        "docker": docker, "namespaces": namespaces, "python": sys.executable,
        "created": time.time(), "bastion": bool(bastion), "sshd": sshd, "verl": verl_cfg,
        "slurm": bool(slurm),
    }
    if slurm and namespaces is None:
        # slurmd starts the nodes' tasks in the machine's PID space: each node's `ray` keeps
        # a stop to that node (raywrap.py), as without namespaces
        config["namespaces"] = False
    _write_json(d / "config.json", config)
    return _wait_ready(d, _start_daemon(d), timeout)


def _verl_config(version: str | None, notice: Callable[[str], None] | None) -> dict[str, Any]:
    """Which VeRL config the daemon lays out: a release's (fetched now, in the caller's
    terminal, so that a slow or refused download is seen), else the stand-in's."""
    from tui.sim.verl_release import DEFAULT_VERL, ReleaseUnavailable, fetch_release

    try:
        rel = fetch_release(version or DEFAULT_VERL)
    except ReleaseUnavailable as e:
        if version is not None:
            raise SimError(f"--verl {version}: {e}") from None
        why = f"VeRL {DEFAULT_VERL}'s config could not be had ({e})"
        (notice or log.warning)(f"{why}: the simulated trainer composes rlconsole's stand-in config instead")
        return {"version": None, "config_dir": None, "wheel": None, "why_standin": str(e)}
    return {"version": rel.version, "config_dir": str(rel.config_dir), "wheel": rel.wheel, "why_standin": None}


def _check_shape(nodes: int, gpus: int, sshd: str) -> None:
    """The asked-for cluster is one the sim can serve here (before anything starts)."""
    if not 1 <= nodes <= MAX_NODES:
        raise SimError(f"--nodes must be 1..{MAX_NODES} (loopback addresses 127.0.0.2..), got {nodes}")
    if not 1 <= gpus <= 64:
        raise SimError(f"--gpus must be 1..64, got {gpus}")
    if sshd not in SSH_SERVERS:
        raise SimError(f"--sshd must be one of {', '.join(SSH_SERVERS)}, got {sshd!r}")
    if sshd == "openssh":
        from tui.sim.opensshd import find_sshd

        if find_sshd() is None:
            raise SimRequirementError("--sshd openssh: OpenSSH's sshd is not installed "
                                      "(Debian/Ubuntu: apt-get install openssh-server)")


def _running_profile(d: Path, current: SimStatus, nodes: int, gpus: int, replay: str | None, bastion: bool,
                     sshd: str, verl: str | None = None) -> Path | None:
    """The running sim's profile when it has the asked-for shape (`sim up` is
    idempotent); None when none runs; an error when one of another shape does."""
    if not current.running:
        return None
    running_cfg = _read_json(d / "config.json") or {}
    same_bastion = bool(running_cfg.get("bastion")) == bastion
    same_sshd = running_cfg.get("sshd", "builtin") == sshd
    running_verl = (running_cfg.get("verl") or {}).get("version")
    same_verl = verl is None or running_verl == verl
    if len(current.nodes) == nodes and current.gpus == gpus and current.replay_gpu == replay and current.profile \
            and same_bastion and same_sshd and same_verl:
        return Path(current.profile)
    if not same_verl:
        raise SimError(f"a simulated cluster is already running in {d} on "
                       f"{'VeRL ' + running_verl if running_verl else 'the stand-in config'}: "
                       "run `rlconsole sim down` first")
    raise SimError(f"a simulated cluster is already running in {d} ({len(current.nodes)} x {current.gpus}"
                   f"{', replaying ' + str(current.replay_gpu) if current.replay_gpu else ''}"
                   f"{', sshd ' + str(running_cfg.get('sshd', 'builtin')) if not same_sshd else ''}): "
                   "run `rlconsole sim down` first")


def _prepare_state_dir(d: Path, current: SimStatus) -> None:
    """A stale sim's leftovers stopped and removed; a directory that is not a sim's is
    never adopted (sim down removes the whole state dir)."""
    if current.stale or (d / "state.json").exists():
        sim_down(d)
    if d.is_dir() and any(d.iterdir()) and (_read_json(d / "config.json") or {}).get("marker") != MARKER:
        raise SimError(f"{d} is not empty and is not a simulated cluster's state dir: choose another "
                       "(RLCONSOLE_SIM_DIR or --state-dir)")
    d.mkdir(parents=True, exist_ok=True)
    for stale in ("state.json", "profile.yaml", "daemon.pid"):
        with contextlib.suppress(FileNotFoundError):
            (d / stale).unlink()


def _start_daemon(d: Path) -> subprocess.Popen[bytes]:
    """The sim's daemon, in a session of its own (it outlives this command)."""
    logf = (d / "daemon.log").open("ab")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(_repo_root()) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.sim.cluster", "daemon", str(d)],
        stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True, env=env, cwd="/",
    )
    logf.close()
    return proc


def _wait_ready(d: Path, proc: subprocess.Popen[bytes], timeout: float) -> Path:
    """The profile once the daemon says ready; on failure or timeout the half-started
    sim is taken down and the daemon's own words are in the error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = _read_json(d / "state.json") or {}
        if st.get("status") == "ready" and st.get("profile"):
            return Path(st["profile"])
        if st.get("status") == "failed" or proc.poll() is not None:
            err = st.get("error") or _log_tail(d / "daemon.log")
            with contextlib.suppress(Exception):
                sim_down(d)
            raise SimError(f"the simulated cluster failed to start: {err}")
        time.sleep(0.05)
    with contextlib.suppress(Exception):
        sim_down(d)
    raise SimError(f"the simulated cluster did not come up within {timeout:g}s (log: {d / 'daemon.log'})")


def _log_tail(p: Path, n: int = 5) -> str:
    try:
        return " | ".join(p.read_text(errors="replace").strip().splitlines()[-n:])
    except OSError:
        return "(no log)"


# --------------------------------------------------------------------------- down


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def _processes_referencing(short: Path, state: Path) -> list[int]:
    """PIDs left over from the sim after its recorded PIDs are gone: a command line
    naming the sim's short dir (containerd and its shims, raylets' temp dirs) or an
    environment started on a sim node (RLCONSOLE_SIM_NODE_DIR under the state dir).
    Never matches by program name, never this process or its parents (a user's
    shell may well have RLCONSOLE_SIM_DIR set)."""
    skip = _ancestors()
    needle_cmd = str(short).encode()
    needle_env = f"RLCONSOLE_SIM_NODE_DIR={state}/nodes/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        pid = int(entry)
        try:
            if needle_cmd in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
                continue
            if needle_env in Path(f"/proc/{pid}/environ").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def _kill(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    left = [p for p in pids if _pid_alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if _pid_alive(p)]
    return left


def _unmount_below(paths: list[Path]) -> None:
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    targets = []
    for line in mounts:
        parts = line.split()
        if len(parts) > 1:
            mp = parts[1].replace("\\040", " ")
            if any(mp == str(p) or mp.startswith(str(p) + "/") for p in paths):
                targets.append(mp)
    for mp in sorted(targets, key=len, reverse=True):
        subprocess.run(["umount", "-l", mp], capture_output=True)


def sim_down(state_dir: str | Path | None = None, timeout: float = 20.0) -> bool:
    """Stop everything the sim started (by PID) and remove its state. Returns True if
    there was something to stop or remove."""
    d = _state_dir(state_dir)
    cfg = _read_json(d / "config.json")
    st = _read_json(d / "state.json") or {}
    if cfg is None and not st:
        return False
    if cfg is not None and cfg.get("marker") != MARKER:
        raise SimError(f"{d} does not look like a simulated cluster's state dir; not touching it")
    sd = Path(st.get("short_dir") or short_dir(d))
    pid = st.get("pid")
    if pid is None:
        with contextlib.suppress(OSError, ValueError):
            pid = int((d / "daemon.pid").read_text().strip())
    _stop_daemon(pid, timeout)  # 1. the daemon cleans up its children itself on SIGTERM
    _stop_recorded(_read_json(d / "state.json") or st)  # 2. what it recorded and did not stop
    _stop_referencing(sd, d)  # 3. anything still carrying the sim's paths (shims, orphans)
    _unmount_below([d, sd])
    shutil.rmtree(sd, ignore_errors=True)
    shutil.rmtree(d, ignore_errors=True)
    if d.exists():  # e.g. a busy mount: say so rather than pretend
        leftovers = [str(p) for p in d.rglob("*")][:3]
        raise SimError(f"could not remove {d} completely (left: {', '.join(leftovers)})")
    return True


def _stop_daemon(pid: int | None, timeout: float) -> None:
    """SIGTERM to the sim's daemon (it stops its children), SIGKILL if it lingers."""
    if pid and _pid_alive(pid) and _is_daemon(_cmdline(pid)):
        _kill(pid, signal.SIGTERM)
        if _wait_gone([pid], timeout):
            _kill(pid, signal.SIGKILL)
            _wait_gone([pid], 2)


def _stop_recorded(st: dict[str, Any]) -> None:
    """What the daemon recorded (it was killed, or its cleanup failed): the nodes'
    namespaces, their OpenSSH servers, the private dockerd; each by PID, each checked to
    be what it was before it is stopped."""
    if st.get("slurm"):
        from tui.sim import slurm as simslurm

        simslurm.stop(st["slurm"])
    for ns in (st.get("namespaces") or {}).values():
        for key in ("init", "unshare"):
            p = ns.get(key)
            if p and _pid_alive(p):
                _kill(p)
    for spid in (st.get("sshd_pids") or {}).values():
        if spid and _pid_alive(spid) and "sshd" in _cmdline(int(spid)):
            from tui.sim.opensshd import kill_tree

            kill_tree(int(spid))  # the node's sshd, its sessions and their commands
    dpid = st.get("dockerd_pid")
    if dpid and _pid_alive(dpid) and "dockerd" in _cmdline(dpid):
        from tui.sim.dockerd import stop_dockerd

        sock = Path(st["docker_sock"]) if st.get("docker_sock") else None
        stop_dockerd(dpid, sock, st.get("docker_cli"), Path(st["docker_config"]) if st.get("docker_config") else None)


def _stop_referencing(sd: Path, d: Path) -> None:
    for _ in range(3):
        left = _processes_referencing(sd, d)
        if not left:
            break
        for p in left:
            _kill(p)
        _wait_gone(left, 3)


# --------------------------------------------------------------------------- daemon


def _is_daemon(cmdline: str) -> bool:
    """A sim daemon's command line: this module, or its name before the layout step
    (`tui.core.sim.cluster`), so that `sim down` after an upgrade still stops a sim
    started by the earlier version."""
    return "tui.sim.cluster" in cmdline or "tui.core.sim.cluster" in cmdline


def namespaces_supported() -> bool:
    """Root and a working `unshare --pid --fork --mount-proc` (checked once per sim)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
        return False
    try:
        p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "true"],
                           capture_output=True, timeout=10)
        return p.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


_REAPER = (
    "import os,signal,time\n"
    "signal.signal(signal.SIGTERM,lambda *a:os._exit(0))\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        time.sleep(1)\n"
)


def _start_namespace(name: str, log_path: Path) -> tuple[int, int]:
    """A node's PID + mount namespace: returns (unshare pid, init pid as seen here)."""
    tini = shutil.which("tini") or shutil.which("docker-init")
    init = [tini, "--", "sleep", "infinity"] if tini else [sys.executable, "-I", "-S", "-c", _REAPER]
    with log_path.open("ab") as lf:
        p = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *init],
                             stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, start_new_session=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            kids = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            return p.pid, int(kids[0])
        if p.poll() is not None:
            break
        time.sleep(0.01)
    p.kill()
    raise RuntimeError(f"{name}: unshare did not start its namespace init")


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _seed_profile() -> dict[str, Any]:
    import yaml

    from tui.core.profile import packaged_profiles_dir

    return yaml.safe_load((packaged_profiles_dir() / "qwen3-8b-grpo-32gpu.yaml").read_text())


def _deep_replace(obj: Any, old: str, new: str) -> Any:
    if isinstance(obj, str):
        return obj.replace(old, new)
    if isinstance(obj, list):
        return [_deep_replace(x, old, new) for x in obj]
    if isinstance(obj, dict):
        return {k: _deep_replace(v, old, new) for k, v in obj.items()}
    return obj


def _set(d: dict[str, Any], dotted: list[str], value: Any) -> None:
    for k in dotted[:-1]:
        d = d.setdefault(k, {})
    d[dotted[-1]] = value


def build_profile(*, nodes: list[dict[str, Any]], gpus: int, shared: Path, known_hosts: Path, key: Path,
                  user: str, image: str, ray_ports: dict[str, Any], ray_tmp: Path, refresh_s: float = 1.0,
                  name: str | None = None, jump: str | None = None, verl: str = "",
                  containers: str = "") -> dict[str, Any]:
    """The sim's profile: the seed's run with sim paths, loopback nodes and small sizes.
    `verl`: a short label of the config the stand-in trainer composes (the header shows it);
    `containers`: what runs the nodes' containers when it is not Docker (simdocker.RUNTIME)."""
    p = _seed_profile()
    p = _deep_replace(p, "/data/datapool", str(shared))
    p = _deep_replace(p, "/home/Megatron-LM", str(shared / "Megatron-LM"))
    n_nodes = len(nodes)
    total = n_nodes * gpus
    p["name"] = name or f"sim-{n_nodes}x{gpus}"
    p["description"] = (f"SIMULATED: the seed's Qwen3-8B GRPO run on {n_nodes} x {gpus} simulated "
                        "MTT S5000 cards (loopback SSH nodes, fake card telemetry, small sizes)")
    p["simulated"] = True
    if verl:
        p["sim_verl"] = verl
    if containers:
        p["sim_containers"] = containers
    p["ssh"] = {
        "known_hosts": str(known_hosts),
        "connect_timeout_s": 5,
        "keepalive_interval_s": 2,
        "command_timeout_s": 60,
        "max_channels": 4,
    }
    if jump:
        p["ssh"]["jump"] = jump
    p["nodes"] = []
    for i, n in enumerate(nodes):
        rp = ray_ports["nodes"][n["name"]]
        p["nodes"].append({
            "name": n["name"],
            "address": n["address"],
            "gpus": gpus,
            "role": "head" if i == 0 else "worker",
            "ssh": {"port": n["port"], "user": user, "identity": str(key)},
            "ray_args": [
                f"--temp-dir={ray_tmp / n['name']}",
                f"--dashboard-agent-listen-port={rp['agent_listen']}",
                f"--dashboard-agent-grpc-port={rp['agent_grpc']}",
                f"--metrics-export-port={rp['metrics']}",
                f"--runtime-env-agent-port={rp['runtime_env']}",
                f"--node-manager-port={rp['node_manager']}",
                f"--object-manager-port={rp['object_manager']}",
            ],
        })
    c = p["container"]
    c["image"] = image
    c["docker"] = ["docker"]  # the node's own `docker` (the sim's wrapper) is first on PATH
    c["create"]["volumes"] = [f"{shared}:{shared}"]
    c["after_start"] = ["echo container ready"]  # the seed: service ssh restart (no sshd in the sim image)
    p["env"]["MCCL_SOCKET_IFNAME"] = "lo"
    p["env"]["GLOO_SOCKET_IFNAME"] = "lo"
    p["ray"] = {
        "head_port": ray_ports["head_port"],
        "dashboard_host": nodes[0]["address"],
        "dashboard_port": ray_ports["dashboard_port"],
        "start_args": ["--num-cpus=2", "--object-store-memory=100000000", "--include-log-monitor=false",
                       "--disable-usage-stats"],
        "head_args": [f"--ray-client-server-port={ray_ports['client_port']}"],
        "stop_before_start": True,
        "join_timeout_s": 60,
    }
    o = p["training"]["overrides"]
    small = {
        "data.train_batch_size": 8,
        "data.max_prompt_length": 256,
        "data.max_response_length": 512,
        "actor_rollout_ref.actor.ppo_mini_batch_size": 8,
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 768,
        "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size": 4,  # divides 36 layers
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": 768,
        "actor_rollout_ref.ref.megatron.expert_model_parallel_size": 1,  # dense model
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": 768,
        "actor_rollout_ref.rollout.data_parallel_size": max(1, total // 2),
        "actor_rollout_ref.rollout.n": 2,
        "trainer.n_gpus_per_node": gpus,
        "trainer.nnodes": n_nodes,
        "trainer.save_freq": 5,
        "trainer.test_freq": 5,
        "trainer.total_epochs": 2,
    }
    for k, v in small.items():
        _set(o, k.split("."), v)
    # The seed passes five Megatron *command-line flags* as override_transformer_config
    # keys; TransformerConfig has no such fields. VeRL >= 0.5 drops them with a warning (no
    # effect; `rlconsole check` WARNs and names them), 0.4.x fails at start with a TypeError.
    # The sim's profile is the corrected run, so that a healthy demo raises no warning.
    tc = o.get("actor_rollout_ref", {}).get("actor", {}).get("megatron", {}).get("+override_transformer_config", {})
    for bad in ("no_gradient_accumulation_fusion", "accumulate_allreduce_grads_in_fp32",
                "no_masked_softmax_fusion", "no_bias_swiglu_fusion", "swiglu"):
        tc.pop(bad, None)
    mon = p.setdefault("monitoring", {})
    mon["refresh_s"] = refresh_s
    mon.pop("total_steps", None)
    # The seed's ranges describe 32 real cards; the sim's are derived from the stand-in
    # trainer's own model (tree/verl/utils/sim_perf.py) and these sizes: see sim_ranges.py.
    from tui.sim.sim_ranges import perf_model, sim_monitoring

    step_s = float(os.environ.get("RLCONSOLE_SIM_STEP_S") or perf_model().STEP_S_DEFAULT)
    mon.update(sim_monitoring(step_s=step_s, nnodes=n_nodes, batch=small["data.train_batch_size"],
                              n=small["actor_rollout_ref.rollout.n"], max_prompt=small["data.max_prompt_length"],
                              max_resp=small["data.max_response_length"], test_freq=small["trainer.test_freq"],
                              save_freq=small["trainer.save_freq"], refresh_s=refresh_s))
    return p


def slurm_profile(p: dict[str, Any], rec: dict[str, Any], n_nodes: int, gpus: int) -> dict[str, Any]:
    """The sim's profile made a Slurm one: `cluster.scheduler: slurm` over the sim's
    controller (`slurm_conf`), srun as the transport; `nodes:` keeps only each node's Ray
    arguments, by Slurm host name (the nodes themselves come from the allocation)."""
    p = dict(p)
    p["name"] = f"sim-slurm-{n_nodes}x{gpus}"
    p["description"] = p["description"].replace("loopback SSH nodes", "a real Slurm on loopback nodes")
    p["cluster"] = {"scheduler": "slurm", "partition": rec["partition"], "nodes": n_nodes, "gpus_per_node": gpus,
                    "time": "4:00:00", "transport": "srun", "slurm_conf": rec["conf"]}
    p["nodes"] = [{"name": nd["name"], "ray_args": nd["ray_args"]} for nd in p["nodes"]]
    return p


def _profile_text(p: dict[str, Any], state_dir: Path) -> str:
    import yaml

    header = (
        f"# SIMULATED cluster profile, written by `rlconsole sim up` into {state_dir}.\n"
        "# Modelled on profiles/qwen3-8b-grpo-32gpu.yaml (the seed's run): the same overrides with\n"
        "# small sizes, nodes on loopback addresses, paths under the sim's shared dir (standing in\n"
        "# for /data/datapool), and per-node Ray ports and temp dirs so that several raylets can\n"
        "# share one machine. Removed by `rlconsole sim down`.\n"
        "# monitoring: ranges are not the seed's (32 real cards): they are derived from the stand-in\n"
        "# trainer's own performance model (tree/verl/utils/sim_perf.py, tui/sim/sim_ranges.py) and\n"
        "# this run's sizes and pace, so that a healthy simulated run is in range and a planted\n"
        "# `rlconsole sim fault slow-steps|low-throughput` is not.\n"
    )
    return header + yaml.safe_dump(p, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True)


class _Daemon:
    def __init__(self, state_dir: Path) -> None:
        self.d = state_dir
        cfg = _read_json(state_dir / "config.json")
        if not cfg or cfg.get("marker") != MARKER:
            raise SystemExit(f"{state_dir}: no sim config")
        self.cfg = cfg
        self.sd = short_dir(state_dir)
        self.state: dict[str, Any] = {
            "marker": MARKER, "pid": os.getpid(), "status": "starting", "short_dir": str(self.sd),
            "gpus": cfg["gpus"], "replay_gpu": cfg.get("replay_gpu"), "nodes": [], "namespaces": {},
            "control": str(self.sd / "ctl.sock"),
        }
        self.servers: dict[str, Any] = {}
        self.bastion: Any = None  # `sim up --bastion`: the jump host's SimNodeServer
        self.node_dirs: dict[str, Path] = {}
        self.ns_procs: dict[str, tuple[int, int]] = {}
        self.dockerd: subprocess.Popen | None = None
        self.stop_event: asyncio.Event | None = None
        self.port_holds: list[PortReservation] = []
        """The slots this sim's Ray and Slurm ports come from, held while the daemon lives
        (`ports.reserve_ports`): no other sim draws them."""

    def _ports(self, n: int) -> list[int]:
        res = reserve_ports(n)
        self.port_holds.append(res)
        return res.ports

    def save(self) -> None:
        _write_json(self.d / "state.json", self.state)

    # -- setup ------------------------------------------------------------

    def _keys(self, names: list[str]) -> None:
        import asyncssh

        kd = self.d / "keys"
        kd.mkdir(exist_ok=True)
        if not (kd / "id_ed25519").exists():
            k = asyncssh.generate_private_key("ssh-ed25519", comment=f"rlconsole-sim@{self.d}")
            (kd / "id_ed25519").write_bytes(k.export_private_key())
            (kd / "id_ed25519").chmod(0o600)
            (kd / "id_ed25519.pub").write_bytes(k.export_public_key())
        for n in names:
            hk = kd / f"host_{n}"
            if not hk.exists():
                hk.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
                hk.chmod(0o600)

    def _node_env(self, name: str, nd: Path) -> dict[str, str]:
        venv_bin = str(Path(self.cfg["python"]).parent)
        user = getpass.getuser()
        return {
            "PATH": os.pathsep.join([str(nd / "bin"), str(self.d / "shared" / "bin"), venv_bin,
                                     "/usr/local/sbin", "/usr/local/bin",
                                     "/usr/sbin", "/usr/bin", "/sbin", "/bin"]),
            "HOME": str(nd / "home"),
            "USER": user,
            "LOGNAME": user,
            "SHELL": "/bin/sh",
            "LANG": "C.UTF-8",
            "RLCONSOLE_SIM_NODE": name,
            "RLCONSOLE_SIM_NODE_DIR": str(nd),
            "RLCONSOLE_SIM_DIR": str(self.d),
            "RLCONSOLE_SIM_SHARED": str(self.d / "shared"),
            "RAY_USAGE_STATS_ENABLED": "0",
            # 4 raylets starting at once on a small, busy machine: give the dashboard
            # agent time to come up before the raylet gives up on it.
            "RAY_agent_register_timeout_ms": "120000",
            # Ray starts num_cpus idle Python workers when a job's driver first connects
            # (2 per job here, ~1 s of CPU each, left idle: the stand-in's actors ask for
            # no CPU); on 2 shared cores the sim does without them.
            "RAY_prestart_worker_first_driver": "0",
            # Ray polling itself, idle: 4 raylets, agents and a dashboard on 2 shared cores
            # cost ~10% of a core with nothing running. Prometheus metrics and the agents'
            # per-process stats (the web dashboard's graphs) are not collected on the sim;
            # the raylets check less often for garbage, idle workers and memory. Not the
            # raylets' resource reports: the GCS places a job's placement groups on them.
            "RAY_raylet_check_gc_period_milliseconds": "1000",
            "RAY_kill_idle_workers_interval_ms": "1000",
            "RAY_memory_monitor_refresh_ms": "1000",
            "RAY_enable_metrics_collection": "0",
            "REPORTER_UPDATE_INTERVAL_MS": "60000",
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    def _node_dirs(self, i: int, name: str, docker: dict[str, Any] | None) -> Path:
        nd = self.d / "nodes" / name
        for sub in ("bin", "home", "gpu-load", "tmp"):
            (nd / sub).mkdir(parents=True, exist_ok=True)
        _write_json(nd / "gmi.json", {"gpus": self.cfg["gpus"], "node_index": i,
                                      "replay": self.state.get("replay_copy")})
        py, root = self.cfg["python"], str(_repo_root())
        from tui.sim.gmi import tool_script

        _script(nd / "bin" / "mthreads-gmi", tool_script(str(nd)))
        if docker:
            from tui.sim.dockerwrap import wrapper_script

            _script(nd / "bin" / "docker", wrapper_script(name, docker["cli"], "unix://" + docker["sock"],
                                                          docker["config"], docker["privileged"], py, root))
        else:
            from tui.sim.simdocker import runtime_script

            _script(nd / "bin" / "docker", runtime_script(name, str(nd), py, root))
        # every node's `ray start` takes a turn on this machine; without namespaces (one
        # process table for every node) a node's `ray stop` must also stay on that node
        from tui.sim.raywrap import wrapper_script as ray_wrapper

        real_ray = Path(py).parent / "ray"
        _script(nd / "bin" / "ray", ray_wrapper(name, str(nd), str(self.sd / "ray" / name), str(real_ray), py,
                                                 root, narrow_stop=not self.state.get("namespaces_enabled")))
        return nd

    def _start_docker(self) -> dict[str, Any] | None:
        """The nodes' container runtime: a private dockerd (returned: how the nodes' wrappers
        reach it) where one is installed and this runs as root, else None: the sim's own
        runtime (simdocker.py), with the reason in the state. `docker=True` insists on dockerd;
        with the default a dockerd that fails to start leaves the sim's runtime, said why."""
        from tui.sim import dockerd as dk
        from tui.sim.simdocker import RUNTIME

        want = self.cfg.get("docker")
        exe, cli = dk.find_dockerd(), dk.find_docker_cli()
        why = ("sim up without dockerd" if want is False else
               "no dockerd on this machine (Debian: apt-get install docker.io)" if not exe or not cli else
               "dockerd needs root" if os.geteuid() != 0 else None)
        if why is not None and want is True:
            raise RuntimeError(f"dockerd requested, but {why}")
        if why is None:
            try:
                return self._start_dockerd(exe, cli)  # type: ignore[arg-type]  # both found (why is None)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                if want is True:
                    raise
                log.warning("the private dockerd did not start (%s): the nodes get the sim's container runtime", e)
                self._stop_own_dockerd()
                why = f"the private dockerd did not start: {e}"
        self.state.update(docker=RUNTIME, docker_why=why)
        return None

    def _stop_own_dockerd(self) -> None:
        """A private dockerd that started but could not be used: stopped, forgotten."""
        if self.dockerd is None:
            return
        from tui.sim.dockerd import stop_dockerd

        with contextlib.suppress(Exception):
            stop_dockerd(self.dockerd.pid, Path(self.state["docker_sock"]), self.state.get("docker_cli"),
                         Path(self.state["docker_config"]))
            self.dockerd.wait(5)
        self.dockerd = None
        for k in ("dockerd_pid", "docker_sock", "docker_cli", "docker_config", "image"):
            self.state.pop(k, None)

    def _start_dockerd(self, exe: str, cli: str) -> dict[str, Any]:
        from tui.sim import dockerd as dk

        sock = self.sd / "docker.sock"
        cfgdir = self.d / "dockercfg"
        cfgdir.mkdir(exist_ok=True)
        (cfgdir / "config.json").write_text("{}\n")
        self.dockerd = dk.start_dockerd(exe, self.d / "docker" / "data", self.sd / "de", sock, self.d / "dockerd.log")
        self.state.update(dockerd_pid=self.dockerd.pid, docker_sock=str(sock), docker_cli=cli,
                          docker_config=str(cfgdir), docker="running", image=dk.IMAGE)
        self.save()
        dk.build_image(cli, sock, cfgdir)
        priv = dk.privileged_works(cli, sock, cfgdir)
        self.state["docker_privileged"] = priv
        return {"cli": cli, "sock": str(sock), "config": str(cfgdir), "privileged": priv}

    async def setup(self) -> None:
        from tui.sim.server import SimNodeServer

        n, gpus = int(self.cfg["nodes"]), int(self.cfg["gpus"])
        names = [node_name(i) for i in range(n)]
        self.sd.mkdir(mode=0o700, exist_ok=True)
        (self.d / "daemon.pid").write_text(str(os.getpid()))
        self.save()
        if self.cfg.get("replay_gpu"):
            dst = self.d / "replay-gpu.txt"
            shutil.copyfile(self.cfg["replay_gpu"], dst)
            self.state["replay_copy"] = str(dst)
        shared = self.d / "shared"
        shared.mkdir(exist_ok=True)
        self.state["verl"] = _install_tree(shared, self.cfg.get("verl") or {})
        self._keys(names)
        docker = self._start_docker()
        use_ns = self.cfg.get("namespaces")
        if use_ns is None:
            use_ns = namespaces_supported()
        elif use_ns and not namespaces_supported():
            raise RuntimeError("namespaces requested but `unshare --pid --fork --mount-proc` does not work here "
                               "(needs root)")
        self.state["namespaces_enabled"] = bool(use_ns)  # before the nodes' dirs: without, each gets its `ray`
        pub = self.d / "keys" / "id_ed25519.pub"
        sshd_exe = None
        self.state["ssh_server"] = self.cfg.get("sshd", "builtin")
        if self.state["ssh_server"] == "openssh":
            from tui.sim.opensshd import find_sshd

            sshd_exe = find_sshd()
            if not sshd_exe:
                raise RuntimeError("OpenSSH's sshd is not installed (apt-get install openssh-server)")
        for i, name in enumerate(names):
            nd = self._node_dirs(i, name, docker)
            ns_pid = None
            if use_ns:
                u, c = _start_namespace(name, self.d / "daemon.log")
                self.ns_procs[name] = (u, c)
                self.state["namespaces"][name] = {"unshare": u, "init": c}
                ns_pid = c
            env = self._node_env(name, nd)
            if sshd_exe:
                from tui.sim.opensshd import OpenSshNode

                self.servers[name] = OpenSshNode(name, node_address(i), self.d / "keys" / f"host_{name}", pub,
                                                 env, nd / "sshd", sshd_exe, ns_pid=ns_pid,
                                                 forward_to=[node_address(j) for j in range(n)])
            else:
                self.servers[name] = SimNodeServer(name, node_address(i), self.d / "keys" / f"host_{name}", [pub],
                                                   env=env, cwd=env["HOME"], ns_pid=ns_pid)
        self.bastion = None
        if self.cfg.get("bastion"):
            # the jump host: its own address, forwards leave from it; the nodes admit only it
            self._keys(["bastion"])
            bhome = self.d / "bastion"
            bhome.mkdir(exist_ok=True)
            self.bastion = SimNodeServer("bastion", BASTION_ADDRESS, self.d / "keys" / "host_bastion", [pub],
                                         env={"PATH": "/usr/bin:/bin", "HOME": str(bhome), "LANG": "C.UTF-8"},
                                         cwd=str(bhome), forward_from=BASTION_ADDRESS)
            for srv in self.servers.values():
                srv.allowed_peers = {BASTION_ADDRESS}
            await self.bastion.start()
            self.state["bastion"] = {"address": BASTION_ADDRESS, "port": self.bastion.port}
        self.node_dirs = {nm: self.d / "nodes" / nm for nm in names}
        self._render_all()
        self.save()
        ports = await asyncio.gather(*(s.start() for s in self.servers.values()))
        self._record_sshd_pids()
        self.state["nodes"] = [{"name": nm, "address": node_address(i), "port": ports[i],
                                "ns_pid": self.state["namespaces"].get(nm, {}).get("init")}
                               for i, nm in enumerate(names)]
        kh_lines = []
        for i, nm in enumerate(names):
            import asyncssh

            key = asyncssh.read_private_key(str(self.d / "keys" / f"host_{nm}"))
            kh_lines.append(f"[{node_address(i)}]:{ports[i]} {key.export_public_key().decode().strip()}")
        if self.bastion is not None:
            import asyncssh

            key = asyncssh.read_private_key(str(self.d / "keys" / "host_bastion"))
            kh_lines.append(f"[{BASTION_ADDRESS}]:{self.bastion.port} {key.export_public_key().decode().strip()}")
        (self.d / "known_hosts").write_text("\n".join(kh_lines) + "\n")
        # Ray ports: 6 per node + 3 for the head, all distinct.
        free = self._ports(6 * n + 3)
        ray_ports: dict[str, Any] = {"head_port": free[0], "dashboard_port": free[1], "client_port": free[2],
                                     "nodes": {}}
        for i, nm in enumerate(names):
            b = 3 + 6 * i
            ray_ports["nodes"][nm] = dict(zip(
                ("agent_listen", "agent_grpc", "metrics", "runtime_env", "node_manager", "object_manager"),
                free[b:b + 6]))
        ray_tmp = self.sd / "ray"
        ray_tmp.mkdir(exist_ok=True)
        from tui.sim.dockerd import IMAGE

        prof = build_profile(nodes=self.state["nodes"], gpus=gpus, shared=shared, known_hosts=self.d / "known_hosts",
                             key=self.d / "keys" / "id_ed25519", user=getpass.getuser(), image=IMAGE,
                             ray_ports=ray_ports, ray_tmp=ray_tmp, verl=_verl_short(self.state.get("verl") or {}),
                             containers="" if docker else str(self.state["docker"]),
                             jump=f"{getpass.getuser()}@{BASTION_ADDRESS}:{self.bastion.port}" if self.bastion else None)
        if self.cfg.get("slurm"):
            from tui.sim import slurm as simslurm

            envs = {nm: self._node_env(nm, self.d / "nodes" / nm) for nm in names}
            rec = await asyncio.to_thread(
                simslurm.start, d=self.d, sd=self.sd, gpus=gpus, node_envs=envs, ports=self._ports(1 + n),
                nodes=[{"name": nm, "address": node_address(i)} for i, nm in enumerate(names)])
            self.state["slurm"] = rec
            self.save()
            prof = slurm_profile(prof, rec, n, gpus)
        ppath = self.d / "profile.yaml"
        ppath.write_text(_profile_text(prof, self.d))
        from tui.core.profile import load_profile

        load_profile(ppath)  # a sim that writes an invalid profile must fail here, loudly
        self.state["profile"] = str(ppath)
        self.state["ray"] = ray_ports

    def _record_sshd_pids(self) -> None:
        """OpenSSH nodes: each sshd's PID in the state, so `sim down` stops it even when
        this daemon died without cleaning up."""
        pids = {nm: getattr(s, "pid", None) for nm, s in self.servers.items()}
        self.state["sshd_pids"] = {nm: p for nm, p in pids.items() if p}
        self.save()

    def _render_all(self) -> None:
        """Render every node's card-tool output (see gmi.py: why the daemon does it)."""
        from tui.sim.gmi import render_node

        now = time.time()
        for nm, nd in self.node_dirs.items():
            ns = self.state["namespaces"].get(nm)
            proc_root = f"/proc/{ns['init']}/root/proc" if ns else "/proc"
            try:
                render_node(str(nd), proc_root, now)
            except Exception:  # one node's bad load file must not stop the others
                log.exception("%s: rendering the card tool output failed", nm)

    async def render_loop(self) -> None:
        from tui.sim.gmi import RENDER_INTERVAL_S

        while True:
            await asyncio.sleep(RENDER_INTERVAL_S)
            await asyncio.to_thread(self._render_all)

    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            req = json.loads(await reader.readline() or b"{}")
            op = req.get("op")
            if op == "status":
                reply = {"ok": True, "nodes": {k: s.running for k, s in self.servers.items()}}
            elif op in ("stop-node", "start-node"):
                s = self.servers.get(req.get("node"))
                if s is None:
                    reply = {"ok": False, "error": f"no node named {req.get('node')!r}"}
                else:
                    if op == "stop-node":
                        await s.stop()
                    else:
                        await s.start()
                    self._record_sshd_pids()
                    reply = {"ok": True}
            elif op == "shutdown":
                assert self.stop_event is not None
                self.stop_event.set()
                reply = {"ok": True}
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as e:  # noqa: BLE001 - reply with the error, keep serving
            reply = {"ok": False, "error": str(e)}
        writer.write(json.dumps(reply).encode() + b"\n")
        with contextlib.suppress(Exception):
            await writer.drain()
            writer.close()

    async def run(self) -> None:
        self.stop_event = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, self.stop_event.set)
        try:
            await self.setup()
            ctl = await asyncio.start_unix_server(self.control, path=str(self.sd / "ctl.sock"))
            render = asyncio.ensure_future(self.render_loop())
            self.state["status"] = "ready"
            self.save()
            log.info("sim ready: %s nodes, profile %s", len(self.servers), self.state["profile"])
            await self.stop_event.wait()
            render.cancel()
            ctl.close()
        except Exception as e:  # reported to sim_up through state.json
            log.exception("sim failed")
            self.state["status"] = "failed"
            self.state["error"] = f"{type(e).__name__}: {e}"
            self.save()
        finally:
            await self.cleanup()

    async def cleanup(self) -> None:
        if self.state.get("slurm"):  # its jobs cancelled and the queue empty first, then its daemons
            from tui.sim import slurm as simslurm

            await asyncio.to_thread(simslurm.stop, self.state["slurm"])
        extra = [self.bastion] if getattr(self, "bastion", None) is not None else []
        await asyncio.gather(*(s.stop() for s in [*self.servers.values(), *extra]), return_exceptions=True)
        for u, c in self.ns_procs.values():
            _kill(c)
            _kill(u)
        _wait_gone([p for uc in self.ns_procs.values() for p in uc], 5)
        for u, _ in self.ns_procs.values():
            with contextlib.suppress(Exception):
                os.waitpid(u, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG: never blocks
        if self.dockerd is not None:
            from tui.sim.dockerd import stop_dockerd

            stop_dockerd(self.dockerd.pid, Path(self.state["docker_sock"]), self.state.get("docker_cli"),
                         Path(self.state["docker_config"]))
            with contextlib.suppress(Exception):
                self.dockerd.wait(5)
        if self.state.get("status") != "failed":
            self.state["status"] = "stopped"
        self.save()
        for res in self.port_holds:  # last: nothing of this sim listens on them any more
            res.close()


def _verl_short(source: dict[str, str]) -> str:
    """`VeRL 0.7.0 config` / `stand-in VeRL config`: what the header says beside SIMULATED."""
    if source.get("source") == "release":
        return f"VeRL {source.get('version')} config"
    return "stand-in VeRL config" if source else ""


def _install_tree(shared: Path, verl: dict[str, Any]) -> dict[str, str]:
    """Lay out the stand-in VeRL tree, data and `modelscope` under the shared dir, where
    the profile's paths point (`tree_install.install_sim_tree`), with the config `sim_up`
    chose (`_verl_config`); return what it says of that config (label, version)."""
    from tui.sim.tree_install import install_sim_tree, read_config_source
    from tui.sim.verl_release import VerlRelease

    release = None
    if verl.get("config_dir"):
        release = VerlRelease(str(verl["version"]), Path(verl["config_dir"]), str(verl.get("wheel") or ""))
    paths = install_sim_tree(shared, verl_release=release,
                             why_standin="offline" if verl.get("why_standin") else None)
    return read_config_source(paths["config_path"]) or {}


def _daemon_main(state_dir: str) -> int:
    d = Path(state_dir)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
    os.umask(0o022)
    daemon = _Daemon(d)
    asyncio.run(daemon.run())
    return 0 if daemon.state.get("status") != "failed" else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "daemon":
        sys.exit(_daemon_main(sys.argv[2]))
    print("usage: python -m tui.sim.cluster daemon STATE_DIR", file=sys.stderr)
    sys.exit(2)
