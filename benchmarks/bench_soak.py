"""The console over a whole run: a soak on the simulated cluster.

One command brings up a 4 x 8 sim (real SSH, real dockerd, real Ray), runs containers
and setup-ray, then submits an accelerated full run of the reference size as a real Ray
job (`soak_driver.py`: 2710 steps, 130 scalar tags a step, ~120 KB of driver log a step
= ~310 MB over the run, TensorBoard events, a checkpoint every 10 steps), while the
console (`RlconsoleApp` on `LiveBackend`, headless `App.run_test`) stays attached from
submit to the end. At the start, the middle and the end it records:

- keypress-to-frame p95 (`f` posted -> the first repaint after its handler ran);
- the console's RSS;
- CPU per refresh on the app's loop (`LiveBackend.refresh_metrics`: RunMetrics, job
  state, pane summary, series), and the whole console's CPU seconds per wall second;
- `rlconsole status --json` wall time on a copy of the spool at that point (a copy:
  status must not append to the spool the console is writing).

    python benchmarks/bench_soak.py [--steps 2710] [--log-scale 1.0] [--step-s 0.1] [--write]

`--log-scale 0.1` writes a tenth of the log volume for a quick run; the section says
which was measured. `--write` replaces only the `soak` section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DRIVER = Path(__file__).resolve().parent / "soak_driver.py"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def keypress_p95(app: Any, presses: int) -> tuple[float, float]:
    """(p50, p95) ms from posting `f` to the first repaint after its handler ran."""
    from textual.events import Key

    screen = app.screen
    handled: list[float] = []
    orig = screen.action_toggle_follow

    def hooked() -> None:
        orig()
        handled.append(time.perf_counter())

    screen.action_toggle_follow = hooked  # type: ignore[method-assign]
    lat: list[float] = []
    try:
        for _ in range(presses):
            n = len(handled)
            t = time.perf_counter()
            app.post_message(Key("f", "f"))
            while len(handled) == n:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0)
            done = asyncio.Event()
            app.call_after_refresh(done.set)
            await done.wait()
            lat.append(time.perf_counter() - t)
            await asyncio.sleep(0.1)
    finally:
        screen.action_toggle_follow = orig  # type: ignore[method-assign]
    lat.sort()
    return 1000 * statistics.median(lat), 1000 * lat[int(0.95 * (len(lat) - 1))]


def status_time(profile_path: Path, state: Path, job_id: str, into: Path) -> tuple[float, float]:
    """Wall seconds of `rlconsole status --json` on a copy of the console's spool and run
    history as they are now: the first run, and the median of two more."""
    if into.exists():
        shutil.rmtree(into)
    (into / "spool").mkdir(parents=True)
    shutil.copy(state / "runs.jsonl", into / "runs.jsonl")
    shutil.copytree(state / "spool" / job_id, into / "spool" / job_id)
    env = dict(os.environ, RLCONSOLE_STATE_DIR=str(into))
    out = []
    for _ in range(3):
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "tui.cli", "status", "--profile", str(profile_path), "--json"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        out.append(time.perf_counter() - t)
        if r.returncode != 0:
            raise RuntimeError(f"status failed: {r.stderr[-2000:]}")
    return out[0], statistics.median(out[1:])


async def soak(profile_path: Path, a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from tui.app import RlconsoleApp
    from tui.core.actions.jobs import job_client
    from tui.core.locations import state_dir
    from tui.core.job.history import RunRecord, record_run
    from tui.core.profile import load_profile
    from tui.backend.live import LiveBackend

    prof = load_profile(profile_path)
    b = LiveBackend(prof)
    cost: list[tuple[int, float]] = []
    orig = b.refresh_metrics

    def timed(w: Any) -> None:
        t = time.thread_time()
        orig(w)
        cost.append((w.parser.last_step or 0, time.thread_time() - t))

    b.refresh_metrics = timed  # type: ignore[method-assign]
    app = RlconsoleApp(b)
    bytes_per_step = int(120_000 * a.log_scale)
    res: dict[str, Any] = {"phases": [], "bytes_per_step": bytes_per_step}
    async with app.run_test(size=(160, 50)):
        client = await asyncio.wait_for(job_client(b.remote), 120)
        tb, ck = tmp / "run" / "tb", tmp / "run" / "ckpt"
        entry = (f"{sys.executable} {DRIVER} --steps {a.steps} --tags {a.tags} --bytes-per-step {bytes_per_step} "
                 f"--step-s {a.step_s} --ckpt-every 10 --tb {tb} --ckpt {ck}")
        job_id = await asyncio.wait_for(client.submit(entry, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}}),
                                        120)
        record_run(RunRecord(profile=prof.name, profile_path=str(profile_path), job_id=job_id,
                             submitted_at=time.time(), entrypoint=entry.split(), runtime_env={},
                             tensorboard_dir=str(tb), checkpoint_dir=str(ck)))
        b._kick.set()
        t_submit = time.monotonic()
        res["job_id"] = job_id
        for name, at in (("start", min(20, a.steps)), ("middle", a.steps // 2), ("end", a.steps)):
            deadline = time.monotonic() + a.steps * a.step_s * 6 + 900
            while True:
                job = b._job
                step = job.step if job is not None and job.id == job_id else None
                if step is not None and step >= at:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name}: the console did not reach step {at} (at {step})")
                await asyncio.sleep(0.5)
            seen_at = time.monotonic() - t_submit
            p0, w0 = time.process_time(), time.monotonic()
            n0 = len(cost)
            p50, p95 = await keypress_p95(app, a.presses)
            await asyncio.sleep(max(0.0, 5.0 - (time.monotonic() - w0)))
            cpu_share = (time.process_time() - p0) / (time.monotonic() - w0)
            recent = [c for _, c in cost[n0:]] or [c for _, c in cost[-5:]]
            spool = state_dir() / "spool" / job_id / "driver.log"
            st1, st2 = status_time(profile_path, state_dir(), job_id, tmp / f"status-{name}")
            ph = {"phase": name, "step": step, "at_s": seen_at, "key_p50_ms": p50, "key_p95_ms": p95,
                  "rss_mb": rss_mb(), "refresh_cpu_ms": 1000 * statistics.median(recent),
                  "refresh_cpu_max_ms": 1000 * max(recent), "cpu_share": cpu_share,
                  "spool_mb": spool.stat().st_size / 1e6, "status_s": st1, "status2_s": st2}
            res["phases"].append(ph)
            print(ph, file=sys.stderr, flush=True)
        res["job_s"] = time.monotonic() - t_submit
    await asyncio.wait_for(b.stop(), 60) if b._tasks else None
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description="The console attached over a whole (accelerated) run")
    ap.add_argument("--steps", type=int, default=2710)
    ap.add_argument("--tags", type=int, default=130)
    ap.add_argument("--log-scale", type=float, default=1.0, help="fraction of the ~120 KB/step driver log")
    ap.add_argument("--step-s", type=float, default=0.1)
    ap.add_argument("--presses", type=int, default=20)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rlconsole-soak-"))
    os.environ.update(XDG_STATE_HOME=str(tmp / "xdg-state"), XDG_CONFIG_HOME=str(tmp / "xdg-config"),
                      RLCONSOLE_STATE_DIR=str(tmp / "state"))
    from tui.cli import main as cli
    from tui.sim.cluster import sim_down, sim_up

    sim = tmp / "sim"
    path = Path(sim_up(4, 8, state_dir=sim))
    try:
        for act in ("containers", "setup-ray"):
            if cli([act, "--profile", str(path), "--yes"]) != 0:
                raise SystemExit(f"{act} failed")
        t0 = time.monotonic()
        res = asyncio.run(soak(path, a, tmp))
        res["wall_s"] = time.monotonic() - t0
    finally:
        sim_down(state_dir=sim)
        shutil.rmtree(tmp, ignore_errors=True)  # ~0.9 GB: the run's log, its spool, copies
    load = os.getloadavg()[0]
    total_mb = res["phases"][-1]["spool_mb"]
    lines = [
        "",
        f"`python benchmarks/bench_soak.py --steps {a.steps} --log-scale {a.log_scale:g} --step-s {a.step_s:g}`: "
        f"{a.steps} steps, {a.tags} scalar tags a step, {res['bytes_per_step'] / 1000:.0f} KB of driver log a step "
        f"({total_mb:,.0f} MB over the run{' - the full volume' if a.log_scale >= 1 else f', {a.log_scale:g} of the full ~310 MB'}), "
        f"TensorBoard events and a checkpoint every 10 steps, one step every {a.step_s:g} s (accelerated), as a real "
        f"Ray job on the 4 x 8 sim; the console (`RlconsoleApp` on `LiveBackend`, headless `run_test` 160x50) "
        f"attached from submit to the last step ({res['job_s']:.0f} s). Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs shared with other work (load average {load:.1f}), {time.strftime('%Y-%m-%d')}.",
        "",
        "| phase | step seen | key p50 | key p95 | RSS | CPU per refresh (median / max) | console CPU s per s | spool | `status --json` (1st / then) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in res["phases"]:
        lines.append(f"| {p['phase']} | {p['step']} | {p['key_p50_ms']:.0f} ms | {p['key_p95_ms']:.0f} ms | "
                     f"{p['rss_mb']:.0f} MB | {p['refresh_cpu_ms']:.1f} / {p['refresh_cpu_max_ms']:.1f} ms | "
                     f"{p['cpu_share']:.2f} | {p['spool_mb']:,.0f} MB | {p['status_s']:.2f} / {p['status2_s']:.2f} s |")
    lines += ["", "Targets: key p95 <= 100 ms throughout; RSS <= 300 MB at the end; CPU per refresh flat in "
              "the step count; `status` on a full-run spool <= 1 s. `status` is a fresh process each time "
              "(interpreter start, imports, SSH to 4 nodes, Ray's API) on a copy of the spool.",
              "", "History (same command): as first measured on 2026-12-02 (load average 3-8), CPU per "
              "refresh was 1.7 / 50.2 / 87.9 ms at start / middle / end (every refresh re-merged and "
              "re-scanned every step's 130 metrics), RSS 148 / 203 / 237 MB and `status --json` 3.2 / 2.5 / "
              "3.2 s (it re-parsed the whole spool). Then a refresh came to merge only the new steps "
              "(`SeriesIndex`): 0.6 / 3.2 / 5.6 ms, still growing with list copies of whole series for the "
              "sparklines, RSS 271 MB at the end and `status` 2.7-2.9 s (load average 5.6). Since: the "
              "sparklines' means come from prefix sums (a refresh is flat in the step count), `status` "
              "reads the parse cache's summary (`parsed-summary.json`, 0.3 MB) instead of every step, and "
              "the index holds a series as two C arrays and its prefix sums as C doubles (tracemalloc, "
              "2710 steps x 130 tags: 89 -> 55 MB of metric structures). What is left of the RSS is the "
              "run's steps as the log parser and TensorBoard's reader hold them (dicts of floats, ~17 MB "
              "each), the merged view, the spool's line index (8 bytes a line, 16 MB) and Textual. "
              "`status` is interpreter start and imports (~0.25 s), SSH to 4 nodes and Ray's API, and "
              "~0.1 s for the job; on two cores shared with a loaded machine it has taken 1.7-2.2 s."]
    text = "\n".join(lines)
    print(text)
    if a.write:
        from benchmarks.mdsection import record_summary, write_section

        write_section("soak", text, heading="The console over a whole run (soak)")
        ph = res["phases"]
        p95 = max(p["key_p95_ms"] for p in ph)
        end = ph[-1]
        record_summary("soak", [
            {"figure": f"whole-run soak ({a.steps} steps): worst keypress p95 (bench_soak)", "baseline": "-",
             "rlconsole": f"{p95:.0f} ms", "ratio": "-", "target": "<= 100 ms", "met": "yes" if p95 <= 100 else "no"},
            {"figure": "whole-run soak: console RSS at the end (bench_soak)", "baseline": "-",
             "rlconsole": f"{end['rss_mb']:.0f} MB", "ratio": "-", "target": "<= 300 MB",
             "met": "yes" if end["rss_mb"] <= 300 else "no"},
            {"figure": "whole-run soak: CPU per refresh, start -> end (bench_soak)", "baseline": "-",
             "rlconsole": f"{ph[0]['refresh_cpu_ms']:.1f} -> {end['refresh_cpu_ms']:.1f} ms", "ratio": "-",
             "target": "flat", "met": "no (grows slowly)" if end["refresh_cpu_ms"] > 2 * max(ph[0]["refresh_cpu_ms"], 1) else "yes"},
            {"figure": "whole-run soak: `status` on the full-run spool (bench_soak)", "baseline": "-",
             "rlconsole": f"{end['status2_s']:.2f} s", "ratio": "-", "target": "<= 1 s",
             "met": "yes" if end["status2_s"] <= 1 else "no"},
        ])


if __name__ == "__main__":
    main()
