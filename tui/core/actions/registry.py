"""Names to actions: the one table the CLI, the TUI's keys, its command palette and its
help share. Each action is a row: its name (the CLI's sub-command, `run_action`'s
name), its help, its keys in the console, the function that runs it and the function
that words its confirmation question. Adding an action is adding a row."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from tui.core.actions.base import Remote
from tui.core.actions.events import ActionEvent
from tui.core.profile import Profile

Runner = Callable[..., AsyncIterator[ActionEvent]]
"""`runner(profile, remote, **opts)`: the action's events, ending in done/fail/skip."""


@dataclass(frozen=True)
class ActionKey:
    """A console key that runs an action: the key, the main screen's method it calls
    (`action_<method>`, which may ask first), and what the key bar, help and palette say."""

    key: str  # Textual key name
    method: str
    label: str
    help: str


@dataclass(frozen=True)
class ActionOption:
    """An option of an action: the CLI's flag and help, and the runner's keyword it sets
    (`opt`; None: the CLI's own, such as `--dry-run`) to `value` when the flag is given,
    or to the flag's argument when it takes one (`metavar`)."""

    flag: str
    opt: str | None
    help: str
    value: Any = True
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class ActionSpec:
    """One action as every face names it."""

    name: str
    help: str  # the CLI sub-command's help
    run: Runner
    question: Callable[..., str]  # `question(profile, **opts)`: the confirmation, naming what changes
    keys: tuple[ActionKey, ...] = ()
    options: tuple[ActionOption, ...] = ()
    changes_cluster: bool = True  # refused in read-only mode

    def opts_from(self, given: Any) -> dict[str, Any]:
        """The runner's options from parsed CLI flags (an argparse namespace)."""
        out: dict[str, Any] = {}
        for o in self.options:
            v = getattr(given, o.dest, None)
            if o.opt is None or v is None or v is False:
                continue
            out[o.opt] = v if o.metavar else o.value
        return out


# --------------------------------------------------------------------------- runners
# Imports are inside the runners: `rlconsole status` and the console's start import this
# table, and should not pay for every action's module.


async def _containers(profile: Profile, remote: Remote, **_: Any) -> AsyncIterator[ActionEvent]:
    from tui.core.actions.containers import containers

    if profile.cluster.slurm:
        # the nodes first: the profile's Slurm allocation, reused or asked for (tui/core/slurm.py)
        from tui.core import slurm

        async for ev in slurm.acquire(profile, "containers", rename=False):
            yield ev
            if ev.kind == "fail":
                return
        await remote_refresh(remote)
    async for ev in containers(profile, remote):
        yield ev


async def remote_refresh(remote: Remote) -> None:
    """After the nodes changed (an allocation): the transport looks again at once."""
    look = getattr(getattr(remote, "pool", None), "look", None)
    if look is not None:
        await look()


async def _model(profile: Profile, remote: Remote, **_: Any) -> AsyncIterator[ActionEvent]:
    from tui.core.actions.model import model

    async for ev in model(profile, remote):
        yield ev


async def _convert(profile: Profile, remote: Remote, force: bool = False, **_: Any) -> AsyncIterator[ActionEvent]:
    from tui.core.actions.model import convert, hf_missing, list_dir, model

    # Converting needs the HF model (seed 5.1 before 5.2): when it is missing and the
    # profile says how to get it, fetch it first, so `c` alone does the whole step.
    if profile.model.download and remote.reachable(profile.head.name)[0] and hf_missing(
            await list_dir(remote, profile.head.name, profile.paths.hf_model)):
        yield ActionEvent("convert", "step", "the HF model is missing: downloading it first (as `model` does)")
        async for ev in model(profile, remote):
            if ev.kind == "fail":
                yield ActionEvent("convert", "fail", f"model download failed: {ev.message}", node=ev.node)
                return
            if ev.kind in ("start", "done", "skip"):
                yield ActionEvent("convert", "step", ev.message, node=ev.node)
            else:
                yield ev
    async for ev in convert(profile, remote, force=bool(force)):
        yield ev


async def _setup_ray(profile: Profile, remote: Remote, stop_first: bool | None = None,
                     stop_confirmed: bool = False, **_: Any) -> AsyncIterator[ActionEvent]:
    from tui.core.actions.ray_setup import setup_ray

    async for ev in setup_ray(profile, remote, stop_first=stop_first, stop_confirmed=bool(stop_confirmed)):
        yield ev


