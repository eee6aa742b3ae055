"""Nothing lost, nothing duplicated, under a seeded random sequence of faults.

Each fault has its own test elsewhere; a 20-hour run meets them one after another, with
the console and `watch` attached, restarted and doubled in between. This benchmark runs
a real job (`soak_driver.py`: VeRL-shaped driver log at a fast cadence) on the simulated
cluster (real SSH servers on 127.0.0.x, the sim's private dockerd, real Ray), attaches
the console (`RlconsoleApp` on `LiveBackend`, headless `run_test`, in a CHILD PROCESS so a
SIGKILL and a new start is a real re-attach) and `rlconsole watch` (a child, notifying a
loopback webhook this process serves), then plays the faults of `FAULTS` in an order
drawn from the seed (printed first; `--seed N` replays it). At the end it compares:

- the local spool against the remote driver log (and the copies rotated away), line for
  line, the console's segment-marker lines aside: `lost_lines`, `duplicated_lines`;
- the steps `rlconsole metrics --job` reads from the spool: `steps_missed`,
  `steps_duplicated` (every step 1..N exactly once);
- the run journal's alert episodes (`<spool>/<job>/journal.jsonl`): each opened once
  and ended once (`alerts_unended`, `alerts_doubled`);
- the webhook's notifications: at most one per journal episode (`notifications_doubled`).

    python benchmarks/bench_chaos.py [--quick] [--json] [--seed N] [--write]
                                     [--steps N] [--faults N]

`--quick` (the CI test, tests/test_bench_chaos.py): a 2 x 2 sim, one fault of each kind
(>= 6), a few minutes. Default: 4 x 8, a 2710-step run, >= 30 faults. `--json` prints
only the counts object; the fault log goes to stderr. `--write` replaces the `chaos`
section of BENCHMARKS.md and its summary row. Loopback only; every process it starts is
stopped by PID, and the sim goes down in a `finally`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DRIVER = Path(__file__).resolve().parent / "soak_driver.py"
MARKER_PREFIX = "[rlconsole] ---- the job's remote log was "
"""The line the follower writes where a new segment starts (follower.py `_resync`)."""

WAIT_S = 240.0
"""Any single wait (a console attaching, the spool catching up): generous, the machine is
shared; a hang still ends with a message naming what it waited for."""


def say(text: str) -> None:
    """Progress goes to stderr: with --json, stdout holds only the object."""
    print(text, file=sys.stderr, flush=True)


def wait_for(cond: Callable[[], Any], what: str, timeout: float = WAIT_S, every: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# --------------------------------------------------------------------------- loopback helpers


class DelayProxy:
    """A TCP proxy on the head's loopback address in front of Ray's dashboard, whose
    answers can be held back: the sim has no slow dashboard of its own, and the console
    reaches the dashboard through the head's SSH forward to whatever port the profile
    names, so pointing the watchers' profile here makes every dashboard call slow."""

    def __init__(self, host: str, target_port: int) -> None:
        self.host, self.target_port = host, target_port
        self.delay = 0.0
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._conn, self.host, 0))
        self.port = self.server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, slow: bool) -> None:
        try:
            while data := await r.read(65536):
                if slow and self.delay:
                    await asyncio.sleep(self.delay)
                w.write(data)
                await w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                w.close()

    async def _conn(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.wait_for(asyncio.open_connection(self.host, self.target_port), 10)
        except (OSError, asyncio.TimeoutError):
            w.close()
            return
        await asyncio.gather(self._pipe(r, uw, False), self._pipe(ur, w, True))

    def close(self) -> None:
        def stop() -> None:
            self.server.close()
            self.loop.stop()
        self.loop.call_soon_threadsafe(stop)
        self.thread.join(10)


class Receiver:
    """The webhook `watch` notifies: every JSON body POSTed, in order (loopback)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                with contextlib.suppress(ValueError):
                    outer.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------- the world


@dataclass
class World:
    """Everything a fault acts on, and what the run recorded."""

    rng: random.Random
    tmp: Path
    sim: Path
    profile: Path           # the watchers' profile (dashboard through the proxy)
    prof: Any
    job_id: str
    steps: int
    log_path: Path          # the remote driver log (the head's file, on this machine)
    spool_path: Path
    pause_file: Path
    proxy: DelayProxy
    hold_s: float
    consoles: list[subprocess.Popen[bytes]] = field(default_factory=list)
    rotated: list[Path] = field(default_factory=list)
    console_restarts: int = 0
    rss_max: float = 0.0
    fault_log: list[str] = field(default_factory=list)

    # -- the console children

    def start_console(self) -> subprocess.Popen[bytes]:
        n = len(self.consoles) + self.console_restarts
        logf = (self.tmp / f"console-{n}.log").open("wb")
        p = subprocess.Popen([sys.executable, __file__, "--console", str(self.profile)], cwd=ROOT,
                             stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        self.consoles.append(p)
        return p

    def stop_console(self, p: subprocess.Popen[bytes], sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(sig)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
        self.consoles.remove(p)

    def sample_rss(self) -> None:
        for p in self.consoles:
            self.rss_max = max(self.rss_max, rss_mb(p.pid))

    # -- the job

    def step(self) -> int:
        """The last step in the remote log (what the job has done)."""
        return last_step(self.log_path)

    def pause(self) -> None:
        self.pause_file.touch()

    def resume(self) -> None:
        self.pause_file.unlink(missing_ok=True)

    def caught_up(self) -> bool:
        """The spool holds every byte of the remote file's current segment."""
        try:
            size = self.log_path.stat().st_size
            seg = json.loads(self.spool_path.with_name(self.spool_path.name + ".seg").read_text())
            return int(self.spool_path.stat().st_size) - int(seg.get("base", 0)) >= size
        except (OSError, ValueError):
            return False

    def hold(self, k: float = 1.0) -> None:
        """Let the fault last, sampling the consoles' memory meanwhile."""
        end = time.monotonic() + self.hold_s * k
        while time.monotonic() < end:
            self.sample_rss()
            time.sleep(0.5)


def last_step(path: Path) -> int:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 400_000))
            tail = f.read()
    except OSError:
        return 0
    i = tail.rfind(b") step:")
    if i < 0:
        return 0
    return int(tail[i + 7:tail.index(b" ", i + 7)])


