"""LogSpool: a byte-exact, line-indexed local copy of the driver log.

The properties that matter for a 15-20 hour run: whatever way the stream is cut into
chunks (mid-line, mid-UTF-8 character, between "\\r" and "\\n"), the lines that come out
are exactly the lines of the text; a restart resumes at `size` with nothing lost or
repeated; reading and searching never load the file; memory is the index only.
"""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tui.core.job.spool as logspool
from tui.core.job.spool import LogSpool


def expected_lines(data: bytes) -> list[str]:
    """The reference: complete lines of `data`, decoded, without "\\n" and one "\\r"."""
    parts = data.split(b"\n")[:-1]
    out = []
    for p in parts:
        s = p.decode("utf-8", errors="replace")
        out.append(s[:-1] if s.endswith("\r") else s)
    return out


def feed(spool: LogSpool, data: bytes, cuts: list[int]) -> list[str]:
    got: list[str] = []
    prev = 0
    for c in sorted(set(cuts)) + [len(data)]:
        got += spool.append(data[prev:c])
        prev = c
    return got


TEXT = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30),
        st.sampled_from(["\n", "\r\n", "\r", "步骤", "é", "🚀", "(TaskRunner pid=7) step:1 - a/b:0.5"]),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_random_chunks_equal_whole_split(tmp_path_factory: pytest.TempPathFactory, text: str,
                                         cuts: list[int]) -> None:
    data = text.encode("utf-8")
    cuts = [c for c in cuts if c <= len(data)]
    path = tmp_path_factory.mktemp("spool") / "driver.log"
    with LogSpool(path) as spool:
        got = feed(spool, data, cuts)
        want = expected_lines(data)
        assert got == want
        assert spool.line_count == len(want)
        assert spool.size == len(data)
        assert spool.lines(0, spool.line_count) == want
        assert path.read_bytes() == data  # byte-exact
    # reopen: same index, same lines
    with LogSpool(path) as again:
        assert again.line_count == len(want)
        assert again.lines(0, len(want)) == want


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT, cut=st.integers(min_value=0, max_value=400), cuts2=st.lists(st.integers(0, 400), max_size=5))
def test_restart_anywhere_loses_and_repeats_nothing(tmp_path_factory: pytest.TempPathFactory, text: str,
                                                   cut: int, cuts2: list[int]) -> None:
    """Cut the stream at any byte, close the console, reopen and resume at `size`."""
    data = text.encode("utf-8")
    cut = min(cut, len(data))
    path = tmp_path_factory.mktemp("spool") / "driver.log"
    with LogSpool(path) as spool:
        first = spool.append(data[:cut])
        resume = spool.size
    assert resume == cut
    with LogSpool(path) as spool:
        rest = data[resume:]  # what `tail -c +{size+1}` sends
        second = feed(spool, rest, [c for c in cuts2 if c <= len(rest)])
    assert first + second == expected_lines(data)


def test_chunk_boundary_mid_line_and_mid_utf8(tmp_path: Path) -> None:
    line = "(TaskRunner pid=42) 训练 step:3 - reward:0.5 🚀\n".encode()
    split_at = line.index("练".encode()) + 1  # inside a 3-byte character
    with LogSpool(tmp_path / "a.log") as spool:
        assert spool.append(line[:split_at]) == []
        assert spool.line_count == 0
        assert spool.pending().startswith("(TaskRunner pid=42) 训")  # replacement char for the cut
        assert spool.append(line[split_at:]) == ["(TaskRunner pid=42) 训练 step:3 - reward:0.5 🚀"]
        assert spool.line(0) == "(TaskRunner pid=42) 训练 step:3 - reward:0.5 🚀"
        assert spool.pending() == ""


def test_crlf_and_bare_cr(tmp_path: Path) -> None:
    with LogSpool(tmp_path / "a.log") as spool:
        assert spool.append(b"one\r") == []
        assert spool.append(b"\ntwo\r\nthree\rstill three\n") == ["one", "two", "three\rstill three"]
        assert spool.lines(0, 3) == ["one", "two", "three\rstill three"]
        assert spool.line(1) == "two"


def test_restart_continues_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "driver.log"
    with LogSpool(path) as spool:
        assert spool.append(b"line 0\nline 1\nhalf of li") == ["line 0", "line 1"]
        size = spool.size
    # the remote follower would now run: tail -c +{size+1} -F FILE
    remote = b"line 0\nline 1\nhalf of line 2\nline 3\n"
    with LogSpool(path) as spool:
        assert spool.line_count == 2
        assert spool.size == size
        assert spool.pending() == "half of li"
        assert spool.append(remote[size:]) == ["half of line 2", "line 3"]
        assert spool.tail(10) == ["line 0", "line 1", "half of line 2", "line 3"]
    assert path.read_bytes() == remote


