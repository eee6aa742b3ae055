"""The run profile: one validated YAML file that describes a whole training run.

A profile replaces the seed's hostfile, its container commands, its `setup_ray.sh` and
its 90-line `ray job submit` script. Everything else (status, actions, checks, the TUI)
reads a `Profile`. Validation is strict and positional: every error names the file, the
line and the key, because a user fixing a profile should never have to guess.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import re
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar, cast

import yaml

from tui.core.errors import ProfileError, UsageError
from tui.core.locations import user_profiles_dir
from tui.core.state import CardLimits
from tui.core.yamlpos import MAX_INT_DIGITS, DuplicateKeyError, LimitError, LocatedDict, LocatedList, load_located

# --------------------------------------------------------------------------- model
#
# The schema is declared once, on the dataclasses: a field's type says how its YAML value
# is read (`_KINDS`), its default is the profile's default, a field without one is
# required, and `_rule(...)` adds what the type cannot say (choices, positive, absolute
# cluster path). `_read()` reads a section by its dataclass; what spans fields (a head
# node, the overrides) is checked by the small functions of the loader below.


def _rule(default: Any = MISSING, *, factory: Callable[[], Any] | None = None, **rules: Any) -> Any:
    """A dataclass field with the reading rules in its metadata (see `_read`)."""
    if factory is not None:
        return field(default_factory=factory, metadata=rules)
    return field(default=default, metadata=rules)


@dataclass
class SshEndpoint:
    """How to reach one node. `host` defaults to the node's address."""

    host: str
    port: int = 22
    user: str | None = None
    identity: list[str] = field(default_factory=list)
    jump_host: str | None = None  # the older one-hop spelling of `jump`
    jump: list[str] = field(default_factory=list)  # [user@]host[:port] hops, first to last
    # False when neither the node nor `ssh:` names a port: the connection then leaves the
    # port to ~/.ssh/config (`Port`), as `ssh` does, and 22 only where that says nothing.
    port_given: bool = True

    @property
    def hops(self) -> list[str]:
        """The jump chain, first hop first (`jump`, else `jump_host`, else none)."""
        return list(self.jump) if self.jump else ([self.jump_host] if self.jump_host else [])


@dataclass
class SshSettings:
    known_hosts: str | None = _rule(None, local=True)  # None: asyncssh's default (~/.ssh/known_hosts)
    config: str | None = _rule(None, local=True)  # None: ~/.ssh/config when it exists
    connect_timeout_s: float = _rule(10.0, positive=True)
    keepalive_interval_s: float = _rule(15.0, positive=True)
    command_timeout_s: float = _rule(30.0, positive=True)
    max_channels: int = _rule(4, positive=True)  # OpenSSH's MaxSessions is 10 by default


@dataclass
class Node:
    name: str
    address: str
    gpus: int
    role: str  # "head" or "worker"
    ssh: SshEndpoint
    ray_args: list[str] = field(default_factory=list)
    line: int = 0
    # a Slurm profile's node: its name for Slurm (`srun -w`), "" before the allocation is known
    slurm_host: str = ""

    @property
    def is_head(self) -> bool:
        return self.role == "head"


_WALLTIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_walltime(text: str) -> int | None:
    """Slurm's `--time` forms in seconds: "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S";
    None when the text is none of them (or zero)."""
    m = _WALLTIME_RE.match(text.strip())
    if not m:
        return None
    d, a, b, c = m.groups()
    nums = [int(x) for x in (a, b, c) if x is not None]
    if d is not None:  # D-H[:M[:S]]
        h, mi, se = (nums + [0, 0])[:3]
        secs = ((int(d) * 24 + h) * 60 + mi) * 60 + se
    elif len(nums) == 1:
        secs = nums[0] * 60
    elif len(nums) == 2:
        secs = nums[0] * 60 + nums[1]
    else:
        secs = (nums[0] * 60 + nums[1]) * 60 + nums[2]
    return secs or None


@dataclass
class ClusterSettings:
    """`cluster:`: who hands out the nodes. `static` (the default): the `nodes:` list.
    `slurm`: a Slurm allocation (tui/core/slurm.py): the nodes are the allocation's, named
    by Slurm's host names, the first one the head; before an allocation is known they are
    `slurm1`..`slurmN`, unreachable, and `containers` (`u`) asks Slurm for one."""

    scheduler: str = _rule("static", choices=("static", "slurm"))
    partition: str | None = None
    nodes: int | None = _rule(None, positive=True)
    gpus_per_node: int | None = _rule(None, positive=True)
    time: str | None = None  # walltime, as sbatch's --time
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    extra_sbatch: list[str] = field(default_factory=list)
    jobid: str | None = None  # an allocation that exists: reused, never duplicated
    transport: str = _rule("srun", choices=("srun", "ssh"))  # how commands reach the nodes
    slurm_conf: str | None = _rule(None, local=True)  # SLURM_CONF for the Slurm commands run here
    time_s: int = 0  # `time` in seconds
    node_ray_args: dict[str, list[str]] = field(default_factory=dict)  # `nodes[]` by Slurm host name
    dashboard_on: str = ""  # srun: the head's address the dashboard was moved to from loopback (slurm.apply)
    ssh_defaults: Any = None  # the `ssh:` node defaults (_NodeDefaults), for the allocation's nodes

    @property
    def slurm(self) -> bool:
        return self.scheduler == "slurm"


@dataclass
class ContainerCreate:
    privileged: bool = False
    network: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    volumes: list[str] = field(default_factory=list)
    extra_args: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=lambda: ["sleep", "infinity"])


