"""Issue 37: a node sends only what changed.

The sampler on each node keeps the sample it last sent and sends nothing for a sample
that repeats it (but for the card tools' own timestamps), a heartbeat of one marker line
every few such samples, and for a changed sample only its changed lines; the console
keeps the node's whole sample (the last full one plus the changes). Real parts: the
node side is the real script run by real shells and the machine's real awk; the live
tests run the console's monitor against real SSH servers (in-process asyncssh running
/bin/sh) whose card tool is a shell script printing files the test writes.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import random
import re
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import make_node
from tui.core.probes import (
    DELTA_AWK,
    SAMPLE_DELTA,
    SAMPLE_END,
    VOLATILE_ERES,
    ClusterMonitor,
    SampleProtocolError,
    SampleStream,
    apply_delta,
    sample_key,
    sampler_script,
)
from tui.core.profile import load_profile
from tui.sim import gmi

DATA = Path(__file__).resolve().parent / "data"
SAMPLES = DATA / "samples"
AWK = shutil.which("awk")

pytestmark = pytest.mark.skipif(AWK is None, reason="no awk on this machine (the node side needs one)")


def _awks() -> list[list[str]]:
    """The awks here: the machine's `awk` and each other implementation installed (a node
    may have any: mawk on Debian and Ubuntu, gawk elsewhere, busybox in small images, BWK's)."""
    seen: set[str] = set()
    out: list[list[str]] = []
    for argv in (["awk"], ["mawk"], ["gawk"], ["original-awk"], ["nawk"], ["busybox", "awk"]):
        path = shutil.which(argv[0])
        if path is None or (argv[0] == "busybox" and subprocess.run(
                [path, "awk", "BEGIN{}"], capture_output=True, timeout=30).returncode != 0):
            continue
        key = " ".join([os.path.realpath(path), *argv[1:]])
        if key not in seen:
            seen.add(key)
            out.append([path, *argv[1:]])
    return out


AWKS = _awks()


# --------------------------------------------------------------------------- the node side, alone


def _sample_lines(util: dict[int, int] | None = None, now: float = 1_700_000_000.0,
                  procs: bool = False) -> list[str]:
    """One sample as the sampler frames it (no end marker): the sim's S5000 x 8 output."""
    loads: dict[int, Any] = {}
    for i, u in (util or {}).items():
        load = gmi.CardLoad()
        load.util, load.mem_mib = float(u), 1000.0 + 10 * u
        if procs:
            load.processes.append((4242 + i, "python3", load.mem_mib))
        loads[i] = load
    cs = gmi.cards(0, 8, loads)
    return ["@@sample-begin", "@@tool=mthreads-gmi", "@@cmd=mthreads-gmi -q --json",
            *gmi.render_json(cs, now).splitlines(), "@@rc=0", "@@cmd=mthreads-gmi",
            *gmi.render_plain(cs, now).splitlines(), "@@rc=0", "@@end"]


