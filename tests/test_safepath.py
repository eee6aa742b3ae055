"""Remote-derived names never become paths outside their directory (issue 15, High 1-2).

A node is untrusted: the TensorBoard folder's file names (from the head's `find`) and
Ray job ids reach the console's disk as the mirror's files and the spool's directories.
Real SSH (an in-process asyncssh server running a real /bin/sh); for the property tests a
hostile node whose every file "exists" (its `tail` answers anything), so a name that
escaped the rule would be written, not merely fail to read."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import make_node
from tui.core.profile import load_profile
from tui.core.safepath import UnsafeName, check_name, confined, open_confined, safe_job_id

DATA = Path(__file__).resolve().parent / "data"

# ------------------------------------------------------------------ the rule itself


@pytest.mark.parametrize("name", [
    "", ".", "..", "/etc/passwd", "a/../../b", "../x", "a/./b", "a//b", "a\nb", "a\rb", "a\0b",
    "a\x1bb", "a\x7fb", "a\x85b", "a\\b", "-rf", "a/-x", "x" * 256, "a/" * 600,
])
def test_check_name_refuses(name: str) -> None:
    with pytest.raises(UnsafeName):
        check_name(name, max_parts=1000)


@pytest.mark.parametrize("name", ["raysubmit_abc123", "02000000", "run 1/events.out.tfevents.1.h",
                                  "中文/事件.tfevents", "a..b", ".hidden"])
def test_check_name_accepts(name: str) -> None:
    assert check_name(name, max_parts=4) == name


def test_check_name_not_a_string() -> None:
    with pytest.raises(UnsafeName):
        safe_job_id(12345)
    with pytest.raises(UnsafeName):
        safe_job_id("a/b")


def test_confined_refuses_symlink_out(tmp_path: Path) -> None:
    base = tmp_path / "base"
    out = tmp_path / "outside"
    base.mkdir()
    out.mkdir()
    (base / "link").symlink_to(out)
    with pytest.raises(UnsafeName):
        confined(base, "link/x.tfevents", max_parts=2)
    (base / "f").symlink_to(out / "target")
    with pytest.raises(UnsafeName):
        confined(base, "f")
    (base / "inner").mkdir()
    (base / "ok").symlink_to(base / "inner")
    assert confined(base, "ok/x", max_parts=2) == base / "ok" / "x"
    # a symlink planted inside (to a file inside) is still not followed at open
    (base / "inner" / "real").write_text("")
    (base / "s").symlink_to(base / "inner" / "real")
    with pytest.raises(OSError):
        open_confined(base, "s", os.O_WRONLY | os.O_APPEND)


# ------------------------------------------------------------------ the TB mirror


def test_parse_scan_refuses_absolute_and_climbing_names() -> None:
    from tui.core.job.mirror import parse_scan

    out = ("10 ./ok/events.out.tfevents.1\n"
           "99 /etc/evil.tfevents\n"
           "99 ./../../x.tfevents\n"
           "99 ../x.tfevents\n"
           "99 ./a/./b.tfevents\n"
           "@@ckpt=7\n")
    sizes, ckpt = parse_scan(out)
    assert sizes == {"ok/events.out.tfevents.1": 10} and ckpt == 7


def _kit_profile(srv: Any, kit: Any, tmp_path: Path) -> Any:
    """A one-node profile for an in-process SSH server, commands run directly."""
    prof = load_profile(DATA / "good_profile.yaml")
    prof.nodes = [make_node("n1", srv.address, srv.port, kit.client_key)]
    prof.ssh.known_hosts = str(kit.known_hosts)
    prof.ssh.connect_timeout_s = 5
    prof.container.access = "direct"
    return prof


async def test_mirror_newline_dir_cannot_write_outside(node_server, ssh_kit, tmp_path: Path) -> None:
    """The reported attack: a directory in the run's TB folder whose name holds a newline
    and an absolute path; `find` prints one record that reads as two lines, the second
    one `SIZE /absolute/...`. Before: the console appended remote bytes there."""
    from tui.core.job.mirror import RemoteTbMirror
    from tui.core.ssh import NodeSession

    remote = tmp_path / "remote"
    victim = tmp_path / "victim"
    victim.mkdir()
    evil_dir = remote / f"x\n5 {victim}"
    evil_dir.mkdir(parents=True)
    (evil_dir / "t.tfevents.1").write_bytes(b"PWNED")
    # what the console then reads remotely: {remote}//{victim}/t.tfevents.1
    (remote / str(victim).lstrip("/")).mkdir(parents=True)
    (remote / str(victim).lstrip("/") / "t.tfevents.1").write_bytes(b"PWNED")
    (remote / "good").mkdir()
    (remote / "good" / "e.tfevents.2").write_bytes(b"fine")
    srv = await node_server()
    s = NodeSession(make_node("n", srv.address, srv.port, ssh_kit.client_key),
                    _kit_profile(srv, ssh_kit, tmp_path).ssh)
    await s.wait_first_attempt(5)
    try:
        local = tmp_path / "local"
        m = RemoteTbMirror(s, str(remote), local, container=False)
        await m.sync()
    finally:
        await s.close()
    assert list(victim.iterdir()) == []
    assert (local / "good" / "e.tfevents.2").read_bytes() == b"fine"


class _HostileNode:
    """An SSH server (in a thread of its own, with its own loop) whose `tail` and `stat`
    answer the same for any path: every name the console asks for "exists", so a name that
    slipped past the rule would be written. Sync tests (hypothesis) call into its loop."""

    def __init__(self, kit: Any, tmp: Path) -> None:
        self.kit, self.tmp = kit, tmp
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def call(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __enter__(self) -> _HostileNode:
        from tui.sim.server import SimNodeServer
        from tui.core.ssh import NodeSession

        self.thread.start()
        bin_dir = self.tmp / "hostile-bin"
        bin_dir.mkdir()
        (bin_dir / "tail").write_text("#!/bin/sh\nprintf 'PWNED\\n'\n")
        (bin_dir / "tail").chmod(0o755)
        (bin_dir / "stat").write_text("#!/bin/sh\necho '1 6'\n")  # every path: inode 1, 6 bytes
        (bin_dir / "stat").chmod(0o755)
        home = self.tmp / "hostile-home"
        home.mkdir()
        env = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(home)}

        async def start() -> tuple[Any, Any]:
            srv = SimNodeServer("hostile", "127.0.0.1", self.kit.host_key, [self.kit.client_pub], env=env)
            await srv.start()
            self.kit.trust("127.0.0.1", srv.port)
            prof = load_profile(DATA / "good_profile.yaml")
            prof.ssh.known_hosts = str(self.kit.known_hosts)
            s = NodeSession(make_node("n1", "127.0.0.1", srv.port, self.kit.client_key), prof.ssh)
            await s.wait_first_attempt(5)
            return srv, s

        self.srv, self.sess = self.call(start())
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            await self.sess.close()
            await self.srv.stop()

        try:
            self.call(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def hostile(ssh_kit: Any, tmp_path: Path) -> Iterator[_HostileNode]:
    with _HostileNode(ssh_kit, tmp_path) as h:
        yield h


_PIECES = st.sampled_from(["..", ".", "", "/", "\n", "\r", "\0", "\x1b", "\\", "-", " ", "./",
                           "tfevents", "etc", "中", "\u2028", "é", "a"])
REMOTE_NAMES = st.one_of(
    st.lists(_PIECES, min_size=1, max_size=8).map("".join),
    st.text(min_size=1, max_size=40),
    st.lists(st.sampled_from(["..", "x", "/", "\n5 /", "tfevents"]), min_size=1, max_size=10).map("".join),
)


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def test_property_mirror_writes_only_under_its_directory(hostile: _HostileNode, tmp_path: Path) -> None:
    """Random remote names (newlines, absolute, `..`, unicode, control characters) as a
    hostile `find` would print them, through parse_scan and the mirror's fetch: every
    file written is under the mirror, and nothing else in the test's tree changes."""
    from tui.core.job.mirror import RemoteTbMirror, parse_scan

    sandbox = tmp_path / "sandbox"
    local = sandbox / "a" / "b" / "mirror"
    local.mkdir(parents=True)
    (sandbox / "a" / "keep").write_text("k")

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                      HealthCheck.too_slow])
    @given(names=st.lists(REMOTE_NAMES, min_size=1, max_size=4))
    def run(names: list[str]) -> None:
        before = _files_under(sandbox) - _files_under(local)
        scan = "".join(f"5 ./{n}\n5 {n}\n" for n in names)
        sizes, _ = parse_scan(scan)
        m = RemoteTbMirror(hostile.sess, "/nonexistent-remote", local, container=False)
        hostile.call(m.fetch(sizes))
        after = _files_under(sandbox) - _files_under(local)
        assert after == before, f"written outside the mirror: {after - before}"
        for p in _files_under(local):
            assert local.resolve() in p.resolve().parents

    run()