async def _submit(profile: Profile, remote: Remote, skip_checks: bool = False, force: bool = False,
                  fresh: bool = False, **_: Any) -> AsyncIterator[ActionEvent]:
    if not skip_checks:
        from tui.core.actions.plan import preflight_events
        from tui.core.actions.resume import fresh_profile
        from tui.core.checks import run_checks

        yield ActionEvent("submit", "step", "preflight checks")
        checked = fresh_profile(profile) if fresh else profile
        for ev in preflight_events(await run_checks(checked, remote=remote, before_submit=True)):
            yield ev
            if ev.kind == "fail":
                return
    from tui.core.actions.jobs import submit

    async for ev in submit(profile, remote, force=bool(force), fresh=bool(fresh)):
        yield ev


async def _stop(profile: Profile, remote: Remote, job_id: str | None = None, cluster: bool = False,
                **_: Any) -> AsyncIterator[ActionEvent]:
    from tui.core.actions.jobs import stop_job

    async for ev in stop_job(profile, remote, job_id=job_id):
        if ev.node is None and ev.kind in ("done", "skip", "fail") and cluster:
            # the job's verdict is not the last word when the cluster goes too
            yield ActionEvent(ev.action, "warn" if ev.kind == "fail" else "step", ev.message)
            continue
        yield ev
    if cluster:
        from tui.core.actions.ray_setup import stop_cluster

        released = profile.cluster.slurm
        ray_failed: str | None = None
        async for ev in stop_cluster(profile, remote):
            if released and ev.node is None and ev.kind in ("done", "skip", "fail"):
                if ev.kind == "fail":
                    ray_failed = ev.message
                yield ActionEvent(ev.action, "warn" if ev.kind == "fail" else "step", ev.message)
                continue
            yield ev
        if released:  # then the nodes go back to Slurm (the question named the job)
            from tui.core import slurm

            # scancel ends the job's own processes, not a container dockerd started for it:
            # stopped first, so that nothing of the run stays on nodes Slurm hands to others
            if slurm.known_job(profile) is not None:
                async for ev in _stop_containers(profile, remote):
                    yield ev

            cancelled = False
            async for ev in slurm.release(profile, "stop"):
                cancelled = cancelled or (ev.kind == "step" and "cancelled" in ev.message)
                yield ev
            await remote_refresh(remote)
            if ray_failed is not None or not cancelled and slurm.known_job(profile) is not None:
                yield ActionEvent("stop", "fail", ray_failed or "the Slurm allocation was not released (scancel failed)")
            else:
                yield ActionEvent("stop", "done", "stopped Ray and released the Slurm allocation"
                                  if cancelled else "stopped Ray (no Slurm allocation to release)")


async def _stop_containers(profile: Profile, remote: Remote) -> AsyncIterator[ActionEvent]:
    """`docker stop` the profile's container on every node of the allocation (kept, not
    removed: the next allocation's `containers` starts it again where it lands on the same
    node); a node that cannot is a warning, the release goes on."""
    name = profile.container.name

    async def one(node: str) -> ActionEvent:
        r = await remote.run(node, [*profile.container.docker, "stop", "-t", "10", name], timeout=60)
        if r.rc == 0 or "No such container" in r.stderr:
            return ActionEvent("stop", "step", f"container {name} stopped", node=node, status="ok")
        return ActionEvent("stop", "warn", f"container {name} not stopped: {(r.stderr or r.stdout).strip()[-300:]}",
                           node=node, status="warn")

    for ev in await asyncio.gather(*(one(n.name) for n in profile.nodes)):
        yield ev


async def _check(profile: Profile, remote: Remote, **_: Any) -> AsyncIterator[ActionEvent]:
    from tui.core.checks import check_action

    async for ev in check_action(profile, remote):
        yield ev


# --------------------------------------------------------------------------- questions
# `running_job` (e.g. "job raysubmit_x at step 812"): the console asks before an action
# that changes a cluster with a job on it, and the question says what it risks.


def _job_first(running_job: str | None, risk: str) -> str:
    return f"A training job is running ({running_job}); {risk}. " if running_job else ""


