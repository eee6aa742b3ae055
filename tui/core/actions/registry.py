"""Names to actions: the one table the CLI, the TUI's keys and its command palette share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, AsyncIterator

from ..profile import Profile
from .base import Remote
from .events import ActionEvent

@dataclass(frozen=True)
class ActionSpec:
    """One action as every face names it: the CLI's sub-command and its help, the
    console's `run_action` name, and whether read-only mode refuses it."""

    name: str
    help: str
    changes_cluster: bool = True


ACTION_TABLE: tuple[ActionSpec, ...] = (
    ActionSpec("containers", "create/start the profile's container on every node"),
    ActionSpec("model", "download the HF model on the head node when absent"),
    ActionSpec("convert", "convert the HF model to a Megatron MCore checkpoint"),
    ActionSpec("setup-ray", "(re)start the Ray cluster on every node"),
    ActionSpec("submit", "submit the training job through Ray's job API"),
    ActionSpec("stop", "stop the running job (and with --cluster, Ray itself)"),
    ActionSpec("check", "preflight checks (exit 0 pass, 1 a check failed, 2 bad profile)", changes_cluster=False),
)
"""The one list of actions: the CLI builds its sub-commands from it, `run_action` accepts
exactly these names, and read-only mode refuses the ones that change the cluster."""

ACTIONS = tuple(a.name for a in ACTION_TABLE)

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
    n = len(profile.nodes)
    c = profile.container.name
    if name == "containers":
        return f"Create/start container {c} on {n} nodes ({profile.container.image})?"
    if name == "model":
        return f"Download the model to {profile.paths.hf_model} on {profile.head.name} if it is missing?"
    if name == "convert":
        if opts.get("force"):
            return f"DELETE {profile.paths.mcore_checkpoint} on {profile.head.name} and convert again?"
        return f"Convert {profile.paths.hf_model} to MCore at {profile.paths.mcore_checkpoint}?"
    if name == "setup-ray":
        stop = profile.ray.stop_before_start if opts.get("stop_first") is None else opts["stop_first"]
        pre = "Stop Ray on every node (any running job dies), then start" if stop else "Start"
        return f"{pre} Ray on {n} nodes with head {profile.head.name}?"
    if name == "submit":
        return f"Submit the training job of {profile.name} to Ray on {profile.head.name}?"
    if name == "stop":
        what = f"job {opts['job_id']}" if opts.get("job_id") else "the running job"
        more = ", then `ray stop --force` on every node" if opts.get("cluster") else ""
        return f"Stop {what}{more}?"
    return f"Run {name}?"


async def run_action(name: str, profile: Profile, remote: Remote, **opts: Any) -> AsyncIterator[ActionEvent]:
    refused = read_only_refusal(name, profile)
    if refused is not None:
        yield ActionEvent(name, "fail", refused, data={"refused": "read-only"})
        return
    if name == "containers":
        from .containers import containers

        async for ev in containers(profile, remote):
            yield ev
    elif name == "model":
        from .model import model

        async for ev in model(profile, remote):
            yield ev
    elif name == "convert":
        from .model import convert, hf_missing, list_dir, model

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
        async for ev in convert(profile, remote, force=bool(opts.get("force"))):
            yield ev
    elif name == "setup-ray":
        from .ray_setup import setup_ray

        async for ev in setup_ray(profile, remote, stop_first=opts.get("stop_first"),
                                  stop_confirmed=bool(opts.get("stop_confirmed"))):
            yield ev
    elif name == "submit":
        if not opts.get("skip_checks"):
            from ..checks import CheckStatus, check_event, run_checks

            yield ActionEvent("submit", "step", "preflight checks")
            results = await run_checks(profile, remote=remote, before_submit=True)
            for r in results:
                if r.status is not CheckStatus.PASS:
                    ev = check_event(r, action="submit")
                    if r.status in (CheckStatus.FAIL, CheckStatus.WARN):
                        ev.kind = "warn"
                        ev.message += f" (fix: {r.fix})" if r.fix else ""
                    yield ev
            failed = [r for r in results if r.status is CheckStatus.FAIL]
            if failed:
                ids = list(dict.fromkeys(r.id for r in failed))
                yield ActionEvent("submit", "fail", f"{len(failed)} preflight check(s) failed "
                                                    f"({', '.join(ids)}); fix them or use --skip-checks")
                return
        from .jobs import submit

        async for ev in submit(profile, remote, force=bool(opts.get("force"))):
            yield ev
    elif name == "stop":
        from .jobs import stop_job

        async for ev in stop_job(profile, remote, job_id=opts.get("job_id")):
            if ev.node is None and ev.kind in ("done", "skip", "fail"):
                if opts.get("cluster"):
                    # the job's verdict is not the last word when the cluster goes too
                    yield ActionEvent(ev.action, "warn" if ev.kind == "fail" else "step", ev.message)
                    continue
            yield ev
        if opts.get("cluster"):
            from .ray_setup import stop_cluster

            async for ev in stop_cluster(profile, remote):
                yield ev
    elif name == "check":
        from ..checks import check_action

        async for ev in check_action(profile, remote):
            yield ev
    else:
        raise ValueError(f"unknown action {name!r}")
