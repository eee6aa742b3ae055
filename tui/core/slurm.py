"""A Slurm allocation: the nodes of a `cluster.scheduler: slurm` profile.

The allocation is a state like the others (`Allocation`: job id, state, nodes, time left,
why pending), read from `squeue` and published with the cluster's state. Getting one is a
step of `containers` (`acquire`): an allocation the profile names (`cluster.jobid`) or one
an earlier console recorded is reused when Slurm still has it; else a holder job
(`sbatch --parsable ... --wrap "sleep infinity"`) keeps the nodes. Its nodes
(`scontrol show hostnames`, each one's `NodeAddr`) become the profile's nodes, the first
the head. `stop --cluster` releases it (`release`: `scancel`).

Every Slurm command runs here, on the machine the console runs on (the login node), as an
argv (no shell), with `SLURM_CONF` from `cluster.slurm_conf` when the profile names one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

from tui.core.actions.events import ActionEvent
from tui.core.procs import end_process
from tui.core.profile import Node, Profile, SshEndpoint

log = logging.getLogger("rlconsole.slurm")

SLURM_TIMEOUT_S = 30.0
LIVE_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")
"""squeue states of an allocation that still holds (or will hold) its nodes."""


@dataclass
class Allocation:
    """One Slurm job holding the profile's nodes, as `squeue` last said."""

    job_id: str
    state: str = "UNKNOWN"  # squeue's %T: PENDING, RUNNING, ...; GONE when squeue no longer has it
    nodes: list[str] = field(default_factory=list)  # Slurm host names, in `scontrol show hostnames` order
    time_left_s: int | None = None  # None: unlimited or not known
    reason: str | None = None  # why it is pending (squeue's %r), None when it runs
    addresses: dict[str, str] = field(default_factory=dict)  # host name -> NodeAddr (an IP when it resolves)
    seen_at: float = field(default_factory=time.time)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    def ends_at(self) -> float | None:
        return None if self.time_left_s is None else self.seen_at + self.time_left_s

    def time_left_now(self) -> int | None:
        end = self.ends_at()
        return None if end is None else max(0, int(end - time.time()))

    def to_json(self) -> dict[str, Any]:
        """`status --json`'s `allocation` (a stable contract: job_id, state, nodes, time_left_s)."""
        return {"job_id": self.job_id or None, "state": self.state, "nodes": list(self.nodes),
                "time_left_s": self.time_left_now(), "reason": self.reason}

    def short(self) -> str:
        """The console pane's line: `Slurm job 12 RUNNING, 4 nodes, 3:58:12 left`."""
        if not self.job_id:
            return "no Slurm allocation: u asks Slurm for one"
        left = self.time_left_now()
        why = f" ({self.reason})" if self.reason and self.state == "PENDING" else ""
        n = f", {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''}" if self.nodes else ""
        tl = f", {fmt_duration(left)} left" if left is not None and self.live else ""
        return f"Slurm job {self.job_id} {self.state}{why}{n}{tl}"

    def summary(self) -> str:
        """One line: `Slurm job 12 RUNNING on node1,node2, 3:58:12 left`."""
        if not self.job_id:
            return "no Slurm allocation (containers, key u, asks Slurm for one)"
        left = self.time_left_now()
        where = f" on {','.join(self.nodes)}" if self.nodes else ""
        why = f" ({self.reason})" if self.reason and self.state == "PENDING" else ""
        tl = f", {fmt_duration(left)} left" if left is not None and self.live else ""
        return f"Slurm job {self.job_id} {self.state}{why}{where}{tl}"