def _q_containers(profile: Profile, running_job: str | None = None, **_: Any) -> str:
    first = ""
    if profile.cluster.slurm:
        from tui.core import slurm

        job = slurm.known_job(profile)
        c = profile.cluster
        first = (f"Use Slurm job {job} (or ask for a new allocation if it has ended), then c" if job else
                 f"Ask Slurm for {c.nodes} nodes x {c.gpus_per_node} GPUs for {c.time}"
                 + (f" in partition {c.partition}" if c.partition else "") + " (sbatch), then c")
    return (_job_first(running_job, "containers up recreates a container whose image or settings changed, "
                                    "and the job's workers in it die")
            + (first or "C") + f"reate/start container {profile.container.name} on {len(profile.nodes)} nodes "
              f"({profile.container.image})?")


def _q_model(profile: Profile, running_job: str | None = None, **_: Any) -> str:
    return (_job_first(running_job, "a download competes with it for the head's disk and network")
            + f"Download the model to {profile.paths.hf_model} on {profile.head.name} if it is missing?")


def _q_convert(profile: Profile, force: bool = False, running_job: str | None = None, **_: Any) -> str:
    if force:
        return (_job_first(running_job, "it may be reading this checkpoint")
                + f"DELETE {profile.paths.mcore_checkpoint} on {profile.head.name} and convert again?")
    return (_job_first(running_job, "converting loads the model on the head's cards next to it")
            + f"Convert {profile.paths.hf_model} to MCore at {profile.paths.mcore_checkpoint}?")


def _q_setup_ray(profile: Profile, stop_first: bool | None = None, running_job: str | None = None,
                 **_: Any) -> str:
    stop = profile.ray.stop_before_start if stop_first is None else stop_first
    pre = "Stop Ray on every node (any running job dies), then start" if stop else "Start"
    return (_job_first(running_job, "if Ray is not as the profile wants, setting it up again stops it and the job dies")
            + f"{pre} Ray on {len(profile.nodes)} nodes with head {profile.head.name}?")


def _q_submit(profile: Profile, fresh: bool = False, **_: Any) -> str:
    if fresh:
        return (f"Start {profile.name} fresh from step 0 on Ray on {profile.head.name}? Its checkpoints in "
                f"{profile.paths.checkpoint_dir} are overwritten as the new run reaches their steps.")
    return f"Submit the training job of {profile.name} to Ray on {profile.head.name}?"


def _q_stop(profile: Profile, job_id: str | None = None, cluster: bool = False, **_: Any) -> str:
    what = f"job {job_id}" if job_id else "the running job"
    more = ", then `ray stop --force` on every node" if cluster else ""
    if cluster and profile.cluster.slurm:
        from tui.core import slurm

        job = slurm.known_job(profile)
        if job:
            more += (f", then stop the container {profile.container.name} on every node and release Slurm job "
                     f"{job} (scancel): its {len(profile.nodes)} nodes go back to Slurm and what runs on them ends")
    return f"Stop {what}{more}?"


def _q_check(profile: Profile, **_: Any) -> str:
    return f"Run the preflight checks of {profile.name}?"


# --------------------------------------------------------------------------- the table

