"""The console's screen without its core: the floor `bench_watch --bare` measures.

The same app, screen and widgets (`RlconsoleApp` over a `StaticBackend` on the sim's
profile, frame pacing as the live backend's), fed synthetic data at the cadence the live
console sees: idle, the same cluster state every refresh (nothing on screen changes);
with a job, every `--step-s` a new step (its log lines, the metrics) and every refresh a
state whose cards all changed. No SSH, no parsing, no polling: what is left is what
drawing these widgets costs in Textual, so `bench_watch` can say "floor X%, console Y%".

    python benchmarks/bare_console.py PROFILE [--job] [--step-s 1] [--refresh-s 2]
        [--headless SECONDS]   (headless: run that long after settling, print JSON)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.peak import own_peak_bytes  # noqa: E402  (before a child puts another tree first)


def build(profile_path: str, job: bool, pace_s: float):  # noqa: ANN201 - (app, backend)
    from tui.app import RlconsoleApp
    from tui.backend.static import StaticBackend, demo_log, demo_metrics, demo_state
    from tui.core.profile import load_profile

    profile = load_profile(profile_path)
    step = 812
    summary, series = demo_metrics(profile, step)
    backend = StaticBackend(profile=profile, state=demo_state(profile, step, busy=job),
                            log_lines=demo_log(step) if job else [], summary=summary if job else None,
                            series=series if job else {}, frame_pace_s=pace_s)
    class BareApp(RlconsoleApp):
        CSS_PATH = str(ROOT / "tui" / "app.tcss")  # relative paths are the defining module's
        feeder: Any = None

        def on_ready(self) -> None:
            """In a terminal: start feeding once the screen is up (headless, the caller feeds)."""
            if self.feeder is not None:
                self.run_worker(self.feeder, group="bare-feed")

    return BareApp(backend, bell=False), backend


async def feed(backend, job: bool, step_s: float, refresh_s: float, cards: bool = False) -> None:  # noqa: ANN001
    """Push what the live backend would: a state every refresh; with a job a step every
    `step_s` (its log lines and metrics) and cards changing every refresh."""
    from tui.backend.static import demo_log, demo_metrics

    profile = backend.profile
    step = 812
    base = backend.state
    next_state = next_step = time.monotonic()
    tick = 0
    while True:
        now = time.monotonic()
        if now >= next_state:
            next_state += refresh_s
            tick += 1
            st = base
            if job or cards:
                nodes = [replace(n, gpu=replace(n.gpu, cards=[
                    replace(c, util_pct=float(40 + (tick * 37 + c.index * 11) % 55),
                            mem_used_mib=40000.0 + ((tick + c.index) % 50) * 300) for c in n.gpus]))
                    if n.gpu is not None else n for n in base.nodes]
                st = replace(base, nodes=nodes, taken_at=time.time())
            backend.push_state(st)
        if job and now >= next_step:
            next_step += step_s
            step += 1
            backend.push_log(demo_log(step, count=4)[1:])
            backend.push_metrics(*demo_metrics(profile, step))
        await asyncio.sleep(max(0.01, min(next_state, next_step if job else next_state) - time.monotonic()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile")
    ap.add_argument("--job", action="store_true")
    ap.add_argument("--cards", action="store_true", help="every card busy, changing every refresh (no job)")
    ap.add_argument("--step-s", type=float, default=1.0)
    ap.add_argument("--refresh-s", type=float, default=2.0)
    ap.add_argument("--headless", type=float, default=0.0, metavar="SECONDS")
    a = ap.parse_args()
    pace = min(1.0, a.refresh_s / 2)  # the live monitor's notify_every_s
    app, backend = build(a.profile, a.job or a.cards, pace)

    if not a.headless:
        app.feeder = feed(backend, a.job, a.step_s, a.refresh_s, a.cards)
        app.run()
        return

    async def go() -> dict[str, float]:
        async with app.run_test(size=(160, 50)) as pilot:
            task = asyncio.ensure_future(feed(backend, a.job, a.step_s, a.refresh_s, a.cards))
            await asyncio.sleep(3.0)
            await pilot.pause()
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.monotonic()
            await asyncio.sleep(a.headless)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            wall = time.monotonic() - t0
            task.cancel()
        return {"cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), "wall_s": wall,
                "samples": 0, "parsed": 0, "nodes_up": 0,
                "rss_mb": own_peak_bytes() / 2**20}

    print(json.dumps(asyncio.run(go())))


if __name__ == "__main__":
    main()