# --------------------------------------------------------------------------- faults


def f_ssh(node_index: Callable[[World], int], hold: float) -> Callable[[World], str]:
    def run(w: World) -> str:
        from tui.sim.cluster import sim_node

        node = w.prof.nodes[node_index(w)].name
        sim_node("stop", node, state_dir=w.sim)
        try:
            w.hold(hold)
        finally:
            sim_node("start", node, state_dir=w.sim)
        return node
    return run


def f_console_kill(w: World) -> str:
    victim = w.consoles[0]
    w.stop_console(victim, signal.SIGKILL)
    w.console_restarts += 1
    w.hold(0.3)
    w.start_console()
    return f"pid {victim.pid}"


def f_two_consoles(w: World) -> str:
    second = w.start_console()
    w.hold(1.5)
    w.stop_console(second, signal.SIGTERM)
    return f"pid {second.pid}"


def f_dashboard_slow(w: World) -> str:
    """Late answers (2 s a chunk), or later than the probe waits (6 s: 5 s timeout), long
    enough for several missed polls and the `ray status` fallback."""
    delay = w.proxy.delay = w.rng.choice((2.0, 6.0))
    try:
        w.hold(2.0)
    finally:
        w.proxy.delay = 0.0
    return f"{delay:g} s a chunk"


def f_stall(w: World) -> str:
    w.pause()
    try:
        w.hold(1.5)
    finally:
        w.resume()
    return f"at step {w.step()}"


def f_log_truncate(w: World) -> str:
    """copytruncate, as logrotate does for a writer that cannot reopen its file (Ray holds
    the driver's stdout O_APPEND): the job is held still and the spool allowed to catch up
    first, so what is measured is the follower's handling of the cut, not the rotation's
    own race (bytes written between the copy and the cut are lost by any reader)."""
    w.pause()
    try:
        wait_for(w.caught_up, "the spool to catch up before the rotation")
        dst = w.tmp / f"rotated-{len(w.rotated)}.log"
        shutil.copyfile(w.log_path, dst)
        w.rotated.append(dst)
        os.truncate(w.log_path, 0)
    finally:
        w.resume()
    w.hold(0.5)
    return f"{dst.stat().st_size} bytes rotated away"


