"""What the dashboard and the nodes send back is untrusted: any JSON shape, any size
(issue 15, Medium 8 and the Low list). Real sockets: a loopback HTTP server standing in
for a hostile dashboard, reached through a real SSH port forward where the probe does."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import make_node
from tui.core.probes import http_get_json, probe_ray, ray_state_from_api
from tui.core.profile import load_profile
from tui.core.state import RayJobState, RayNodeState, RayState

DATA = Path(__file__).resolve().parent / "data"

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
    | st.sampled_from(["ALIVE", "DEAD", "RUNNING", "GPU", "node_id", "result", "data"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["data", "result", "clusterStatus", "loadMetricsReport", "usageByNode", "usage",
                         "GPU", "node_id", "node_ip", "state", "resources_total", "is_head_node",
                         "state_message", "submission_id", "job_id", "status", "entrypoint",
                         "start_time", "end_time", "message"]) | st.text(max_size=5),
        inner, max_size=6),
    max_leaves=30)


def _nodes_doc(rows: Any) -> Any:
    return {"data": {"result": {"result": rows}}}


def _status_doc(lm: Any) -> Any:
    return {"data": {"clusterStatus": {"loadMetricsReport": lm}}}


def _check_state(s: RayState) -> None:
    """What the rest of the console relies on: the right types, finite numbers."""
    assert isinstance(s, RayState) and s.available
    for n in s.nodes:
        assert isinstance(n, RayNodeState)
        assert isinstance(n.node_id, str) and isinstance(n.address, str)
        assert isinstance(n.gpus_total, float) and math.isfinite(n.gpus_total)
        assert isinstance(n.gpus_used, float) and math.isfinite(n.gpus_used)
        assert n.error is None or isinstance(n.error, str)
    for j in s.jobs:
        assert isinstance(j, RayJobState)
        assert isinstance(j.id, str) and isinstance(j.status, str) and isinstance(j.entrypoint, str)
        assert j.start_time is None or (isinstance(j.start_time, float) and math.isfinite(j.start_time))
        assert j.message is None or isinstance(j.message, str)
    assert math.isfinite(float(s.gpus_used)) and math.isfinite(float(s.gpus_total))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=JSON, status=JSON, jobs=JSON)
def test_ray_state_any_json_shape(nodes: Any, status: Any, jobs: Any) -> None:
    _check_state(ray_state_from_api(nodes, status, jobs))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=JSON, lm=JSON, jobs=st.lists(JSON, max_size=4))
def test_ray_state_plausible_envelopes_odd_insides(rows: Any, lm: Any, jobs: list[Any]) -> None:
    """The right envelopes with anything inside (where the first crashes were)."""
    _check_state(ray_state_from_api(_nodes_doc(rows), _status_doc(lm), jobs))


@pytest.mark.parametrize("nodes,status,jobs", [
    (_nodes_doc([{"node_id": "a", "state": "ALIVE", "resources_total": {"GPU": "8"}}]), {}, []),
    (_nodes_doc([{"node_id": "a", "state": "ALIVE", "resources_total": [8]}]), {}, []),
    (_nodes_doc([{"node_id": ["x"], "state": "ALIVE"}]), {}, []),
    (_nodes_doc([{"node_id": "a", "state": "ALIVE"}]), _status_doc({"usageByNode": {"a": {"GPU": 3}}}), []),
    (_nodes_doc([{"node_id": "a", "state": "ALIVE"}]), _status_doc({"usageByNode": {"a": []}}), []),
    (_nodes_doc("rows"), {}, []),
    ({"data": []}, {}, []),
    ([], [], {}),
    ({}, {}, [{"submission_id": "x", "start_time": "soon"}]),
    ({}, {}, [{"submission_id": {"a": 1}, "entrypoint": 5, "message": ["m"]}]),
    ({}, _status_doc({"usage": {"GPU": "lots"}}), []),
    ({}, _status_doc({"usage": {"GPU": []}}), []),
    ({}, {}, [{"submission_id": "x", "start_time": 1e400}]),
])
def test_ray_state_reported_shapes(nodes: Any, status: Any, jobs: Any) -> None:
    """Shapes that raised AttributeError / TypeError / IndexError out of the probe."""
    _check_state(ray_state_from_api(nodes, status, jobs))


# ------------------------------------------------------------------ the HTTP client


async def _http_server(handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]
                       ) -> tuple[asyncio.AbstractServer, int]:
    srv = await asyncio.start_server(handler, "127.0.0.1", 0)
    return srv, srv.sockets[0].getsockname()[1]


def _answer(body: bytes, head: bytes = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"):  # type: ignore[no-untyped-def]
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(head + b"\r\n" + body)
        with _suppress():
            await writer.drain()
        writer.close()
    return handle


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], (ConnectionError, OSError))  # type: ignore[arg-type]


async def test_http_body_is_bounded() -> None:
    """A dashboard that floods: the client stops at its limit with a clear error
    instead of buffering everything (was +2.7 GiB)."""
    from tui.core import rayapi

    sent = {"bytes": 0}

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n[")
        chunk = b"1," * 32768
        try:
            for _ in range(10_000):  # 640 MiB unless the client hangs up
                writer.write(chunk)
                sent["bytes"] += len(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        writer.close()

    srv, port = await _http_server(flood)
    try:
        with pytest.raises(ConnectionError, match="truncated"):
            await http_get_json(port, "/api/jobs/", timeout=60)
    finally:
        srv.close()
        await srv.wait_closed()
    assert sent["bytes"] < 8 * rayapi.HTTP_BODY_MAX


@pytest.mark.parametrize("body,head", [
    (b"[" * 200_000, b"HTTP/1.1 200 OK\r\n"),              # RecursionError in json
    (b"1" * 5000, b"HTTP/1.1 200 OK\r\n"),                  # int-string limit
    (b"{}", b"HTTP/\r\n"),                                   # no status code (IndexError)
    (b"{}", b"HTTP/1.1 abc\r\n"),
    (b"zz\r\n{}", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"),
], ids=["deep-nesting", "huge-int", "no-code", "bad-code", "bad-chunk"])
async def test_http_odd_answers_are_errors_not_crashes(body: bytes, head: bytes) -> None:
    srv, port = await _http_server(_answer(body, head))
    try:
        with pytest.raises((ConnectionError, ValueError)):
            await http_get_json(port, "/x", timeout=30)
    finally:
        srv.close()
        await srv.wait_closed()


@pytest.fixture
async def dashboard() -> AsyncIterator[Callable[[dict[str, bytes]], Any]]:
    """A loopback 'dashboard' serving fixed bodies by path."""
    servers: list[asyncio.AbstractServer] = []

    async def make(bodies: dict[str, bytes]) -> int:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            req = await reader.readuntil(b"\r\n\r\n")
            path = req.split(b" ")[1].decode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + bodies.get(path, b"{}"))
            with _suppress():
                await writer.drain()
            writer.close()

        srv, port = await _http_server(handle)
        servers.append(srv)
        return port

    yield make
    for s in servers:
        s.close()
        await s.wait_closed()


@pytest.mark.parametrize("nodes,status,jobs", [
    (b'{"data": {"result": {"result": [{"node_id": "a", "state": "ALIVE", "resources_total": [8]}]}}}',
     b"{}", b"[]"),
    (b'{"data": []}', b'{"data": {"clusterStatus": {"loadMetricsReport": {"usage": {"GPU": 3}}}}}', b"{}"),
    (b"{}", b"{}", b'[{"submission_id": "x", "start_time": "soon"}]'),
])
async def test_probe_ray_through_ssh_forward_odd_dashboard(node_server, ssh_kit, dashboard,
                                                           nodes: bytes, status: bytes, jobs: bytes) -> None:
    """`status`'s Ray probe, end to end (SSH forward to a hostile dashboard): a state,
    never a traceback."""
    from tui.core.ssh import NodeSession

    port = await dashboard({"/api/v0/nodes?detail=1": nodes, "/api/cluster_status": status,
                            "/api/jobs/": jobs})
    srv = await node_server()
    prof = load_profile(DATA / "good_profile.yaml")
    prof.ssh.known_hosts = str(ssh_kit.known_hosts)
    prof.ray.dashboard_port = port
    prof.ray.dashboard_host = "127.0.0.1"
    s = NodeSession(make_node("n1", srv.address, srv.port, ssh_kit.client_key), prof.ssh)
    await s.wait_first_attempt(5)
    try:
        st_ = await asyncio.wait_for(probe_ray(s, prof, allow_cli=False), 60)
    finally:
        await s.close()
    _check_state(st_)
    assert json.dumps(st_.jobs and st_.jobs[0].id or "")


# ------------------------------------------------------------------ command output


async def test_command_output_is_capped_with_a_note(node_server, ssh_kit, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node flooding stdout and stderr: `run` keeps the first RUN_OUTPUT_CAP characters
    of each and says so (was: everything buffered, +1.6 GiB)."""
    from tui.core import ssh
    from tui.core.ssh import CommandTimeout, NodeSession

    monkeypatch.setattr(ssh, "RUN_OUTPUT_CAP", 1 << 20)
    srv = await node_server()
    prof = load_profile(DATA / "good_profile.yaml")
    prof.ssh.known_hosts = str(ssh_kit.known_hosts)
    s = NodeSession(make_node("n1", srv.address, srv.port, ssh_kit.client_key), prof.ssh)
    await s.wait_first_attempt(5)
    try:
        r = await s.run("head -c 8000000 /dev/zero | tr '\\0' x; head -c 3000000 /dev/zero | tr '\\0' y >&2",
                        timeout=120)
        assert r.rc == 0
        assert r.stdout.startswith("x" * 1000) and len(r.stdout) < (1 << 20) + 200
        assert "output truncated: 6951424 more characters" in r.stdout
        assert len(r.stderr) < (1 << 20) + 200 and "output truncated" in r.stderr
        small = await s.run("echo fine")
        assert small.stdout == "fine\n"
        with pytest.raises(CommandTimeout) as ei:  # a node that never stops
            await s.run("yes", timeout=3)
        assert len(ei.value.result.stdout) < (1 << 20) + 200
    finally:
        await s.close()