def fmt_duration(s: int) -> str:
    d, rest = divmod(int(s), 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    return (f"{d}-" if d else "") + f"{h}:{m:02d}:{sec:02d}"


def parse_time_left(text: str) -> int | None:
    """squeue's %L: `D-HH:MM:SS`, `HH:MM:SS`, `MM:SS`, `UNLIMITED`, `NOT_SET`, `INVALID`."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text.strip())
    if not m:
        return None
    d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


class SlurmError(Exception):
    """A Slurm command failed; the message is its own words."""


# --------------------------------------------------------------------------- commands


def slurm_env(profile: Profile) -> dict[str, str]:
    env = dict(os.environ)
    if profile.cluster.slurm_conf:
        env["SLURM_CONF"] = profile.cluster.slurm_conf
    return env


async def slurm_cmd(profile: Profile, argv: list[str], timeout: float = SLURM_TIMEOUT_S) -> tuple[int, str, str]:
    """Run one Slurm client command here (argv, no shell); (rc, stdout, stderr)."""
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                    env=slurm_env(profile))
    except OSError as e:
        return 127, "", f"{argv[0]}: {e.strerror or e} (is Slurm's client installed here?)"
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        await end_process(proc, sig=signal.SIGKILL)
        return 124, "", f"{argv[0]}: no answer within {timeout:g}s"
    except BaseException:
        # Cancelled (the console closing its pool mid-poll): killed and reaped here, not
        # left to be finalised after the event loop has closed (tui/core/procs.py).
        await end_process(proc, sig=signal.SIGKILL)
        raise
    return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


async def query(profile: Profile, job_id: str) -> Allocation:
    """The allocation `job_id` as squeue has it now (state GONE when squeue does not list
    it), with its nodes and their addresses once it runs."""
    rc, out, err = await slurm_cmd(profile, ["squeue", "-h", "-j", job_id, "-o", "%i|%T|%L|%r|%N"])
    line = next((ln for ln in out.splitlines() if ln.split("|")[0].strip() == job_id), None)
    if rc != 0 and "Invalid job id" not in err:
        raise SlurmError(err.strip() or f"squeue exit code {rc}")
    if line is None:
        return Allocation(job_id, "GONE")
    _, state, left, reason, nodelist = (line.split("|") + [""] * 5)[:5]
    a = Allocation(job_id, state.strip(), time_left_s=parse_time_left(left),
                   reason=None if reason.strip() in ("", "None") else reason.strip())
    nodelist = nodelist.strip()
    if nodelist and a.state != "PENDING":
        rc, out, err = await slurm_cmd(profile, ["scontrol", "show", "hostnames", nodelist])
        if rc != 0:
            raise SlurmError(err.strip() or f"scontrol show hostnames: exit code {rc}")
        a.nodes = out.split()
        a.addresses = await _addresses(profile, a.nodes)
    return a


async def _addresses(profile: Profile, hosts: list[str]) -> dict[str, str]:
    """Each node's address: its NodeAddr (scontrol show node), as an IP when it resolves
    here (Ray compares node IPs)."""
    out_map: dict[str, str] = {}
    rc, out, _ = await slurm_cmd(profile, ["scontrol", "-o", "show", "node", ",".join(hosts)])
    for line in out.splitlines() if rc == 0 else []:
        name = re.search(r"\bNodeName=(\S+)", line)
        addr = re.search(r"\bNodeAddr=(\S+)", line)
        if name and addr:
            out_map[name.group(1)] = addr.group(1)
    for h in hosts:
        a = out_map.get(h, h)
        try:
            a = str(socket.getaddrinfo(a, None, socket.AF_INET)[0][4][0])
        except (OSError, IndexError):
            pass
        out_map[h] = a
    return out_map


def sbatch_argv(profile: Profile) -> list[str]:
    """The holder job: the profile's nodes, cards, walltime and site options; one batch
    step that sleeps, so the allocation holds the nodes until it is cancelled or ends."""
    c = profile.cluster
    argv = ["sbatch", "--parsable", f"--job-name=rlconsole-{profile.name}", f"--nodes={c.nodes}",
            f"--gpus-per-node={c.gpus_per_node}", f"--time={c.time}", "--output=/dev/null"]
    for flag, v in (("--partition", c.partition), ("--account", c.account), ("--qos", c.qos),
                    ("--constraint", c.constraint)):
        if v:
            argv.append(f"{flag}={v}")
    argv += list(c.extra_sbatch)
    argv += ["--wrap", "exec sleep infinity"]
    return argv


# --------------------------------------------------------------------------- the record


def _record_path() -> Path:
    from tui.core.locations import state_dir

    return state_dir() / "slurm-allocations.json"


def _record_key(profile: Profile) -> str:
    return f"{profile.name}:{profile.cluster.slurm_conf or ''}"


def recorded_job(profile: Profile) -> str | None:
    try:
        data = json.loads(_record_path().read_text())
    except (OSError, ValueError):
        return None
    v = data.get(_record_key(profile)) if isinstance(data, dict) else None
    return str(v["job_id"]) if isinstance(v, dict) and re.fullmatch(r"\d+", str(v.get("job_id", ""))) else None


def _record(profile: Profile, job_id: str | None) -> None:
    p = _record_path()
    try:
        data = json.loads(p.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    if job_id is None:
        data.pop(_record_key(profile), None)
    else:
        data[_record_key(profile)] = {"job_id": job_id, "at": time.time()}
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.chmod(tmp, 0o600)
    tmp.replace(p)


def known_job(profile: Profile) -> str | None:
    """The allocation this profile uses: `cluster.jobid`, else the one recorded here."""
    return profile.cluster.jobid or recorded_job(profile)


# --------------------------------------------------------------------------- nodes


def apply(profile: Profile, alloc: Allocation, rename: bool = True) -> None:
    """The allocation's nodes become the profile's: the first the head, `gpus_per_node`
    cards each, the `nodes:` entry of the same host name giving its ray_args. `rename`:
    the nodes take Slurm's host names (before any connection is made); without it (a
    console already watching `slurm1`..) the nodes keep their names and only learn where
    they are, in place."""
    c = profile.cluster
    gpus = c.gpus_per_node or 1
    d = c.ssh_defaults
    if c.transport == "srun" and alloc.nodes and (profile.ray.dashboard_host in LOOPBACK_NAMES
                                                  or profile.ray.dashboard_host == c.dashboard_on):
        # no SSH tunnel: the login node reaches the head's dashboard at the head's address
        c.dashboard_on = profile.ray.dashboard_host = alloc.addresses.get(alloc.nodes[0], alloc.nodes[0])
    if not rename and len(profile.nodes) == len(alloc.nodes):
        for node, host in zip(profile.nodes, alloc.nodes):
            node.slurm_host = host
            node.address = alloc.addresses.get(host, host)
            node.ssh.host = node.address
            node.ray_args = list(c.node_ray_args.get(host, []))
        return
    nodes = []
    for i, host in enumerate(alloc.nodes):
        addr = alloc.addresses.get(host, host)
        ep = SshEndpoint(host=addr, port=d.port if d else 22, user=d.user if d else None,
                         identity=list(d.identity) if d else [], jump_host=d.jump_host if d else None,
                         jump=list(d.jump) if d else [], port_given=d.port_given if d else False)
        nodes.append(Node(host, addr, gpus, "head" if i == 0 else "worker", ep,
                          list(c.node_ray_args.get(host, [])), slurm_host=host))
    profile.nodes[:] = nodes


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def has_nodes(profile: Profile) -> bool:
    return all(n.slurm_host for n in profile.nodes)


async def resolve(profile: Profile, rename: bool = True) -> Allocation | None:
    """The profile's current allocation (reused: `cluster.jobid` or the recorded one),
    applied to its nodes when it runs; None when there is none (or Slurm cannot say)."""
    job = known_job(profile)
    if job is None:
        return None
    try:
        a = await query(profile, job)
    except SlurmError as e:
        log.info("slurm: job %s: %s", job, e)
        return Allocation(job, "UNKNOWN", reason=str(e))
    if a.running and a.nodes:
        apply(profile, a, rename=rename)
    return a


# --------------------------------------------------------------------------- the steps


async def acquire(profile: Profile, action: str, rename: bool = True,
                  wait_s: float = 600.0) -> AsyncIterator[ActionEvent]:
    """Make sure the profile has a running allocation and its nodes: reuse the known one,
    else submit the holder job; wait for it to run (saying why it pends). Ends with a
    `step` naming the allocation, or a `fail`."""
    job = known_job(profile)
    a: Allocation | None = None
    if job is not None:
        try:
            a = await query(profile, job)
        except SlurmError as e:
            yield ActionEvent(action, "fail", f"squeue: {e}")
            return
        if not a.live:
            if profile.cluster.jobid:
                yield ActionEvent(action, "fail", f"Slurm job {job} (cluster.jobid) is {a.state}: "
                                                  "remove cluster.jobid to get a new allocation")
                return
            _record(profile, None)
            a = None
        elif not a.running:
            yield ActionEvent(action, "step", f"reusing Slurm job {job} ({a.state})", data={"slurm_job": job})
    reused = a is not None
    if a is None:
        argv = sbatch_argv(profile)
        yield ActionEvent(action, "step", f"asking Slurm for {profile.cluster.nodes} nodes x "
                                          f"{profile.cluster.gpus_per_node} GPUs for {profile.cluster.time}"
                                          + (f" in partition {profile.cluster.partition}"
                                             if profile.cluster.partition else ""))
        rc, out, err = await slurm_cmd(profile, argv)
        job = out.strip().split(";")[0].strip()
        if rc != 0 or not re.fullmatch(r"\d+", job):
            yield ActionEvent(action, "fail", f"sbatch: {(err or out).strip() or f'exit code {rc}'}")
            return
        _record(profile, job)
        yield ActionEvent(action, "step", f"Slurm job {job} submitted (holds the nodes)", data={"slurm_job": job})
        a = Allocation(job, "PENDING")
    assert job is not None
    deadline = time.monotonic() + wait_s
    told: str | None = None
    while True:
        try:
            a = await query(profile, job)
        except SlurmError as e:
            yield ActionEvent(action, "fail", f"squeue: {e}")
            return
        if a.running and a.nodes:
            break
        if not a.live:
            if not profile.cluster.jobid:
                _record(profile, None)
            yield ActionEvent(action, "fail", f"Slurm job {job} ended ({a.state}) before it ran")
            return
        now = f"{a.state}" + (f" ({a.reason})" if a.reason else "")
        if now != told:
            yield ActionEvent(action, "step", f"Slurm job {job} is {now}: waiting for its nodes")
            told = now
        if time.monotonic() > deadline:
            yield ActionEvent(action, "fail", f"Slurm job {job} still {now} after {wait_s:g}s: it stays queued "
                                              "(press the key again later, or `scancel` it)")
            return
        await asyncio.sleep(1.0)
    apply(profile, a, rename=rename)
    yield ActionEvent(action, "step", f"{'using ' if reused else ''}Slurm job {job}"
                                      f"{'' if reused else ' runs'} on {', '.join(a.nodes)}; head {a.nodes[0]}",
                      data={"slurm_job": job, "nodes": list(a.nodes)})


async def release(profile: Profile, action: str) -> AsyncIterator[ActionEvent]:
    """`scancel` the profile's allocation and forget it (a `cluster.jobid` given by the
    user is cancelled too: `stop --cluster` asked, naming it)."""
    job = known_job(profile)
    if job is None:
        yield ActionEvent(action, "step", "no Slurm allocation to release")
        return
    rc, out, err = await slurm_cmd(profile, ["scancel", job])
    if rc != 0:
        yield ActionEvent(action, "warn", f"scancel {job}: {(err or out).strip() or f'exit code {rc}'}")
        return
    _record(profile, None)
    for n in profile.nodes:
        n.slurm_host = ""
    yield ActionEvent(action, "step", f"Slurm job {job} cancelled: its nodes go back to Slurm",
                      data={"slurm_job": job})


def resolve_now(profile: Profile) -> Allocation | None:
    """`resolve` from synchronous code (a pool being built), in or out of an event loop."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, resolve(profile)).result(timeout=3 * SLURM_TIMEOUT_S)