@dataclass
class Container:
    name: str
    image: str
    # or "direct": the SSH endpoint already is the container
    access: str = _rule("docker-exec", choices=("docker-exec", "direct"))
    docker: list[str] = _rule(factory=lambda: ["docker"], allow_scalar=True)
    create: ContainerCreate = _rule(factory=ContainerCreate, section=True)
    after_start: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Paths:
    """Paths on the cluster (absolute; never expanded here: they belong to the nodes)."""

    verl: str = _rule(cluster=True)
    megatron: str | None = _rule(None, cluster=True)
    hf_model: str = _rule(cluster=True)
    mcore_checkpoint: str = _rule(cluster=True)
    train_files: list[str] = _rule(allow_scalar=True, cluster=True)
    val_files: list[str] = _rule(factory=list, allow_scalar=True, cluster=True)
    tensorboard_dir: str = _rule(cluster=True)
    checkpoint_dir: str = _rule(cluster=True)
    workdir: str | None = _rule(None, cluster=True)
    data_dir: str | None = _rule(None, cluster=True)
    shared: list[str] = _rule(factory=list, cluster=True)


@dataclass
class ModelInfo:
    """What static checks must know about the model without reading its config."""

    source: str | None = None
    download: list[str] = field(default_factory=list)
    num_layers: int | None = _rule(None, positive=True)
    moe: bool = False
    max_position_embeddings: int | None = _rule(None, positive=True)


@dataclass
class Convert:
    script: str = _rule(cluster=True)
    python: str = "python"
    extra_args: list[str] = field(default_factory=list)


@dataclass
class RaySettings:
    binary: str = "ray"
    head_port: int = _rule(6379, kind="port")
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = _rule(8265, kind="port")
    num_gpus: int | None = _rule(None, positive=True)  # None: each node's `gpus`
    start_args: list[str] = field(default_factory=list)
    head_args: list[str] = field(default_factory=list)
    worker_args: list[str] = field(default_factory=list)
    stop_before_start: bool = True
    join_timeout_s: float = _rule(120.0, positive=True)


@dataclass
class Override:
    """One Hydra override: `prefix` is "", "+" or "++"; `key` is dotted."""

    prefix: str
    key: str
    value: Any
    line: int = 0


@dataclass
class Training:
    module: str
    config_path: str
    config_name: str
    overrides: list[Override]
    python: str = "python3"
    python_args: list[str] = field(default_factory=lambda: ["-u"])
    submission_prefix: str | None = None
    env: dict[str, str] = field(default_factory=dict)


# The console refreshes this often at most; below it the loop only burns a core.
MIN_REFRESH_S = 0.1


@dataclass
class Monitoring:
    mfu_pct: tuple[float, float] | None = None
    throughput_tokens_per_s_per_node: tuple[float, float] | None = None
    step_time_min: tuple[float, float] | None = None
    mem_gib_per_card: tuple[float, float] | None = None
    total_steps: int | None = _rule(None, positive=True)
    refresh_s: float = _rule(2.0, positive=True, minimum=MIN_REFRESH_S)
    # alert thresholds (tui/core/alerts.py)
    hot_c: float = _rule(85.0, positive=True)
    mem_full_pct: float = _rule(95.0, positive=True)
    stall_factor: float = _rule(3.0, positive=True)
    out_of_range_steps: int = _rule(3, positive=True)

    def card_limits(self) -> CardLimits:
        """The card rule (hot, memory near full) for the alerts and the node grid alike."""
        return CardLimits(hot_c=self.hot_c, mem_full_pct=self.mem_full_pct)


@dataclass
class ConsoleSettings:
    bell: bool = True  # ring the terminal bell on error alerts
    read_only: bool = False  # watch only: actions that change the cluster are refused


@dataclass
class NotifySettings:
    """`notify:`: where alerts go when nobody watches (tui/core/notify.py)."""

    to: list[str] = _rule(factory=list, allow_scalar=True)  # webhook URLs or local commands
    # the least severe alert sent
    level: str = _rule("warning", choices=("info", "warning", "error"))


