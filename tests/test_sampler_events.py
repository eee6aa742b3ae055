"""Issue 37: the node's sampler inspects its container when Docker says something
happened to it, not every sample.

`docker inspect` was two thirds of what a sample cost on the node (the docker CLI
alone, every refresh, on every node). The loop now runs a `docker events` watcher in
the background and inspects when it printed, when it (re)starts, and on every sample
while there is none (an old docker, no daemon, no `mktemp`). Real parts: the real loop
under the machine's shells; a `docker` script that prints an inspect document from a
file and, for `events`, one line per event file the test drops (until its `--until`).
On the live path, through the sim's real dockerd: tests/test_probes.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.test_sampler_delta import FakeCards, _read_until
from tui.core.probes import (
    CONTAINER_EVENTS,
    EVENTS_WATCH_S,
    SampleStream,
    container_events_command,
    parse_sample,
    sampler_script,
)
from tui.core.profile import load_profile

DATA = Path(__file__).parent / "data"

FAKE_DOCKER = """#!/bin/sh
# docker for the tests: `inspect` prints the document the test wrote (with the status in
# `status`); `events` prints `e` for each file event.* the test drops, until its --until
d='{dir}'
echo "$1" >>"$d/calls"
case "$1" in
  inspect)
    [ -e "$d/status" ] || {{ echo "Error: No such object: $4" >&2; exit 1; }}
    sed "s/@@STATUS@@/$(cat "$d/status")/" "$d/inspect.json" ;;
  events)
    [ -e "$d/no-events" ] && {{ echo "docker: 'events' is not a docker command." >&2; exit 1; }}
    echo $$ >>"$d/watchers"
    until=; for a in "$@"; do [ "$prev" = --until ] && until=$a; prev=$a; done
    while [ "$(date +%s)" -le "$until" ]; do
      for f in "$d"/event.*; do [ -e "$f" ] && rm -f "$f" && echo e; done
      sleep 0.05
    done ;;
  *) exit 1 ;;
esac
"""

INSPECT = [{"Id": "4f" * 32, "Name": "/train-rl", "Config": {"Image": "local/sim:1"},
            "State": {"Status": "@@STATUS@@", "Running": True, "Paused": False, "Restarting": False,
                      "OOMKilled": False, "Dead": False, "Pid": 4242, "ExitCode": 0, "Error": "",
                      "StartedAt": "2026-12-07T10:00:00.000000000Z", "FinishedAt": "0001-01-01T00:00:00Z"}}]


class FakeDocker:
    def __init__(self, d: Path) -> None:
        self.dir = d
        (d / "bin").mkdir(parents=True)
        tool = d / "bin" / "docker"
        tool.write_text(FAKE_DOCKER.format(dir=d))
        tool.chmod(0o755)
        (d / "inspect.json").write_text(json.dumps(INSPECT, indent=4) + "\n")
        (d / "status").write_text("running")
        (d / "calls").write_text("")

    def calls(self, sub: str) -> int:
        return (self.dir / "calls").read_text().split().count(sub)

    def change(self, status: str, event: bool = True) -> None:
        (self.dir / "status").write_text(status)
        if event:
            (self.dir / f"event.{time.monotonic_ns()}").write_text("")

    def watchers(self) -> list[int]:
        f = self.dir / "watchers"
        return [int(x) for x in f.read_text().split()] if f.exists() else []

    def wait_for_watcher(self) -> list[int]:
        """The watchers' PIDs once the loop has started one (60 s at most: a bound)."""
        deadline = time.monotonic() + 60
        while not self.watchers() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.watchers()


def _profile() -> Any:
    return load_profile(DATA / "good_profile.yaml")  # access: docker-exec, container train-rl


def _status(text: str | None) -> str | None:
    return None if text is None else parse_sample(text, _profile())[1].status


def _loop(tmp_path: Path, docker: FakeDocker, shell: str = "sh", first_on_path: Path | None = None
          ) -> subprocess.Popen[bytes]:
    cards = FakeCards(tmp_path / "cards")
    script = sampler_script(_profile(), 0.05, heartbeat_s=3600)
    argv = [shutil.which(shell) or shell, *(["sh"] if shell == "busybox" else []), "-c", script]
    first = f"{first_on_path}:" if first_on_path is not None else ""
    env = {"PATH": f"{first}{docker.dir / 'bin'}:{cards.path}", "LANG": "C.UTF-8", "HOME": str(tmp_path),
           "TMPDIR": str(tmp_path)}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env=env)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_the_watch_asks_docker_for_the_changes_the_console_shows() -> None:
    cmd = container_events_command(_profile())
    assert cmd is not None and cmd.startswith("docker events --filter container=train-rl --filter type=container")
    assert all(f"event={e}" in cmd for e in ("start", "die", "oom", "pause", "unpause", "health_status"))
    assert not any(e.startswith("exec") for e in CONTAINER_EVENTS)  # a health check's exec changes nothing
    direct = _profile()
    direct.container.access = "direct"
    assert container_events_command(direct) is None
    assert "docker events" not in sampler_script(direct, 1.0)