# ------------------------------------------------------------------ event files


def test_event_frame_claiming_a_tebibyte_is_not_reread(tmp_path: Path) -> None:
    """A corrupt (or hostile) event file: after good frames, a header whose length (with
    a valid checksum) claims 1 TiB. Before: the reader waited for that frame to
    complete and re-read the file's rest on every update. Now the file is marked bad
    once; its good scalars stay; later updates read nothing of it."""
    import struct as _struct

    from tui.core.job.tbreader import ScalarReader, masked_crc32c
    from tui.sim.tbwrite import ScalarWriter

    w = ScalarWriter(str(tmp_path / "tb"), sync=True)
    for step in range(1, 4):
        w.add_scalars(step, {"a": float(step)})
    w.flush()
    w.close()
    [f] = list((tmp_path / "tb").rglob("*tfevents*"))
    hdr = _struct.pack("<Q", 1 << 40)
    with f.open("ab") as fh:
        fh.write(hdr + _struct.pack("<I", masked_crc32c(hdr)) + b"\0" * 100_000)
    r = ScalarReader(tmp_path / "tb")
    r.update()
    assert [row["step"] for row in r.rows()] == [1, 2, 3]
    assert any("claims" in e for e in r.errors.values())
    read = r.bytes_read
    with f.open("ab") as fh:
        fh.write(b"\0" * 100_000)
    for _ in range(3):
        r.update()
    assert r.bytes_read == read