# ------------------------------------------------------------------ the spool


@pytest.mark.parametrize("job", ["/abs/evil", "../../evil", "..", "a/../../evil", "x\ny", ""])
def test_jobwatcher_refuses_unsafe_job_id(tmp_path: Path, job: str) -> None:
    """Before: `base = spool / job_id` unchecked, driver.log written at /abs/evil/..."""
    from tui.core.job.watcher import JobWatcher

    prof = load_profile(DATA / "good_profile.yaml")
    spool = tmp_path / "a" / "spool"
    spool.mkdir(parents=True)
    with pytest.raises(UnsafeName):
        JobWatcher(prof, None, job, root=spool)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "a" / "evil").exists()
    assert list(spool.iterdir()) == []


def test_find_job_skips_unsafe_ids(tmp_path: Path) -> None:
    """`status` finds its job in Ray's list; a job whose id cannot be a directory name
    is passed over (logged), never watched."""
    from tui.core.job.watcher import find_job
    from tui.core.state import RayJobState

    prof = load_profile(DATA / "good_profile.yaml")
    known = [RayJobState(id="raysubmit_good", status="RUNNING", start_time=1),
             RayJobState(id="../../../tmp/evil", status="RUNNING", start_time=2)]
    assert asyncio.run(find_job(prof, None, known)) == ("raysubmit_good", "RUNNING")
    assert asyncio.run(find_job(prof, None, known[1:])) is None


