"""The log spool under contention (issue 15, Medium 6): one writer per job across
processes, readers follow the owner's spool, `status` never appends to a spool another
process owns, and a remote log that was truncated or replaced starts a new segment
with a visible marker, never silent duplicates.

Real parts: real processes holding real `flock`s, a real SSH server (in-process
asyncssh running /bin/sh) serving a real file as the head's driver log."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_node
from tui.core.job.watcher import JobWatcher
from tui.core.raypaths import driver_log_path
from tui.core.job.spool import LogSpool, SpoolNotOwned
from tui.core.profile import load_profile
from tui.core.ssh import SessionPool

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parent.parent
JOB = "raysubmit_contention"


# ------------------------------------------------------------------ helpers


def _profile(srv: Any, kit: Any, tmp_path: Path) -> Any:
    prof = load_profile(DATA / "good_profile.yaml")
    prof.nodes = [make_node("n1", srv.address, srv.port, kit.client_key)]
    prof.ssh.known_hosts = str(kit.known_hosts)
    prof.ssh.connect_timeout_s = 5
    prof.container.access = "direct"
    prof.ray.start_args = [f"--temp-dir={tmp_path / 'ray'}"]
    return prof


def _remote_log(prof: Any) -> Path:
    p = Path(driver_log_path(prof, JOB))
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


async def _until(cond: Any, what: str, tries: int = 600) -> None:
    """Wait for a condition (bounded: 600 x 0.05 s), without asserting on time."""
    for _ in range(tries):
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


_HOLDER = textwrap.dedent("""
    import sys
    from tui.core.job.spool import LogSpool
    s = LogSpool(sys.argv[1])
    print("owner" if s.owner else "reader", flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        s.append(line.encode())
        print("ok", flush=True)
""")


def _holder(path: Path) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], cwd=ROOT, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout is not None
    return p


def _stop(p: subprocess.Popen[str]) -> None:
    if p.poll() is None:
        assert p.stdin is not None
        p.stdin.write("quit\n")
        p.stdin.flush()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)


# ------------------------------------------------------------------ the lock


def test_second_process_reads_and_takes_over(tmp_path: Path) -> None:
    """Process A owns the spool; this one only reads (an append is refused), follows
    what A writes, and takes over when A is gone."""
    path = tmp_path / "spool" / "driver.log"
    a = _holder(path)
    try:
        assert a.stdout.readline().strip() == "owner"  # type: ignore[union-attr]
        mine = LogSpool(path)
        assert not mine.owner
        with pytest.raises(SpoolNotOwned):
            mine.append(b"dup\n")
        a.stdin.write("one\ntwo\n")  # type: ignore[union-attr]
        a.stdin.flush()  # type: ignore[union-attr]
        assert [a.stdout.readline().strip() for _ in range(2)] == ["ok", "ok"]  # type: ignore[union-attr]
        assert mine.refresh() == ["one", "two"] and mine.refresh() == []
        # a third process is a reader too, while A lives
        b = _holder(path)
        assert b.stdout.readline().strip() == "reader"  # type: ignore[union-attr]
        b.kill()
        b.wait(30)
    finally:
        _stop(a)
    assert mine.try_lock() and mine.owner
    mine.append(b"three\n")
    assert mine.tail(5) == ["one", "two", "three"]
    assert path.read_bytes() == b"one\ntwo\nthree\n"
    mine.close()


# ------------------------------------------------------------------ two watchers


async def test_two_consoles_one_spool_not_doubled(node_server, ssh_kit, tmp_path: Path) -> None:
    """Two consoles on one job (two watchers, two open spools): before, a 2000-line log
    became 4000 lines. Now one fetches, the other follows its spool: both see every
    line once, and the spool is the remote file byte for byte."""
    srv = await node_server()
    prof = _profile(srv, ssh_kit, tmp_path)
    remote = _remote_log(prof)
    remote.write_bytes(b"".join(f"line {i}\n".encode() for i in range(1000)))
    root = tmp_path / "spool"
    got1: list[str] = []
    got2: list[str] = []
    async with SessionPool(prof) as pool:
        w1 = JobWatcher(prof, pool, JOB, on_lines=got1.extend, root=root)
        w2 = JobWatcher(prof, pool, JOB, on_lines=got2.extend, root=root)
        assert w1.spool.owner and not w2.spool.owner
        t1 = asyncio.create_task(w1.follow_log())
        t2 = asyncio.create_task(w2.follow_log())
        try:
            with remote.open("ab") as f:
                f.write(b"".join(f"line {i}\n".encode() for i in range(1000, 2000)))
            await _until(lambda: len(got1) >= 2000 and len(got2) >= 2000, "both saw 2000 lines")
        finally:
            for t in (t1, t2):
                t.cancel()
            await asyncio.gather(t1, t2, return_exceptions=True)
    want = [f"line {i}" for i in range(2000)]
    assert got1 == want and got2 == want
    assert (root / JOB / "driver.log").read_bytes() == remote.read_bytes()
    w1.spool.close()
    w2.spool.close()


_CONSOLE = textwrap.dedent("""
    import asyncio, getpass, sys
    from tui.core.job.watcher import JobWatcher
    from tui.core.profile import Node, SshEndpoint, load_profile
    from tui.core.ssh import SessionPool

    data, host, port, key, known, ray, root, job = sys.argv[1:]
    prof = load_profile(data)
    prof.nodes = [Node(name="n1", address=host, gpus=8, role="head",
                       ssh=SshEndpoint(host=host, port=int(port), user=getpass.getuser(), identity=[key]))]
    prof.ssh.known_hosts = known
    prof.container.access = "direct"
    prof.ray.start_args = ["--temp-dir=" + ray]

    async def main():
        async with SessionPool(prof) as pool:
            seen = []
            w = JobWatcher(prof, pool, job, on_lines=seen.extend, root=__import__("pathlib").Path(root))
            print("owner" if w.spool.owner else "reader", flush=True)
            task = asyncio.create_task(w.follow_log())
            while (await asyncio.to_thread(sys.stdin.readline)).strip() != "quit":
                print(len(seen), flush=True)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
""")


async def test_status_never_appends_to_a_console_owned_spool(node_server, ssh_kit, tmp_path: Path) -> None:
    """A console (another process) follows the job; `status` (a one-shot follow, as
    `rlconsole status` does it) while the remote log grows: it reads the console's
    spool and appends nothing. Before: duplicates, and every later offset skewed."""
    srv = await node_server()
    prof = _profile(srv, ssh_kit, tmp_path)
    remote = _remote_log(prof)
    remote.write_bytes(b"".join(f"a {i}\n".encode() for i in range(500)))
    root = tmp_path / "spool"
    console = subprocess.Popen(
        [sys.executable, "-c", _CONSOLE, str(DATA / "good_profile.yaml"), srv.address, str(srv.port),
         str(ssh_kit.client_key), str(ssh_kit.known_hosts), str(tmp_path / "ray"), str(root), JOB],
        cwd=ROOT, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=open(tmp_path / "console.err", "w"))
    assert console.stdin is not None and console.stdout is not None

    def console_seen() -> int:
        console.stdin.write("n\n")  # type: ignore[union-attr]
        console.stdin.flush()  # type: ignore[union-attr]
        return int(console.stdout.readline())  # type: ignore[union-attr]

    try:
        assert await asyncio.to_thread(console.stdout.readline) == "owner\n"
        for _ in range(600):
            if await asyncio.to_thread(console_seen) >= 500:
                break
            await asyncio.sleep(0.05)
        with remote.open("ab") as f:  # the log grows while `status` runs
            f.write(b"".join(f"b {i}\n".encode() for i in range(500)))
        async with SessionPool(prof) as pool:
            st = JobWatcher(prof, pool, JOB, wall_clock=False, root=root)
            assert not st.spool.owner
            st.reattach(0)
            await st.follow_log(once=True)
            assert st.spool.line_count <= 1000
            st.spool.close()
        for _ in range(600):
            if await asyncio.to_thread(console_seen) >= 1000:
                break
            await asyncio.sleep(0.05)
    finally:
        console.stdin.write("quit\n")
        console.stdin.flush()
        try:
            console.wait(30)
        except subprocess.TimeoutExpired:
            console.kill()
            console.wait(30)
    assert (root / JOB / "driver.log").read_bytes() == remote.read_bytes()


# ------------------------------------------------------------------ resync


async def test_truncated_replaced_rewritten_start_marked_segments(node_server, ssh_kit, tmp_path: Path) -> None:
    """A remote log that shrank, was replaced (another inode), or rewritten in place
    (same size, other first bytes): each starts a new segment behind a marker line.
    Before: `tail -c +OFFSET` re-sent nothing (shrunk) or the new file's tail after the
    old content, silently."""
    srv = await node_server()
    prof = _profile(srv, ssh_kit, tmp_path)
    remote = _remote_log(prof)
    root = tmp_path / "spool"
    got: list[str] = []
    async with SessionPool(prof) as pool:
        w = JobWatcher(prof, pool, JOB, on_lines=got.extend, root=root)
        remote.write_bytes(b"old 1\nold 2\nold 3\n")
        await w.follow_log(once=True)
        assert got == ["old 1", "old 2", "old 3"]

        remote.write_bytes(b"new 1\n")  # truncated in place (same inode), shorter
        await w.follow_log(once=True)
        assert got[3].startswith("[rlconsole] ---- the job's remote log was truncated")
        assert got[4:] == ["new 1"]

        tmp = remote.with_name("next.log")  # replaced: another file (inode) at the path
        tmp.write_bytes(b"other 1\nother 2\n")
        os.replace(tmp, remote)
        await w.follow_log(once=True)
        assert "replaced" in got[5] and got[6:] == ["other 1", "other 2"]

        with remote.open("r+b") as f:  # rewritten in place: same inode and size
            f.write(b"OTHER")
        with remote.open("ab") as f:
            f.write(b"more\n")
        await w.follow_log(once=True)
        assert "rewritten" in got[8] and got[9:] == ["OTHER 1", "other 2", "more"]

        # nothing twice: a further pass fetches nothing; a restart (new process) too
        await w.follow_log(once=True)
        assert len(got) == 12
        w.spool.close()
        again: list[str] = []
        w2 = JobWatcher(prof, pool, JOB, on_lines=again.extend, root=root)
        with remote.open("ab") as f:
            f.write(b"last\n")
        await w2.follow_log(once=True)
        assert again == ["last"]
        w2.spool.close()
    lines = (root / JOB / "driver.log").read_text().splitlines()
    assert sum(1 for x in lines if x.startswith("[rlconsole] ----")) == 3
    assert lines[-4:] == ["OTHER 1", "other 2", "more", "last"]


async def test_live_follow_sees_replacement_once(node_server, ssh_kit, tmp_path: Path) -> None:
    """While following: the file is replaced under the follower (what `tail -F` would
    re-send from its start). The marker, then the new file's lines, each once."""
    srv = await node_server()
    prof = _profile(srv, ssh_kit, tmp_path)
    remote = _remote_log(prof)
    remote.write_bytes(b"first 1\nfirst 2\npartial")
    got: list[str] = []
    async with SessionPool(prof) as pool:
        w = JobWatcher(prof, pool, JOB, on_lines=got.extend, root=tmp_path / "spool")
        task = asyncio.create_task(w.follow_log())
        try:
            await _until(lambda: len(got) >= 2, "the first lines")
            tmp = remote.with_name("new.log")
            tmp.write_bytes(b"second 1\nsecond 2\n")
            os.replace(tmp, remote)
            await _until(lambda: len(got) >= 6, "the new file's lines")
            with remote.open("ab") as f:
                f.write(b"second 3\n")
            await _until(lambda: len(got) >= 7, "an appended line")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        w.spool.close()
    assert got[:2] == ["first 1", "first 2"]
    assert got[2] == "partial" and "replaced" in got[3]  # the cut line ends before the marker
    assert got[4:] == ["second 1", "second 2", "second 3"]


def test_a_dropped_spool_gives_its_lock_back(tmp_path: Path) -> None:
    """A spool dropped without close() (a one-shot `status` run in-process, a watcher
    replaced) must not keep the job's lock for the process's life: the next one owns."""
    import gc

    path = tmp_path / "driver.log"
    first = LogSpool(path)
    assert first.owner
    del first
    gc.collect()
    second = LogSpool(path)
    assert second.owner
    second.close()


async def test_tb_mirror_has_one_writer(node_server, ssh_kit, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The TensorBoard mirror sits next to the spool and follows the same rule: only the
    spool's owner fetches; another console reads the owner's copy (two appending the
    same remote bytes would double the mirror)."""
    from tui.core.job import mirror
    from tui.sim.tbwrite import ScalarWriter

    monkeypatch.setattr(mirror, "is_local", lambda profile: False)  # a console elsewhere
    srv = await node_server()
    prof = _profile(srv, ssh_kit, tmp_path)
    tb = tmp_path / "remote-tb"
    prof.env["TENSORBOARD_DIR"] = str(tb)
    w = ScalarWriter(str(tb), sync=True)
    for step in range(1, 6):
        w.add_scalars(step, {"critic/rewards/mean": step / 10})
    w.flush()
    w.close()
    root = tmp_path / "spool"
    async with SessionPool(prof) as pool:
        owner = JobWatcher(prof, pool, JOB, root=root)
        reader = JobWatcher(prof, pool, JOB, root=root)
        assert owner.spool.owner and not reader.spool.owner
        await reader.poll_scalars_once()
        assert not list((root / JOB / "tb").rglob("*tfevents*"))  # the reader wrote nothing
        await owner.poll_scalars_once()
        await reader.poll_scalars_once()
        assert sorted(reader._reader.by_step) == [1, 2, 3, 4, 5]
        for f in tb.rglob("*tfevents*"):
            assert (root / JOB / "tb" / f.relative_to(tb)).read_bytes() == f.read_bytes()
        owner.spool.close()
        reader.spool.close()
