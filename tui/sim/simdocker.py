"""The sim's own container runtime: a simulated node's `docker` where the sim runs no dockerd.

`sim up` uses a private dockerd where one is installed and the sim runs as root (dockerd
needs root; see dockerwrap.py). Everywhere else (a laptop without Docker, any non-root
user, `sim_up(docker=False)`) each node gets this runtime instead, as `<node>/bin/docker`,
first on the node's PATH. It is honest about what it is: `docker version` and `docker
info` say "simulated (no dockerd)", every container carries the label
`rlconsole.sim.runtime`, and `sim status` and the console's header say
"containers: simulated (no dockerd)".

It answers the docker commands the product sends (create, run, start, stop, restart,
kill, rm, pause, unpause, inspect, ps, exec, logs, wait; `tui/core/actions/containers.py`,
`tui/core/probes.py`, `tui/core/ssh.py`) with Docker's own output shapes: `docker inspect`
prints Docker's JSON (`State.Status`, `Running`, `Pid`, `ExitCode`, `StartedAt`, ...,
`Config.Image`) that `tui/core/parsers/docker.py` reads, `docker ps --format '{{json .}}'`
Docker's string-valued rows, and the errors are Docker's words ("No such container",
"is not running", "Conflict. The container name ... is already in use").

A container's state lives in the node's own dir (`<node>/containers/<id>/`). Its main
process (the image's command; the sim's image is `sleep infinity`) runs on the node
itself, under a small `sh` supervisor in its own session that records the main PID and,
when it ends, the exit status. `docker exec` runs the command on the node itself (as the
dockerd wrapper does: the sim has no training image), after checking the container runs,
with the container's `--env` and a marker variable (`RLCONSOLE_SIM_CONTAINER=<id>`) that
everything it starts inherits. `docker stop`/`kill`/`rm -f` end the main process and,
as the kernel does when a container's init dies, every process carrying the marker (Ray
started through `docker exec` dies with its container, as on a real node).

The telemetry sampler runs `docker inspect --type container NAME` every refresh: the
node's `docker` script answers that in `sh` for an absent or running container (no
Python start); everything else comes here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

RUNTIME = "simulated (no dockerd)"
"""What this runtime calls itself: `sim status`, the console's header, `docker version`."""
RUNTIME_LABEL = "rlconsole.sim.runtime"
MARKER_ENV = "RLCONSOLE_SIM_CONTAINER"
DEFAULT_CMD = ["sleep", "infinity"]
NEVER = "0001-01-01T00:00:00Z"
_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")

# `docker create/run` flags that take no value (any other option takes one).
_CREATE_BOOL = {"--privileged", "-i", "--interactive", "-t", "--tty", "--rm", "-d", "--detach", "--init",
                "--read-only", "-P", "--publish-all", "--no-healthcheck", "--oom-kill-disable", "--sig-proxy",
                "-q", "--quiet"}
_EXEC_BOOL = {"-d", "--detach", "-i", "--interactive", "-t", "--tty", "--privileged"}
_GLOBAL_WITH_VALUE = {"-H", "--host", "--context", "-c", "--config", "-l", "--log-level", "--tlscacert",
                      "--tlscert", "--tlskey"}

SUPERVISOR = """
d=$1 token=$2; shift 2
exec 3>&2 2>/dev/null
"$@" </dev/null 2>&3 3>&- &
p=$!
printf '%s %s\\n' "$token" "$p" > "$d/pid.tmp" && mv -f "$d/pid.tmp" "$d/pid"
wait "$p"; rc=$?
printf '%s %s\\n' "$token" "$rc" > "$d/exit.tmp" && mv -f "$d/exit.tmp" "$d/exit"
"""
"""A container's supervisor (`sh -c`, own session): runs the main process, records its
PID and, when it ends, its exit status (128+N for signal N, as Docker reports it). The
container's log gets the process's output only (not the shell's "Terminated")."""


class DockerError(Exception):
    """A docker command's failure: Docker's message on stderr and its exit code."""

    def __init__(self, message: str, rc: int = 1) -> None:
        super().__init__(message)
        self.rc = rc


# --------------------------------------------------------------------------- helpers


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e9):09d}Z"


def _parse_time(s: str) -> float | None:
    if not s or s == NEVER:
        return None
    try:
        return datetime.strptime(s[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e9):09d}Z"