def _awk(prev: list[str], cur: list[str], awk: list[str] | None = None) -> str:
    """What the node sends for `cur` after having sent `prev` (the real awk program)."""
    sep = "@@sep-0123456789abcdef"
    r = subprocess.run([*(awk or [AWK or "awk"]), "-v", f"sep={sep}", DELTA_AWK], input="\n".join([*prev, sep, *cur]) + "\n",
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _received(prev: list[str], out: str) -> list[str] | None:
    """The console's sample after the node sent `out` (None: nothing was sent)."""
    if not out:
        return None
    if out.startswith(SAMPLE_DELTA):
        return apply_delta(prev, out)
    return out[:-1].split("\n")


def _awk_id(awk: list[str]) -> str:
    return "-".join(os.path.basename(x) for x in awk)


@pytest.fixture(params=AWKS, ids=_awk_id)
def awk(request: pytest.FixtureRequest) -> list[str]:
    return request.param


def test_an_unchanged_sample_sends_nothing_though_its_timestamps_moved(awk: list[str]) -> None:
    a, b = _sample_lines(now=1_700_000_000.0), _sample_lines(now=1_700_000_007.0)
    assert a != b and sample_key("\n".join(a)) == sample_key("\n".join(b))
    assert _awk(a, b, awk) == ""
    assert _awk(a, a, awk) == ""


def test_one_card_changed_sends_that_cards_lines_only(awk: list[str]) -> None:
    a, b = _sample_lines(), _sample_lines({3: 77}, now=1_700_000_002.0)
    out = _awk(a, b, awk)
    assert out.startswith(SAMPLE_DELTA)
    assert _received(a, out) == b  # whole, timestamps included
    full = len("\n".join(b)) + 1
    assert len(out) < full / 10, (len(out), full)
    # the splices carry card 3's lines (its JSON block, its table row), not the other cards'
    sent = "\n".join(line for line in out.splitlines() if not line.startswith("@@splice"))
    assert '"Gpu": "77%"' in sent and '"Index"' not in sent


def test_a_new_process_shifts_one_section_not_the_others(awk: list[str]) -> None:
    """Processes appear: the process table grows, the JSON (another section)
    keeps its line numbers, so only the changed lines travel."""
    a, b = _sample_lines({2: 50, 4: 60}), _sample_lines({2: 50, 4: 60}, procs=True, now=1_700_000_004.0)
    assert len(a) != len(b)
    out = _awk(a, b, awk)
    assert out.startswith(SAMPLE_DELTA) and _received(a, out) == b
    assert len(out) < 1500, out


def test_numbers_are_compared_as_text(awk: list[str]) -> None:
    """awk compares two numeric-looking input lines as numbers ("1.0" == "1") unless told
    otherwise: a line changed from 1 to 1.0 is a change."""
    a = ["@@sample-begin", "1", "010", "x"]
    b = ["@@sample-begin", "1.0", "10", "x"]
    assert _received(a, _awk(a, b, awk)) == b


_LINE = st.sampled_from(["", "0", "1.0", "  x", "@@rc=0", "@@cmd=nvidia-smi", "a b c",
                         "Mon Jan 01 00:00:00 2024", '    "Timestamp": "now",', "中文", "\t tab"])


@pytest.mark.parametrize("awk_argv", AWKS, ids=_awk_id)
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), edits=st.lists(st.tuples(st.sampled_from("cid"), _LINE), max_size=12))
def test_what_the_node_sends_always_rebuilds_its_sample(awk_argv: list[str], seed: int,
                                                        edits: list[tuple[str, str]]) -> None:
    """Any change to a real sample (lines changed, inserted, deleted, markers among them):
    the console's copy plus what the node sent is the node's sample, exactly; nothing is
    sent only when the two differ in the tools' timestamps alone."""
    rng = random.Random(seed)
    prev = _sample_lines(now=1_700_000_000.0)
    cur = _sample_lines(now=1_700_000_000.0 + rng.randrange(0, 3))
    for op, line in edits:
        i = rng.randrange(0, len(cur) + 1)
        if op == "i" or not cur:
            cur.insert(i, line)
        elif op == "d" and i < len(cur):
            del cur[i]
        elif i < len(cur):
            cur[i] = line
    got = _received(prev, _awk(prev, cur, awk_argv))
    if got is None:
        assert sample_key("\n".join(prev)) == sample_key("\n".join(cur)) and len(prev) == len(cur)
    else:
        assert got == cur


def test_the_node_and_the_console_agree_on_what_a_timestamp_is(awk: list[str]) -> None:
    """The awk's EREs and the console's `sample_key` judge every line of the tools' real
    output alike (what the node leaves out as a timestamp, the console ignores too)."""
    lines: list[str] = []
    for f in sorted((SAMPLES / "mthreads-gmi").iterdir()) + sorted((SAMPLES / "nvidia-smi").iterdir()):
        lines += f.read_text(errors="replace").splitlines()
    lines += _sample_lines()
    lines += ["Sun Dec  6 01:38:38 2026", "Sun Dec 06 01:38:38 2026 x", '"Timestamp" : "x"']
    prog = ("function vol(s) { return s ~ /A/ || s ~ /B/ } { print (vol($0) ? 1 : 0) }"
            .replace("A", VOLATILE_ERES[0], 1).replace("/B/", f"/{VOLATILE_ERES[1]}/"))
    r = subprocess.run([*awk, prog], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=30, check=True)
    node = [x == "1" for x in r.stdout.split()]
    console = [sample_key(line) != line for line in lines]
    assert node == console
    assert sum(node) >= 4  # the check saw timestamps of both kinds


