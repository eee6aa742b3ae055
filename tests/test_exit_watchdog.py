"""Quitting ends the process (tui/cli/console.py EXIT_WATCHDOG_S): the console arms a
faulthandler countdown as it starts to close; a process stuck past it prints every
thread's stack and exits 1, and the demo's question after the console is not cut short."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tui.app import RlconsoleApp
from tui.backend.static import demo_backend

REPO = Path(__file__).resolve().parents[1]


def _child(body: str) -> subprocess.CompletedProcess[str]:
    code = "import time\nimport tui.cli.console as c\nc.EXIT_WATCHDOG_S = 0.5\n" + body
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)


def test_a_process_stuck_after_the_console_closed_is_ended_with_its_stacks() -> None:
    r = _child("c.arm_exit_watchdog()\ntime.sleep(30)\n")
    assert r.returncode == 1, r
    assert "Timeout (0:00:00.500000)!" in r.stderr and "most recent call first" in r.stderr, r.stderr


def test_a_disarmed_countdown_ends_nothing() -> None:
    """The demo disarms it while it asks whether to keep the sim."""
    r = _child("c.arm_exit_watchdog()\nc.disarm_exit_watchdog()\ntime.sleep(1.5)\nprint('asked')\n")
    assert r.returncode == 0 and r.stdout == "asked\n", r


async def test_the_console_arms_it_as_it_closes() -> None:
    closing: list[bool] = []
    app = RlconsoleApp(demo_backend(nodes=2), on_closing=lambda: closing.append(True))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert closing == []
    assert closing == [True]
