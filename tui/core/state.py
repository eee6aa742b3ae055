"""Typed state: what probes produce and what widgets and `--json` consume.

Data flows one way: probes (command output, Ray API, log stream, event files) are parsed
into these plain dataclasses, and everything that shows state reads only these. Keeping
them free of Textual and of I/O lets the CLI and the TUI share one model, and lets tests
build states directly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal


class JobStatus(str, Enum):
    """A training job's status: Ray's five, and the console's two: UNKNOWN (Ray did not
    answer) and NOT_ON_CLUSTER (a run from the history the current Ray does not list).

    A `str` enum (Python 3.10 has no StrEnum): it equals Ray's own strings, so a status
    read from Ray compares with these members as it is, and it serialises as its value in
    `status --json` and in f-strings."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    NOT_ON_CLUSTER = "NOT_ON_CLUSTER"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, value: str | JobStatus | None) -> JobStatus:
        """Ray's (or the history's) word for a status, as a member; a word Ray may add
        later is UNKNOWN rather than an exception in the middle of a refresh."""
        if isinstance(value, JobStatus):
            return value
        try:
            return cls(str(value).strip().upper())
        except ValueError:
            return cls.UNKNOWN


ACTIVE_JOB_STATUSES = frozenset({JobStatus.PENDING, JobStatus.RUNNING})
"""A job that holds the cluster: a second submit is refused, keys that change it ask."""

TERMINAL_JOB_STATUSES = frozenset({JobStatus.FAILED, JobStatus.SUCCEEDED, JobStatus.STOPPED})

ContainerStatus = Literal[
    "created", "running", "paused", "restarting", "removing", "exited", "dead",
    "absent", "unknown", "unavailable",
]
"""`docker inspect`'s `State.Status`, plus: `absent` (no such container), `unknown`
(could not be asked: node down), `unavailable` (no Docker on the node)."""


@dataclass
class GpuProcess:
    pid: int
    name: str = ""
    mem_used_mib: float | None = None


@dataclass
class GpuCard:
    """One accelerator card. `None` means the tool did not report that value
    (`[N/A]`, `[Not Supported]`, missing field), never zero."""

    index: int
    name: str = ""
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    uuid: str | None = None
    processes: list[GpuProcess] = field(default_factory=list)


def mem_pct(card: GpuCard) -> float | None:
    """Memory used in percent, None when either figure is unknown (never a made-up 0)."""
    if card.mem_used_mib is None or not card.mem_total_mib:
        return None
    return 100.0 * card.mem_used_mib / card.mem_total_mib


@dataclass(frozen=True)
class CardLimits:
    """When a card is in trouble: the one rule the alerts (tui/core/alerts.py) and the
    node grid's colours (widgets/node_grid.py) both apply, read from the profile's
    `monitoring.hot_c` / `monitoring.mem_full_pct`, so a card drawn red is a card that
    raised an alert and the other way round."""

    hot_c: float = 85.0
    mem_full_pct: float = 95.0

    def is_hot(self, card: GpuCard) -> bool:
        return card.temp_c is not None and card.temp_c >= self.hot_c

    def mem_full(self, card: GpuCard) -> bool:
        pct = mem_pct(card)
        return pct is not None and pct >= self.mem_full_pct


@dataclass
class GpuReport:
    """The result of parsing one card tool's output on one node.

    `parsed` is False when the output could not be understood; `error` then says why,
    and `cards` holds whatever could be salvaged (possibly nothing). A parser never
    raises on bad input: it returns a report with `parsed=False`.
    """

    tool: str
    cards: list[GpuCard] = field(default_factory=list)
    parsed: bool = True
    error: str | None = None
    driver_version: str | None = None
    simulated: bool = False


@dataclass
class ContainerState:
    name: str
    status: ContainerStatus = "unknown"
    image: str | None = None
    started_at: str | None = None
    exit_code: int | None = None
    oom_killed: bool | None = None
    error: str | None = None


@dataclass
class RayNodeState:
    node_id: str
    address: str
    alive: bool
    gpus_total: float = 0.0
    gpus_used: float = 0.0
    is_head: bool = False
    error: str | None = None  # Ray's state_message: why a node died (bounded, untrusted)


@dataclass
class RayJobState:
    id: str
    status: JobStatus  # Ray's five (a string from Ray is made a member on the way in)
    entrypoint: str = ""
    start_time: float | None = None
    end_time: float | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        self.status = JobStatus.of(self.status)


