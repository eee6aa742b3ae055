"""`rlconsole serve`: the console in a real headless Chromium (Debian's package, driven by
Playwright) against the simulated cluster, behind the access token.

What the browser shows is checked on what it received: the websocket frames textual-serve
sends the page are the console's own screen output, so the node names, the Training pane
and the READ-ONLY badge must be in them. The screenshot is taken from the same page;
`RLCONSOLE_WRITE_BROWSER_PNG=1` writes it to docs/browser.png.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import require_command
from tui.cli import main

CHROMIUM = "/usr/bin/chromium"
WAIT_S = 90.0
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_non_loopback_host_needs_allow_remote(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["serve", "--host", "0.0.0.0", "--port", "0", "-P", "qwen3-8b-grpo-32gpu"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "--host 0.0.0.0 is not a loopback address; add --allow-remote" in err
    assert "plain HTTP" in err and "\n" == err[-1] and err.count("\n") == 1


def test_console_command_is_read_only_unless_allowed() -> None:
    from tui.cli.serve import console_command

    ro = console_command("/p/my run.yaml", read_only=True)
    assert ro.endswith("--profile '/p/my run.yaml' --read-only")
    assert "--read-only" not in console_command("/p/x.yaml", read_only=False)


def _start_serve(profile: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "serve", "--port", "0", "--profile", str(profile),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + WAIT_S
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()  # serve prints two lines as soon as it listens
        if line.startswith("http://"):
            return proc, line.strip()
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"serve printed no URL: {proc.stderr.read() if proc.stderr else ''}")


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError("serve did not stop on SIGTERM within 30 s") from None


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - loopback URL built here
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


@pytest.mark.integration
def test_browser_shows_the_live_console_behind_the_token(small_sim: Path, tmp_path: Path) -> None:
    require_command(CHROMIUM, "chromium")
    from playwright.sync_api import sync_playwright

    proc, url = _start_serve(small_sim)
    try:
        assert url.startswith("http://127.0.0.1:")
        base, token = url.split("/?token=")
        assert len(token) >= 30
        # without the token (or with a wrong one): 403, the websocket that drives the console too
        assert _status(base + "/") == 403
        assert _status(base + "/?token=" + "x" * len(token)) == 403
        assert _status(base + "/ws?width=80&height=24") == 403
        assert _status(base + "/static/js/textual.js") == 403

        frames: list[str] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"])
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 960})

                def on_ws(ws) -> None:  # noqa: ANN001 - Playwright's WebSocket
                    ws.on("framereceived", lambda payload: frames.append(
                        payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload))

                page.on("websocket", on_ws)
                page.goto(url, timeout=WAIT_S * 1000)
                screen = ""
                deadline = time.monotonic() + WAIT_S
                while time.monotonic() < deadline:
                    screen = ANSI.sub("", "".join(frames))
                    if all(s in screen for s in ("node1", "node2", "Training", "READ-ONLY", "SIMULATED")):
                        break
                    page.wait_for_timeout(500)
                for s in ("node1", "node2", "Training", "READ-ONLY", "SIMULATED"):
                    assert s in screen, f"{s!r} not on the served console; it showed: {screen[-2000:]!r}"
                page.wait_for_timeout(3000)  # a few refreshes: the grid has its cards' figures
                shot = tmp_path / "browser.png"
                page.screenshot(path=str(shot))
            finally:
                browser.close()
        png = shot.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000, len(png)  # a rendered page, not a blank one
        if os.environ.get("RLCONSOLE_WRITE_BROWSER_PNG") == "1":
            dest = Path(__file__).resolve().parent.parent / "docs" / "browser.png"
            dest.parent.mkdir(exist_ok=True)
            shutil.copyfile(shot, dest)
    finally:
        rc = _stop(proc)
    assert rc == 0
