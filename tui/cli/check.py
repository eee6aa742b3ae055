"""`rlconsole check`: the preflight's command-line face.

The checks, their order and the result shape are the core's (`tui.core.checks`); this
module only connects, runs them and prints: grouped text (FAIL/WARN coloured on a
terminal, never when NO_COLOR is set) or `--json`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import replace
from typing import TextIO

from tui.core.checks import CheckResult, CheckStatus, format_results, results_json, run_checks, static_checks
from tui.core.profile import Profile
from tui.core.safetext import shown


def use_colour(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything non-empty
    (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


async def _live(p: Profile) -> list[CheckResult]:
    from tui.core.actions.remote import PoolRemote
    from tui.core.transport import open_pool

    pool = open_pool(p)
    try:
        await pool.open()
        return await run_checks(p, PoolRemote(pool, p))
    finally:
        await pool.close()


def printable(r: CheckResult) -> CheckResult:
    """`r` with its text made safe to show (the one rule for outside text,
    tui/core/safetext.py): a message quotes what a node printed (an error's last line),
    and the terminal must show it, not obey it. Before `format_results` adds its own
    colour, which is the one escape the printed lines keep."""
    return replace(r, id=shown(r.id), message=shown(r.message), fix=None if r.fix is None else shown(r.fix),
                   node=None if r.node is None else shown(r.node), cause=None if r.cause is None else shown(r.cause))


def run_check_cli(p: Profile, as_json: bool = False, static: bool = False) -> int:
    """Exit status: 0 nothing failed, 1 a check failed (2, a bad profile, is the loader's)."""
    results = static_checks(p) if static else asyncio.run(_live(p))
    if as_json:
        print(json.dumps(results_json(p, results, static), indent=2))
    else:
        print("\n".join(format_results([printable(r) for r in results], colour=use_colour(sys.stdout))))
    return 1 if any(r.status is CheckStatus.FAIL for r in results) else 0