# ------------------------------------------ issue 39 S12: the mirror's byte limit, kept here too


class _FloodSession:
    """A head whose `head -c` is not there (or lies): `stream_bytes` sends `chunks` MiB
    whatever the command asks. Counts what it sent and whether the stream was closed."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks
        self.sent = 0
        self.closed = False
        self.commands: list[str] = []

    async def stream_bytes(self, cmd: str, container: bool) -> AsyncIterator[bytes]:
        self.commands.append(cmd)
        try:
            for _ in range(self.chunks):
                self.sent += 1
                yield b"x" * (1 << 20)
        finally:
            self.closed = True


async def test_remote_read_keeps_its_limit_locally() -> None:
    """read_remote_bytes: at most `limit` bytes are kept, whatever the node sends, and the
    stream is closed once they are there (before: everything sent was kept)."""
    from tui.core.job.remote_files import read_remote_bytes

    sess = _FloodSession(16)
    data = await asyncio.wait_for(read_remote_bytes(sess, "/tb/e.tfevents.1", 0, False, limit=3 << 20), 30)
    assert len(data) == 3 << 20
    assert sess.sent <= 4 and sess.closed
    assert "head -c 3145728" in sess.commands[0]  # (the remote bound is still asked for)


async def test_mirror_copies_no_more_than_the_file_gained(tmp_path: Path) -> None:
    """The mirror asks for what the scan said each file gained and keeps no more, so a node
    that sends more (16 MiB for a file of 100 bytes) cannot grow the local copy past it."""
    from tui.core.job.mirror import RemoteTbMirror

    sess = _FloodSession(16)
    m = RemoteTbMirror(sess, "/tb", tmp_path / "mirror", container=False)
    got = await asyncio.wait_for(m.fetch({"run/events.out.tfevents.1": 100}), 30)
    assert got == 100
    assert (tmp_path / "mirror" / "run" / "events.out.tfevents.1").stat().st_size == 100
    assert sess.sent == 1 and sess.closed
    got = await asyncio.wait_for(m.fetch({"run/events.out.tfevents.1": 150}), 30)  # it grew by 50
    assert got == 50 and (tmp_path / "mirror" / "run" / "events.out.tfevents.1").stat().st_size == 150