@dataclass
class RayState:
    """Ray as seen from the head. `available` False: no Ray answered (not started,
    or head unreachable); `error` says which."""

    available: bool = False
    nodes_alive: int = 0
    nodes_dead: int = 0
    gpus_total: float = 0.0
    gpus_used: float = 0.0
    nodes: list[RayNodeState] = field(default_factory=list)
    jobs: list[RayJobState] = field(default_factory=list)
    source: str | None = None  # "api", "ray status", "api nodes" (setup-ray's look: no jobs read)
    error: str | None = None
    unconfirmed: bool = False
    """Set with `available` False when only the dashboard missed an answer: Ray's GCS
    still listens and the `ray status` fallback was not run. Not proof that Ray (or its
    jobs) went away: the monitor keeps its last good answer over a few of these."""
    unasked: bool = False
    """Set with `available` False when Ray could not be asked at all: the head's SSH link
    was down or failed mid-probe, or Ray's GCS listens but `ray status` did not answer (or
    answered with no status it could be read from), or the probe itself raised. It
    says nothing about Ray or its jobs: a running job must not read as "not on this
    cluster" (after the head's sshd restarts, the node is reachable again a refresh before
    Ray is polled again: this stale answer used to flip the watched job to NOT_ON_CLUSTER
    and end its stall episode early; found by bench_chaos)."""

    def by_address(self) -> dict[str, RayNodeState]:
        """Ray's record of the node at each address: its ALIVE one when it has one. A
        worker that rejoined Ray has a new node id at the same address, and Ray lists the
        old one as DEAD for the rest of the cluster's life, in no promised order: the
        first or the last record at an address could be either."""
        found: dict[str, RayNodeState] = {}
        for r in self.nodes:
            seen = found.get(r.address)
            if seen is None or (r.alive and not seen.alive):
                found[r.address] = r
        return found

    def node_at(self, address: str) -> RayNodeState | None:
        return self.by_address().get(address)


@dataclass
class NodeState:
    name: str
    address: str
    role: str
    reachable: bool = False
    error: str | None = None
    container: ContainerState | None = None
    gpu: GpuReport | None = None
    updated_at: float | None = None
    stale_since: float | None = None
    """Set on a node that is down: `container` and `gpu` are the last known values,
    sampled at this time (the console shows them as such, with their age)."""

    @property
    def gpus(self) -> list[GpuCard]:
        return self.gpu.cards if self.gpu else []


@dataclass
class JobState:
    id: str
    status: JobStatus
    step: int | None = None
    total_steps: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    last_checkpoint: int | None = None
    summary: dict[str, Any] = field(default_factory=dict)  # RunMetrics.summary(): derived figures, flags
    diagnosis: dict[str, Any] | None = None
    """A FAILED job's cause from the diagnosis catalog: `id`, `title`, `fix`, `line`
    (the log line, 0-based; -1: named by Ray's job message) and `also` (the ids of the
    other known failures in the log's tail, in log order). None: not failed, or no known
    cause (`status --json`)."""
    on_cluster: bool | None = None
    """True: the current Ray lists this job. False: it does not (a run from the history,
    e.g. of an earlier cluster or before `ray stop`): the job is shown as the last run
    (status NOT_ON_CLUSTER, its last step and checkpoint, no metrics, no ETA). None:
    Ray did not answer, so it is not known."""

    def __post_init__(self) -> None:
        self.status = JobStatus.of(self.status)


@dataclass
class ClusterState:
    profile: str
    simulated: bool
    nodes: list[NodeState] = field(default_factory=list)
    ray: RayState = field(default_factory=RayState)
    job: JobState | None = None
    taken_at: float | None = None
    # a Slurm profile's allocation (tui/core/slurm.py's Allocation; None: not a Slurm profile)
    allocation: Any = None

    def to_json(self) -> dict[str, Any]:
        """The `status --json` contract (README, "The job in the console and in `status --json`"): keep these keys stable."""
        return {
            "profile": self.profile,
            "simulated": self.simulated,
            "taken_at": self.taken_at,
            "nodes": [
                {
                    "name": n.name,
                    "address": n.address,
                    "role": n.role,
                    "reachable": n.reachable,
                    "error": n.error,
                    "container": asdict(n.container) if n.container else {"status": "unknown"},
                    "gpu_tool": n.gpu.tool if n.gpu else None,
                    "gpus_parsed": n.gpu.parsed if n.gpu else None,
                    "gpus_error": n.gpu.error if n.gpu else None,
                    "gpus": [asdict(c) for c in n.gpus],
                }
                for n in self.nodes
            ],
            "ray": {
                "available": self.ray.available,
                "nodes_alive": self.ray.nodes_alive,
                "nodes_dead": self.ray.nodes_dead,
                "gpus_total": self.ray.gpus_total,
                "gpus_used": self.ray.gpus_used,
                "source": self.ray.source,
                "error": self.ray.error,
                "jobs": [asdict(j) for j in self.ray.jobs],
            },
            "job": asdict(self.job) if self.job else None,
            "allocation": self.allocation.to_json() if self.allocation is not None else None,
        }