@dataclass
class Profile:
    name: str
    path: str
    nodes: list[Node]
    container: Container
    paths: Paths
    training: Training
    ssh: SshSettings = field(default_factory=SshSettings)
    model: ModelInfo = field(default_factory=ModelInfo)
    convert: Convert | None = None
    env: dict[str, str] = field(default_factory=dict)
    ray: RaySettings = field(default_factory=RaySettings)
    monitoring: Monitoring = field(default_factory=Monitoring)
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
    notify: NotifySettings = field(default_factory=NotifySettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    gpu_tool: str = "auto"
    simulated: bool = False
    description: str = ""
    sim_verl: str = ""  # written by `rlconsole sim up`: which VeRL config the simulated trainer composes
    sim_containers: str = ""  # written by `rlconsole sim up` when no dockerd runs the containers: "simulated (no dockerd)"

    @property
    def head(self) -> Node:
        return next(n for n in self.nodes if n.is_head)

    @property
    def workers(self) -> list[Node]:
        return [n for n in self.nodes if not n.is_head]

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    def override_value(self, key: str, default: Any = None) -> Any:
        """The value the overrides give to a dotted key (prefix ignored)."""
        for o in self.training.overrides:
            if o.key == key:
                return o.value
        return default


# --------------------------------------------------------------------------- reader

_MISSING = object()


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


SHOWN_CHARS = 60
"""A bad value is quoted in the error up to this long: a 20000-digit one is still one
readable line."""


def _show(value: Any) -> str:
    if isinstance(value, str):
        more = f"... ({len(value)} characters)" if len(value) > SHOWN_CHARS else ""
        return '"' + value[:SHOWN_CHARS].replace('"', '\\"') + more + '"'
    if isinstance(value, (dict, list)):
        return _type_name(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_text(value)
    return repr(value)


def _int_text(v: int) -> str:
    """An integer for a message: itself, or its size when it is huge (str() of one past
    4300 digits raises; one of 100 is no port or count to print whole)."""
    if -10**30 < v < 10**30:
        return str(v)
    return f"an integer of about {int(v.bit_length() * 0.30103) + 1} digits"


class _Section:
    """Reads one mapping of the profile, tracking which keys were used so that unknown
    keys (usually typos) are reported with a suggestion instead of being ignored."""

    def __init__(self, data: Any, path: str, file: str, line: int) -> None:
        self.file = file
        self.path = path
        self.line = line
        if data is None:
            data = LocatedDict()
            data.line = line
            data.key_lines = {}
        if not isinstance(data, dict):
            raise ProfileError(file, line, path or "profile",
                               f"expected a mapping, got {_type_name(data)}")
        self.data: dict[Any, Any] = data
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def line_of(self, name: str) -> int:
        d = self.data
        return d.line_of(name) if isinstance(d, LocatedDict) else self.line

    def error(self, name: str, message: str) -> ProfileError:
        return ProfileError(self.file, self.line_of(name), self.key(name), message)

    def raw(self, name: str, default: Any = _MISSING, required: bool = False) -> Any:
        self.used.add(name)
        if name not in self.data:
            if required:
                raise ProfileError(self.file, self.line, self.key(name), "required key is missing")
            return None if default is _MISSING else default
        if required and self.data[name] is None:  # `name:` with nothing after it
            raise self.error(name, "required key has no value")
        return self.data[name]

    def string(self, name: str, default: Any = _MISSING, required: bool = False,
            choices: tuple[str, ...] | None = None, nonempty: bool = True) -> Any:
        v = self.raw(name, default, required)
        if v is None or (v is default and default is not _MISSING):
            return v
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise self.error(name, f"expected a string, got {_type_name(v)}")
        v = str(v)
        if nonempty and not v.strip():
            raise self.error(name, "expected a non-empty string")
        if choices and v not in choices:
            raise self.error(name, f"expected one of {', '.join(choices)}, got {_show(v)}")
        return v

    def integer(self, name: str, default: Any = _MISSING, required: bool = False,
            minimum: int | None = None, positive: bool = False) -> Any:
        v = self.raw(name, default, required)
        if v is None or (v is default and default is not _MISSING):
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            what = "a positive integer" if positive else "an integer"
            raise self.error(name, f"expected {what}, got {_show(v)}")
        if positive and v <= 0:
            raise self.error(name, f"expected a positive integer, got {_int_text(v)}")
        if minimum is not None and v < minimum:
            raise self.error(name, f"expected an integer >= {minimum}, got {_int_text(v)}")
        return v

    def port(self, name: str, default: Any = _MISSING) -> Any:
        v = self.integer(name, default)
        if v is not None and not 1 <= v <= 65535:
            raise self.error(name, f"expected a port number 1-65535, got {_int_text(v)}")
        return v

    def number(self, name: str, default: Any = _MISSING, positive: bool = False,
               minimum: float | None = None) -> Any:
        v = self.raw(name, default)
        if v is None or (v is default and default is not _MISSING):
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error(name, f"expected a number, got {_show(v)}")
        if isinstance(v, int) and not -10**30 < v < 10**30:  # (float() of it overflows)
            raise self.error(name, f"expected a number, got {_int_text(v)}")
        # `.nan` compares false with everything, so `v <= 0` lets it through and a NaN
        # timeout silently means no timeout; `.inf` is no timeout said out loud. Both out.
        if not math.isfinite(v):
            raise self.error(name, f"expected a finite number, got {_show(v)}")
        if positive and v <= 0:
            raise self.error(name, f"expected a positive number, got {v}")
        if minimum is not None and v < minimum:
            raise self.error(name, f"expected a number >= {minimum:g}, got {v:g}")
        return float(v)

    def boolean(self, name: str, default: Any = _MISSING) -> Any:
        v = self.raw(name, default)
        if v is None or (v is default and default is not _MISSING):
            return v
        if not isinstance(v, bool):
            raise self.error(name, f"expected true or false, got {_show(v)}")
        return v

    def str_list(self, name: str, default: Any = _MISSING, required: bool = False,
                 allow_scalar: bool = False) -> Any:
        v = self.raw(name, default, required)
        if v is None or (v is default and default is not _MISSING):
            return v if v is not None else []
        if allow_scalar and isinstance(v, str):
            return [v]
        if not isinstance(v, list):
            raise self.error(name, f"expected a list of strings, got {_type_name(v)}")
        out = []
        for i, item in enumerate(v):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                line = v.line_of(i) if isinstance(v, LocatedList) else self.line_of(name)
                raise ProfileError(self.file, line, f"{self.key(name)}[{i}]",
                                   f"expected a string, got {_type_name(item)}")
            out.append(str(item))
        return out

    def str_map(self, name: str) -> dict[str, str]:
        v = self.raw(name, None)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise self.error(name, f"expected a mapping of names to values, got {_type_name(v)}")
        out: dict[str, str] = {}
        for k, item in v.items():
            line = v.line_of(k) if isinstance(v, LocatedDict) else self.line_of(name)
            if not isinstance(k, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                raise ProfileError(self.file, line, f"{self.key(name)}.{k}",
                                   "expected an environment variable name")
            if isinstance(item, (dict, list)):
                raise ProfileError(self.file, line, f"{self.key(name)}.{k}",
                                   f"expected a string, got {_type_name(item)}")
            if item is None:
                item = "null"
            elif isinstance(item, bool):
                item = "true" if item else "false"
            out[k] = str(item)
        return out

    def range(self, name: str) -> tuple[float, float] | None:
        v = self.raw(name, None)
        if v is None:
            return None
        if (not isinstance(v, list) or len(v) != 2
                or any(isinstance(x, bool) or not isinstance(x, (int, float))
                       or not math.isfinite(x) for x in v)):
            raise self.error(name, f"expected [low, high] numbers, got {_show(v) if not isinstance(v, list) else v}")
        lo, hi = float(v[0]), float(v[1])
        if lo > hi:
            raise self.error(name, f"low {lo:g} is above high {hi:g}")
        return (lo, hi)

    def section(self, name: str, required: bool = False) -> _Section:
        v = self.raw(name, None, required)
        return _Section(v, self.key(name), self.file, self.line_of(name))

    def done(self) -> None:
        for k in self.data:
            if k not in self.used:
                known = sorted(self.used)
                hint = difflib.get_close_matches(str(k), known, n=1)
                suffix = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise ProfileError(self.file, self.line_of(k), self.key(str(k)),
                                   f"unknown key{suffix}")


# --------------------------------------------------------------------------- helpers


def expand_local(path: str) -> str:
    """Expand `~` and `$VARS` in a path used on this machine (never in remote paths:
    those belong to the cluster and must reach it unchanged)."""
    return os.path.expandvars(os.path.expanduser(path))


def _require_abs(sec: _Section, name: str, value: str | None) -> None:
    if value is not None and not value.startswith("/"):
        raise sec.error(name, f"expected an absolute path on the cluster, got {_show(value)}")


_HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.\-]*[A-Za-z0-9])?$")


def _check_address(sec: _Section, name: str, value: str) -> None:
    try:
        ipaddress.ip_address(value)
        return
    except ValueError:
        pass
    if not _HOST_RE.match(value):
        raise sec.error(name, f"expected an IP address or host name, got {_show(value)}")


def _check_jumps(sec: _Section, name: str, hops: list[str] | str | None) -> None:
    """Each hop of `jump`/`jump_host` is `[user@]host[:port]` (`[v6]:port`, or a bare IPv6
    address without a port), the port 1-65535 in ASCII digits: `127.0.0.1:notaport` loaded,
    `check --static` said nothing, and the connection failed naming the node, not the hop."""
    for i, hop in enumerate([hops] if isinstance(hops, str) else (hops or [])):
        spec = hop.rsplit("@", 1)[1] if "@" in hop else hop
        port = ""
        if spec.startswith("[") and "]" in spec:
            host, _, rest = spec[1:].partition("]")
            if rest and not rest.startswith(":"):
                host = ""
            port = rest[1:] if rest else ""
            if rest == ":":
                host = ""
        elif spec.count(":") == 1:
            host, port = spec.split(":")
            if not port:
                host = ""
        else:
            host = spec
        ok_host = bool(host) and (_HOST_RE.match(host) is not None or _is_ip(host))
        ok_port = not port or (port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535)
        if not (ok_host and ok_port and "@" not in spec):
            which = "" if isinstance(hops, str) else f"hop {i + 1}: "
            raise sec.error(name, f"{which}expected [user@]host[:port] with a port 1-65535, got {_show(hop)}")


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return False


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-@]*(\.[A-Za-z_0-9][A-Za-z0-9_\-@]*)*$")