def f_card_hot(w: World) -> str:
    """A card held hot through the card tool's documented hook (gmi.py), then cleared."""
    from tui.sim.faults import clear_faults

    node = w.rng.choice(w.prof.nodes).name
    card = w.rng.randrange(w.prof.nodes[0].gpus)
    p = w.sim / "nodes" / node / "gpu-load" / f"{card}.fault.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"pid": 1, "util": 100, "mem_mib": 81000, "temp_c": 95, "name": "bench_chaos"}))
    try:
        w.hold(1.5)
    finally:
        clear_faults(w.sim)
    return f"{node} card {card}"


@dataclass(frozen=True)
class Fault:
    """One kind of fault: what it does to the run, and why a run meets it."""

    name: str
    why: str
    run: Callable[[World], str]


FAULTS: list[Fault] = [
    Fault("head-ssh", "the head's SSH server stops and starts: the log follower and probes reconnect",
          f_ssh(lambda w: 0, 1.0)),
    Fault("worker-ssh", "a worker's SSH server stops and starts briefly",
          f_ssh(lambda w: w.rng.randrange(1, len(w.prof.nodes)) if len(w.prof.nodes) > 1 else 0, 0.5)),
    Fault("node-away", "a worker is lost long enough to be reported down, then comes back (its SSH; "
          "`sim fault node-lost` would also kill its raylet and fail the job)",
          f_ssh(lambda w: len(w.prof.nodes) - 1, 2.0)),
    Fault("console-kill", "the console is SIGKILLed and started again: a re-attach to its own spool",
          f_console_kill),
    Fault("two-consoles", "a second console attaches for a while, then quits", f_two_consoles),
    Fault("dashboard-slow", "Ray's dashboard answers late, or too late", f_dashboard_slow),
    Fault("stall", "the trainer makes no step for a while (alive): a stall episode", f_stall),
    Fault("log-truncate", "the remote driver log is rotated (copytruncate): a new spool segment",
          f_log_truncate),
    Fault("card-hot", "a card runs hot, then is cleared: a card alert episode", f_card_hot),
]
BY_NAME = {f.name: f for f in FAULTS}


def schedule(rng: random.Random, n: int) -> list[Fault]:
    """`n` faults: rounds of every kind, each round shuffled, so that even a short run
    meets each kind once."""
    out: list[Fault] = []
    while len(out) < n:
        rnd = list(FAULTS)
        rng.shuffle(rnd)
        out += rnd
    return out[:n]


# --------------------------------------------------------------------------- the console child


def console_child(profile_path: str) -> int:
    """`--console PROFILE`: the whole console, headless, until SIGTERM (a clean quit) or
    SIGKILL (a crash). What the user runs, minus the terminal."""
    from tui.app import RlconsoleApp
    from tui.backend.live import LiveBackend
    from tui.core.profile import load_profile

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        b = LiveBackend(load_profile(profile_path))
        app = RlconsoleApp(b)
        async with app.run_test(size=(160, 50)):
            print("console attached", flush=True)
            await stop.wait()
        if b._tasks:
            await asyncio.wait_for(b.stop(), 60)

    asyncio.run(main())
    return 0


# --------------------------------------------------------------------------- set-up


def watchers_profile(src: Path, dst: Path, proxy_port: int, step_s: float) -> Path:
    """The sim profile for the console and watch: the dashboard through the delaying
    proxy; no metric ranges (the soak driver's figures are not the stand-in trainer's,
    and a range episode that never ends is noise here); a stall after ~4 s without a step."""
    import yaml

    data = yaml.safe_load(src.read_text())
    data["ray"]["dashboard_port"] = proxy_port
    mon = data.setdefault("monitoring", {})
    for k in ("mfu_pct", "throughput_tokens_per_s_per_node", "step_time_min", "mem_gib_per_card"):
        mon.pop(k, None)
    mon.update(refresh_s=1.0, stall_factor=max(3.0, 4.0 / step_s))
    dst.write_text(yaml.safe_dump(data, sort_keys=False))
    return dst


