"""`rlconsole demo` as a person runs it: in a terminal (tmux), keys typed, screen read.

It starts the simulated cluster, shows 4 nodes x 8 cards, brings the containers up on
`u`, opens help on `?`, quits on `q`, and on the question afterwards stops the sim.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import require_dockerd

pytestmark = pytest.mark.integration


def _need_tmux() -> None:
    if shutil.which("tmux"):
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("tmux not found, and CI=true: install tmux")
    pytest.skip("tmux not installed")


class Term:
    def __init__(self, sock: str) -> None:
        self.sock = sock

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True, timeout=30).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def wait_for(self, text: str, timeout: float = 90.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.3)
        raise AssertionError(f"{text!r} not on screen after {timeout:.0f}s:\n{screen}")


def test_demo_in_a_terminal(tmp_path: Path) -> None:
    _need_tmux()
    require_dockerd()
    from tui.sim.cluster import sim_down, sim_status

    sim_dir = tmp_path / "sim"
    env = {**os.environ, "RLCONSOLE_SIM_DIR": str(sim_dir), "RLCONSOLE_STATE_DIR": str(tmp_path / "state"),
           "TERM": "xterm-256color"}
    for var in ("COLUMNS", "LINES"):  # Textual would take these over the terminal's real size
        env.pop(var, None)
    sock = f"rlc-demo-{uuid.uuid4().hex[:8]}"
    term = Term(sock)
    cmd = f"{sys.executable} -m tui.cli demo; echo DEMO-EXITED $?; sleep 60"
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "160", "-y", "50", cmd],
                   env=env, cwd=str(Path(__file__).resolve().parent.parent), check=True)
    try:
        screen = term.wait_for("node4", timeout=120)
        assert "SIMULATED" in screen and "node1" in screen
        term.wait_for("ctr absent", timeout=60)
        term.keys("u")
        term.wait_for("containers done", timeout=120)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and term.screen().count("ctr running") < 4:
            time.sleep(0.5)
        assert term.screen().count("ctr running") == 4, term.screen()
        term.keys("?")
        term.wait_for("rlconsole keys", timeout=30)
        term.keys("Escape")
        time.sleep(0.5)
        term.keys("q")
        term.wait_for("Stop the simulated cluster?", timeout=60)
        term.keys("y", "Enter")
        term.wait_for("DEMO-EXITED 0", timeout=60)
        assert "simulated cluster stopped" in term.screen()
        assert not sim_status(sim_dir).running
    finally:
        term.tmux("kill-server")
        sim_down(state_dir=sim_dir)
