"""The actions, headless: `rlconsole containers|model|convert|setup-ray|submit|stop`.

Every action changes the cluster, so each asks first: on a terminal with a y/N prompt,
headless only with `--yes` (a cron job or a script must say it means it). Progress is
printed one event per line (or JSON lines with `--json`); the last line is the verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, AsyncIterator

from tui.core.actions.events import ActionEvent
from tui.core.actions.registry import SPECS, describe, read_only_refusal, run_action
from tui.core.errors import RlconsoleError, UsageError
from tui.core.profile import Profile
from tui.core.safetext import shown

if TYPE_CHECKING:
    from tui.core.actions.remote import PoolRemote


def _can_ask(question: str, yes: bool) -> None:
    """Headless without --yes: refuse before anything connects or runs."""
    if not yes and (not sys.stdin or not sys.stdin.isatty()):
        raise UsageError(f"{question.rstrip('?.')}: refusing without --yes (no terminal to ask on)")


def _confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    _can_ask(question, yes)
    try:
        answer = input(f"{shown(question, lines=True)} [y/N] ")  # it may name Ray's job: the one rule
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _print(ev: ActionEvent, as_json: bool) -> None:
    if as_json:
        print(json.dumps(ev.to_json()), flush=True)
        return
    mark = {"fail": "FAILED: ", "warn": "warning: ", "skip": "nothing to do: ", "done": "done: "}.get(ev.kind, "")
    where = f"[{ev.node}] " if ev.node else ""
    if ev.kind == "output":
        print(f"  {where}{shown(ev.message, lines=True)}", flush=True)
    else:
        print(f"{ev.action}: {where}{mark}{shown(ev.message, lines=True)}", flush=True)


async def _plan_then_ask(profile: Profile, remote: PoolRemote, opts: dict, as_json: bool, yes: bool,
                         dry_run: bool) -> int | None:
    """`submit`: print what it will launch and the preflight's verdict (the console's `s`
    shows the same plan), then ask. An exit code to stop with, or None to submit."""
    from tui.core.actions.plan import submit_plan

    plan = await submit_plan(profile, remote, fresh=bool(opts.get("fresh")))
    if as_json:
        print(json.dumps({"plan": plan.to_json()}), flush=True)
    else:
        print("\n".join(f"submit: {shown(line)}" for line in plan.lines()), flush=True)
    if dry_run:
        return 0 if plan.ok and not plan.finished else 1
    if not plan.ok:  # what submit itself says of a failed preflight: each check, then the refusal
        from tui.core.actions.plan import preflight_events

        for ev in preflight_events(list(plan.results)):
            _print(ev, as_json)
        return 1
    if plan.finished:  # a resume would end at once: said, and refused without --fresh
        print(f"rlconsole: {plan.run_name} finished at step {plan.resume_step}: nothing to resume; "
              "`rlconsole submit --fresh` starts it again from step 0", file=sys.stderr)
        return 1
    question = f"Submit {plan.run_name} on {plan.cards} cards?"
    if plan.from_scratch:
        question = describe("submit", profile, fresh=True)
    if not await asyncio.to_thread(_confirm, question, yes):
        print("rlconsole: cancelled", file=sys.stderr)
        return 1
    # The checks just ran and passed (the same ones, `before_submit`); a verdict older
    # than a minute (a slow answer at the prompt) is run again by submit itself.
    opts["skip_checks"] = plan.fresh()
    return None


async def _look_then_ask(profile: Profile, remote: PoolRemote, opts: dict) -> None:
    """`setup-ray` without --yes: look at Ray first, so the question (or the headless
    refusal) says what a stop would hit: a Ray that is up, or one whose state is
    unknown (its port answers, `ray status` does not), where a job may be running.
    A yes is the confirmation the stop needs; headless, the refusal (exit 2) is raised."""
    from tui.core.actions.ray_setup import stop_question

    question = await stop_question(profile, remote, opts.get("stop_first"))
    if not await asyncio.to_thread(_confirm, question or describe("setup-ray", profile, **opts), False):
        raise _Cancelled()
    opts["stop_confirmed"] = True


class _Cancelled(Exception):
    """The user answered no at a prompt asked after connecting."""


async def _drive(profile: Profile, name: str, opts: dict, as_json: bool, plan: dict | None = None,
                 look_first: bool = False) -> int:
    if profile.simulated:
        from tui.sim.faults import install_submit_hook

        install_submit_hook()
    from tui.core.actions.remote import PoolRemote
    from tui.core.transport import open_pool

    if name == "containers" and profile.cluster.slurm:
        # the allocation before the nodes are reached: they then go by Slurm's host names
        from tui.core import slurm

        async for ev in slurm.acquire(profile, name, rename=True):
            _print(ev, as_json)
            if ev.kind == "fail":
                return 1
    pool = open_pool(profile)
    try:
        await pool.open()
        remote = PoolRemote(pool, profile)
        if plan is not None:
            stop = await _plan_then_ask(profile, remote, opts, as_json, **plan)
            if stop is not None:
                return stop
        if look_first:
            try:
                await _look_then_ask(profile, remote, opts)
            except _Cancelled:
                print("rlconsole: cancelled", file=sys.stderr)
                return 1
        # Every action ends with one done/skip/fail event: its verdict is the exit code.
        verdict = 1
        gen: AsyncIterator[ActionEvent] = run_action(name, profile, remote, who="cli", **opts)
        async for ev in gen:
            _print(ev, as_json)
            if ev.kind in ("done", "skip", "fail"):
                verdict = 0 if ev.kind != "fail" else 1
        return verdict
    finally:
        await pool.close()


def run_action_cli(profile: Profile, args: argparse.Namespace) -> int:
    name = args.cmd
    refused = read_only_refusal(name, profile)
    if refused is not None:  # before asking: the answer could not change it
        raise RlconsoleError(refused)
    opts = SPECS[name].opts_from(args)
    if name == "submit" and not opts.get("skip_checks"):
        # the plan first (it runs the preflight), then the question
        dry_run = bool(getattr(args, "dry_run", False))
        if not dry_run:
            _can_ask(describe(name, profile, **opts), args.yes)
        return asyncio.run(_drive(profile, name, opts, args.json, plan={"yes": args.yes, "dry_run": dry_run}))
    if name == "setup-ray":
        if not args.yes:  # the question must name Ray's state: asked after a look (a read)
            return asyncio.run(_drive(profile, name, opts, args.json, look_first=True))
        opts["stop_confirmed"] = True  # --yes answered "stop a running Ray" too
        return asyncio.run(_drive(profile, name, opts, args.json))
    if not _confirm(describe(name, profile, **opts), args.yes):
        print("rlconsole: cancelled", file=sys.stderr)
        return 1
    return asyncio.run(_drive(profile, name, opts, args.json))
