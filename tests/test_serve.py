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


# ------------------------------------------------------- issue 39 N9: the served page itself


async def _client(allow_remote: bool = False, command: str = "sleep 5"):  # type: ignore[no-untyped-def]
    """An aiohttp test client on `make_server`'s app (no browser, no sim): the guard, the
    page and the websocket's handshake as a browser meets them."""
    from aiohttp.test_utils import TestClient, TestServer

    from tui.cli.serve import make_server

    server = make_server(command, "T" * 32, "rlconsole test", allow_remote=allow_remote)
    client = TestClient(TestServer(await server._make_app()))
    await client.start_server()
    return client


async def test_the_token_leaves_the_address_bar() -> None:
    """The first good request (`/?token=...`) is a redirect to the page without the token,
    the cookie set: before, the page was served at the URL with the token in it."""
    import asyncio

    client = await _client()
    try:
        r = await asyncio.wait_for(client.get("/?token=" + "T" * 32 + "&fontsize=20", allow_redirects=False), 30)
        assert r.status == 303, r.status
        assert "token" not in r.headers["Location"] and r.headers["Location"] == "/?fontsize=20"
        assert "rlconsole_serve" in r.cookies
        r = await asyncio.wait_for(client.get("/?fontsize=20", cookies={"rlconsole_serve": "T" * 32}), 30)
        assert r.status == 200
    finally:
        await client.close()


async def test_the_page_loads_nothing_from_elsewhere() -> None:
    """textual-serve's page linked a Google font: the page a tab gets names no other site,
    and its Content-Security-Policy allows this server only."""
    import asyncio

    client = await _client()
    try:
        r = await asyncio.wait_for(client.get("/", cookies={"rlconsole_serve": "T" * 32}), 30)
        body = await r.text()
        assert r.status == 200 and "textual.js" in body
        assert "googleapis" not in body and not re.search(r"(?:href|src)=[\"']https?://(?!127\.0\.0\.1)", body), body
        csp = r.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "font-src 'self'" in csp and "http" not in csp.replace("'self'", "")
    finally:
        await client.close()


@pytest.mark.parametrize("host", ["evil.example:8765", "evil.example", "10.1.2.3:8765", "[2001:db8::1]:8765"])
async def test_a_foreign_host_is_refused_even_with_the_token(host: str) -> None:
    """DNS rebinding: a page of another site, its name made to resolve to 127.0.0.1, sends
    its own name as Host and as Origin (they agree with each other): refused unless
    --allow-remote. Through `ssh -L 9000:...` the Host is localhost:9000: served."""
    import asyncio

    client = await _client()
    try:
        r = await asyncio.wait_for(client.get("/?token=" + "T" * 32, headers={"Host": host, "Origin": f"http://{host}"},
                                              allow_redirects=False), 30)
        assert r.status == 403, (host, r.status)
        for h in ("localhost:9000", "127.0.0.1:8765", "[::1]:8765"):
            r = await asyncio.wait_for(client.get("/", headers={"Host": h, "Origin": f"http://{h}"},
                                                  cookies={"rlconsole_serve": "T" * 32}), 30)
            assert r.status == 200, (h, r.status)
    finally:
        await client.close()
    client = await _client(allow_remote=True)
    try:
        r = await asyncio.wait_for(client.get("/", headers={"Host": host}, cookies={"rlconsole_serve": "T" * 32}), 30)
        assert r.status == 200
    finally:
        await client.close()


async def test_the_terminal_size_a_tab_asks_for_is_bounded() -> None:
    """`/ws?width=1000000` started a console of a million columns; now it is refused before
    the handshake, and a `resize` message is bounded."""
    import asyncio

    import aiohttp

    from tui.cli.serve import MAX_COLUMNS, MAX_ROWS, _bounded

    client = await _client()
    try:
        for q in ("width=1000000&height=24", "width=80&height=99999", "width=-1", "width=1e9"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as e:
                await asyncio.wait_for(client.ws_connect(f"/ws?{q}", headers={"Cookie": "rlconsole_serve=" + "T" * 32}),
                                       30)
            assert e.value.status == 400, q
    finally:
        await client.close()
    assert _bounded(10**9, 80, MAX_COLUMNS) == MAX_COLUMNS and _bounded(-5, 24, MAX_ROWS) == 1
    assert _bounded("100", 80, MAX_COLUMNS) == 80 and _bounded(True, 24, MAX_ROWS) == 24
    assert _bounded(120, 80, MAX_COLUMNS) == 120