# --------------------------------------------------------------------------- the console side, alone


def test_sample_stream_frames_full_delta_and_heartbeat_whatever_the_chunking() -> None:
    a, b = _sample_lines(), _sample_lines({5: 40})
    delta = _awk(a, b)
    stream = "\n".join(a) + f"\n{SAMPLE_END}\n{SAMPLE_END}\n" + delta + f"{SAMPLE_END}\n{SAMPLE_END}\n"
    want = ["\n".join(a) + "\n", None, "\n".join(b) + "\n", None]
    for cut in [0, 1, 5, 13, 14, 100, len(stream) // 2, len(stream) - 1, len(stream)]:
        s = SampleStream("n")
        got = s.feed(stream[:cut]) + s.feed(stream[cut:])
        assert got == want, cut
        assert (s.full, s.deltas, s.heartbeats) == (1, 1, 2)


def test_sample_stream_refuses_a_delta_it_cannot_apply() -> None:
    a, b = _sample_lines(), _sample_lines({5: 40})
    delta = _awk(a, b)
    with pytest.raises(SampleProtocolError):
        SampleStream("n").feed(delta + f"{SAMPLE_END}\n")  # no full sample yet on this stream
    s = SampleStream("n")
    s.feed("\n".join(a[:-3]) + f"\n{SAMPLE_END}\n")  # a shorter sample than the node's
    with pytest.raises(SampleProtocolError):
        s.feed(delta + f"{SAMPLE_END}\n")
    for bad in (f"{SAMPLE_DELTA}1 9\n@@splice 0 1\nx\n", f"{SAMPLE_DELTA}x 1\n", f"{SAMPLE_DELTA}0 99\n",
                f"{SAMPLE_DELTA}2 3\n@@splice 2 1 1\nx\n@@splice 0 1 1\ny\n"):
        with pytest.raises(SampleProtocolError):
            apply_delta(["a", "b", "c"], bad)


# --------------------------------------------------------------------------- the shell loop, alone


FAKE_TOOL = """#!/bin/sh
# a card tool for the tests: prints what the test wrote, its timestamp line the time now;
# hangs (as a wedged driver's tool does) while the file `hang` exists
d='{dir}'
while [ -e "$d/hang" ]; do sleep 0.05; done
now=$(date '+%a %b %d %H:%M:%S %Y')
case "$*" in
  "-q --json") sed "s/@@NOW@@/$now/" "$d/json" ;;
  "") sed "s/@@NOW@@/$now/" "$d/plain" ;;
  *) echo "Invalid option: $1"; exit 1 ;;
esac
"""


class FakeCards:
    """One node's card tool: a script on PATH and the files it prints."""

    def __init__(self, d: Path, node_index: int = 0) -> None:
        self.dir, self.node_index = d, node_index
        d.mkdir(parents=True, exist_ok=True)
        (d / "bin").mkdir(exist_ok=True)
        tool = d / "bin" / "mthreads-gmi"
        tool.write_text(FAKE_TOOL.format(dir=d))
        tool.chmod(0o755)
        self.set({})

    def set(self, util: dict[int, int]) -> None:
        loads = {}
        for i, u in util.items():
            load = gmi.CardLoad()
            load.util, load.mem_mib = float(u), 1000.0 + 10 * u
            loads[i] = load
        cs = gmi.cards(self.node_index, 8, loads)
        now = 1_700_000_000.0
        ts = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now))
        for name, text in (("json", gmi.render_json(cs, now)), ("plain", gmi.render_plain(cs, now))):
            tmp = self.dir / f"{name}.tmp"
            tmp.write_text(text.replace(ts, "@@NOW@@"))
            os.replace(tmp, self.dir / name)

    def hang(self, on: bool) -> None:
        if on:
            (self.dir / "hang").write_text("")
        else:
            (self.dir / "hang").unlink(missing_ok=True)

    @property
    def path(self) -> str:
        return f"{self.dir / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def _direct_profile() -> Any:
    prof = load_profile(DATA / "good_profile.yaml")
    prof.container.access = "direct"  # the sample is the card tool's output alone
    return prof


