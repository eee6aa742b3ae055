"""Keys that kill a job ask first, and two consoles cannot both submit (issue 15, item 9),
on the simulated cluster: real SSH, real dockerd, real Ray.

* setup-ray on a Ray that is up but not as the profile wants used to run
  `ray stop --force` on every node at once, killing the running job. Now it stops short
  and says what it would ask, naming the job; the job keeps running. Headless, the y/N
  prompt (or --yes) is that confirmation; without a terminal and --yes it refuses.
* Two consoles pressing `s` a quarter second apart both listed "nothing running" and
  both submitted. Now a submit holds a reservation on the head (an atomic `mkdir` under
  Ray's temp dir) from before the list until Ray has the job: a held reservation refuses
  with a message naming it, and two concurrent submits give exactly one job.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tui.cli import main
from tui.core.actions.jobs import job_client, list_jobs, submit_lock_path
from tui.core.state import ACTIVE_JOB_STATUSES
from tui.core.actions.registry import run_action
from tui.core.profile import Profile, load_profile

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def guard_sim(ray_sim: Any) -> Path:
    """The worker's shared sim with Ray up (`ray_sim`; the test's own containers,
    convert and setup-ray find them done). The test ends stopping Ray, which `ray_sim`
    starts again for the next module."""
    return Path(ray_sim.profile_path)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


async def console(profile: Profile, fn: Any) -> Any:
    """One console's connections to the cluster (its own SSH pool), for `fn(remote)`."""
    from tui.core.actions.remote import PoolRemote
    from tui.core.ssh import SessionPool

    pool = SessionPool(profile)
    try:
        await asyncio.wait_for(pool.open(), 60)
        return await fn(PoolRemote(pool, profile))
    finally:
        await asyncio.wait_for(pool.close(), 60)


async def drive(profile: Profile, name: str, **opts: Any) -> list[Any]:
    async def go(remote: Any) -> list[Any]:
        return [ev async for ev in run_action(name, profile, remote, **opts)]
    return await console(profile, lambda r: asyncio.wait_for(go(r), 300))


async def active_jobs(profile: Profile) -> list[str]:
    async def go(remote: Any) -> list[str]:
        return [j.id for j in await list_jobs(await job_client(remote)) if j.status in ACTIVE_JOB_STATUSES]
    return await console(profile, go)


async def sh_on_head(profile: Profile, script: str) -> Any:
    async def go(remote: Any) -> Any:
        return await remote.run(profile.head.name, ["sh", "-c", script, "sh", submit_lock_path(profile)],
                                container=True, timeout=60)
    return await console(profile, go)


def test_submit_reservation_and_setup_ray_confirmation(guard_sim: Path, ray_sim: Any, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    P = ["--profile", str(guard_sim)]
    prof = load_profile(guard_sim)
    for action in ("containers", "convert", "setup-ray"):
        rc, out, _ = run([action, *P, "--yes"], capsys)
        assert rc == 0, out[-2000:]

    # -- two consoles submit at the same moment (different submission ids, as two
    #    consoles a second apart would have): exactly one job
    data = yaml.safe_load(guard_sim.read_text())
    data["training"]["submission_prefix"] = "second-console"
    second = tmp_path / "second.yaml"
    second.write_text(yaml.safe_dump(data, sort_keys=False))
    prof2 = load_profile(second)

    async def both() -> list[list[Any]]:
        return list(await asyncio.gather(drive(prof, "submit", skip_checks=True),
                                         drive(prof2, "submit", skip_checks=True)))
    a, b = asyncio.run(both())
    verdicts = sorted([a[-1].kind, b[-1].kind])
    assert verdicts == ["done", "fail"], [a[-1].one_line(), b[-1].one_line()]
    refused = a[-1] if a[-1].kind == "fail" else b[-1]
    assert ("another console is submitting" in refused.message
            or "a job is already running" in refused.message), refused.message
    assert len(asyncio.run(active_jobs(prof))) == 1
    # the reservation was released: nothing is left on the head
    assert asyncio.run(sh_on_head(prof, 'test ! -e "$1"')).ok
    rc, out, _ = run(["stop", *P, "--yes"], capsys)
    assert rc == 0, out[-2000:]

    # -- a reservation held by another console: refused, and the message names it
    r = asyncio.run(sh_on_head(prof, 'mkdir -p "$1" && echo "othermachine pid 4242" > "$1/owner"'))
    assert r.ok, r.stderr
    rc, out, _ = run(["submit", *P, "--yes", "--skip-checks"], capsys)
    last = out.splitlines()[-1]
    assert rc == 1 and "another console is submitting" in last and "othermachine pid 4242" in last, last
    assert submit_lock_path(prof) in last
    assert asyncio.run(active_jobs(prof)) == []
    assert asyncio.run(sh_on_head(prof, 'rm -rf -- "$1"')).ok
    rc, out, _ = run(["submit", *P, "--yes", "--skip-checks"], capsys)
    assert rc == 0, out[-2000:]
    jobs = asyncio.run(active_jobs(prof))
    assert len(jobs) == 1, jobs
    job_id = jobs[0]

    # -- setup-ray with a profile Ray does not match: stops short, names the job, kills nothing
    data = yaml.safe_load(guard_sim.read_text())
    data.setdefault("ray", {})["num_gpus"] = ray_sim.cards // 2  # half the GPUs Ray has: "not as the profile wants"
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(data, sort_keys=False))
    evs = asyncio.run(drive(load_profile(other), "setup-ray"))
    last_ev = evs[-1]
    assert last_ev.kind == "fail" and last_ev.data.get("confirm"), last_ev.one_line()
    assert job_id in last_ev.data["confirm"] and "ray stop --force" in last_ev.data["confirm"]
    assert not any("ray stop" in ev.message for ev in evs if ev.kind == "node")
    assert asyncio.run(active_jobs(prof)) == [job_id]
    # headless without a terminal and without --yes: refused before anything runs
    rc, _, err = run(["setup-ray", "--profile", str(other)], capsys)
    assert rc == 2 and "refusing without --yes" in err
    assert asyncio.run(active_jobs(prof)) == [job_id]

    # -- and the job is stopped and Ray with it (what --yes would have done, asked for)
    rc, out, _ = run(["stop", *P, "--yes", "--cluster"], capsys)
    assert rc == 0, out[-2000:]
    st = json.loads(run(["status", *P, "--json"], capsys)[1])
    assert not (st.get("ray") or {}).get("available")


def test_the_reservation_script_says_held_while_its_holder_is_writing(tmp_path: Path) -> None:
    """The holder makes the directory, then writes its owner file: a second console that
    looks in between (seen in CI, under load) must hear "held", not fail on the missing
    file (`head` exited 1, so the submit said "cannot reserve ...: @@held 0")."""
    import subprocess

    from tui.core.actions.jobs import LOCK_SCRIPT

    lock = tmp_path / "ray" / "rlconsole-submit.lock"

    def take(who: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", LOCK_SCRIPT, "sh", str(lock), who, "300"], capture_output=True,
                              text=True, timeout=30)

    first = take("console A")
    assert (first.returncode, first.stdout) == (0, "@@taken\n")
    second = take("console B")
    assert second.returncode == 0 and second.stdout.startswith("@@held ") and second.stdout.endswith("console A\n")
    (lock / "owner").unlink()  # the holder between its mkdir and its owner file
    between = take("console B")
    assert between.returncode == 0 and between.stdout.startswith("@@held "), (between.returncode, between.stdout)