def test_property_spool_writes_only_under_its_directory(hostile: _HostileNode, tmp_path: Path) -> None:
    """Random job ids, through JobWatcher and its log follower against a node that
    answers every path: driver.log lands only under the spool, or the id is refused."""
    from tui.core.job.watcher import JobWatcher

    prof = load_profile(DATA / "good_profile.yaml")
    prof.container.access = "direct"
    sandbox = tmp_path / "sbox"
    spool = sandbox / "x" / "y" / "spool"
    spool.mkdir(parents=True)

    class Pool:
        head = hostile.sess

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                      HealthCheck.too_slow])
    @given(job=REMOTE_NAMES)
    def run(job: str) -> None:
        before = _files_under(sandbox) - _files_under(spool)
        try:
            w = JobWatcher(prof, Pool(), job, root=spool)
        except UnsafeName:
            pass
        else:
            hostile.call(w.follow_log(once=True))
            assert w.spool.path.resolve().parent.parent == spool.resolve()
            assert w.spool.size > 0  # the hostile node's bytes were written: in the spool
            w.spool.close()
        after = _files_under(sandbox) - _files_under(spool)
        assert after == before, f"written outside the spool: {after - before}"

    run()


def test_logs_and_metrics_refuse_unsafe_job_ids(tmp_path: Path) -> None:
    """`logs --job` and `metrics --job`: a user-typed id goes through the same rule,
    before any connection (a clear error, not a path outside the spool)."""
    from tui.core.errors import ActionError
    from tui.cli.logs import run_logs
    from tui.cli.metrics import MetricsSourceError, spool_log_for_job

    prof = load_profile(DATA / "good_profile.yaml")
    for bad in ("../../etc", "/etc", "a\nb"):
        with pytest.raises(ActionError, match="not a job id"):
            run_logs(prof, job_id=bad)
        with pytest.raises(MetricsSourceError, match="not a job id"):
            spool_log_for_job(bad)


def test_history_record_with_integer_job_id_is_skipped(tmp_path: Path) -> None:
    """A runs.jsonl line whose job_id is an integer raised (TypeError joining it onto the
    spool dir) from `status`/the console; it is skipped like any foreign line."""
    import json

    from tui.core.job.history import history_path, last_run, runs
    from tui.core.job.watcher import find_job

    prof = load_profile(DATA / "good_profile.yaml")
    base = {"profile": prof.name, "profile_path": "p.yaml", "submitted_at": 1.0, "entrypoint": [],
            "runtime_env": {}}
    path = history_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**base, "job_id": "raysubmit_ok"}) + "\n"
                    + json.dumps({**base, "job_id": 12345}) + "\n")
    assert [r.job_id for r in runs(prof.name)] == ["raysubmit_ok"]
    assert last_run(prof.name).job_id == "raysubmit_ok"
    assert asyncio.run(find_job(prof, None, [])) == ("raysubmit_ok", "UNKNOWN")


def test_confined_symlink_loop_is_unsafe(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(UnsafeName):
        confined(tmp_path, "a/x", max_parts=2)