# --------------------------------------------------------------------------- walltime


def walltime_message(alloc: Allocation | None, step: int | None, total_steps: int | None,
                     step_time_s: float | None, eta_s: float | None, save_freq: int | None,
                     last_checkpoint: int | None, now: float | None = None) -> str | None:
    """The warning when the allocation ends before the run does: "the allocation ends at
    step ~N: the last checkpoint before it is step M"; None when it does not (or cannot be
    told: no time left, no pace yet)."""
    if alloc is None or not alloc.running or step is None or not step_time_s or step_time_s <= 0 or eta_s is None:
        return None
    now = time.time() if now is None else now
    end = alloc.ends_at()
    if end is None or now + eta_s <= end:
        return None
    left = max(0.0, end - now)
    at_step = step + int(left // step_time_s)
    if total_steps is not None and at_step >= total_steps:
        return None
    ckpt = None
    if save_freq and save_freq > 0:
        ckpt = (at_step // save_freq) * save_freq or None
    if ckpt is None or (last_checkpoint is not None and last_checkpoint > ckpt):
        ckpt = last_checkpoint
    tail = f"the last checkpoint before it is step {ckpt}" if ckpt else "no checkpoint is saved before it"
    return (f"the allocation (Slurm job {alloc.job_id}) ends in {fmt_duration(int(left))}, at step ~{at_step} of "
            f"{total_steps or '?'}: {tail}")


class WalltimeRule:
    """One alert episode (key "walltime") while the run's ETA lies past the allocation's end."""

    KEY = "walltime"

    def __init__(self, save_freq: int | None) -> None:
        self.save_freq = save_freq
        self.open = False

    @classmethod
    def for_profile(cls, profile: Profile) -> WalltimeRule:
        v = profile.override_value("trainer.save_freq")
        try:
            freq = int(v) if v is not None and not isinstance(v, bool) else None
        except (TypeError, ValueError):
            freq = None
        return cls(freq)

    def observe(self, alloc: Allocation | None, summary: Any, now: float | None = None) -> list[Any]:
        from tui.core.alert import Alert

        running = getattr(summary, "status", None) == "RUNNING"
        msg = walltime_message(alloc, summary.step, summary.total_steps, summary.step_time_s, summary.eta_s,
                               self.save_freq, summary.last_checkpoint, now) if running else None
        at = time.time() if now is None else now
        if msg and not self.open:
            self.open = True
            return [Alert("warning", "slurm", msg, at=at, key=self.KEY)]
        if not msg and self.open and (not running or alloc is not None):
            self.open = False
            return [Alert("info", "slurm", "the run now ends before the allocation does", at=at, key=self.KEY,
                          ends=True)]
        return []
