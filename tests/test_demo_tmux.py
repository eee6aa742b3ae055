"""`rlconsole demo` as a person runs it: in a terminal (tmux), keys typed, screen read.

It starts the simulated cluster, shows 4 nodes x 8 cards, brings the containers up on
`u`, opens help on `?`, quits on `q`, and on the question afterwards stops the sim.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ray_logs, require_dockerd

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

    def escape(self, closes: str | None = None, timeout: float = 30.0) -> None:
        """Esc, then wait until the app has taken it before the next key: a terminal app
        reads an Esc with the key after it in one read as Alt+key (a loaded machine left
        `Escape`, 0.5 s, `q` unread together: the help stayed open, `q` never quit).
        `closes`: a text that leaves the screen with it; else the screen changing."""
        before = self.screen()
        self.keys("Escape")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self.screen()
            if (closes not in now) if closes is not None else now != before:
                return
            time.sleep(0.2)
        raise AssertionError(f"Esc was not taken after {timeout:.0f}s ({closes!r} still shown):\n{self.screen()}")

    def wait_for(self, text: str, timeout: float = 90.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.3)
        raise AssertionError(f"{text!r} not on screen after {timeout:.0f}s:\n{screen}")


# --------------------------------------------------------------------------- issue 31
# The demo tells the truth: the whole chain (u c r s) on the sim, then the run watched in
# the terminal. A healthy simulated run draws no ✗ and raises no alert; one planted fault
# raises exactly its alert. The sim runs at a fast pace (0.5 s a step) so that a few dozen
# steps, with their validation and checkpoint steps, take under a minute.

STEP_S = "0.5"


def _wait_re(term: Term, pattern: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = term.screen()
        if re.search(pattern, screen):
            return screen
        time.sleep(0.5)
    raise AssertionError(f"{pattern!r} not on screen after {timeout:.0f}s:\n{screen}")


def _chain_to_steps(term: Term, steps: int) -> str:
    """Keys u, c, r, s (y to the submit question), then wait for `steps` steps."""
    screen = term.wait_for("ctr absent", timeout=120)
    assert "SIMULATED" in screen and "node1" in screen and "node4" in screen, screen
    for key, done in (("u", r"containers done"), ("c", r"convert done")):
        term.keys(key)
        _wait_re(term, done, 240)
        if key == "u":
            _wait_re(term, r"(?s)(ctr running.*){4}", 30)  # every node's container, in its row
    # setup-ray: on a machine shared with other simulated clusters a raylet can miss Ray's
    # own start-up deadline; a person presses `r` again, so does the test, twice at most.
    # The console asks first when Ray came up half-way (and stops it on `y`); when the
    # head's own start failed, Ray is down and it starts again without a question (a CI
    # run waited for the question there). The bring-up is not what is tested here; the
    # alerts it raised are the baseline the tests compare with.
    for attempt in range(3):
        term.keys("r")
        if attempt:
            screen = _wait_re(term, r"Stop Ray on every node\?|setup.ray running", 60)
            if re.search(r"Stop Ray on every node\?", screen):
                term.keys("y")
                _wait_re(term, r"setup.ray running", 60)  # not the last attempt's "failed"
        screen = _wait_re(term, r"setup.ray (done|failed)", 300)
        if re.search(r"setup.ray done", screen):
            break
    else:
        raise AssertionError(f"setup-ray failed three times:\n{term.screen()}")
    term.keys("s")
    _wait_re(term, r"Submit \S+\?", 60)
    term.keys("y")
    deadline = time.monotonic() + 180
    screen = ""
    while time.monotonic() < deadline:
        screen = term.screen()
        m = re.search(r"step (\d+)/\d+", screen)
        if m and int(m.group(1)) >= steps:
            return screen
        time.sleep(0.5)
    raise AssertionError(f"no step {steps} within 180 s:\n{screen}")


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory):
    """`rlconsole demo` in tmux (160x50) with the chain run by keys and a job making steps."""
    _need_tmux()
    require_dockerd()
    from tui.sim.cluster import sim_down
    from tui.sim.faults import clear_faults

    tmp = tmp_path_factory.mktemp("demo31")
    sim_dir = tmp / "sim"
    env = {**os.environ, "RLCONSOLE_SIM_DIR": str(sim_dir), "RLCONSOLE_STATE_DIR": str(tmp / "state"),
           "TERM": "xterm-256color", "RLCONSOLE_SIM_STEP_S": STEP_S}
    for var in ("COLUMNS", "LINES"):
        env.pop(var, None)
    sock = f"rlc-demo31-{uuid.uuid4().hex[:8]}"
    term = Term(sock)
    cmd = f"{sys.executable} -m tui.cli demo --no-bell; echo DEMO-EXITED $?; sleep 60"
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "160", "-y", "50", cmd],
                   env=env, cwd=str(Path(__file__).resolve().parent.parent), check=True)
    try:
        try:
            _chain_to_steps(term, 3)
        except AssertionError as e:  # with what each node's raylet was doing (the head's died once in CI)
            raise AssertionError(f"{e}\n{ray_logs(sim_dir)}") from None
        yield term, sim_dir, env, _alert_rows(term)
    finally:
        term.tmux("kill-server")
        (Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / sock).unlink(missing_ok=True)
        clear_faults(sim_dir)
        sim_down(state_dir=sim_dir)


def _watch(term: Term, seconds: float, until_step: int | None = None) -> list[str]:
    """Screens captured every half second for `seconds` (or until the pane's step reaches
    `until_step`)."""
    screens: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        s = term.screen()
        screens.append(s)
        m = re.search(r"step (\d+)/\d+", s)
        if until_step is not None and m and int(m.group(1)) >= until_step:
            break
        time.sleep(0.5)
    return screens


def _alert_rows(term: Term) -> list[str]:
    """The alert list (`a`): one row per alert raised this session, then closed again."""
    term.keys("a")
    listing = _wait_re(term, r"Alerts \(\d+\)", 30)
    rows = [line for line in listing.splitlines() if re.search(r"\d\d-\d\d \d\d:\d\d:\d\d +(info|warning|error) ", line)]
    term.escape(closes="Alerts (")
    return rows


def _problems(rows: list[str]) -> list[str]:
    """Rows of the alert list that are not the console's notice that it watches the job
    (an info event, no cause for concern)."""
    return [r for r in rows if not re.search(r" info +ray +watching job ", r)]


def test_demo_healthy_run_draws_no_cross_and_raises_no_alert(demo_run) -> None:
    """~40 steps (8 of them validation, 8 checkpoint steps) of a healthy simulated run:
    every figure ✓, never a ✗, and no alert raised (the alert line shows none, or only the
    console's "watching job" notice; the alert list holds nothing else)."""
    term, _, _, before = demo_run
    screens = _watch(term, 90, until_step=40)
    last = screens[-1]
    m = re.search(r"step (\d+)/\d+", last)
    assert m and int(m.group(1)) >= 25, last  # the run went on while watched
    for s in screens:
        assert "✗" not in s, s
        bar = s.splitlines()[1]
        assert "alerts" in bar and "▲" not in bar and "✖" not in bar, s  # no warning or error shown
    assert last.count("✓") >= 3, last  # step time, throughput and MFU each judged, in range
    assert re.search(r"s/step ✓ [\d.]+ ?s?-[\d.]+ (s|min)\b", last), last  # a step time range in time units
    rows = _alert_rows(term)
    assert _problems([r for r in rows if r not in before]) == [], rows  # none raised while watched


def test_demo_planted_fault_raises_exactly_its_alert(demo_run) -> None:
    """`sim fault low-throughput`: the modelled cards slow down, so the throughput and the
    MFU both turn ✗ (figures that follow from one another, issue 36) and the alerts raised
    are their two range alerts; no stall (the steps are slower, not stopped), nothing else."""
    term, sim_dir, env, before = demo_run
    r = subprocess.run([sys.executable, "-m", "tui.cli", "sim", "fault", "low-throughput"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=str(Path(__file__).resolve().parent.parent))
    assert r.returncode == 0, r.stderr
    screen = term.wait_for("outside the profile's", timeout=90)
    assert "throughput" in screen.splitlines()[1] or "MFU" in screen.splitlines()[1], screen
    screens = _watch(term, 10)
    last = screens[-1]
    assert re.search(r"tok/s/node ✗ [\d.]+-[\d.]+", last), last
    assert re.search(r"MFU [\d.]+% ✗", last), last
    problems = _problems([r for r in _alert_rows(term) if r not in before])
    assert len(problems) == 2, problems
    assert any(re.search(r"warning +job +throughput [\d.]+ tokens/s per node outside the profile's [\d.]+-[\d.]+", p)
               for p in problems), problems
    assert any(re.search(r"warning +job +MFU [\d.]+ ?% outside the profile's", p) for p in problems), problems


def test_demo_reopened_on_a_failed_job_shows_its_cause_then_only_the_new_run(demo_run) -> None:
    """Issue 36 majors 2 and 3 where users look (tmux, the demo's own command): the job
    fails of an OOM; the demo quit (the sim kept) and opened again shows the cause on the
    main screen without a key (it showed `watching job`); `s` submits a new run and the log
    pane holds that run only: a search for the failed run's error finds nothing (the pane
    started with the old run's lines). Then `?` opens the keys, and `q` with `y` to the
    question stops the sim, its job running (the module's one demo ends so)."""
    from tui.sim.cluster import sim_status

    term, sim_dir, env, _ = demo_run
    root = str(Path(__file__).resolve().parent.parent)

    def cli(*args: str) -> None:
        r = subprocess.run([sys.executable, "-m", "tui.cli", *args], env=env, capture_output=True, text=True,
                           timeout=60, cwd=root)
        assert r.returncode == 0, r.stderr

    cli("sim", "fault", "clear")
    cli("sim", "fault", "oom", "--at-step", "0")
    _wait_re(term, r"FAILED", 180)
    term.keys("q")
    term.wait_for("Stop the simulated cluster?", timeout=60)
    term.keys("n", "Enter")
    term.wait_for("DEMO-EXITED 0", timeout=60)

    sock = f"rlc-demo36-{uuid.uuid4().hex[:8]}"
    again = Term(sock)
    cmd = f"{sys.executable} -m tui.cli demo --no-bell; echo DEMO-EXITED $?; sleep 60"
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "160", "-y", "50", cmd],
                   env=env, cwd=root, check=True)
    try:
        screen = _wait_re(again, r"(?i)out of memory", 120)
        assert "watching job" not in screen.splitlines()[1], screen  # the banner: the cause, not a notice
        assert "FAILED" in screen, screen
        again.keys("s")
        _wait_re(again, r"Submit \S+\?|[Ss]tart \S+ fresh", 60)
        again.keys("y")
        # the new run making steps: its step line with progress and ETA (a stopped run's
        # line names its end state instead). Waiting for the run to end instead took two
        # minutes of the suite: the OOM at step 0 left no checkpoint, so it starts over.
        screen = _wait_re(again, r"step \d+/\d+ +(\([\d.]+%\)|SUCCEEDED)", 180)
        assert "out of memory" not in "\n".join(screen.splitlines()[:4]).lower(), screen  # the old cause left the banner
        # the log pane holds the new run only: the old run's error is nowhere in it (`/`
        # searches it all, older and newer than the view)
        again.keys("/")
        time.sleep(0.5)
        again.keys("OutOfMemoryError", "Enter")
        _wait_re(again, r"/OutOfMemoryError: no older match", 30)
        # last, the way out a person takes: `?` opens the keys, `q` quits and `y` to the
        # question stops the simulated cluster, its job running
        again.escape()  # the search box closes
        again.keys("?")
        again.wait_for("rlconsole keys", timeout=30)
        again.escape(closes="rlconsole keys")
        again.keys("q")
        again.wait_for("Stop the simulated cluster?", timeout=60)
        again.keys("y", "Enter")
        again.wait_for("DEMO-EXITED 0", timeout=120)
        assert "simulated cluster stopped" in again.screen(), again.screen()
        assert not sim_status(sim_dir).running
    finally:
        again.tmux("kill-server")
        (Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / sock).unlink(missing_ok=True)
