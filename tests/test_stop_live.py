"""`stop` of a job that is still starting, on the real Ray of the worker's sim (`ray_sim`).

A job stopped a second or two after its submit is STOPPED at once, but its actors (the
TaskRunner, the workers that hold the cards) may still be coming up; they took their cards
seconds later. A CI run: `stop` said "every card is free", and the next module's preflight
found all 32 cards busy with the stopped job's workers (its TaskRunner also went on
writing steps into the TensorBoard dir the next console read). `stop` now waits until Ray
has no actor of the job left (its state API) before it looks at the cards, and only then
says they are free: here they must stay free after it says so.

Ray's own stop can also miss the driver itself, which then trains on while Ray calls the
job STOPPED (`tui/core/actions/stray_driver.py`); `stop` ends it. The rounds read this
machine's processes for it; a planted stray driver makes the case certain, next to
another run's process that must be left alone.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tui.cli import main
from tui.core.profile import load_profile
from tui.core.rayapi import RUN_TAG_KEY

pytestmark = pytest.mark.integration

FREE_FOR_S = 6.0
"""How long the cards must stay free, and Ray hold no actor of the job, after `stop` said
the cards are free (without the wait, the stopped job's 4 actors were there at the first
look after it)."""


def _profile(ray_sim: Any, tmp_path: Path) -> Path:
    """The sim's profile with a long run (its steps never end the job by themselves)."""
    data = yaml.safe_load(Path(ray_sim.profile_path).read_text())
    data["training"]["overrides"]["trainer"]["total_epochs"] = 1000
    data.setdefault("env", {})["RLCONSOLE_SIM_STEP_S"] = "0.5"
    path = tmp_path / "stop-live.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


async def _busy_and_actors(prof: Any, job_id: str) -> tuple[dict[str, list[str]], int | None]:
    from tui.core.actions.jobs import job_client, leftover_processes
    from tui.core.actions.remote import PoolRemote
    from tui.core.ssh import SessionPool

    async with SessionPool(prof) as pool:
        remote = PoolRemote(pool, prof)
        client = await job_client(remote)
        trace = await client.job_trace(job_id)
        assert trace is not None, f"Ray knows no job {job_id}"
        return await leftover_processes(prof, remote), await client.live_actors(trace.ray_job_id)


def _stays_free(prof: Any, job_id: str, out: str) -> None:
    """For FREE_FOR_S after `stop` said every card is free: no card busy, no actor of the
    job alive, no process of it up."""
    end = time.monotonic() + FREE_FOR_S
    while time.monotonic() < end:
        busy, actors = asyncio.run(asyncio.wait_for(_busy_and_actors(prof, job_id), 60))
        left = _carrying(job_id)
        assert not busy and actors == 0 and not left, \
            (f"after stop said every card is free: busy {busy}, {actors} live actor(s) of {job_id}, "
             f"processes of it still up: {left}\n{out[-2000:]}")
        time.sleep(1.0)


def _submitted(ray_sim: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Any, Any]:
    """A long job submitted on the sim's Ray (`_profile`): the profile's path, the profile
    and the job's run record."""
    from tui.core.job.history import last_run

    path = _profile(ray_sim, tmp_path)
    prof = load_profile(path)
    rc = main(["submit", "--profile", str(path), "--yes", "--skip-checks"])
    assert rc == 0, capsys.readouterr().out[-2000:]
    rec = last_run(prof.name)
    assert rec is not None
    capsys.readouterr()
    return path, prof, rec


def test_a_job_stopped_while_it_starts_leaves_every_card_free(ray_sim: Any, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Stopped at once after its submit, a job's actors outlived the stop's look about every
    other time without the actors' wait (4 live actors, measured), and its driver outlived
    Ray's stop in 6 of 14 such stops under load (the next test makes that case certain)."""
    path, prof, rec = _submitted(ray_sim, tmp_path, capsys)
    # stopped at once: its driver and actors are still on their way up
    rc = main(["stop", "--profile", str(path), "--yes"])
    out = capsys.readouterr().out
    assert rc == 0 and "every card is free" in out.splitlines()[-1], out[-2000:]
    _stays_free(prof, rec.job_id, out)


def _carrying(submission_id: str) -> list[int]:
    """The processes on this machine (the sim's nodes share it) whose environment holds the
    job's Ray job config: its driver and what that started. Read here, not with the
    product's scan: Ray's stop can miss a driver that was starting (measured: 6 of 14
    stops a second or two after the submit, under load; it went on and took all 32 cards)."""
    needle = f'"job_submission_id": "{submission_id}"'.encode()
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "environ").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