def _flatten_overrides(data: Any, file: str, base: str, prefix: str, parent_line: int,
                       out: list[Override], path: str) -> None:
    """Turn nested YAML into dotted Hydra overrides. A key written `+name` or `++name`
    gives every leaf below it that prefix: Hydra's way to add keys absent from the
    config (`+`) or to add-or-override (`++`)."""
    if not isinstance(data, dict):
        raise ProfileError(file, parent_line, path, f"expected a mapping, got {_type_name(data)}")
    for raw_key, value in data.items():
        line = data.line_of(raw_key) if isinstance(data, LocatedDict) else parent_line
        if not isinstance(raw_key, str):
            raise ProfileError(file, line, f"{path}.{raw_key}", "override keys must be strings")
        key = raw_key
        p = prefix
        m = re.match(r"^(\+\+|\+)", key)
        if m:
            if prefix:
                raise ProfileError(file, line, f"{path}.{raw_key}",
                                   f"a '{m.group(1)}' inside a '{prefix}' section is redundant")
            p = m.group(1)
            key = key[len(p):]
        if not _KEY_RE.match(key):
            raise ProfileError(file, line, f"{path}.{raw_key}",
                               "expected a dotted Hydra key (letters, digits, _ - @ .)")
        full = f"{base}.{key}" if base else key
        if isinstance(value, dict) and value:
            _flatten_overrides(value, file, full, p, line, out, f"{path}.{raw_key}")
        else:
            if isinstance(value, dict):
                value = {}
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and _CONTROL_RE.search(item):
                    raise ProfileError(file, line, f"{path}.{raw_key}",
                                       "Hydra cannot take a line break or control character in a value")
                if isinstance(item, (dict, list)):
                    raise ProfileError(file, line, f"{path}.{raw_key}",
                                       "expected a list of plain values (no nested lists or mappings)")
            out.append(Override(prefix=p, key=full, value=value, line=line))


# Overrides the static checks divide by or multiply into a card count: a size of 0,
# `.inf` or `.nan` there is a profile error, not a ZeroDivisionError in `check`.
_COUNT_KEYS = re.compile(r"(^|\.)([a-z_]*_parallel_size|nnodes|n_gpus_per_node)$")