def _go_json(obj: Any, indent: int | None = None) -> str:
    """JSON as Go's encoder writes it (Docker's CLI): `<`, `>`, `&` escaped."""
    text = json.dumps(obj, indent=indent, separators=None if indent else (",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def _human(seconds: float) -> str:
    """Docker's units.HumanDuration."""
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return f"{s} seconds"
    m = s // 60
    if m == 1:
        return "About a minute"
    if m < 60:
        return f"{m} minutes"
    h = round(s / 3600)
    if h == 1:
        return "About an hour"
    if h < 48:
        return f"{h} hours"
    if h < 24 * 7 * 2:
        return f"{h // 24} days"
    if h < 24 * 30 * 2:
        return f"{h // 24 // 7} weeks"
    if h < 24 * 365 * 2:
        return f"{h // 24 // 30} months"
    return f"{h // 24 // 365} years"


def _alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def processes_with_env(needle: bytes) -> set[int]:
    """PIDs whose environment holds the entry `needle` (`K=V`), and their descendants
    (a process that cleared its environment still belongs to its parent's container);
    never this process or its parents."""
    marked: set[int] = set()
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            parent[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if env.startswith(needle + b"\0") or b"\0" + needle + b"\0" in env:
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


_OWN_STATE = ("Token", "Supervisor")
"""State keys of the runtime's own (a run's token, its supervisor's PID): not shown."""


def shown(c: dict[str, Any]) -> dict[str, Any]:
    """The container as `docker inspect` shows it: Docker's key order (State after Args),
    without the runtime's own keys."""
    out: dict[str, Any] = {}
    for k, v in c.items():
        if k == "State":
            continue
        out[k] = v
        if k == "Args":
            out["State"] = {sk: sv for sk, sv in c["State"].items() if sk not in _OWN_STATE}
    return out


def container_members(cid: str) -> set[int]:
    """What runs in container `cid`: the processes started in it (MARKER_ENV) and their
    descendants. Both container runtimes of the sim mark them so (this one, and the
    dockerd wrapper's `docker exec`, tui/sim/dockerwrap.py)."""
    return processes_with_env(f"{MARKER_ENV}={cid}".encode())


def kill_container_members(cid: str) -> None:
    """SIGKILL what runs in container `cid`: what a container's end does to its processes."""
    _signal_all(container_members(cid), signal.SIGKILL)


def _signal_all(pids: set[int], sig: int) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, sig)


# --------------------------------------------------------------------------- options


def _split_options(args: list[str], bool_opts: set[str]) -> tuple[list[tuple[str, str | None]], list[str]]:
    """Leading options of a subcommand, `(option, value)`, and the rest (from the first
    positional argument on). `-it`-style bundles of value-less short flags are split."""
    opts: list[tuple[str, str | None]] = []
    j = 0
    while j < len(args):
        a = args[j]
        if a == "--":
            j += 1
            break
        if not a.startswith("-") or a == "-":
            break
        name, eq, val = a.partition("=")
        if eq:
            opts.append((name, val))
        elif a in bool_opts:
            opts.append((a, None))
        elif not a.startswith("--") and len(a) > 2 and all(f"-{ch}" in bool_opts for ch in a[1:]):
            opts.extend((f"-{ch}", None) for ch in a[1:])
        elif not a.startswith("--") and len(a) > 2:
            opts.append((a[:2], a[2:]))  # -eK=V
        else:
            j += 1
            opts.append((a, args[j] if j < len(args) else ""))
        j += 1
    return opts, args[j:]


def _env_entries(opts: list[tuple[str, str | None]]) -> list[str]:
    env: list[str] = []
    for k, v in opts:
        if k in ("-e", "--env") and v is not None:
            env.append(v if "=" in v else f"{v}={os.environ.get(v, '')}")
        elif k == "--env-file" and v:
            try:
                lines = Path(v).read_text().splitlines()
            except OSError as e:
                raise DockerError(f"open {v}: {e.strerror.lower() if e.strerror else e}", 125) from None
            env += [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return env


# --------------------------------------------------------------------------- the runtime


class Runtime:
    """The containers of one node, kept in `<node_dir>/containers/`."""

    def __init__(self, node_dir: str | Path) -> None:
        self.node_dir = Path(node_dir)
        self.root = self.node_dir / "containers"
        self.names = self.root / "names"
        self.names.mkdir(parents=True, exist_ok=True)

    # -- storage

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with open(self.root / ".lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def ids(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and p.name != "names"
                      and (p / "container.json").exists())

    def resolve(self, ref: str) -> str | None:
        """A container's id from its name, full id or unique id prefix."""
        ref = ref.lstrip("/")
        with contextlib.suppress(OSError):
            if _NAME_RE.match(ref):
                return (self.names / ref).read_text().strip() or None
        if re.fullmatch(r"[0-9a-f]{1,64}", ref):
            hits = [i for i in self.ids() if i.startswith(ref)]
            if len(hits) == 1:
                return hits[0]
        return None

    def load(self, cid: str) -> dict[str, Any]:
        d = self.root / cid
        c = json.loads((d / "container.json").read_text())
        c["State"] = json.loads((d / "state.json").read_text())
        return c

    def save(self, c: dict[str, Any]) -> None:
        """The container's state, and its `docker inspect` answer rendered for the node's
        sh fast path (served only while the `live` mark says it is running)."""
        d = self.root / c["Id"]
        _write(d / "state.json", json.dumps(c["State"]))
        _write(d / "inspect.json", _go_json([shown(c)], indent=4) + "\n")
        live = d / "live"
        if c["State"]["Status"] == "running":
            live.touch()
        else:
            with contextlib.suppress(FileNotFoundError):
                live.unlink()

    def _main_pid(self, cid: str) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            tok, pid = (self.root / cid / "pid").read_text().split()
            return int(pid)
        return None

    def _exit(self, cid: str, token: str) -> tuple[int, float] | None:
        """The supervisor's record of this run's end: (exit code, when)."""
        p = self.root / cid / "exit"
        with contextlib.suppress(OSError, ValueError):
            tok, rc = p.read_text().split()
            if tok == token:
                return int(rc), p.stat().st_mtime
        return None

    def current(self, cid: str) -> tuple[dict[str, Any], bool]:
        """The container as it is now (a run that ended is `exited` with its status), and
        whether that changed since it was saved."""
        c = self.load(cid)
        st = c["State"]
        if st["Status"] not in ("running", "paused"):
            return c, False
        ended = self._exit(cid, st.get("Token", ""))
        if ended is None and _alive(int(st.get("Pid") or 0)):
            return c, False
        # the main process ended: its supervisor writes the status as soon as its wait returns
        deadline = time.monotonic() + 5
        while ended is None and _alive(int(st.get("Supervisor") or 0)) and time.monotonic() < deadline:
            time.sleep(0.005)
            ended = self._exit(cid, st.get("Token", ""))
        rc, when = ended if ended is not None else (137, time.time())
        st.update(Status="exited", Running=False, Paused=False, Pid=0, ExitCode=rc, FinishedAt=_iso(when))
        if ended is None:
            st["Error"] = "the container's process is gone (its supervisor was killed)"
        return c, True

    def refresh(self, cid: str) -> dict[str, Any]:
        """`current`, with an end it found recorded; as when a real container's init dies,
        every process still in it is killed."""
        c, changed = self.current(cid)
        if changed:
            _signal_all(self.members(cid), signal.SIGKILL)
            self.save(c)
            if c["HostConfig"].get("AutoRemove"):
                self._remove(c)
        return c

    def members(self, cid: str) -> set[int]:
        return container_members(cid)

    def _remove(self, c: dict[str, Any]) -> None:
        name = c["Name"].lstrip("/")
        with contextlib.suppress(FileNotFoundError):
            if (self.names / name).read_text().strip() == c["Id"]:
                (self.names / name).unlink()
        shutil.rmtree(self.root / c["Id"], ignore_errors=True)

    def get(self, ref: str) -> dict[str, Any]:
        cid = self.resolve(ref)
        if cid is None or not (self.root / cid / "container.json").exists():
            raise DockerError(f"Error response from daemon: No such container: {ref}")
        return self.refresh(cid)

    # -- create / start / stop

    def create(self, args: list[str], sub: str = "create") -> tuple[dict[str, Any], list[tuple[str, str | None]]]:
        opts, rest = _split_options(args, _CREATE_BOOL)
        if not rest:
            raise DockerError(f'"docker {sub}" requires at least 1 argument.\nSee \'docker {sub} --help\'.', 125)
        image, cmd = rest[0], rest[1:]
        o: dict[str, list[str]] = {}
        for k, v in opts:
            o.setdefault(k, []).append(v if v is not None else "true")
        name = (o.get("--name") or [""])[-1] or f"sim_{secrets.token_hex(3)}"
        if not _NAME_RE.match(name):
            raise DockerError(f"Error response from daemon: Invalid container name ({name}), only "
                              "[a-zA-Z0-9][a-zA-Z0-9_.-] are allowed", 125)
        entry = (o.get("--entrypoint") or [""])[-1]
        argv = ([entry] if entry else []) + (cmd or ([] if entry else DEFAULT_CMD))
        binds = (o.get("-v") or []) + (o.get("--volume") or [])
        labels: dict[str, str] = {}
        for kv in (o.get("-l") or []) + (o.get("--label") or []):
            k, _, v = kv.partition("=")
            labels[k] = v
        labels[RUNTIME_LABEL] = RUNTIME
        net = ((o.get("--net") or []) + (o.get("--network") or []) or ["default"])[-1]
        cid = secrets.token_hex(32)
        c = {
            "Id": cid, "Created": _now(), "Path": argv[0], "Args": argv[1:],
            "State": {"Status": "created", "Running": False, "Paused": False, "Restarting": False, "OOMKilled": False,
                      "Dead": False, "Pid": 0, "ExitCode": 0, "Error": "", "StartedAt": NEVER, "FinishedAt": NEVER},
            "Image": "sha256:" + hashlib.sha256(image.encode()).hexdigest(),
            "LogPath": str(self.root / cid / "log"), "Name": "/" + name, "RestartCount": 0,
            "Driver": "rlconsole-sim", "Platform": "linux", "ExecIDs": None,
            "HostConfig": {"Binds": binds or None, "NetworkMode": net, "Privileged": "--privileged" in o,
                           "AutoRemove": "--rm" in o, "RestartPolicy": {"Name": (o.get("--restart") or ["no"])[-1],
                                                                        "MaximumRetryCount": 0}},
            "Mounts": [self._mount(b) for b in binds],
            "Config": {"Hostname": (o.get("-h") or o.get("--hostname") or [os.uname().nodename])[-1],
                       "User": (o.get("-u") or o.get("--user") or [""])[-1], "Env": _env_entries(opts),
                       "Cmd": cmd or ([] if entry else DEFAULT_CMD), "Image": image,
                       "WorkingDir": (o.get("-w") or o.get("--workdir") or [""])[-1],
                       "Entrypoint": [entry] if entry else None, "Labels": labels},
            "NetworkSettings": {"Networks": {net: {}}},
        }
        with self.locked():
            other = self.resolve(name)
            if other is not None and (self.root / other).exists():
                raise DockerError(f'Error response from daemon: Conflict. The container name "/{name}" is already in '
                                  f'use by container "{other}". You have to remove (or rename) that container to be '
                                  "able to reuse that name.", 125)
            d = self.root / cid
            d.mkdir()
            _write(d / "container.json", json.dumps({k: v for k, v in c.items() if k != "State"}))
            self.save(c)
            _write(self.names / name, cid + "\n")
        return c, opts

    @staticmethod
    def _mount(bind: str) -> dict[str, Any]:
        src, _, rest = bind.partition(":")
        dst, _, mode = rest.partition(":")
        if src.startswith("/"):
            with contextlib.suppress(OSError):
                Path(src).mkdir(parents=True, exist_ok=True)  # Docker creates a missing bind source
        return {"Type": "bind" if src.startswith("/") else "volume", "Source": src, "Destination": dst or src,
                "Mode": mode, "RW": "ro" not in mode.split(","), "Propagation": "rprivate"}

    def env_of(self, c: dict[str, Any], extra: list[str] | None = None) -> dict[str, str]:
        """What runs in the container sees: the node's environment, the container's
        `--env`, `extra` (`docker exec -e`), and the marker."""
        env = dict(os.environ)
        for kv in [*(c["Config"].get("Env") or []), *(extra or [])]:
            k, _, v = kv.partition("=")
            env[k] = v
        env[MARKER_ENV] = c["Id"]
        return env

    def start(self, c: dict[str, Any]) -> dict[str, Any]:
        """Start a created or exited container (the caller holds the lock)."""
        st, cid = c["State"], c["Id"]
        if st["Status"] == "running":
            return c
        if st["Status"] == "paused":
            raise DockerError("Error response from daemon: cannot start a paused container, try unpause instead")
        argv = [c["Path"], *c["Args"]]
        env = self.env_of(c)
        if shutil.which(argv[0], path=env.get("PATH")) is None and not os.access(argv[0], os.X_OK):
            st.update(Error=f'failed to create task for container: exec: "{argv[0]}": executable file not found in '
                            "$PATH: unknown", ExitCode=127)
            self.save(c)
            raise DockerError(f"Error response from daemon: {st['Error']}")
        d = self.root / cid
        for f in ("pid", "exit"):
            with contextlib.suppress(FileNotFoundError):
                (d / f).unlink()
        token = secrets.token_hex(8)
        with open(d / "log", "ab") as log:
            sup = subprocess.Popen(["/bin/sh", "-c", SUPERVISOR, "rlconsole-sim-container", str(d), token, *argv],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd="/",
                             start_new_session=True)
        deadline = time.monotonic() + 10
        pid = None
        while pid is None and time.monotonic() < deadline:
            pid = self._main_pid(cid)
            if pid is None:
                time.sleep(0.005)
        if pid is None:
            raise DockerError(f"Error response from daemon: container {cid} did not start within 10s")
        st.update(Status="running", Running=True, Paused=False, Dead=False, Pid=pid, ExitCode=0, Error="",
                  StartedAt=_now(), Token=token, Supervisor=sup.pid)
        self.save(c)
        return c

    def stop(self, c: dict[str, Any], timeout: float = 10.0, sig: int = signal.SIGTERM) -> dict[str, Any]:
        """`sig` to the main process, SIGKILL after `timeout`; then every process left in
        the container (the caller holds the lock)."""
        cid = c["Id"]
        st = c["State"]
        if st["Status"] not in ("running", "paused"):
            return c
        pid = int(st.get("Pid") or 0)
        if st["Status"] == "paused":
            _signal_all(self.members(cid) | {pid}, signal.SIGCONT)
        _signal_all({pid}, sig)
        deadline = time.monotonic() + max(0.0, timeout)
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _alive(pid):
            _signal_all({pid}, signal.SIGKILL)
        _signal_all(self.members(cid), signal.SIGKILL)
        end = time.monotonic() + 5  # the supervisor records the status as soon as its wait returns
        while self._exit(cid, st.get("Token", "")) is None and time.monotonic() < end:
            time.sleep(0.01)
        return self.refresh(cid)

    # -- what `docker ps` shows

    def ps_row(self, c: dict[str, Any], no_trunc: bool = False) -> dict[str, str]:
        st = c["State"]
        now = time.time()
        created = _parse_time(c["Created"]) or now
        status = st["Status"]
        if status == "running":
            shown = f"Up {_human(now - (_parse_time(st['StartedAt']) or now))}"
        elif status == "paused":
            shown = f"Up {_human(now - (_parse_time(st['StartedAt']) or now))} (Paused)"
        elif status == "exited":
            shown = f"Exited ({st['ExitCode']}) {_human(now - (_parse_time(st['FinishedAt']) or now))} ago"
        else:
            shown = status.capitalize()
        cmd = " ".join([c["Path"], *c["Args"]])
        if not no_trunc and len(cmd) > 20:
            cmd = cmd[:19] + "…"
        labels = c["Config"].get("Labels") or {}
        return {
            "Command": json.dumps(cmd, ensure_ascii=False),
            "CreatedAt": time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(created)),
            "ID": c["Id"] if no_trunc else c["Id"][:12], "Image": c["Config"]["Image"],
            "Labels": ",".join(f"{k}={v}" for k, v in labels.items()), "LocalVolumes": "0",
            "Mounts": ",".join(m["Source"] for m in c["Mounts"]), "Names": c["Name"].lstrip("/"),
            "Networks": c["HostConfig"]["NetworkMode"], "Ports": "", "RunningFor": f"{_human(now - created)} ago",
            "Size": "0B", "State": status, "Status": shown,
        }


# --------------------------------------------------------------------------- templates

_TEMPLATE_RE = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_TABLE_HEADERS = {"ID": "CONTAINER ID", "Image": "IMAGE", "Command": "COMMAND", "CreatedAt": "CREATED AT",
                  "RunningFor": "CREATED", "Ports": "PORTS", "State": "STATE", "Status": "STATUS", "Size": "SIZE",
                  "Names": "NAMES", "Labels": "LABELS", "Mounts": "MOUNTS", "Networks": "NETWORKS",
                  "LocalVolumes": "LOCAL VOLUMES"}
DEFAULT_PS = "table {{.ID}}\t{{.Image}}\t{{.Command}}\t{{.RunningFor}}\t{{.Status}}\t{{.Ports}}\t{{.Names}}"


def _lookup(obj: Any, path: str) -> Any:
    for part in [p for p in path.split(".") if p]:
        if not isinstance(obj, dict) or part not in obj:
            raise DockerError(f'template: :1: executing "" at <.{path}>: map has no entry for key "{part}"')
        obj = obj[part]
    return obj


def _go_value(v: Any) -> str:
    if v is None:
        return "<no value>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return _go_json(v)
    return str(v)


def render_template(fmt: str, obj: Any) -> str:
    """Docker's `--format` for the forms people use: `{{.A.B}}`, `{{json .}}`,
    `{{json .A}}`, literal text, `\\t`/`\\n` escapes."""

    def one(m: re.Match[str]) -> str:
        expr = m.group(1)
        if expr.startswith("json "):
            return _go_json(_lookup(obj, expr[5:].strip().lstrip(".")) if expr[5:].strip() != "." else obj)
        if expr == ".":
            return _go_value(obj)
        if expr.startswith("."):
            return _go_value(_lookup(obj, expr[1:]))
        raise DockerError(f'template parsing error: template: :1: function "{expr.split()[0]}" not defined '
                          f"(containers: {RUNTIME})")

    return _TEMPLATE_RE.sub(one, fmt.replace("\\t", "\t").replace("\\n", "\n"))


def _table(fmt: str, rows: list[dict[str, str]]) -> list[str]:
    body = fmt[len("table"):].strip()
    fields = [m.group(1).lstrip(".") for m in _TEMPLATE_RE.finditer(body)]
    header = "\t".join(_TABLE_HEADERS.get(f, f.upper()) for f in fields)
    cells = [header.split("\t")] + [render_template(body, r).split("\t") for r in rows]
    widths = [max(len(row[i]) if i < len(row) else 0 for row in cells) for i in range(len(cells[0]))]
    return ["   ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip() for row in cells]


# --------------------------------------------------------------------------- the CLI


class Cli:
    """`docker ARGS` on one node."""

    def __init__(self, node_dir: str | Path) -> None:
        self.rt = Runtime(node_dir)
        self.opts: dict[str, str | None] = {}

    def out(self, s: str) -> None:
        sys.stdout.write(s)
        sys.stdout.flush()

    def err(self, s: str) -> None:
        sys.stderr.write(s if s.endswith("\n") else s + "\n")

    def main(self, argv: list[str]) -> int:
        i = 0
        while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-v", "--version", "--help", "-h"):
            i += 2 if argv[i] in _GLOBAL_WITH_VALUE else 1
        rest = argv[i:]
        if not rest or rest[0] in ("--help", "-h", "help"):
            self.out(f"Usage:  docker COMMAND\n\nthe rlconsole sim's container runtime (containers: {RUNTIME});\n"
                     f"commands: {', '.join(sorted(self.COMMANDS))}\n")
            return 0
        sub, args = rest[0], rest[1:]
        if sub in ("container", "image") and args:
            sub, args = (args[0] if sub == "container" else f"image-{args[0]}"), args[1:]
            sub = {"ls": "ps", "list": "ps", "image-ls": "images", "image-inspect": "image-inspect"}.get(sub, sub)
        if sub in ("-v", "--version"):
            sub = "--version"
        fn = self.COMMANDS.get(sub)
        if fn is None:
            self.err(f"docker: '{sub}' is not a docker command of the rlconsole sim's runtime "
                     f"(containers: {RUNTIME}).\nSee 'docker --help'")
            return 1
        try:
            return int(fn(self, args) or 0)
        except DockerError as e:
            self.err(str(e))
            return e.rc
        except KeyboardInterrupt:
            return 130

    # each command: (self, args) -> exit code

    def cmd_version(self, args: list[str]) -> int:
        self.out(f"Client:\n Version:           rlconsole-sim\n Context:           {self.rt.node_dir.name}\n\n"
                 f"Server:\n Engine:\n  Version:          {RUNTIME}\n  Containers:       the node's own processes, "
                 f"state in {self.rt.root}\n")
        return 0

    def cmd_short_version(self, args: list[str]) -> int:
        self.out(f"Docker version rlconsole-sim ({RUNTIME})\n")
        return 0

    def cmd_info(self, args: list[str]) -> int:
        with self.rt.locked():
            cs = [self.rt.refresh(i) for i in self.rt.ids()]
        running = sum(1 for c in cs if c["State"]["Status"] == "running")
        self.out(f"Server:\n Containers: {len(cs)}\n  Running: {running}\n Server Version: {RUNTIME}\n"
                 f" Storage Driver: rlconsole-sim\n Docker Root Dir: {self.rt.root}\n")
        return 0

    def cmd_create(self, args: list[str]) -> int:
        c, _ = self.rt.create(args)
        self.out(c["Id"] + "\n")
        return 0

    def cmd_run(self, args: list[str]) -> int:
        c, opts = self.rt.create(args, "run")
        detach = any(k in ("-d", "--detach") for k, _ in opts)
        with self.rt.locked():
            try:
                c = self.rt.start(c)
            except DockerError as e:
                raise DockerError(f"docker: {e}", 127 if "not found" in str(e) else 125) from None
        if detach:
            self.out(c["Id"] + "\n")
            return 0
        rc = self._follow_log(c["Id"], follow=True, tail=None)
        if c["HostConfig"].get("AutoRemove"):
            with self.rt.locked(), contextlib.suppress(DockerError):
                self.rt._remove(self.rt.get(c["Id"]))
        return rc

    def _each(self, args: list[str], fn: Callable[[dict[str, Any]], Any], bool_opts: set[str] | None = None,
              usage: str = "") -> int:
        """Run `fn` on each named container under the lock, printing each name as Docker
        does; a missing one is an error that does not stop the others."""
        opts, names = _split_options(args, bool_opts or set())
        if not names:
            raise DockerError(f'"docker {usage}" requires at least 1 argument.')
        self.opts = dict(opts)
        rc = 0
        for n in names:
            try:
                with self.rt.locked():
                    fn(self.rt.get(n))
                self.out(n + "\n")
            except DockerError as e:
                self.err(str(e))
                rc = e.rc
        return rc

    def cmd_start(self, args: list[str]) -> int:
        failed: list[str] = []

        def one(c: dict[str, Any]) -> None:
            try:
                self.rt.start(c)
            except DockerError:
                failed.append(c["Name"].lstrip("/"))
                raise

        rc = self._each(args, one, {"-a", "--attach", "-i", "--interactive"}, "start")
        if failed:
            self.err(f"Error: failed to start containers: {', '.join(failed)}")
        return rc

    def _timeout(self) -> float:
        t = self.opts.get("-t") or self.opts.get("--time") or self.opts.get("--timeout")
        try:
            return float(t) if t is not None else 10.0
        except ValueError:
            raise DockerError(f'invalid argument "{t}" for "-t, --time" flag: strconv.ParseInt: parsing '
                              f'"{t}": invalid syntax', 125) from None

    def _sig(self, default: str) -> int:
        raw = (self.opts.get("-s") or self.opts.get("--signal") or default).upper()
        raw = raw[3:] if raw.startswith("SIG") else raw
        if raw.isdigit():
            return int(raw)
        sig = getattr(signal, f"SIG{raw}", None)
        if sig is None:
            raise DockerError(f"Error response from daemon: Invalid signal: {raw}")
        return int(sig)

    def cmd_stop(self, args: list[str]) -> int:
        return self._each(args, lambda c: self.rt.stop(c, self._timeout(), self._sig("TERM")), usage="stop")

    def cmd_restart(self, args: list[str]) -> int:
        return self._each(args, lambda c: self.rt.start(self.rt.stop(c, self._timeout(), self._sig("TERM"))),
                          usage="restart")

    def cmd_kill(self, args: list[str]) -> int:
        def one(c: dict[str, Any]) -> None:
            if c["State"]["Status"] not in ("running", "paused"):
                raise DockerError(f"Error response from daemon: Cannot kill container: {c['Name'].lstrip('/')}: "
                                  f"Container {c['Id']} is not running")
            sig = self._sig("KILL")
            if sig == signal.SIGKILL:
                self.rt.stop(c, 0, signal.SIGKILL)
            else:
                _signal_all({int(c["State"]["Pid"])}, sig)

        return self._each(args, one, usage="kill")

    def cmd_rm(self, args: list[str]) -> int:
        def one(c: dict[str, Any]) -> None:
            if c["State"]["Status"] in ("running", "paused"):
                if not ({"-f", "--force"} & set(self.opts)):
                    raise DockerError(f"Error response from daemon: You cannot remove a {c['State']['Status']} "
                                      f"container {c['Id']}. Stop the container before attempting removal or force "
                                      "remove")
                c = self.rt.stop(c, 0, signal.SIGKILL)
            self.rt._remove(c)

        return self._each(args, one, {"-f", "--force", "-v", "--volumes", "-l", "--link"}, "rm")

    def _pause(self, c: dict[str, Any], pause: bool) -> None:
        st = c["State"]
        want_from = "running" if pause else "paused"
        if st["Status"] != want_from:
            state = "not running" if st["Status"] not in ("running", "paused") else \
                ("already paused" if pause else "not paused")
            raise DockerError(f"Error response from daemon: Container {c['Id']} is {state}")
        _signal_all(self.rt.members(c["Id"]) | {int(st["Pid"])}, signal.SIGSTOP if pause else signal.SIGCONT)
        st.update(Status="paused" if pause else "running", Paused=pause)
        self.rt.save(c)

    def cmd_pause(self, args: list[str]) -> int:
        return self._each(args, lambda c: self._pause(c, True), usage="pause")

    def cmd_unpause(self, args: list[str]) -> int:
        return self._each(args, lambda c: self._pause(c, False), usage="unpause")

    def cmd_inspect(self, args: list[str]) -> int:
        opts, names = _split_options(args, {"-s", "--size"})
        o = dict(opts)
        fmt = o.get("-f") or o.get("--format")
        kind = o.get("--type") or ""
        if not names:
            raise DockerError('"docker inspect" requires at least 1 argument.')
        if kind not in ("", "container"):
            for n in names:
                self.err(f"Error: No such {kind}: {n}")
            if not fmt:
                self.out("[]\n")
            return 1
        found, rc = [], 0
        for n in names:
            try:
                with self.rt.locked():
                    found.append(self.rt.get(n))
            except DockerError:
                self.err(f"Error: No such {'container' if kind else 'object'}: {n}")
                rc = 1
        found = [shown(c) for c in found]
        if fmt:
            for c in found:
                self.out(render_template(fmt, c) + "\n")
        else:
            self.out(_go_json(found, indent=4) + "\n")
        return rc

    def cmd_ps(self, args: list[str]) -> int:
        opts, _ = _split_options(args, {"-a", "--all", "-q", "--quiet", "--no-trunc", "-l", "--latest", "-s",
                                        "--size"})
        flags = {k for k, _ in opts}
        show_all = bool({"-a", "--all"} & flags)
        no_trunc = "--no-trunc" in flags
        filters = [v or "" for k, v in opts if k in ("-f", "--filter")]
        fmt = next((v for k, v in reversed(opts) if k == "--format"), None) or DEFAULT_PS
        if fmt == "json":
            fmt = "{{json .}}"
        with self.rt.locked():
            cs = [self.rt.refresh(i) for i in self.rt.ids()]
        cs = [c for c in cs if (show_all or c["State"]["Status"] in ("running", "paused", "restarting"))
              and all(self._matches(c, f) for f in filters)]
        cs.sort(key=lambda c: c["Created"], reverse=True)
        if {"-q", "--quiet"} & flags:
            self.out("".join((c["Id"] if no_trunc else c["Id"][:12]) + "\n" for c in cs))
            return 0
        rows = [self.rt.ps_row(c, no_trunc) for c in cs]
        lines = _table(fmt, rows) if fmt.startswith("table") else [render_template(fmt, r) for r in rows]
        self.out("".join(ln + "\n" for ln in lines))
        return 0

    @staticmethod
    def _matches(c: dict[str, Any], f: str) -> bool:
        key, _, val = f.partition("=")
        if key == "name":
            return val in c["Name"].lstrip("/")
        if key == "id":
            return c["Id"].startswith(val)
        if key == "status":
            return c["State"]["Status"] == val
        if key == "label":
            k, eq, v = val.partition("=")
            labels = c["Config"].get("Labels") or {}
            return k in labels and (not eq or labels[k] == v)
        if key == "ancestor":
            return c["Config"]["Image"] == val
        raise DockerError(f"Error response from daemon: invalid filter '{key}'")

    def cmd_exec(self, args: list[str]) -> int:
        opts, rest = _split_options(args, _EXEC_BOOL)
        if len(rest) < 2:
            raise DockerError('"docker exec" requires at least 2 arguments.\nSee \'docker exec --help\'.')
        name, cmd = rest[0], rest[1:]
        cid = self.rt.resolve(name)
        if cid is None or not (self.rt.root / cid / "container.json").exists():
            raise DockerError(f"Error response from daemon: No such container: {name}")
        c, _ = self.rt.current(cid)  # read only: exec is frequent, and its own check needs no lock
        if c["State"]["Status"] == "paused":
            raise DockerError(f"Error response from daemon: Container {cid} is paused, unpause the container "
                              "before exec")
        if c["State"]["Status"] != "running":
            raise DockerError(f"Error response from daemon: Container {cid} is not running")
        env = self.rt.env_of(c, _env_entries(opts))
        o = dict(opts)
        # Docker's default working dir is the container's "/": here, where the command runs on
        # the node itself, the node's home, never the caller's cwd (srun's, a checkout).
        workdir = o.get("-w") or o.get("--workdir") or c["Config"].get("WorkingDir") or os.environ.get("HOME") or "/"
        if workdir:
            try:
                os.chdir(workdir)
            except OSError:
                raise DockerError(f'OCI runtime exec failed: exec failed: unable to start container process: chdir to '
                                  f'cwd ("{workdir}") set in config.json failed: no such file or directory: unknown',
                                  126) from None
        if {"-d", "--detach"} & set(o):
            subprocess.Popen(cmd, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return 0
        try:
            os.execvpe(cmd[0], cmd, env)
        except OSError:
            raise DockerError(f'OCI runtime exec failed: exec failed: unable to start container process: exec: '
                              f'"{cmd[0]}": executable file not found in $PATH: unknown', 126) from None
        return 0  # not reached

    def _follow_log(self, cid: str, follow: bool, tail: int | None) -> int:
        """Print the container's output (the last `tail` lines); with `follow`, on until
        it exits. Returns its exit code (0 while it runs)."""
        path = self.rt.root / cid / "log"
        pos = 0
        with contextlib.suppress(OSError):
            data = path.read_bytes()
            if tail is not None:
                lines = data.splitlines(keepends=True)
                data = b"".join(lines[-tail:] if tail else [])
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            pos = path.stat().st_size
        while follow:
            try:
                c, _ = self.rt.current(cid)
            except OSError:  # removed meanwhile (`--rm`, `rm -f` elsewhere)
                return 0
            running = c["State"]["Status"] in ("running", "paused")
            with contextlib.suppress(OSError), open(path, "rb") as f:
                f.seek(pos)
                chunk = f.read()
                pos += len(chunk)
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            if not running:
                return int(c["State"]["ExitCode"])
            time.sleep(0.1)
        return 0

    def cmd_logs(self, args: list[str]) -> int:
        opts, names = _split_options(args, {"-f", "--follow", "-t", "--timestamps", "--details"})
        if len(names) != 1:
            raise DockerError('"docker logs" requires exactly 1 argument.')
        o = dict(opts)
        tail_s = o.get("-n") or o.get("--tail") or "all"
        tail = None if tail_s == "all" else int(tail_s) if tail_s.isdigit() else None
        with self.rt.locked():
            c = self.rt.get(names[0])
        self._follow_log(c["Id"], bool({"-f", "--follow"} & set(o)), tail)
        return 0

    def cmd_wait(self, args: list[str]) -> int:
        _, names = _split_options(args, set())
        if not names:
            raise DockerError('"docker wait" requires at least 1 argument.')
        for n in names:
            with self.rt.locked():
                cid = self.rt.get(n)["Id"]
            while True:
                with self.rt.locked():
                    c = self.rt.refresh(cid)
                if c["State"]["Status"] not in ("running", "paused"):
                    self.out(f"{c['State']['ExitCode']}\n")
                    break
                time.sleep(0.1)
        return 0

    def cmd_images(self, args: list[str]) -> int:
        with self.rt.locked():
            images = sorted({self.rt.load(i)["Config"]["Image"] for i in self.rt.ids()})
        self.out("REPOSITORY   TAG   IMAGE ID   CREATED   SIZE\n")
        for im in images:
            repo, _, tag = im.rpartition(":") if ":" in im.rsplit("/", 1)[-1] else (im, "", "latest")
            self.out(f"{repo}   {tag}   {hashlib.sha256(im.encode()).hexdigest()[:12]}   -   0B\n")
        return 0

    def cmd_pull(self, args: list[str]) -> int:
        _, names = _split_options(args, {"-a", "--all-tags", "-q", "--quiet"})
        for n in names:
            self.out(f"{n}: the sim's runtime has no registry and no images (containers: {RUNTIME}); "
                     "any image name is taken as given\n")
        return 0

    COMMANDS: dict[str, Callable[[Cli, list[str]], int]] = {
        "version": cmd_version, "--version": cmd_short_version, "info": cmd_info, "create": cmd_create,
        "run": cmd_run, "start": cmd_start, "stop": cmd_stop, "restart": cmd_restart, "kill": cmd_kill,
        "rm": cmd_rm, "pause": cmd_pause, "unpause": cmd_unpause, "inspect": cmd_inspect, "ps": cmd_ps,
        "exec": cmd_exec, "logs": cmd_logs, "wait": cmd_wait, "images": cmd_images, "pull": cmd_pull,
    }


def main(node_dir: str, argv: list[str] | None = None) -> int:
    return Cli(node_dir).main(sys.argv[1:] if argv is None else argv)


def runtime_script(node: str, node_dir: str, python: str, repo_root: str) -> str:
    """The node's `docker`: sh for the telemetry sampler's hot path (`docker inspect
    --type container NAME` of an absent or a running container: a file read, no Python
    start), this module for the rest."""
    root = f"{node_dir}/containers"
    return f"""#!/bin/sh
# This node's docker (rlconsole sim, node {node}): the sim's own container runtime, no dockerd
# (containers: {RUNTIME}). State in {root}. See tui/sim/simdocker.py.
if [ "$#" -eq 4 ] && [ "$1" = inspect ] && [ "$2" = --type ] && [ "$3" = container ]; then
  case "$4" in
    [!A-Za-z0-9]*|*[!A-Za-z0-9_.-]*) ;;
    *)
      if [ ! -e '{root}/names/'"$4" ]; then
        case "$4" in
          *[!0-9a-f]*) echo '[]'; echo "Error: No such container: $4" >&2; exit 1 ;;
        esac
      elif read id < '{root}/names/'"$4" && [ -e '{root}/'"$id/live" ] && [ ! -e '{root}/'"$id/exit" ] \\
          && read tok pid < '{root}/'"$id/pid" && [ -d "/proc/$pid" ]; then
        exec cat '{root}/'"$id/inspect.json"
      fi ;;
  esac
fi
exec '{python}' -IS -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from tui.sim.simdocker import main; sys.exit(main(sys.argv.pop(1)))' '{repo_root}' '{node_dir}' "$@"
"""  # noqa: E501 - one exec line of a generated shell script
