"""`r` (setup-ray) asks before stopping a running Ray (issue 15, item 9), in the console.

The core's setup-ray stops short of `ray stop --force` on a live Ray unless the stop is
confirmed, and says what it would ask (tests/test_destructive_guards.py checks that on
the sim). Here: the console turns that into a ConfirmationModal; "n" leaves Ray alone,
"y" runs setup-ray again with the confirmation. A StaticBackend whose setup-ray speaks
that protocol stands in for the cluster.
"""

from __future__ import annotations

import dataclasses
from typing import Any, AsyncIterator

from tui.app import RlconsoleApp
from tui.backend.static import StaticBackend, demo_backend
from tui.core.actions.events import ActionEvent
from widgets.confirm import ConfirmationModal

from .pilot_helpers import SIZE, settle, until

QUESTION = "Ray is up (4/4 nodes, 32/16 GPUs), not as the profile wants. ... job raysubmit_x is running and would be killed."


class AskingBackend(StaticBackend):
    async def run_action(self, name: str, **opts: Any) -> AsyncIterator[ActionEvent]:
        self.calls.append((name, dict(opts)))
        yield ActionEvent(name, "start", name)
        if name == "setup-ray" and not opts.get("stop_confirmed"):
            yield ActionEvent(name, "fail", "not stopping a running Ray without confirmation: " + QUESTION,
                              data={"confirm": QUESTION})
            return
        yield ActionEvent(name, "done", "Ray set up")


async def job_question_answered(pilot) -> None:
    """The demo's job runs, so `r` first asks about it (the action table's question)."""
    await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmationModal)
                and "A training job is running" in pilot.app.screen.message)
    await pilot.press("y")
    await settle(pilot)


def _backend() -> AskingBackend:
    d = demo_backend()
    return AskingBackend(**{f.name: getattr(d, f.name) for f in dataclasses.fields(StaticBackend)
                            if not f.name.startswith("_")})


async def test_setup_ray_asks_and_no_leaves_ray_alone() -> None:
    b = _backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await job_question_answered(pilot)
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal) and QUESTION in app.screen.message)
        assert QUESTION in app.screen.message
        await pilot.press("n")
        await settle(pilot)
        assert b.calls == [("setup-ray", {})]


async def test_setup_ray_asks_and_yes_runs_it_confirmed() -> None:
    b = _backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await job_question_answered(pilot)
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal) and QUESTION in app.screen.message)
        await pilot.press("y")
        await until(pilot, lambda: len(b.calls) == 2)
        await settle(pilot)
        assert b.calls == [("setup-ray", {}), ("setup-ray", {"stop_confirmed": True})]
        assert not isinstance(app.screen, ConfirmationModal)