def submit(prof: Any, profile_path: Path, tmp: Path, a: argparse.Namespace, step_s: float,
           pause_file: Path) -> str:
    from tui.core.job.history import RunRecord, record_run
    from tui.core.rayapi import RayJobClient

    tb, ck = tmp / "run" / "tb", tmp / "run" / "ckpt"
    entry = (f"{sys.executable} {DRIVER} --steps {a.steps} --tags {a.tags} --bytes-per-step {a.bytes_per_step} "
             f"--step-s {step_s:g} --ckpt-every 10 --tb {tb} --ckpt {ck} --pause-file {pause_file}")
    client = RayJobClient(prof.ray.dashboard_port, host=prof.ray.dashboard_host)
    job_id = asyncio.run(asyncio.wait_for(
        client.submit(entry, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}}), 120))
    record_run(RunRecord(profile=prof.name, profile_path=str(profile_path), job_id=job_id,
                         submitted_at=time.time(), entrypoint=entry.split(), runtime_env={},
                         tensorboard_dir=str(tb), checkpoint_dir=str(ck)))
    return job_id


def job_status(prof: Any, job_id: str) -> str:
    from tui.core.rayapi import RayJobClient

    client = RayJobClient(prof.ray.dashboard_port, host=prof.ray.dashboard_host, timeout=10)
    try:
        j = asyncio.run(asyncio.wait_for(client.get_job(job_id), 15))
    except (OSError, asyncio.TimeoutError, ConnectionError):
        return "?"
    return str(j.status) if j is not None else "?"


# --------------------------------------------------------------------------- the checks


def _lines_of(paths: list[Path], skip_markers: bool) -> Iterator[bytes]:
    """The files' lines in order, split on `\n` only (tqdm lines hold `\r`), streamed: a
    full run's log is ~325 MB."""
    marker = MARKER_PREFIX.encode()
    for p in paths:
        with p.open("rb") as f:
            for line in f:
                if not (skip_markers and line.startswith(marker)):
                    yield line


def compare_log(remote_files: list[Path], spool_path: Path) -> tuple[int, int]:
    """(lost, duplicated) lines: the spool, marker lines aside, against the remote log's
    files in order (the rotated copies, then the current file). Equal line for line is
    (0, 0), read as a stream; otherwise both are counted as multisets (a loss and a
    duplicate are told apart, wherever they are)."""
    same = all(a == b for a, b in itertools.zip_longest(_lines_of(remote_files, False),
                                                        _lines_of([spool_path], True)))
    if same:
        return 0, 0
    want_c = collections.Counter(_lines_of(remote_files, False))
    have_c = collections.Counter(_lines_of([spool_path], True))
    return sum((want_c - have_c).values()), sum((have_c - want_c).values())