PLANT = ('RAY_JOB_CONFIG_JSON_ENV_VAR="$1" sleep 120 </dev/null >/dev/null 2>&1 & echo $!')
"""Starts, in the head's container, a process with the environment Ray gives a job's driver
(its job config, the job's metadata in it): what a driver that Ray's stop missed looks like
there. Its pid (the container's) on stdout."""


async def _on_head(prof: Any, *argv: str) -> str:
    from tui.core.actions.remote import PoolRemote
    from tui.core.ssh import SessionPool

    async with SessionPool(prof) as pool:
        r = await PoolRemote(pool, prof).run(prof.head.name, list(argv), container=True, timeout=30)
        return r.stdout.strip() if r.rc == 0 else f"rc={r.rc}: {r.stderr.strip()}"


def _stray(prof: Any, submission_id: str, run_tag: str) -> str:
    config = {"runtime_env": {}, "metadata": {"job_submission_id": submission_id, "job_name": submission_id,
                                              RUN_TAG_KEY: run_tag}}
    pid = asyncio.run(asyncio.wait_for(_on_head(prof, "sh", "-c", PLANT, "sh", json.dumps(config)), 60))
    assert pid.isdigit(), pid
    return pid


def _alive(prof: Any, pid: str) -> bool:
    return asyncio.run(asyncio.wait_for(_on_head(prof, "sh", "-c", 'kill -0 "$1" 2>/dev/null && echo up || echo gone',
                                                 "sh", pid), 60)) == "up"


def test_stop_ends_the_named_jobs_driver_that_ray_missed_and_nothing_else(
        ray_sim: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The stray driver of the job being stopped is ended and named; a process of another
    run (the same submission id, another run's tag: another cluster's job on a shared
    machine) is left alone."""
    from tui.core.actions.jobs import job_client
    from tui.core.actions.remote import PoolRemote
    from tui.core.actions.stray_driver import driver_node, job_processes
    from tui.core.ssh import SessionPool

    path, prof, rec = _submitted(ray_sim, tmp_path, capsys)

    async def driver_seen() -> tuple[Any, list[str]]:
        """The job's trace once its driver has joined Ray, and what the product's scan
        finds of it on the driver's node then."""
        async with SessionPool(prof) as pool:
            remote = PoolRemote(pool, prof)
            client = await job_client(remote)
            for _ in range(240):  # the caller's timeout bounds it first
                t = await client.job_trace(rec.job_id)
                if t is not None and t.ray_job_id:
                    return t, await job_processes(remote, driver_node(prof, t), t)
                await asyncio.sleep(0.5)
            raise AssertionError(f"{rec.job_id}'s driver never joined Ray")

    t, seen = asyncio.run(asyncio.wait_for(driver_seen(), 120))
    assert len(t.run_tag) == 32, f"submit gave the job no run tag: {t}"
    # the scan finds Ray's real driver by the tag Ray put in its environment, and so does
    # a read of this machine's processes by Ray's own submission id
    assert any("verl.trainer.main_ppo" in line for line in seen), seen
    assert _carrying(rec.job_id), "no process holds Ray's job config of the running job"
    stray, other = _stray(prof, rec.job_id, t.run_tag), _stray(prof, rec.job_id, "0" * 32)
    late = ""
    try:
        capsys.readouterr()
        rc = main(["stop", "--profile", str(path), "--yes"])
        out = capsys.readouterr().out
        assert rc == 0 and "every card is free" in out.splitlines()[-1], out[-2000:]
        assert f"but its driver was still up (Ray's stop misses a driver that is starting); ended it: {stray} sleep 120" \
            in out, out[-2000:]
        assert not _alive(prof, stray)
        assert _alive(prof, other), "stop ended a process of another run"
        # Ray's own `ray job stop` misses it the same way: with the job ended for Ray, a
        # bare `stop` names what is left and ends nothing; `stop --job` (named) ends it
        late = _stray(prof, rec.job_id, t.run_tag)
        rc = main(["stop", "--profile", str(path), "--yes"])
        out = capsys.readouterr().out
        assert rc == 0 and f"but its driver is still up: {late} sleep 120" in out and _alive(prof, late), out[-2000:]
        rc = main(["stop", "--profile", str(path), "--yes", "--job", rec.job_id])
        out = capsys.readouterr().out
        assert rc == 0 and f"ended it: {late} sleep 120" in out and "every card is free" in out.splitlines()[-1], \
            out[-2000:]
        assert not _alive(prof, late) and _alive(prof, other)
    finally:
        asyncio.run(asyncio.wait_for(_on_head(prof, "sh", "-c", 'kill -KILL "$@" 2>/dev/null; true',
                                              "sh", *(p for p in (stray, other, late) if p)), 60))
    _stays_free(prof, rec.job_id, out)
