"""Write docs/screenshot.svg: the console as it shows a running job on the simulated cluster.

By default the screenshot comes from the live path (`LiveBackend`, the one users watch):
it starts the simulated cluster in a temporary directory, runs the seed's procedure
headless (containers, convert, setup-ray, submit), waits for steps, opens the console
headless on it, saves Textual's own SVG screenshot, then stops the job and the sim. So
the README shows only what the live path really produces: a healthy run, every figure ✓
in the sim profile's ranges. `--fault KIND` plants `rlconsole sim fault KIND` once the run
is going and shoots when its alert is up (docs/screenshot-fault.svg). `--static` takes the
deterministic demo data the snapshot tests use instead. `--runs` shoots the runs view (`R`) over the same demo data (docs/runs.svg).
`--browser` shoots docs/browser.png instead: the same running job, through `rlconsole serve` in Debian's headless Chromium
(Playwright, from the test extras). `--slurm` shoots docs/screenshot-slurm.svg: the same run on `sim up --slurm`
(root and Debian's Slurm), the Ray pane naming the allocation. Run:

    python docs/make_screenshot.py [--static | --runs | --browser | --fault KIND | --slurm] [--size 160x50] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


async def shoot(backend: object, out: Path, width: int, height: int, ready: object = None,
                fault: object = None, keys: tuple[str, ...] = ("u",)) -> None:
    """`fault`: called once the run is ready; the shot waits for a warning or error alert."""
    from tui.app import RlconsoleApp
    from widgets.alerts_bar import AlertsBar

    app = RlconsoleApp(backend)
    async with app.run_test(size=(width, height)) as pilot:
        if ready is not None:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not ready(backend):  # type: ignore[operator]
                await asyncio.sleep(0.5)
            await asyncio.sleep(3.0)  # a few more steps: the plots have a shape
            if fault is not None:
                fault()  # type: ignore[operator]
                bar = app.query_one(AlertsBar)
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not any(a.level in ("warning", "error")
                                                              for a in bar.now.current()):
                    await asyncio.sleep(0.5)
                await asyncio.sleep(4.0)  # the ✗ and a few more steps of the fault
        else:
            await pilot.press(*keys)  # `u`: per-node progress in the action panel; `R`: the runs view
            await pilot.pause(0.4)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))


def _cli(args: list[str], env: dict[str, str]) -> str:
    r = subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"rlconsole {' '.join(args)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def browser_shot(profile: Path, out: Path, env: dict[str, str]) -> None:
    """The served console (read-only, as `serve` defaults) in headless Chromium."""
    from playwright.sync_api import sync_playwright

    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "serve", "--port", "0", "--profile", str(profile)],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        url = next(line.strip() for line in proc.stdout if line.startswith("http://"))
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"])
            page = b.new_page(viewport={"width": 1600, "height": 960})
            page.goto(url)
            page.wait_for_timeout(15000)  # the console's first samples, steps and plots
            page.screenshot(path=str(out))
            b.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def live(out: Path, width: int, height: int, browser: bool = False, fault: str | None = None,
         slurm: bool = False) -> None:
    from tui.core.profile import load_profile
    from tui.sim.cluster import sim_down, sim_up
    from tui.backend.live import LiveBackend

    base = Path(tempfile.mkdtemp(prefix="rlc-screenshot-"))
    env = {**os.environ, "XDG_STATE_HOME": str(base / "state"), "XDG_CONFIG_HOME": str(base / "config")}
    os.environ.update({k: env[k] for k in ("XDG_STATE_HOME", "XDG_CONFIG_HOME")})
    sim = base / "sim"
    profile = sim_up(4, 8, state_dir=sim, slurm=slurm)
    try:
        for action in ("containers", "convert", "setup-ray", "submit"):
            _cli([action, "--profile", str(profile), "--yes"], env)
        for _ in range(90):
            job = json.loads(_cli(["status", "--profile", str(profile), "--json"], env)).get("job") or {}
            if job.get("status") == "RUNNING" and (job.get("step") or 0) >= 8:
                break
            time.sleep(2)

        def ready(b: LiveBackend) -> bool:
            st = b.state
            return bool(st is not None and st.job is not None and st.job.step and st.job.step >= 10
                        and all(n.gpu is not None for n in st.nodes))

        if browser:
            browser_shot(profile, out, env)
        else:
            from tui.sim.faults import plant_fault

            plant = (lambda: plant_fault(fault, state_dir=sim)) if fault else None
            asyncio.run(shoot(LiveBackend(load_profile(profile)), out, width, height, ready, plant))
        _cli(["stop", *(["--cluster"] if slurm else []), "--profile", str(profile), "--yes"], env)
    finally:
        sim_down(state_dir=sim)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="160x50")
    ap.add_argument("--out", default=str(Path(__file__).with_name("screenshot.svg")))
    ap.add_argument("--static", action="store_true", help="the demo data of the snapshot tests, no sim")
    ap.add_argument("--browser", action="store_true", help="docs/browser.png: the console through `serve`")
    ap.add_argument("--fault", metavar="KIND", help="docs/screenshot-fault.svg: after `sim fault KIND`")
    ap.add_argument("--runs", action="store_true", help="docs/runs.svg: the runs view (`R`) over the demo data")
    ap.add_argument("--slurm", action="store_true", help="docs/screenshot-slurm.svg: the run on `sim up --slurm`")
    a = ap.parse_args()
    if a.slurm and a.out == ap.get_default("out"):
        a.out = str(Path(__file__).with_name("screenshot-slurm.svg"))
    if a.browser and a.out == ap.get_default("out"):
        a.out = str(Path(__file__).with_name("browser.png"))
    if a.fault and a.out == ap.get_default("out"):
        a.out = str(Path(__file__).with_name("screenshot-fault.svg"))
    w, h = (int(x) for x in a.size.lower().split("x"))
    out = Path(a.out).resolve()
    if a.runs:
        from tui.backend.static import demo_backend

        out = out if a.out != ap.get_default("out") else Path(__file__).with_name("runs.svg")
        asyncio.run(shoot(demo_backend(), out, w, h, keys=("R",)))
    elif a.static:
        from tui.backend.static import demo_backend

        asyncio.run(shoot(demo_backend(), out, w, h))
    else:
        live(out, w, h, browser=a.browser, fault=a.fault, slurm=a.slurm)
    print(out)


if __name__ == "__main__":
    main()
