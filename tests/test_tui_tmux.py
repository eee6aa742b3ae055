"""Smoke test in a real terminal: the console under tmux, driven by keys, read back with
`capture-pane`.

Pilot tests run headless, so they never exercise the terminal driver, the key decoding
or what actually reaches the screen. Here the real `rlconsole` entry point runs in a tmux
pane (160x50) on the StaticBackend (RLCONSOLE_STATIC_BACKEND=1: fixed demo data, no
cluster needed); the `rlconsole demo` variant on the simulated cluster is a separate test.

Skips when tmux is not installed, except under CI=true, where it fails: CI must install
tmux and run this for real.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.conftest import require_command

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "profiles" / "qwen3-8b-grpo-32gpu.yaml"
WIDTH, HEIGHT = 160, 50
TIMEOUT_S = 30.0
"""Generous: the first frame takes ~1 s, but CI machines and xdist neighbours are slow."""


def require_tmux() -> str:
    return require_command("tmux", "tmux")


class Tmux:
    """One private tmux server (its own socket, `-L`), so tests never touch the user's
    sessions or each other's under xdist."""

    def __init__(self, tmux: str) -> None:
        self.tmux = tmux
        self.socket = f"rlconsole-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.tmux, "-L", self.socket, *args], capture_output=True, text=True,
                              check=check, timeout=10)

    def screen(self) -> str:
        """The pane's visible text now ("" once the pane or server is gone)."""
        res = self.run("capture-pane", "-p", "-t", "main", check=False)
        return res.stdout if res.returncode == 0 else ""

    def alive(self) -> bool:
        return self.run("has-session", "-t", "main", check=False).returncode == 0

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "main", *keys)

    def wait(self, cond: Callable[[str], bool], what: str, timeout: float = TIMEOUT_S) -> str:
        """Poll the screen until `cond(screen)`; fail showing the last screen."""
        end = time.monotonic() + timeout
        text = ""
        while time.monotonic() < end:
            text = self.screen()
            if cond(text):
                return text
            time.sleep(0.1)
        pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}; screen was:\n{text}")

    def kill(self) -> None:
        """Stop this test's server and remove its socket file (tmux leaves it behind when
        the server exits on its own, as it does once the console quits)."""
        self.run("kill-server", check=False)
        sock = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / self.socket
        sock.unlink(missing_ok=True)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux(require_tmux())
    yield t
    t.kill()


def test_console_under_tmux_shows_grid_help_and_quits(tmux: Tmux, tmp_path: Path) -> None:
    env = {
        "RLCONSOLE_STATIC_BACKEND": "1",
        "RLCONSOLE_STATE_DIR": str(tmp_path / "state"),  # the debug log stays in the test
        "RLCONSOLE_CONFIG_DIR": str(tmp_path / "config"),
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
    }
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    done = tmp_path / "exit_status"
    # The pane runs a shell: record the console's exit status, then end (which ends tmux).
    # COLUMNS/LINES, if pytest's environment has them, would override the pane's real
    # size (shutil.get_terminal_size reads them first).
    # The seed's run with loopback addresses: even if the static backend were not taken,
    # nothing could reach for the real cluster's addresses.
    profile = tmp_path / "seed-on-loopback.yaml"
    seen: dict[str, str] = {}
    profile.write_text(re.sub(r"\b10\.10\.\d+\.\d+\b",
                              lambda m: seen.setdefault(m.group(0), f"127.0.0.{len(seen) + 2}"),
                              PROFILE.read_text()))
    cmd = (f"env -u COLUMNS -u LINES {exports} {sys.executable} -m tui.cli --profile {profile}; "
           f"echo $? > {done}")
    tmux.run("new-session", "-d", "-s", "main", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(ROOT), cmd)

    # The node grid (every node's header and a card line) and the footer's keys.
    names = ("node125", "node71", "node116", "node119")
    # The whole first frame: on a loaded machine the terminal can show the grid and the
    # footer a write before the job log's pane (seen in a full run), so that is waited for too.
    first = tmux.wait(lambda s: all(n in s for n in names) and all(t in s for t in ("Help", "Quit", "Job log")),
                      "the node grid, the job log and the footer")
    assert "Nodes 4/4 up" in first
    assert "SIMULATED" in first
    assert "88°" in first  # node71's hot card, drawn

    tmux.keys("?")
    # the frame's border can reach the terminal a write before its body on a loaded
    # machine: wait for the whole screen (its title and its last line), not the border
    tmux.wait(lambda s: "rlconsole keys" in s and "Esc closes" in s, "the help screen")
    tmux.keys("Escape")
    tmux.wait(lambda s: "rlconsole keys" not in s and "node125" in s, "help to close")

    tmux.keys("q")  # idle: quits at once, no question
    end = time.monotonic() + TIMEOUT_S
    while not done.exists() and time.monotonic() < end:
        time.sleep(0.1)
    assert done.exists(), f"the console did not quit on `q`; screen:\n{tmux.screen()}"
    assert done.read_text().strip() == "0"