@pytest.mark.parametrize("shell", [s for s in ("sh", "dash", "bash", "zsh", "busybox") if shutil.which(s)])
def test_an_unchanged_container_is_not_inspected_again_and_a_change_arrives_on_its_event(
        shell: str, tmp_path: Path) -> None:
    docker = FakeDocker(tmp_path / "docker")
    proc = _loop(tmp_path, docker, shell)
    stream = SampleStream(shell)
    state: dict[str, Any] = {}

    def done(got: list[str | None]) -> bool:
        if "quiet_from" not in state and got:  # the full sample is in: count from here
            state["quiet_from"] = (time.monotonic(), docker.calls("inspect"))
        if "changed" not in state and "quiet_from" in state and time.monotonic() - state["quiet_from"][0] > 1.0:
            state["quiet"] = docker.calls("inspect") - state["quiet_from"][1]
            state["changed"] = docker.calls("inspect")
            docker.change("paused")
        return "changed" in state and _status(got[-1]) == "paused"

    got = _read_until(proc, stream, done)  # it stops the loop after
    inspected_for_it = docker.calls("inspect") - state["changed"]
    watchers = docker.watchers()
    assert _status(got[0]) == "running" and _status(got[-1]) == "paused"
    # 1 s of 0.05 s samples (~20, fewer on a slow machine): at most the one inspection
    # owed to the watcher's start; before, every one of them ran `docker inspect`
    assert state["quiet"] <= 1, state
    assert 1 <= inspected_for_it <= 2  # the event's (and the sample's before it saw the change)
    assert len(watchers) == 1 and docker.calls("events") == 1


def test_the_watcher_ends_with_the_loop_and_leaves_no_file(tmp_path: Path) -> None:
    docker = FakeDocker(tmp_path / "docker")
    proc = _loop(tmp_path, docker)
    try:
        [watcher] = docker.wait_for_watcher()
        # Linux: the watcher's file is open and already unlinked, nothing named on disk
        assert _alive(watcher) and not list(tmp_path.glob("rlconsole-events.*"))
    finally:
        os.kill(proc.pid, signal.SIGTERM)  # the loop's shell alone: it must take its watcher along
        proc.wait(timeout=30)
    deadline = time.monotonic() + 30  # a bound, not a measurement
    while _alive(watcher) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(watcher)
    if alive:
        os.kill(watcher, signal.SIGKILL)
    assert not alive, "the docker events watcher outlived its loop"
    assert not list(tmp_path.glob("rlconsole-events.*"))


def test_a_docker_without_events_is_inspected_every_sample(tmp_path: Path) -> None:
    """An old docker, podman without the socket, a daemon that is down: the watcher fails
    at once, and the loop inspects every sample, as before, retrying the watcher a
    watch (EVENTS_WATCH_S) later."""
    docker = FakeDocker(tmp_path / "docker")
    (docker.dir / "no-events").write_text("")
    proc = _loop(tmp_path, docker)
    state: dict[str, Any] = {}

    def done(got: list[str | None]) -> bool:
        if "changed" not in state and docker.calls("inspect") >= 10:
            docker.change("exited", event=False)  # no watcher, no event: seen all the same
            state["changed"] = True
        return "changed" in state and _status(got[-1]) == "exited"

    got = _read_until(proc, SampleStream("n"), done)
    assert _status(got[-1]) == "exited"
    assert docker.calls("events") == 1  # tried once; the next try is a watch later
    assert EVENTS_WATCH_S >= 30


def test_a_loop_without_an_epoch_clock_inspects_every_sample(tmp_path: Path) -> None:
    docker = FakeDocker(tmp_path / "docker")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "date").write_text("#!/bin/sh\necho 'date: invalid format'\n")
    (tools / "date").chmod(0o755)
    cards = FakeCards(tmp_path / "cards")
    proc = subprocess.Popen([shutil.which("sh") or "/bin/sh", "-c", sampler_script(_profile(), 0.05)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env={"PATH": f"{tools}:{docker.dir / 'bin'}:{cards.path}", "LANG": "C.UTF-8",
                                 "HOME": str(tmp_path), "TMPDIR": str(tmp_path)})
    _read_until(proc, SampleStream("n"), lambda got: docker.calls("inspect") >= 5)
    assert docker.calls("inspect") >= 5 and docker.calls("events") == 0


def test_a_loop_killed_outright_leaves_no_file(tmp_path: Path) -> None:
    """SIGKILL runs no trap (a node's sshd killed, the sim's `stop-node`): the events file
    is unlinked as soon as the loop has it open, so nothing is left in $TMPDIR; the
    watcher itself ends at its `--until` (a minute), here killed with the group."""
    docker = FakeDocker(tmp_path / "docker")
    proc = _loop(tmp_path, docker)
    try:
        assert docker.wait_for_watcher()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert not list(tmp_path.glob("rlconsole-events.*"))
    assert not list(tmp_path.glob("*events*"))


SLOW_MKTEMP = """#!/bin/sh
# mktemp that makes its file, says its name, then takes a while to exit: the window in
# which the loop has a file on disk but has not yet unlinked it
f="$TMPDIR/rlconsole-events.slow"
: >"$f"
echo "$f"
exec >&-
: >'{made}'
sleep 2
"""


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_a_loop_ended_while_it_makes_its_events_file_leaves_none(tmp_path: Path, shell: str) -> None:
    """A TERM (the console going away, sshd ending the session) while the loop's mktemp
    runs: the EXIT trap is set before the file exists and names what mktemp made, so
    nothing is left in $TMPDIR. (Before, a file made in that window stayed: one was found
    in a machine's /tmp after a run.)"""
    docker = FakeDocker(tmp_path / "docker")
    slow = tmp_path / "slow"
    slow.mkdir()
    made = tmp_path / "mktemp-ran"
    (slow / "mktemp").write_text(SLOW_MKTEMP.format(made=made))
    (slow / "mktemp").chmod(0o755)
    proc = _loop(tmp_path, docker, shell, first_on_path=slow)
    try:
        deadline = time.monotonic() + 30  # a bound, not a measurement
        while not made.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert made.exists(), "the loop never ran its mktemp"
        assert list(tmp_path.glob("rlconsole-events.*"))  # the window: the file is there
        os.kill(proc.pid, signal.SIGTERM)  # the loop's shell alone, mid-mktemp
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert not list(tmp_path.glob("rlconsole-events.*"))