def test_lazy_line_access_and_ranges(tmp_path: Path) -> None:
    with LogSpool(tmp_path / "a.log") as spool:
        spool.append(b"".join(f"line {i}\n".encode() for i in range(1000)))
        assert spool.line(0) == "line 0"
        assert spool.line(999) == "line 999"
        assert spool.line(-1) == "line 999"
        with pytest.raises(IndexError):
            spool.line(1000)
        assert spool.lines(10, 13) == ["line 10", "line 11", "line 12"]
        assert spool.lines(995, 5000) == [f"line {i}" for i in range(995, 1000)]
        assert spool.lines(-5, 2) == ["line 0", "line 1"]
        assert spool.tail(2) == ["line 998", "line 999"]
        assert spool.tail(0) == []
        # lines are read from the file, not kept: change the file under the spool (same length)
        with open(tmp_path / "a.log", "r+b") as f:
            f.seek(len(b"line 0\n"))
            f.write(b"LINE 1")
        assert spool.line(1) == "LINE 1"


def test_failed_write_leaves_spool_consistent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Disk full mid-append: nothing of that chunk stays, `size` is still the resume point."""
    path = tmp_path / "a.log"
    with LogSpool(path) as spool:
        spool.append(b"one\ntw")
        real_write = os.write

        def short_then_fail(fd: int, data: bytes) -> int:
            if len(data) > 3:
                return real_write(fd, bytes(data[:3]))  # a short write, then
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(logspool.os, "write", short_then_fail)
        with pytest.raises(OSError):
            spool.append(b"o\nthree\n")
        monkeypatch.setattr(logspool.os, "write", real_write)
        assert spool.size == len(b"one\ntw") == path.stat().st_size
        assert spool.append(b"o\nthree\n") == ["two", "three"]
    assert path.read_bytes() == b"one\ntwo\nthree\n"


def test_empty_and_clear(tmp_path: Path) -> None:
    with LogSpool(tmp_path / "sub" / "a.log") as spool:  # parent created
        assert spool.line_count == 0 and spool.size == 0
        assert spool.append(b"") == []
        assert spool.tail(5) == []
        assert spool.search("x") is None
        spool.append(b"a\nb")
        spool.clear()
        assert spool.line_count == 0 and spool.size == 0 and spool.pending() == ""
        assert spool.append(b"c\n") == ["c"]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """Shrink CHUNK so a small file spans many chunks (boundaries are what we test)."""
    monkeypatch.setattr(logspool, "CHUNK", 64)
    return 64


def test_search_forward_backward_across_chunks(tmp_path: Path, small_chunks: int) -> None:
    lines = [f"(TaskRunner pid=1) step:{i} - actor/pg_loss:0.{i:03d}" for i in range(500)]
    lines[137] = "(TaskRunner pid=1) RuntimeError: Parent directory /mnt/x does not exist."
    lines[401] = "(TaskRunner pid=1) runtimeerror: again, lower case"
    with LogSpool(tmp_path / "a.log") as spool:
        spool.append(("\n".join(lines) + "\n").encode())
        assert spool.search("RuntimeError") == 137  # from 0
        assert spool.search("runtimeERROR", 138) == 401  # case-insensitive, resumes after
        assert spool.search("RuntimeError", 402) is None
        assert spool.search("RuntimeError", 499, backwards=True) == 401
        assert spool.search("RuntimeError", 400, backwards=True) == 137
        assert spool.search("RuntimeError", 137, backwards=True) == 137
        assert spool.search("RuntimeError", 136, backwards=True) is None
        assert spool.search(r"step:4\d\d -", 0, regex=True) == 400
        assert spool.search(r"step:4\d\d -", 499, backwards=True, regex=True) == 499
        assert spool.search(r"pg_loss:0\.005$", regex=True) == 5  # $ is end of line
        assert spool.search("step:2 -", 0) == 2
        assert spool.search("no such text") is None
        with pytest.raises(Exception):
            spool.search("(", regex=True)


def test_search_non_ascii_substring_uses_text_path(tmp_path: Path, small_chunks: int) -> None:
    lines = [f"第{i}步 - Épreuve {i}" for i in range(300)]
    lines[250] = "训练失败 (training failed)"
    with LogSpool(tmp_path / "a.log") as spool:
        spool.append(("\n".join(lines) + "\n").encode())
        assert spool.search("训练") == 250
        assert spool.search("épreuve 7") == 7  # case-insensitive beyond ASCII
        assert spool.search("ÉPREUVE 29", 299, backwards=True) == 299
        assert spool.search("ÉPREUVE 29", 289, backwards=True) == 29
        assert spool.search("训练", 249, backwards=True) is None


def test_search_crlf_and_partial_line_not_searched(tmp_path: Path, small_chunks: int) -> None:
    with LogSpool(tmp_path / "a.log") as spool:
        spool.append(b"alpha\r\nbeta end\r\ngamma pending")
        assert spool.search(r"end$", regex=True) == 1
        assert spool.search("pending") is None  # not a line yet


def test_reopen_rebuilds_index_in_chunks(tmp_path: Path, small_chunks: int) -> None:
    path = tmp_path / "a.log"
    rng = random.Random(5)
    body = "".join(f"{'x' * rng.randint(0, 200)} {i}\n" for i in range(2000)) + "tail"
    path.write_bytes(body.encode())
    with LogSpool(path) as spool:
        assert spool.line_count == 2000
        assert spool.line(1234).endswith(" 1234")
        assert spool.pending() == "tail"
        assert spool.search(" 1999") == 1999


def test_pure_python_newline_path_matches_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    table = bytes(b"ab\n\r"[i % 4] for i in range(256))
    data = random.Random(1).randbytes(50_000).translate(table)
    fast = logspool._newline_starts(data, 100)
    monkeypatch.setattr(logspool, "_np", None)
    slow = logspool._newline_starts(data, 100)
    assert fast == slow
    assert list(slow[:3]) == [100 + i + 1 for i, b in enumerate(data) if b == 10][:3]


def test_memory_is_the_index_only(tmp_path: Path) -> None:
    """~200 MB of VeRL-like log: reopening and appending hold only the index in memory."""
    path = tmp_path / "big.log"
    step = ("(TaskRunner pid=2716) step:{} - actor/pg_loss:np.float64(0.0195) - actor/entropy:0.51 - "
            "critic/score/mean:0.42 - perf/throughput:712.5 - timing_s/step:1043.2\n")
    block = "".join(step.format(i) for i in range(2000)).encode()
    target = 200 * 1024 * 1024
    with open(path, "wb") as f:
        written = 0
        while written < target:
            f.write(block)
            written += len(block)
    n_lines = written // len(block) * 2000
    tracemalloc.start()
    try:
        with LogSpool(path) as spool:
            assert spool.line_count == n_lines
            # keep appending 8 MB in 1 MB chunks, as the follower would
            got = 0
            for _ in range(8):
                got += len(spool.append(block[: 1024 * 1024]))
            spool.append(b"\n")
            assert spool.line(n_lines // 2).startswith("(TaskRunner pid=2716) step:")
            index = spool.index_bytes()
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert index <= 8 * (n_lines + got + 2) * 1.2  # 8 bytes a line (+ array over-allocation)
    # peak = index + one read chunk + one appended chunk's lines; nothing proportional to the file
    assert peak < index + 48 * 1024 * 1024, (peak, index)
    assert peak < 80 * 1024 * 1024
    os.unlink(path)


def test_saved_index_is_used_and_extended(tmp_path: Path) -> None:
    """A saved line index spares a re-open the scan of the whole run's log; the bytes
    appended after it are indexed as usual; a stale or broken index is ignored."""
    from tui.core.job.spool import LogSpool

    p = tmp_path / "driver.log"
    with LogSpool(p) as s:
        s.append(b"".join(b"line %d\n" % i for i in range(1000)) + b"part")
        s.save_index()
        s.append(b"ial\nmore\n")
        want = s.lines(0, s.line_count)
    with LogSpool(p) as s:
        assert s.lines(0, s.line_count) == want and want[1000] == "partial" and want[-1] == "more"
    # an index that does not fit the file (a different log of the same name) is ignored
    idx = p.with_name(p.name + ".idx")
    raw = bytearray(idx.read_bytes())
    raw[16:24] = (7).to_bytes(8, "little")  # line 1 "starts" at byte 7: not after a newline
    idx.write_bytes(bytes(raw))
    with LogSpool(p) as s:
        assert s.lines(0, s.line_count) == want
    idx.write_bytes(b"\x00" * 5)
    with LogSpool(p) as s:
        assert s.lines(0, s.line_count) == want
        s.clear()
        assert not idx.exists() and s.line_count == 0