MAX_PROFILE_BYTES = 4 << 20


def _check_count_override(o: Override, file: str) -> None:
    if not _COUNT_KEYS.search(o.key) or o.value is None:
        return
    v = o.value
    if isinstance(v, str):
        # an interpolation (`${...}`) or an importer's placeholder is not ours to judge;
        # a number written as a string is. `isdigit` is true of "²" and "٣" too, which
        # int() refuses or reads, and Hydra would take for text: said, not crashed on.
        digits = v.strip().lstrip("+-")
        if not digits.isdigit():
            return
        if not digits.isascii():
            raise ProfileError(file, o.line, f"training.overrides.{o.key}",
                               f"expected a positive integer written with 0-9, got {_show(v)}")
        if len(digits) > MAX_INT_DIGITS:
            raise ProfileError(file, o.line, f"training.overrides.{o.key}",
                               f"an integer of {len(digits)} digits (at most {MAX_INT_DIGITS})")
        v = int(v.strip())
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return
    if (isinstance(v, float) and (not math.isfinite(v) or not v.is_integer())) or v <= 0:
        raise ProfileError(file, o.line, f"training.overrides.{o.key}",
                           f"expected a positive integer, got {_show(v)}")


# --------------------------------------------------------------------------- loader


# How a field's declared type is read from YAML (the `_Section` reader of that kind).
_KINDS = {
    "str": "str", "str | None": "str", "int": "int", "int | None": "int", "float": "float",
    "bool": "bool", "list[str]": "list", "dict[str, str]": "map", "tuple[float, float] | None": "range",
}

_T = TypeVar("_T")


def _read(cls: type[_T], sec: _Section, **given: Any) -> _T:
    """Read one section by its dataclass's declared schema (see `_rule`), in field
    order, so the first bad key is the one reported. `given` fields are read by the
    caller; `sec.done()` is left to the caller too (a section may hold more keys)."""
    values: dict[str, Any] = {}
    for f in fields(cast(Any, cls)):
        if f.name in given:
            continue
        rule = f.metadata
        default: Any = _MISSING
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        required = default is _MISSING
        kind = rule.get("kind") or _KINDS[str(f.type)]
        if kind == "str":
            v = sec.string(f.name, default, required=required, choices=rule.get("choices"))
        elif kind == "int":
            v = sec.integer(f.name, default, required=required, positive=rule.get("positive", False))
        elif kind == "port":
            v = sec.port(f.name, default)
        elif kind == "float":
            v = sec.number(f.name, default, positive=rule.get("positive", False), minimum=rule.get("minimum"))
        elif kind == "bool":
            v = sec.boolean(f.name, default)
        elif kind == "list":
            v = sec.str_list(f.name, default, required=required, allow_scalar=rule.get("allow_scalar", False))
        elif kind == "map":
            v = sec.str_map(f.name)
        elif kind == "range":
            v = sec.range(f.name)
        else:  # pragma: no cover - a schema mistake, caught by the profile tests
            raise AssertionError(f"{cls.__name__}.{f.name}: no reader for {kind!r}")
        if rule.get("local") and v:
            v = expand_local(v)
        values[f.name] = v
    obj = cls(**values, **given)
    _check_cluster_paths(cls, sec, obj)
    return obj


def _check_cluster_paths(cls: type, sec: _Section, obj: Any) -> None:
    """Fields marked `cluster=True` are absolute paths on the nodes."""
    for f in fields(cast(Any, cls)):
        if not f.metadata.get("cluster"):
            continue
        value = getattr(obj, f.name)
        if isinstance(value, list):
            for i, v in enumerate(value):
                if not v.startswith("/"):
                    raise sec.error(f.name, f"{f.name}[{i}]: expected an absolute path on the cluster, got {_show(v)}")
        else:
            _require_abs(sec, f.name, value)


@dataclass
class _NodeDefaults:
    """`ssh:` keys that are defaults for every node's own `ssh:`."""

    user: str | None
    port: int
    port_given: bool
    identity: list[str]
    jump_host: str | None
    jump: list[str]


def _ssh(root: _Section) -> tuple[SshSettings, _NodeDefaults]:
    s = root.section("ssh")
    ssh = _read(SshSettings, s)
    if ssh.max_channels > 10:
        raise s.error("max_channels", f"OpenSSH refuses more than 10 sessions per connection by default, got {ssh.max_channels}")
    defaults = _NodeDefaults(
        user=s.string("user", None),
        port=s.port("port", 22),
        port_given="port" in s.data,
        identity=s.str_list("identity", [], allow_scalar=True),
        jump_host=s.string("jump_host", None),
        jump=s.str_list("jump", [], allow_scalar=True),
    )
    _check_jumps(s, "jump_host", defaults.jump_host)
    _check_jumps(s, "jump", defaults.jump)
    if s.raw("strict_host_key_checking", True) is not True:
        raise s.error("strict_host_key_checking",
                      "host keys are always verified; add the node's key to known_hosts instead")
    s.done()
    return ssh, defaults