def check_steps(w: World) -> tuple[int, int]:
    """(missed, duplicated) steps in `rlconsole metrics --job ID --json` (the spool)."""
    r = subprocess.run([sys.executable, "-m", "tui.cli", "metrics", "--job", w.job_id, "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"metrics --job failed: {r.stderr.strip()[-500:]}")
    return step_counts([int(row["step"]) for row in json.loads(r.stdout)], w.steps)


def step_counts(seen: list[int], steps: int) -> tuple[int, int]:
    """(missed, duplicated): steps 1..`steps` each expected exactly once in `seen`."""
    c = collections.Counter(seen)
    missed = len(set(range(1, steps + 1)) - set(c))
    return missed, sum(n - 1 for n in c.values() if n > 1)


def episodes(journal: Path) -> dict[str, list[tuple[str, float]]]:
    """Alert episode events from the journal, by episode key: ("open"|"end", time)."""
    from tui.core.job.journal import Journal

    out: dict[str, list[tuple[str, float]]] = collections.defaultdict(list)
    for e in Journal(journal.parent).entries():
        ep = e.data.get("episode")
        if isinstance(ep, str):
            out[ep].append(("end" if e.data.get("ends") else "open", e.at))
    return out


RUN_END = "job-end"
"""The alert rules' episode for the job's end: it opens when the run ends and stays open
(the run IS over) until another job is watched, so it is not counted as unended."""


def check_alerts(eps: dict[str, list[tuple[str, float]]]) -> tuple[int, int, int]:
    """(unended, doubled, episodes): an episode opened while open, or ended while ended, is
    doubled; one still open at the end (the run's end aside) is unended."""
    unended = doubled = n = 0
    for key, evs in eps.items():
        state = "end"
        for what, _ in evs:
            if what == state:
                doubled += 1
            state = what
            n += what == "open"
        unended += state == "open" and key != RUN_END
    return unended, doubled, n


def check_notifications(eps: dict[str, list[tuple[str, float]]], bodies: list[dict[str, Any]],
                        why: list[str] | None = None) -> int:
    """Notifications beyond one per journal episode (by key and time: a notification
    belongs to the episode open at its time, else to the nearest within 2 s of slack for
    the processes' clocks). `why` gets a line per doubled key: its episodes and its notifications' times."""
    doubled = 0
    by_key: dict[str, list[float]] = collections.defaultdict(list)
    for b in bodies:
        if isinstance(b.get("key"), str) and isinstance(b.get("time"), (int, float)):
            by_key[b["key"]].append(float(b["time"]))
    for key, times in by_key.items():
        spans: list[tuple[float, float]] = []
        start: float | None = None
        for what, at in eps.get(key, []):
            if what == "open" and start is None:
                start = at
            elif what == "end" and start is not None:
                spans.append((start, at))
                start = None
        if start is not None:
            spans.append((start, float("inf")))
        counts: collections.Counter[int] = collections.Counter()
        for t in times:
            # the episode open at its time; else the nearest within the slack (two
            # episodes of one key can be a second apart: the first one's slack must
            # not take the second's notification)
            inside = [i for i, (a, b) in enumerate(spans) if a <= t <= b]
            near = sorted((max(a - t, t - b), i) for i, (a, b) in enumerate(spans) if a - 2 <= t <= b + 2)
            counts[inside[0] if inside else near[0][1] if near else -1] += 1
        extra = sum(n - 1 for n in counts.values() if n > 1)
        doubled += extra
        if extra and why is not None:
            why.append(f"{key}: episodes {[(round(a, 1), round(b, 1)) for a, b in spans]}, "
                       f"notified at {[round(t, 1) for t in times]}")
    return doubled


# --------------------------------------------------------------------------- the run


def run(a: argparse.Namespace, seed: int, tmp: Path) -> dict[str, Any]:
    from tui.cli import main as cli
    from tui.core.locations import spool_root
    from tui.core.profile import load_profile
    from tui.core.raypaths import driver_log_path
    from tui.sim.cluster import sim_down, sim_up

    rng = random.Random(seed)
    plan = schedule(rng, a.faults)
    # the job must outlast the faults: ~FAULT_S of wall time each, plus the first steps
    step_s = max(a.step_s, (len(plan) * a.fault_s + 20) / a.steps)
    sim = tmp / "sim"
    procs: list[subprocess.Popen[bytes]] = []
    receiver = Receiver()
    proxy: DelayProxy | None = None
    w: World | None = None
    res: dict[str, Any] = {}
    try:
        t0 = time.monotonic()
        src = Path(sim_up(a.nodes, a.gpus, state_dir=sim))
        with contextlib.redirect_stdout(sys.stderr):
            for act in ("containers", "setup-ray"):
                if cli([act, "--profile", str(src), "--yes"]) != 0:
                    raise RuntimeError(f"{act} failed on the sim")
        base = load_profile(src)
        proxy = DelayProxy(base.ray.dashboard_host, base.ray.dashboard_port)
        prof_path = watchers_profile(src, tmp / "chaos.yaml", proxy.port, step_s)
        prof = load_profile(prof_path)
        pause_file = tmp / "pause"
        job_id = submit(base, prof_path, tmp, a, step_s, pause_file)
        say(f"job {job_id}: {a.steps} steps at {step_s:.2f} s, {a.bytes_per_step} B of log a step; "
            f"{len(plan)} faults; set-up {time.monotonic() - t0:.0f} s")
        w = World(rng=rng, tmp=tmp, sim=sim, profile=prof_path, prof=prof, job_id=job_id, steps=a.steps,
                  log_path=Path(driver_log_path(base, job_id)),
                  spool_path=spool_root() / job_id / "driver.log", pause_file=pause_file, proxy=proxy,
                  hold_s=a.hold_s)
        # the console first: it owns the spool (one writer per job), so the first
        # console-kill kills the writer mid-stream and `watch` must take over
        w.start_console()
        wait_for(lambda: w.spool_path.exists() and w.spool_path.stat().st_size > 0, "the spool's first bytes")
        logf = (tmp / "watch.log").open("wb")
        procs.append(subprocess.Popen([sys.executable, "-m", "tui.cli", "watch", "--profile", str(prof_path),
                                       "--notify", receiver.url], cwd=ROOT, stdin=subprocess.DEVNULL,
                                      stdout=logf, stderr=subprocess.STDOUT))
        logf.close()
        t_faults = time.monotonic()
        for i, f in enumerate(plan):
            if w.step() >= a.steps:
                say(f"the job ended before fault {i + 1}: raise --steps or lower --faults")
                break
            at = w.step()
            detail = f.run(w)
            line = f"{i + 1:3d}. step {at:5d}  {f.name:<14} {detail}"
            w.fault_log.append(line)
            say(line)
            w.hold(rng.uniform(0.5, 1.0))  # the run recovers before the next one
        res["faults"] = len(w.fault_log)
        res["faults_s"] = time.monotonic() - t_faults
        wait_for(lambda: job_status(base, job_id) in ("SUCCEEDED", "FAILED", "STOPPED"),
                 "the job to end", timeout=a.steps * step_s * 3 + WAIT_S, every=2)
        res["job_status"] = job_status(base, job_id)
        # every watcher sees the end (the episodes it ends) and the spool the last byte
        wait_for(lambda: w.caught_up() and last_step(w.spool_path) >= a.steps, "the spool's last step")
        w.hold(8 / max(w.hold_s, 0.1))
        for p in list(w.consoles):
            w.stop_console(p, signal.SIGTERM)
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
        res["state_changes"] = [ln.split(" ", 2)[2] for ln in (tmp / "watch.log").read_text().splitlines()
                                if " JOB " in ln and "->" in ln]
        lost, dup = compare_log([*w.rotated, w.log_path], w.spool_path)
        missed, sdup = check_steps(w)
        eps = episodes(w.spool_path.parent / "journal.jsonl")
        unended, doubled, n_eps = check_alerts(eps)
        why: list[str] = []
        notified_twice = check_notifications(eps, receiver.bodies, why)
        for line in why:  # what a failure needs to be understood, beside the seed
            say(f"notified twice: {line}")
        res.update(seed=seed, lost_lines=lost, duplicated_lines=dup, steps_missed=missed,
                   steps_duplicated=sdup, alerts_unended=unended, alerts_doubled=doubled,
                   notifications_doubled=notified_twice,
                   console_restarts=w.console_restarts, rss_mb_max=round(w.rss_max, 1),
                   episodes=n_eps, notifications=len(receiver.bodies), fault_log=w.fault_log,
                   segments=len(w.rotated) + 1, wall_s=time.monotonic() - t0, step_s=step_s)
        return res
    finally:
        if w is not None:
            w.resume()
            for p in list(w.consoles):
                with contextlib.suppress(Exception):
                    w.stop_console(p, signal.SIGKILL)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        receiver.close()
        if proxy is not None:
            proxy.close()
        sim_down(state_dir=sim)


JSON_KEYS = ("seed", "faults", "lost_lines", "duplicated_lines", "steps_missed", "steps_duplicated",
             "alerts_unended", "alerts_doubled", "notifications_doubled", "console_restarts", "rss_mb_max")
COUNTS = JSON_KEYS[2:9]


def report(res: dict[str, Any], a: argparse.Namespace) -> str:
    load = os.getloadavg()[0]
    kinds = collections.Counter(line.split()[3] for line in res["fault_log"])
    lines = [
        "",
        f"`python benchmarks/bench_chaos.py --seed {res['seed']}{' --quick' if a.quick else ''}"
        f" --steps {a.steps} --faults {a.faults}`: a {a.steps}-step job (`soak_driver.py`, "
        f"{a.bytes_per_step / 1000:.0f} KB of driver log a step, one step every {res['step_s']:.2f} s) on the "
        f"{a.nodes} x {a.gpus} sim, the console (`RlconsoleApp` on `LiveBackend`, headless, a child process) and "
        f"`rlconsole watch` (a loopback webhook) attached; {res['faults']} faults in a seeded order; the job "
        f"{res['job_status']}; {res['wall_s']:.0f} s in all. Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs shared with other work (load average {load:.1f}), {time.strftime('%Y-%m-%d')}.",
        "",
        "| count | value |",
        "|---|---:|",
    ]
    lines += [f"| {k} | {res[k]} |" for k in ("faults", *COUNTS, "console_restarts", "rss_mb_max")]
    lines += [f"| alert episodes (journal) | {res['episodes']} |", f"| notifications | {res['notifications']} |",
              f"| log segments | {res['segments']} |"]
    lines += [f"| job state changes `watch` printed | {len(res['state_changes'])} |"]
    lines += ["", "Faults played: " + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())) + ".",
              "", "Every count is the target 0: lines are the spool against the remote log and its rotated "
              "copies (the console's segment markers aside), steps are `rlconsole metrics --job`, alerts "
              "the run journal's episodes, notifications the webhook's bodies per episode."]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description="Faults against a running job; counts of anything lost or doubled")
    ap.add_argument("--quick", action="store_true", help="2 x 2 sim, one fault of each kind, a few minutes")
    ap.add_argument("--json", action="store_true", help="print only the counts object")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--write", action="store_true", help="write the chaos section of BENCHMARKS.md")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--faults", type=int, default=None)
    ap.add_argument("--bytes-per-step", type=int, default=None,
                    help="driver log a step (default: a real run's ~120 KB; --quick 8 KB)")
    ap.add_argument("--console", metavar="PROFILE", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.console:
        return console_child(a.console)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"seed {seed}", file=sys.stderr if a.json else sys.stdout, flush=True)
    quick = a.quick
    a.steps = a.steps or (600 if quick else 2710)
    a.faults = a.faults or (len(FAULTS) if quick else 30)
    a.nodes, a.gpus = (2, 2) if quick else (4, 8)
    a.tags = 40 if quick else 130
    a.bytes_per_step = a.bytes_per_step or (8_000 if quick else 120_000)
    a.step_s = 0.1
    a.hold_s = 4.0 if quick else 6.0
    a.fault_s = 8.0 if quick else 16.0

    tmp = Path(tempfile.mkdtemp(prefix="chaos-"))
    os.environ.update(XDG_STATE_HOME=str(tmp / "xdg-state"), XDG_CONFIG_HOME=str(tmp / "xdg-config"),
                      XDG_CACHE_HOME=str(tmp / "xdg-cache"), RLCONSOLE_STATE_DIR=str(tmp / "state"))
    os.environ.pop("RLCONSOLE_PROFILE", None)
    try:
        res = run(a, seed, tmp)
    finally:
        if not os.environ.get("BENCH_CHAOS_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps({k: res[k] for k in JSON_KEYS}))
    else:
        print(report(res, a))
        print("\nFault log:\n" + "\n".join(res["fault_log"]))
        print("\nJob state changes `watch` printed (one expected: RUNNING -> the end):\n"
              + "\n".join(res["state_changes"]))
    if a.write:
        from benchmarks.mdsection import record_summary, write_section

        text = report(res, a)
        write_section("chaos", text, heading="Nothing lost under faults (chaos)")
        bad = sum(int(res[k]) for k in COUNTS)
        full = a.steps >= 2710 and res["faults"] >= 30
        met = ("yes" if full else "yes, on a shortened run") if bad == 0 else "no"
        record_summary("chaos", [
            {"figure": f"chaos: lines, steps, alerts, notifications lost or doubled; {a.steps} steps, "
                       f"{res['faults']} faults (bench_chaos)",
             "baseline": "-", "rlconsole": str(bad), "ratio": "-", "target": "0 (2710 steps, >= 30 faults)",
             "met": met},
        ])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
