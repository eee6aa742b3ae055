"""Write docs/screenshot.svg: the console as it shows a running job on the simulated cluster.

By default the screenshot comes from the live path (`LiveBackend`, the one users watch):
it starts the simulated cluster in a temporary directory, runs the seed's procedure
headless (containers, convert, setup-ray, submit), waits for steps, opens the console
headless on it, saves Textual's own SVG screenshot, then stops the job and the sim. So
the README shows only what the live path really produces. `--static` takes the
deterministic demo data the snapshot tests use instead. Run:

    python docs/make_screenshot.py [--static] [--size 160x50] [--out docs/screenshot.svg]
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


async def shoot(backend: object, out: Path, width: int, height: int, ready: object = None) -> None:
    from tui.app import RlconsoleApp

    app = RlconsoleApp(backend)
    async with app.run_test(size=(width, height)) as pilot:
        if ready is not None:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not ready(backend):  # type: ignore[operator]
                await asyncio.sleep(0.5)
            await asyncio.sleep(3.0)  # a few more steps: the plots have a shape
        else:
            await pilot.press("u")  # show per-node progress in the action panel
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


def live(out: Path, width: int, height: int) -> None:
    from tui.core.profile import load_profile
    from tui.sim.cluster import sim_down, sim_up
    from tui.backend.live import LiveBackend

    base = Path(tempfile.mkdtemp(prefix="rlc-screenshot-"))
    env = {**os.environ, "XDG_STATE_HOME": str(base / "state"), "XDG_CONFIG_HOME": str(base / "config")}
    os.environ.update({k: env[k] for k in ("XDG_STATE_HOME", "XDG_CONFIG_HOME")})
    sim = base / "sim"
    profile = sim_up(4, 8, state_dir=sim)
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

        asyncio.run(shoot(LiveBackend(load_profile(profile)), out, width, height, ready))
        _cli(["stop", "--profile", str(profile), "--yes"], env)
    finally:
        sim_down(state_dir=sim)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="160x50")
    ap.add_argument("--out", default=str(Path(__file__).with_name("screenshot.svg")))
    ap.add_argument("--static", action="store_true", help="the demo data of the snapshot tests, no sim")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.lower().split("x"))
    out = Path(a.out).resolve()
    if a.static:
        from tui.backend.static import demo_backend

        asyncio.run(shoot(demo_backend(), out, w, h))
    else:
        live(out, w, h)
    print(out)


if __name__ == "__main__":
    main()