def _node(n: _Section, line: int, d: _NodeDefaults) -> Node:
    nname = n.string("name", required=True)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", nname):
        raise n.error("name", f"expected letters, digits, '.', '_' or '-', got {_show(nname)}")
    address = n.string("address", required=True)
    _check_address(n, "address", address)
    gpus = n.integer("gpus", required=True, positive=True)
    role = n.string("role", "worker", choices=("head", "worker"))
    ray_args = n.str_list("ray_args", [])
    e = n.section("ssh")
    host = e.string("host", address)
    _check_address(e, "host", host)
    endpoint = SshEndpoint(
        host=host,
        port=e.port("port", d.port),
        port_given=d.port_given or "port" in e.data,
        user=e.string("user", d.user),
        identity=[expand_local(p) for p in e.str_list("identity", d.identity, allow_scalar=True)],
        jump_host=e.string("jump_host", d.jump_host),
        jump=e.str_list("jump", d.jump, allow_scalar=True),
    )
    _check_jumps(e, "jump_host", endpoint.jump_host)
    _check_jumps(e, "jump", endpoint.jump)
    e.done()
    n.done()
    return Node(nname, address, gpus, role, endpoint, ray_args, line)


def _nodes(root: _Section, defaults: _NodeDefaults) -> list[Node]:
    file = root.file
    raw_nodes = root.raw("nodes", required=True)
    if not isinstance(raw_nodes, list):
        raise root.error("nodes", f"expected a list of nodes, got {_type_name(raw_nodes)}")
    if not raw_nodes:
        raise root.error("nodes", "expected at least one node")
    nodes: list[Node] = []
    seen_names: dict[str, int] = {}
    seen_addrs: dict[str, int] = {}
    for i, raw in enumerate(raw_nodes):
        line = raw_nodes.line_of(i) if isinstance(raw_nodes, LocatedList) else 1
        n = _Section(raw, f"nodes[{i}]", file, line)
        node = _node(n, line, defaults)
        if node.name in seen_names:
            raise n.error("name", f"duplicate node name {_show(node.name)} (also at line {seen_names[node.name]})")
        seen_names[node.name] = n.line_of("name")
        if node.address in seen_addrs:
            raise n.error("address", f"duplicate node address {_show(node.address)} "
                                     f"(also at line {seen_addrs[node.address]})")
        seen_addrs[node.address] = n.line_of("address")
        nodes.append(node)
    heads = [nd for nd in nodes if nd.is_head]
    if len(heads) != 1:
        names = ", ".join(nd.name for nd in heads) or "none"
        raise ProfileError(file, root.line_of("nodes"), "nodes",
                           f"expected exactly one node with role: head, got {len(heads)} ({names})")
    return nodes


_SLURM_ONLY = ("partition", "nodes", "gpus_per_node", "time", "account", "qos", "constraint",
               "extra_sbatch", "jobid", "transport", "slurm_conf")


def _cluster(root: _Section) -> ClusterSettings:
    c = root.section("cluster")
    cl = _read(ClusterSettings, c, time_s=0, node_ray_args={}, ssh_defaults=None, dashboard_on="")
    c.done()
    if not cl.slurm:
        for k in _SLURM_ONLY:
            if k in c.data:
                raise c.error(k, "only with scheduler: slurm")
        return cl
    for k in ("nodes", "gpus_per_node", "time"):
        if getattr(cl, k) is None:
            raise ProfileError(c.file, c.line, c.key(k), "required with scheduler: slurm")
    secs = parse_walltime(str(cl.time))
    if secs is None:
        raise c.error("time", f"expected a Slurm walltime (MINUTES, H:MM:SS or D-H:MM:SS), got {_show(cl.time)}")
    cl.time_s = secs
    for k in ("partition", "account", "qos", "constraint"):
        v = getattr(cl, k)
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_.\-&|,:*!()\[\]]+", v):
            raise c.error(k, f"expected a Slurm {k} name, got {_show(v)}")
    for i, arg in enumerate(cl.extra_sbatch):
        if not arg.startswith("-") or _CONTROL_RE.search(arg):
            raise c.error("extra_sbatch", f"extra_sbatch[{i}]: expected an sbatch option (-x or --name=value), "
                                          f"got {_show(arg)}")
    if cl.jobid is not None and not re.fullmatch(r"[0-9]+", cl.jobid):
        raise c.error("jobid", f"expected a Slurm job id (digits), got {_show(cl.jobid)}")
    return cl


def placeholder_nodes(cluster: ClusterSettings, defaults: Any) -> list[Node]:
    """A Slurm profile's nodes before its allocation is known: `slurm1`..`slurmN`, no
    address (unreachable until `containers` gets the allocation), the first the head."""
    assert cluster.nodes is not None and cluster.gpus_per_node is not None
    out = []
    for i in range(cluster.nodes):
        ep = SshEndpoint(host="", port=defaults.port if defaults else 22, user=defaults.user if defaults else None,
                         identity=list(defaults.identity) if defaults else [],
                         jump_host=defaults.jump_host if defaults else None,
                         jump=list(defaults.jump) if defaults else [],
                         port_given=defaults.port_given if defaults else False)
        out.append(Node(f"slurm{i + 1}", "", cluster.gpus_per_node, "head" if i == 0 else "worker", ep))
    return out


def _slurm_nodes(root: _Section, cluster: ClusterSettings, defaults: _NodeDefaults) -> list[Node]:
    """`nodes:` in a Slurm profile is optional: a list of `{name: HOST, ray_args: [...]}`
    giving settings to the allocation's node of that Slurm host name; the nodes
    themselves (addresses, roles, cards) come from the allocation."""
    raw_nodes = root.raw("nodes", None)
    if raw_nodes is not None:
        if not isinstance(raw_nodes, list):
            raise root.error("nodes", f"expected a list of nodes, got {_type_name(raw_nodes)}")
        for i, raw in enumerate(raw_nodes):
            line = raw_nodes.line_of(i) if isinstance(raw_nodes, LocatedList) else 1
            n = _Section(raw, f"nodes[{i}]", root.file, line)
            nname = n.string("name", required=True)
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", nname):
                raise n.error("name", f"expected a Slurm host name, got {_show(nname)}")
            for k in ("address", "gpus", "role", "ssh"):
                if k in n.data:
                    raise n.error(k, "comes from the Slurm allocation (scheduler: slurm): only name and "
                                     "ray_args may be given")
            cluster.node_ray_args[nname] = n.str_list("ray_args", [])
            n.done()
    cluster.ssh_defaults = defaults
    return placeholder_nodes(cluster, defaults)


