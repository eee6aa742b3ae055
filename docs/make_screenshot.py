"""Write docs/screenshot.svg: the main screen on deterministic demo data.

Uses Textual's own screenshot (SVG), on the same StaticBackend data as the snapshot
tests, so the README shows exactly what the tests pin down. Run:
    python docs/make_screenshot.py [--size 160x50] [--out docs/screenshot.svg]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from tui.app import RlconsoleApp
from tui.backend import demo_backend


async def make(out: Path, width: int, height: int) -> None:
    app = RlconsoleApp(demo_backend())
    async with app.run_test(size=(width, height)) as pilot:
        await pilot.press("u")  # show per-node progress in the action panel
        await pilot.pause(0.4)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="160x50")
    ap.add_argument("--out", default=str(Path(__file__).with_name("screenshot.svg")))
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.lower().split("x"))
    out = Path(a.out)
    asyncio.run(make(out, w, h))
    print(out)


if __name__ == "__main__":
    main()