@pytest.mark.parametrize("shell", [s for s in ("sh", "dash", "bash", "zsh", "busybox") if shutil.which(s)])
def test_the_loop_under_each_shell_sends_full_then_heartbeats_then_a_delta(shell: str, tmp_path: Path) -> None:
    """The real loop, run by each POSIX shell here (a node's login shell runs it):
    a full sample, heartbeats while nothing changes, the changed card's lines only."""
    cards = FakeCards(tmp_path / "cards")
    script = sampler_script(_direct_profile(), 0.05, heartbeat_s=1)
    argv = [shutil.which(shell) or shell, *(["sh"] if shell == "busybox" else []), "-c", script]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env={"PATH": cards.path, "LANG": "C.UTF-8", "HOME": str(tmp_path)})
    stream = SampleStream(shell)
    got: list[str | None] = []
    decode = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        changed = False
        deadline = time.monotonic() + 60  # a bound, not a measurement
        # The tool's two outputs change one after the other (two files): a sample may read
        # one before the change and one after, so the change can take two deltas.
        while time.monotonic() < deadline and not (changed and stream.deltas and got[-1] is not None
                                                   and '"Gpu": "88%"' in got[-1]):
            if not select.select([fd], [], [], 0.1)[0]:
                continue
            raw = os.read(fd, 65536)
            assert raw, f"the loop under {shell} ended: {got}"
            got += stream.feed(decode.decode(raw))
            if not changed and got.count(None) >= 3:
                cards.set({6: 88})
                changed = True
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the loop's own group: its shell, sleep and tool
        proc.wait(timeout=30)
    assert got and got[0] is not None and stream.full == 1, got[:2]
    assert stream.deltas in (1, 2) and got[-1] is not None and '"Gpu": "88%"' in got[-1]
    assert stream.lines is not None and len(stream.lines) == len(got[0].splitlines())


# --------------------------------------------------------------------------- live: the monitor over real SSH


