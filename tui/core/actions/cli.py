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
from typing import AsyncIterator

from ..errors import UsageError
from ..profile import Profile
from .events import ActionEvent
from ..errors import RlconsoleError
from .registry import describe, read_only_refusal, run_action


def _confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin or not sys.stdin.isatty():
        raise UsageError(f"{question.rstrip('?')}: refusing without --yes (no terminal to ask on)")
    try:
        answer = input(f"{question} [y/N] ")
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
        print(f"  {where}{ev.message}", flush=True)
    else:
        print(f"{ev.action}: {where}{mark}{ev.message}", flush=True)


async def _drive(profile: Profile, name: str, opts: dict, as_json: bool) -> int:
    from ..ssh import SessionPool
    from .remote import PoolRemote

    pool = SessionPool(profile)
    try:
        await pool.open()
        remote = PoolRemote(pool, profile)
        # Every action ends with one done/skip/fail event: its verdict is the exit code.
        verdict = 1
        gen: AsyncIterator[ActionEvent] = run_action(name, profile, remote, **opts)
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
    opts: dict = {}
    if name == "convert":
        opts["force"] = bool(args.force)
    elif name == "submit":
        opts["force"] = bool(args.force)
        opts["skip_checks"] = bool(args.skip_checks)
    elif name == "stop":
        opts["cluster"] = bool(args.cluster)
        opts["job_id"] = args.job
    elif name == "setup-ray":
        opts["stop_first"] = False if args.no_stop else None
    if not _confirm(describe(name, profile, **opts), args.yes):
        print("rlconsole: cancelled", file=sys.stderr)
        return 1
    if name == "setup-ray":  # the question above said a running Ray is stopped: --yes or y answered it
        opts["stop_confirmed"] = True
    return asyncio.run(_drive(profile, name, opts, args.json))