ACTION_TABLE: tuple[ActionSpec, ...] = (
    ActionSpec("containers", "create/start the profile's container on every node", _containers, _q_containers,
               (ActionKey("u", "containers", "Containers",
                          "Containers up: create and start the container on every node"),)),
    ActionSpec("model", "download the HF model on the head node when absent", _model, _q_model,
               (ActionKey("m", "model", "Model", "Model download: fetch the HF model on the head node when absent"),)),
    ActionSpec("convert", "convert the HF model to a Megatron MCore checkpoint", _convert, _q_convert,
               (ActionKey("c", "convert", "Convert",
                          "Convert HF -> Megatron MCore (asks before --force when a checkpoint exists)"),),
               (ActionOption("--force", "force", "delete and redo a complete output"),)),
    ActionSpec("setup-ray", "(re)start the Ray cluster on every node", _setup_ray, _q_setup_ray,
               (ActionKey("r", "setup_ray", "Setup Ray", "Setup Ray: ray stop, then start the head and join the workers"),),
               (ActionOption("--no-stop", "stop_first", "do not stop Ray first", value=False),)),
    ActionSpec("submit", "submit the training job through Ray's job API", _submit, _q_submit,
               (ActionKey("s", "submit", "Submit", "Submit the training job (ray job submit)"),),
               (ActionOption("--force", "force", "submit even if a job is running"),
                ActionOption("--skip-checks", "skip_checks", "do not run preflight first (and show no plan)"),
                ActionOption("--fresh", "fresh", "start from step 0 even where a checkpoint exists "
                                                 "(trainer.resume_mode=disable; asks: the old checkpoints are "
                                                 "overwritten as the new run reaches their steps)"),
                ActionOption("--dry-run", None, "print what would be launched and the preflight's verdict, then "
                                                "stop (exit 0: submit would go ahead, 1: it would refuse)"))),
    ActionSpec("stop", "stop the running job (and with --cluster, Ray itself)", _stop, _q_stop,
               (ActionKey("x", "stop_job", "Stop job", "Stop the running job (asks first; names the job, step and checkpoint)"),
                ActionKey("X", "stop_cluster", "Stop Ray", "Stop the job, then `ray stop --force` on every node (asks first)")),
               (ActionOption("--cluster", "cluster", "also `ray stop --force` on every node"),
                ActionOption("--job", "job_id", "the Ray submission id to stop (default: the watched job)", metavar="ID"))),
    ActionSpec("check", "preflight checks (exit 0 pass, 1 a check failed, 2 bad profile)", _check, _q_check,
               (ActionKey("p", "preflight", "Preflight", "Preflight: run the checks and list their results"),),
               changes_cluster=False),
)
"""The one list of actions: the CLI builds its sub-commands from it, the console its
action keys (then its view keys, `tui/commands.py`), `run_action` accepts exactly these
names, and read-only mode refuses the ones that change the cluster."""

SPECS = {a.name: a for a in ACTION_TABLE}

CHANGING_ACTIONS = tuple(a.name for a in ACTION_TABLE if a.changes_cluster)
"""The actions that change the cluster: refused in read-only mode. "check" (the
preflight) only reads, so a read-only console still offers it."""


def read_only_refusal(name: str, profile: Profile) -> str | None:
    """Why `name` is refused (None: it may run). Checked where every action starts (this
    registry, the static backend, the CLI), so read-only mode holds even for a caller that
    never looked at the key bar: a hidden key is a courtesy, this is the rule."""
    if profile.console.read_only and name in CHANGING_ACTIONS:
        return (f"{name}: refused, the console is read-only (--read-only or console.read_only "
                f"in profile {profile.name}); it changes the cluster, so run it from a console "
                f"without --read-only")
    return None


def describe(name: str, profile: Profile, **opts: Any) -> str:
    """What the action will do, as the confirmation question names it."""
    spec = SPECS.get(name)
    return spec.question(profile, **opts) if spec else f"Run {name}?"


async def run_action(name: str, profile: Profile, remote: Remote, *, who: str = "",
                     **opts: Any) -> AsyncIterator[ActionEvent]:
    """Run one action by name (refused in read-only mode when it changes the cluster).

    `who` ("console", "cli"): an action that changes the cluster is written to the
    journal of the run it concerns when it ends (`tui/core/job/journal.py`): the job
    its last event names (the job submit started, the job stop stopped), else the
    profile's last run."""
    spec = SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown action {name!r}")
    refused = read_only_refusal(name, profile)
    if refused is not None:
        yield ActionEvent(name, "fail", refused, data={"refused": "read-only"})
        return
    started = time.time()
    last: ActionEvent | None = None
    try:
        async for ev in spec.run(profile, remote, **opts):
            if ev.node is None and ev.kind in ("done", "fail", "skip"):
                last = ev
            yield ev
    finally:
        if who and spec.changes_cluster:
            _journal(profile, name, who, started, last)


def _journal(profile: Profile, name: str, who: str, started: float, last: ActionEvent | None) -> None:
    from tui.core.job.history import last_run
    from tui.core.job.journal import job_state_entry, record_action

    result, message = (last.kind, last.message) if last is not None else ("fail", "interrupted")
    job_id = last.data.get("job_id") if last is not None else None
    if not isinstance(job_id, str):
        rec = last_run(profile.name)
        job_id = rec.job_id if rec is not None else None
    data = {"profile": profile.name}
    if last is not None and name == "submit" and isinstance(last.data.get("parent"), dict):
        data["parent"] = last.data["parent"]
    also = []
    status = last.data.get("status") if last is not None else None
    if name == "stop" and isinstance(status, str):
        also.append(job_state_entry(status, None, who, profile, at=last.at if last is not None else None))
    record_action(job_id, name, who, started, result, message, data, also)
