"""The sim's `ray start` takes turns on the machine (tui/sim/raywrap.py): at most
START_SLOTS starts at once, whichever sims they belong to, so that one node's start is not
timed out behind the others' (Ray gives a raylet 30 s to register). The real `ray start`
is exercised by every sim test; here a stand-in `ray` records when each start ran."""

from __future__ import annotations

import threading
from pathlib import Path

from tui.sim.raywrap import START_SLOTS, start


def _fake_ray(tmp_path: Path) -> Path:
    ray = tmp_path / "ray"
    ray.write_text("#!/bin/sh\n"
                   f"echo \"begin $(date +%s.%N) $*\" >> '{tmp_path / 'log'}'\n"
                   "sleep 0.6\n"
                   f"echo \"end $(date +%s.%N) $*\" >> '{tmp_path / 'log'}'\n"
                   "exit 3\n")
    ray.chmod(0o755)
    return ray


def _most_at_once(log: Path) -> int:
    events = sorted((float(t), 1 if kind == "begin" else -1)
                    for kind, t, *_ in (line.split() for line in log.read_text().splitlines()))
    now = most = 0
    for _, d in sorted(events, key=lambda e: (e[0], e[1])):  # an end before a begin at the same time
        now += d
        most = max(most, now)
    return most


def test_starts_take_turns_and_keep_their_exit_code(tmp_path: Path) -> None:
    ray, locks = _fake_ray(tmp_path), tmp_path / "locks"
    codes: list[int] = []
    threads = [threading.Thread(target=lambda i=i: codes.append(start(str(ray), ["start", f"--n={i}"], str(locks))))
               for i in range(START_SLOTS + 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes == [3] * (START_SLOTS + 2)  # each start's own exit code
    assert _most_at_once(tmp_path / "log") == START_SLOTS


def test_a_blocking_start_takes_no_turn(tmp_path: Path) -> None:
    """`ray start --block` never returns: holding a slot would stop every later start."""
    import fcntl

    ray, locks = _fake_ray(tmp_path), tmp_path / "locks"
    locks.mkdir()
    held = [open(locks / f"slot{i}.lock", "a") for i in range(START_SLOTS)]  # noqa: SIM115
    try:
        for f in held:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert start(str(ray), ["start", "--block"], str(locks)) == 3  # every slot taken, and it ran
    finally:
        for f in held:
            f.close()
