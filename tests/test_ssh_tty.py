"""`ssh -t head rlconsole`: the console running on a node, over a real OpenSSH session
with a terminal, drawn in a tmux pane on this side.

The node is a simulated one (an asyncssh server that gives `ssh -t` a real
pseudo-terminal); the client is OpenSSH, verifying the node's host key against the sim's
known_hosts (no StrictHostKeyChecking=no). The console on the node reads the same profile
and watches the cluster from there, as it would on a real head node.
"""

from __future__ import annotations

import shlex
import time
import warnings
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import require_command
from tests.test_tui_tmux import Tmux, require_tmux

pytestmark = pytest.mark.integration
WAIT_S = 90.0


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux(require_tmux())
    yield t
    t.kill()


def test_ssh_t_runs_the_console_on_the_node(small_sim: Path, tmux: Tmux, tmp_path: Path) -> None:
    from tui.core.profile import load_profile

    prof = load_profile(small_sim)
    head = prof.nodes[0]
    assert prof.ssh.known_hosts and head.ssh.identity
    done = tmp_path / "exit_status"
    ssh = [require_command("ssh", "openssh-client"), "-F", "/dev/null", "-t", "-o", "BatchMode=yes",
           "-o", f"UserKnownHostsFile={prof.ssh.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
           "-o", "StrictHostKeyChecking=yes", "-i", head.ssh.identity[0], "-p", str(head.ssh.port),
           f"{head.ssh.user}@{head.ssh.host}", f"rlconsole --profile {shlex.quote(str(small_sim))}"]
    cmd = f"env -u COLUMNS -u LINES TERM=xterm-256color {shlex.join(ssh)}; echo $? > {done}"
    tmux.run("new-session", "-d", "-s", "main", "-x", "140", "-y", "40", cmd)

    def drawn(s: str) -> bool:
        lines = s.splitlines()
        return (all(x in s for x in ("node1", "node2", "Training", "Quit", "Nodes 2/2 up"))
                and len(lines) > 1 and lines[1].rstrip().endswith("SIMULATED"))

    screen = tmux.wait(drawn, "the console drawn over ssh -t", timeout=WAIT_S)
    assert "SIMULATED" in screen
    # "Nodes 2/2 up": the console on the node reaches both nodes

    # a resize of the local terminal reaches the console on the node (SIGWINCH through the pty)
    tmux.run("resize-window", "-t", "main", "-x", "100", "-y", "30")
    # the header's right-aligned badge: cut off by the narrower pane until the console,
    # told the new size, redraws it at the new right edge
    assert screen.splitlines()[1].rstrip().endswith("SIMULATED") and len(screen.splitlines()[1].rstrip()) > 100

    def redrawn(s: str) -> bool:
        lines = s.splitlines()
        return len(lines) > 1 and lines[1].rstrip().endswith("SIMULATED") and len(lines[1].rstrip()) <= 100

    tmux.wait(redrawn, "the console to redraw at 100 columns", timeout=WAIT_S)

    tmux.keys("q")
    end = time.monotonic() + WAIT_S
    while not done.exists() and time.monotonic() < end:
        time.sleep(0.2)
    screen = tmux.screen()
    assert done.exists(), f"ssh did not end after `q`; screen:\n{screen}"
    status = done.read_text().strip()
    if status == "1" and "Timeout (0:00:30)!" in screen:
        # the console's exit watchdog (tui/cli/console.py) ended a process stuck after
        # it closed: `q` still ended the session, as promised; the stacks it printed are
        # what the stuck exit needs looked at (seen once in CI, before the watchdog)
        warnings.warn(f"the console's exit was stuck and its watchdog ended it:\n{screen}", stacklevel=1)
        return
    assert status == "0", f"exit status {status}; screen:\n{screen}"