def _container(root: _Section) -> Container:
    c = root.section("container", required=True)
    cc = c.section("create")
    create = _read(ContainerCreate, cc)
    for i, vol in enumerate(create.volumes):
        if ":" not in vol:
            raise cc.error("volumes", f"volumes[{i}]: expected HOST:CONTAINER[:MODE], got {_show(vol)}")
    cc.done()
    cname = c.string("name", required=True)
    if not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.\-]*", cname):
        raise c.error("name", f"not a valid Docker container name: {_show(cname)}")
    container = _read(Container, c, name=cname, create=create)
    container.docker = container.docker or ["docker"]
    c.done()
    return container


def _training(root: _Section) -> Training:
    file = root.file
    t = root.section("training", required=True)
    raw_over = t.raw("overrides", required=True)
    overrides: list[Override] = []
    _flatten_overrides(raw_over, file, "", "", t.line_of("overrides"), overrides, "training.overrides")
    seen_keys: dict[str, int] = {}
    for o in overrides:
        _check_count_override(o, file)
        if o.key in seen_keys:
            raise ProfileError(file, o.line, f"training.overrides.{o.key}",
                               f"duplicate override (also at line {seen_keys[o.key]})")
        seen_keys[o.key] = o.line
    training = Training(
        module=t.string("module", "verl.trainer.main_ppo"),
        config_path=t.string("config_path", required=True),
        config_name=t.string("config_name", required=True),
        overrides=overrides,
        python=t.string("python", "python3"),
        python_args=t.str_list("python_args", ["-u"]),
        submission_prefix=t.string("submission_prefix", None),
        env=t.str_map("env"),
    )
    if training.submission_prefix is not None and not re.fullmatch(r"[A-Za-z0-9_.\-]+", training.submission_prefix):
        raise t.error("submission_prefix", f"expected letters, digits, '.', '_' or '-', got {_show(training.submission_prefix)}")
    _require_abs(t, "config_path", training.config_path)
    t.done()
    return training


def _monitoring(mo: _Section) -> Monitoring:
    monitoring = _read(Monitoring, mo)
    if monitoring.mem_full_pct > 100:
        raise mo.error("mem_full_pct", f"expected a percentage up to 100, got {monitoring.mem_full_pct:g}")
    if monitoring.stall_factor < 1:
        raise mo.error("stall_factor", f"expected a factor >= 1, got {monitoring.stall_factor:g}")
    return monitoring


def _section_of(root: _Section, name: str, cls: type[_T],
                check: Callable[[_Section], _T] | None = None) -> _T:
    """A plain section: read by its schema (or `check`, which reads and cross-checks)."""
    sec = root.section(name)
    obj = check(sec) if check else _read(cls, sec)
    sec.done()
    return obj


def _parse_profile(data: Any, file: str) -> Profile:
    """Read the whole profile, section by section, in the order a user writes it."""
    root = _Section(data, "", file, 1)
    version = root.integer("version", 1)
    if version != 1:
        raise root.error("version", f"this rlconsole reads profile version 1, got {version}")
    name = root.string("name", required=True)
    description = root.string("description", "", nonempty=False)
    simulated = root.boolean("simulated", False)
    sim_verl = root.string("sim_verl", "", nonempty=False)
    sim_containers = root.string("sim_containers", "", nonempty=False)
    gpu_tool = root.string("gpu_tool", "auto", choices=("auto", "mthreads-gmi", "nvidia-smi"))
    ssh, node_defaults = _ssh(root)
    cluster = _cluster(root)
    nodes = _slurm_nodes(root, cluster, node_defaults) if cluster.slurm else _nodes(root, node_defaults)
    container = _container(root)
    paths_sec = root.section("paths", required=True)
    paths = _read(Paths, paths_sec)
    paths_sec.done()
    model = _section_of(root, "model", ModelInfo)
    convert = _section_of(root, "convert", Convert) if "convert" in root.data else None
    env = root.str_map("env")
    ray = _section_of(root, "ray", RaySettings)
    training = _training(root)
    monitoring = _section_of(root, "monitoring", Monitoring, _monitoring)
    console = _section_of(root, "console", ConsoleSettings)
    notify = _section_of(root, "notify", NotifySettings)
    root.done()
    return Profile(
        name=name, path=file, nodes=nodes, container=container, paths=paths,
        training=training, ssh=ssh, model=model, convert=convert, env=env, ray=ray,
        monitoring=monitoring, console=console, notify=notify, cluster=cluster, gpu_tool=gpu_tool,
        simulated=simulated,
        description=description, sim_verl=sim_verl, sim_containers=sim_containers,
    )


