"""The job log over SSH: resumes byte for byte after a cut mid-line, a dropped link or a
console restart; no line lost, none repeated. Real SSH (the simulated cluster's head),
a real file on it; the console's spool is a byte-exact copy."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from tui.core.job.watcher import JobWatcher
from tui.core.raypaths import driver_log_path
from tui.core.profile import load_profile
from tui.core.ssh import SessionPool

pytestmark = pytest.mark.integration


def _direct_profile(sim_as_up, tmp_path: Path):
    """The sim's profile with commands sent straight to the node (no container needed)."""
    data = yaml.safe_load(Path(sim_as_up.profile_path).read_text())
    data["container"]["access"] = "direct"
    p = tmp_path / "direct.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_profile(p)


async def test_log_resumes_after_cut_mid_line_and_restart(sim_as_up, tmp_path: Path) -> None:
    prof = _direct_profile(sim_as_up, tmp_path)
    job = "raysubmit_cutTest"
    remote_log = Path(driver_log_path(prof, job))
    remote_log.parent.mkdir(parents=True, exist_ok=True)
    remote_log.write_bytes(b"(TaskRunner pid=7) step:1 - a:1.0\n\xe4\xb8\xad line two\r\nhalf of li")
    got: list[str] = []
    async with SessionPool(prof) as pool:
        w = JobWatcher(prof, pool, job, on_lines=got.extend, root=tmp_path / "spool")
        await w.follow_log(once=True)
        assert got == ["(TaskRunner pid=7) step:1 - a:1.0", "中 line two"]
        with remote_log.open("ab") as f:
            f.write(b"ne three\n(TaskRunner pid=7) step:2 - a:2.0\n")
        await w.follow_log(once=True)
        assert got[2:] == ["half of line three", "(TaskRunner pid=7) step:2 - a:2.0"]
        assert sorted(w.parser.steps) == [1, 2]
    w.spool.close()  # the console exits (its spool lock goes with it)

    # the console restarts: the spool is read back, only new bytes are fetched
    with remote_log.open("ab") as f:
        f.write(b"line four\n")
    again: list[str] = []
    async with SessionPool(prof) as pool:
        w2 = JobWatcher(prof, pool, job, on_lines=again.extend, root=tmp_path / "spool")
        w2.reattach()
        assert w2.spool.line_count == 4 and sorted(w2.parser.steps) == [1, 2]
        await w2.follow_log(once=True)
    assert again == ["line four"]
    assert (tmp_path / "spool" / job / "driver.log").read_bytes() == remote_log.read_bytes()


async def test_follow_survives_a_dropped_connection(sim_as_up, tmp_path: Path) -> None:
    prof = _direct_profile(sim_as_up, tmp_path)
    job = "raysubmit_dropTest"
    remote_log = Path(driver_log_path(prof, job))
    remote_log.parent.mkdir(parents=True, exist_ok=True)
    remote_log.write_bytes(b"")
    got: list[str] = []
    async with SessionPool(prof, backoff_initial_s=0.1, backoff_max_s=0.5) as pool:
        w = JobWatcher(prof, pool, job, on_lines=got.extend, root=tmp_path / "spool")
        task = asyncio.create_task(w.follow_log())

        async def wait_for(n: int) -> None:
            for _ in range(300):
                if len(got) >= n:
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"expected {n} lines, got {got}")

        with remote_log.open("ab") as f:
            f.write(b"one\ntwo\nthr")
        await wait_for(2)
        pool.head.drop("test: link cut")  # the connection goes away mid-line
        with remote_log.open("ab") as f:
            f.write(b"ee\nfour\n")
        await wait_for(4)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert got == ["one", "two", "three", "four"]


async def test_remote_scalars_mirror_incrementally(sim_as_up, tmp_path: Path) -> None:
    """Event files on the head are fetched over SSH by byte offset: only what was
    appended since the last sync travels, and the local copy equals the remote file."""
    from tui.core.job.mirror import RemoteTbMirror
    from tui.core.job.tbreader import ScalarReader
    from tui.sim.tbwrite import ScalarWriter

    prof = _direct_profile(sim_as_up, tmp_path)
    remote_dir = Path(sim_as_up.state_dir) / "shared" / "tb-mirror-test"
    w = ScalarWriter(str(remote_dir), sync=True)
    for step in range(1, 11):
        w.add_scalars(step, {"critic/rewards/mean": step / 10, "perf/throughput": 80.0 + step})
    w.flush()
    async with SessionPool(prof) as pool:
        m = RemoteTbMirror(pool.head, str(remote_dir), tmp_path / "local", container=False)
        first = await m.sync()
        assert first > 0
        reader = ScalarReader(tmp_path / "local")
        reader.update()
        assert [r["step"] for r in reader.rows()] == list(range(1, 11))
        for step in range(11, 14):
            w.add_scalars(step, {"critic/rewards/mean": step / 10})
        w.flush()
        second = await m.sync()
        assert 0 < second < first
        assert await m.sync() == 0
    w.close()
    reader.update()
    assert reader.rows()[-1] == {"step": 13, "metrics": {"critic/rewards/mean": pytest.approx(1.3)}}
    for f in remote_dir.rglob("*tfevents*"):
        assert (tmp_path / "local" / f.relative_to(remote_dir)).read_bytes() == f.read_bytes()