async def _until(cond: Any, what: str, timeout: float = 60.0) -> None:
    """Wait for a condition, bounded (not a measurement)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.05)


def _card_view(node: Any) -> list[tuple[Any, ...]]:
    return [(c.index, c.name, c.util_pct, c.mem_used_mib, c.mem_total_mib, c.temp_c, c.power_w) for c in node.gpus]


@pytest.fixture
async def two_nodes(node_server: Any, ssh_kit: Any, tmp_path: Path) -> Any:
    """Two real SSH servers, each with its own fake card tool; a profile for them."""
    cards = [FakeCards(tmp_path / f"cards{i}", node_index=i) for i in range(2)]
    servers = [await node_server(address="127.0.0.1", env={"PATH": c.path}) for c in cards]
    prof = _direct_profile()
    prof.nodes = [make_node("n1", "127.0.0.1", servers[0].port, ssh_kit.client_key),
                  make_node("n2", "127.0.0.1", servers[1].port, ssh_kit.client_key, role="worker")]
    prof.ssh.known_hosts = str(ssh_kit.known_hosts)
    prof.ssh.connect_timeout_s = 5
    return prof, cards


@pytest.mark.integration
async def test_an_idle_node_sends_almost_nothing_and_a_changed_card_arrives_alone(two_nodes: Any) -> None:
    prof, cards = two_nodes
    mon = ClusterMonitor(prof, refresh_s=0.2, stale_after_s=2.0)
    assert mon.heartbeat_s == 0  # a heartbeat every unchanged sample: the most an idle node sends
    await mon.start()
    try:
        await _until(lambda: all(n.gpu is not None and len(n.gpus) == 8 for n in mon.state.nodes), "first samples")
        full_size = mon.received["n1"]
        assert full_size > 10_000  # the first sample came whole
        before = _card_view(mon.state.nodes[0])
        r0, h0, p0 = dict(mon.received), mon.heartbeats, mon.parsed
        await _until(lambda: mon.heartbeats >= h0 + 20, "20 heartbeats")  # ~10 unchanged samples a node
        sent = sum(mon.received.values()) - sum(r0.values())
        beats = mon.heartbeats - h0
        # each heartbeat is the end marker alone; nothing else came (timestamps moved meanwhile)
        assert sent <= (len(SAMPLE_END) + 1) * (beats + 2), (sent, beats)
        assert sent < full_size / 10
        assert mon.parsed == p0, "an unchanged node's sample was parsed"

        d0, n1_0 = mon.deltas_applied, mon.received["n1"]
        cards[0].set({3: 77})
        await _until(lambda: mon.state.nodes[0].gpus[3].util_pct == 77, "card 3 at 77%")
        assert mon.deltas_applied > d0  # it came as a change, not a whole sample
        assert mon.received["n1"] - n1_0 < full_size / 4, (mon.received["n1"] - n1_0, full_size)
        after = _card_view(mon.state.nodes[0])
        assert [c for i, c in enumerate(after) if i != 3] == [c for i, c in enumerate(before) if i != 3]
        assert after[3][2] == 77 and after[3][3] > before[3][3]
        assert len(mon.state.nodes[0].gpus) == 8 and mon.state.nodes[1].gpus[3].util_pct == 0
    finally:
        await mon.stop()


@pytest.mark.integration
async def test_a_reconnect_starts_with_a_full_sample(two_nodes: Any) -> None:
    prof, cards = two_nodes
    mon = ClusterMonitor(prof, refresh_s=0.2)
    await mon.start()
    try:
        await _until(lambda: all(len(n.gpus) == 8 for n in mon.state.nodes), "first samples")
        cards[0].set({1: 30})
        await _until(lambda: mon.state.nodes[0].gpus[1].util_pct == 30, "card 1 at 30%")
        full_size, sess = mon.received["n1"], mon.pool.session("n1")
        connects = sess.connects
        cards[0].set({1: 30, 2: 60})  # changed while the link is down: the new stream brings it whole
        sess.drop("test: the link dropped")
        await _until(lambda: sess.connects > connects and mon.state.nodes[0].reachable, "reconnected")
        await _until(lambda: mon.state.nodes[0].gpus[2].util_pct == 60, "card 2 at 60% after the reconnect")
        assert mon.received["n1"] - full_size > 10_000  # a whole sample again, not a delta
        view = _card_view(mon.state.nodes[0])
        assert len(view) == 8 and view[1][2] == 30 and view[2][2] == 60
        assert all(c[2] == 0 for c in view if c[0] not in (1, 2))
    finally:
        await mon.stop()


@pytest.mark.integration
async def test_a_node_whose_sampler_goes_silent_goes_stale_one_with_heartbeats_does_not(two_nodes: Any) -> None:
    """n2's card tool hangs (its sampler sends nothing, not even heartbeats) while its SSH
    answers: n2 is shown down with its last cards, stale; n1, idle, sends heartbeats only
    and stays up all along. When the tool answers again n2 is back."""
    prof, cards = two_nodes
    mon = ClusterMonitor(prof, refresh_s=0.3, stale_after_s=6.0)
    assert mon.heartbeat_s >= 2  # a heartbeat every few unchanged samples, about every stale_after/2
    n1_down: list[str | None] = []
    mon.subscribe(lambda st: n1_down.append(st.nodes[0].error) if not st.nodes[0].reachable else None)
    await mon.start()
    try:
        await _until(lambda: all(len(n.gpus) == 8 for n in mon.state.nodes), "first samples")
        n1_down.clear()
        h0 = mon.heartbeats
        cards[1].hang(True)
        await _until(lambda: not mon.state.nodes[1].reachable, "n2 stale", timeout=60)
        n2 = mon.state.nodes[1]
        assert "sampler" in (n2.error or "") and len(n2.gpus) == 8  # the last cards are kept
        assert mon.pool.session("n2").connected  # its link is fine: not dropped
        assert mon.heartbeats > h0 and mon.state.nodes[0].reachable
        cards[1].hang(False)
        await _until(lambda: mon.state.nodes[1].reachable, "n2 back", timeout=60)
        assert mon.state.nodes[1].error is None
        assert n1_down == [], n1_down  # heartbeats alone kept the idle node up
    finally:
        cards[1].hang(False)
        await mon.stop()


async def test_stale_after_sets_the_heartbeat() -> None:
    prof = _direct_profile()
    mon = ClusterMonitor(prof, refresh_s=2.0)
    assert mon.stale_after_s == ClusterMonitor.STALE_AFTER_MIN_S  # a slow sample is not a stale node
    # heard from about every stale_after/2: the sample that notices comes up to an interval later
    assert mon.heartbeat_s == 3 and mon.heartbeat_s + mon.refresh_s <= mon.stale_after_s / 2
    assert ClusterMonitor(prof, refresh_s=1.0).heartbeat_s == 4
    assert ClusterMonitor(prof, refresh_s=10.0).stale_after_s == 25.0  # 2.5 intervals
    assert ClusterMonitor(prof, refresh_s=10.0).heartbeat_s == 2
    script = sampler_script(prof, 2.0, heartbeat_s=3)
    assert re.search(r'-ge 3 \]; then echo \'@@sample-end\'', script)
    assert "-r" not in script.split()  # never a guessed flag


def _read_until(proc: subprocess.Popen[bytes], stream: SampleStream,
                done: Callable[[list[str | None]], bool]) -> list[str | None]:
    """What a sampler loop sent (samples, None for a heartbeat) until `done` says enough
    (60 s at most: a bound, not a measurement); the loop is stopped after."""
    got: list[str | None] = []
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not done(got):
            if select.select([fd], [], [], 0.1)[0]:
                raw = os.read(fd, 65536)
                assert raw, got
                got += stream.feed(raw.decode())
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    return got


def test_a_node_without_awk_sends_every_sample_in_full(tmp_path: Path) -> None:
    """awk is the one tool the loop adds; where a node has none, the loop sends each
    sample whole, as before issue 37 (the console reads both)."""
    cards = FakeCards(tmp_path / "cards")
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("sed", "date", "sleep", "cat"):
        (tools / name).symlink_to(shutil.which(name) or f"/bin/{name}")
    script = sampler_script(_direct_profile(), 0.05)
    proc = subprocess.Popen([shutil.which("sh") or "/bin/sh", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={"PATH": f"{cards.dir / 'bin'}:{tools}", "LANG": "C.UTF-8", "HOME": str(tmp_path)})
    stream = SampleStream("no-awk")
    got = _read_until(proc, stream, lambda got: len(got) >= 3)
    assert len(got) >= 3 and None not in got and stream.full == len(got)
    assert all('"Gpu": "0%"' in t for t in got if t)


def test_a_node_whose_date_has_no_epoch_sends_a_heartbeat_every_unchanged_sample(tmp_path: Path) -> None:
    """The heartbeat's clock is `date +%s` (GNU, BSD and busybox date have it; POSIX does
    not promise it): where it prints no number, the loop says so every unchanged sample
    rather than never."""
    cards = FakeCards(tmp_path / "cards")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "date").write_text("#!/bin/sh\necho 'date: invalid format'\n")  # what a date without %s might say
    (tools / "date").chmod(0o755)
    script = sampler_script(_direct_profile(), 0.05, heartbeat_s=3600)
    proc = subprocess.Popen([shutil.which("sh") or "/bin/sh", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={"PATH": f"{tools}:{cards.path}", "LANG": "C.UTF-8", "HOME": str(tmp_path)})
    stream = SampleStream("no-clock")
    got = _read_until(proc, stream, lambda got: got.count(None) >= 3)
    assert got[0] is not None and got.count(None) >= 3 and stream.full == 1