def display_path(path: Path) -> str:
    """The path as the user would recognise it: relative to the working dir if below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_profile_text(text: str, file: str) -> Profile:
    try:
        data = load_located(text)
    except DuplicateKeyError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else None
        raise ProfileError(file, line, None, e.problem or "duplicate key") from None
    except LimitError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else None
        raise ProfileError(file, line, e.key, e.problem or "too large") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ProfileError(file, line, None, f"YAML syntax error: {problem}") from None
    if data is None:
        raise ProfileError(file, 1, None, "the profile is empty")
    return _parse_profile(data, file)


def load_profile(path: str | Path) -> Profile:
    path = Path(path)
    shown = display_path(path)
    try:
        size = path.stat().st_size
        if size > MAX_PROFILE_BYTES:  # a profile is a few KB; never read a runaway file whole
            raise ProfileError(shown, None, None, f"{size:,} bytes: larger than a profile can be "
                                                  f"({MAX_PROFILE_BYTES:,} at most)")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(shown, None, None, "no such profile file") from None
    except UnicodeDecodeError as e:
        raise ProfileError(shown, None, None, f"not UTF-8 text ({e.reason})") from None
    except OSError as e:
        raise ProfileError(shown, None, None, f"cannot read: {e.strerror}") from None
    prof = load_profile_text(text, shown)
    prof.path = str(path.resolve())
    return prof


# --------------------------------------------------------------------------- lookup


def packaged_profiles_dir() -> Path:
    """The profiles shipped with rlconsole: the `profiles` package beside `tui`, found by
    path rather than by `import profiles`, which a `./profiles` folder of the current
    directory (a namespace package when run as `python -m tui.cli`) would shadow."""
    beside = Path(__file__).resolve().parent.parent.parent / "profiles"
    if (beside / "__init__.py").is_file():
        return beside
    import profiles  # an install that splits the two packages: the import is all there is

    return Path(profiles.__file__).parent


def profile_search_dirs() -> list[Path]:
    return [Path.cwd() / "profiles", user_profiles_dir(), packaged_profiles_dir()]


def available_profiles() -> Iterator[tuple[str, Path]]:
    seen: set[str] = set()
    for d in profile_search_dirs():
        if d.is_dir():
            for f in sorted(d.glob("*.yaml")):
                if f.stem not in seen:
                    seen.add(f.stem)
                    yield f.stem, f


def resolve_profile(spec: str | None, fallback: Callable[[], str | None] | None = None) -> Path:
    """Find a profile by path or by name (./profiles, the user config dir, the packaged
    profiles, in that order). Without a spec: $RLCONSOLE_PROFILE, then `fallback` (the
    running sim's profile). The seed's real-cluster profile is never a silent default."""
    if not spec:
        spec = os.environ.get("RLCONSOLE_PROFILE") or (fallback() if fallback else None)
        if not spec:
            raise UsageError("no profile given: pass --profile NAME|PATH, set RLCONSOLE_PROFILE, "
                             "or start the simulated cluster with `rlconsole sim up`")
    p = Path(expand_local(spec))
    if p.is_file():
        return p
    if "/" in spec or spec.endswith((".yaml", ".yml")):
        raise ProfileError(spec, None, None, "no such profile file")
    for d in profile_search_dirs():
        for ext in (".yaml", ".yml"):
            cand = d / f"{spec}{ext}"
            if cand.is_file():
                return cand
    names = ", ".join(n for n, _ in available_profiles()) or "none"
    raise UsageError(f"no profile named {spec!r} (looked in ./profiles, {user_profiles_dir()}, "
                     f"the packaged profiles; known: {names})")


def cwd_origin(profile: Profile, found: str | Path | None = None, spec: str | None = None) -> str | None:
    """Where in the current directory `profile` was read from ("./profiles", or "the current
    directory" itself), or None when it was not from there. The current directory (perhaps a repository just
    cloned, written by anyone): from ./profiles, judged on the path as it was found as well
    as resolved (a link there is from ./profiles wherever it points), or a bare name
    (`--profile NAME`) that named a file of the current directory itself. `found`: the path
    `resolve_profile` returned; `spec`: what it was asked. The packaged profiles' own text
    (rlconsole's checkout as the current directory, a link to one of them) is not."""
    try:
        cwd = Path.cwd()
        resolved = Path(profile.path).resolve()
        if resolved.is_relative_to(packaged_profiles_dir().resolve()):
            return None
        seen = [resolved] + ([Path(os.path.abspath(found))] if found is not None else [])
        dirs = (cwd / "profiles", (cwd / "profiles").resolve())
        if any(p.is_relative_to(d) for p in seen for d in dirs):
            return "./profiles in the current directory"
        bare = spec is not None and "/" not in spec and not spec.endswith((".yaml", ".yml"))
        if bare and found is not None and Path(os.path.abspath(found)).parent in (cwd, cwd.resolve()):
            return "the current directory (found by its name)"
    except (OSError, ValueError):
        pass
    return None


def cwd_profile_warning(profile: Profile, found: str | Path | None = None, spec: str | None = None) -> str | None:
    """The one warning line for a profile read from the current directory (`cwd_origin`)
    that makes this machine run commands or read an SSH config as soon as the console
    starts, before any key: its file and those keys. None for any other profile, or one
    that sets none of them."""
    origin = cwd_origin(profile, found, spec)
    if origin is None:
        return None
    keys: list[str] = []
    commands = [t for t in profile.notify.to if not t.startswith(("http://", "https://"))]
    if commands:
        keys.append(f"notify.to (runs {len(commands)} local command{'s' if len(commands) > 1 else ''} "
                    "with every alert)")
    if len(commands) < len(profile.notify.to):
        keys.append("notify.to (posts every alert to a URL)")
    if profile.ssh.config is not None:
        keys.append("ssh.config (an SSH config runs local commands: ProxyCommand, Match exec)")
    if not keys:
        return None
    return (f"profile {profile.path} comes from {origin} and sets "
            f"{'; '.join(keys)}: read it before you trust it")
