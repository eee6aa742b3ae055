"""`rlconsole serve`: the console in a browser, through textual-serve.

Each browser tab gets its own console process (textual-serve runs the command with its
web driver), so a tab sees exactly what a terminal would. What this module adds is the
part that makes handing out a URL safe:

* bound to 127.0.0.1 unless the user names another address *and* passes
  `--allow-remote` (the page is plain HTTP; from elsewhere, an SSH tunnel is the way);
* a random access token in the printed URL: a request without it, or without the
  cookie the first good request sets, gets 403 — the websocket that drives the console
  included, so knowing the port is not enough;
* read-only unless `--allow-actions` (a profile's `console.read_only` still wins);
* no access log: the URL carries the token, and aiohttp would log every request line.
"""

from __future__ import annotations

import asyncio
import hmac
import re
import secrets
import shlex
import signal
import sys
from typing import Any, Awaitable, Callable

from tui.core.errors import UsageError
from tui.core.netaddr import is_loopback

COOKIE = "rlconsole_serve"
DEFAULT_PORT = 8765
# What a Host header may be before it is written into the page (the websocket address).
_HOST_RE = re.compile(r"^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$")

REMOTE_WHY = ("the page is plain HTTP: the token and everything the console shows cross the "
              "network in clear; prefer `ssh -L PORT:127.0.0.1:PORT head` and the default host")


def console_command(profile_path: str, read_only: bool) -> str:
    """The shell command textual-serve runs per tab: this interpreter's rlconsole, so the
    served console is the installed one even when `rlconsole` is not on PATH."""
    argv = [sys.executable, "-m", "tui.cli", "--profile", profile_path]
    if read_only:
        argv.append("--read-only")
    return shlex.join(argv)


def token_ok(given: str | None, token: str) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), token.encode())


def make_server(command: str, token: str, title: str) -> Any:
    """A textual-serve Server guarded by the token. Imported here, not at module level:
    only `serve` pays for aiohttp and textual-serve."""
    import aiohttp_jinja2
    from aiohttp import web
    from textual_serve.server import Server, to_int

    @web.middleware
    async def guard(request: web.Request,
                    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        from_query = request.query.get("token")
        if not (token_ok(from_query, token) or token_ok(request.cookies.get(COOKIE), token)):
            return web.Response(status=403, text="rlconsole serve: this URL needs the access token "
                                                 "printed when serve started (?token=...)\n")
        origin = request.headers.get("Origin")
        if origin and origin.split("://", 1)[-1] != request.host:
            return web.Response(status=403, text="rlconsole serve: cross-origin request refused\n")
        if not _HOST_RE.match(request.host or ""):
            return web.Response(status=400, text="rlconsole serve: bad Host header\n")
        response = await handler(request)
        if from_query and request.path == "/":
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
        return response

    class ConsoleServer(Server):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(guard)
            return app

        async def on_startup(self, app: web.Application) -> None:
            """textual-serve prints a banner with its URL here; `serve` prints its own,
            with the token, once the port is bound."""

        @aiohttp_jinja2.template("app_index.html")
        async def handle_index(self, request: web.Request) -> dict[str, Any]:
            # Addresses built from the request's own Host, not the bind address: through
            # `ssh -L 9000:127.0.0.1:8765` the browser's host is localhost:9000.
            scheme = "https" if request.secure else "http"
            ws = "wss" if request.secure else "ws"
            return {
                "font_size": to_int(request.query.get("fontsize", "16"), 16),
                "app_websocket_url": f"{ws}://{request.host}/ws",
                "config": {"static": {"url": f"{scheme}://{request.host}/static/"}},
                "application": {"name": self.title},
            }

    return ConsoleServer(command, title=title)


async def serve_until_stopped(server: Any, host: str, port: int,
                              on_ready: Callable[[int], None]) -> None:
    """Bind, report the bound port, serve until SIGINT/SIGTERM, then stop every tab's
    console (textual-serve asks each to quit when its websocket closes)."""
    from aiohttp import web

    app = await server._make_app()
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as e:
            raise UsageError(f"serve: cannot listen on {host}:{port}: {e.strerror or e}") from None
        bound = runner.addresses[0][1]
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        on_ready(bound)
        await stop.wait()
    finally:
        await runner.cleanup()


def run_serve(profile: Any, host: str, port: int, allow_remote: bool, allow_actions: bool) -> int:
    if not is_loopback(host) and not allow_remote:
        raise UsageError(f"serve: --host {host} is not a loopback address; add --allow-remote to "
                         f"serve it anyway ({REMOTE_WHY})")
    read_only = profile.console.read_only or not allow_actions
    token = secrets.token_urlsafe(24)
    server = make_server(console_command(str(profile.path), read_only), token,
                         title=f"rlconsole {profile.name}")

    def ready(bound: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        mode = "read-only" if read_only else "ACTIONS ALLOWED (--allow-actions)"
        if not is_loopback(host):
            print(f"rlconsole serve: WARNING: listening on {host}, beyond this machine: {REMOTE_WHY}",
                  file=sys.stderr)
        print(f"rlconsole serve: {profile.name}, {mode}; open in a browser (the token is the key, "
              f"keep it private; Ctrl+C stops):", flush=True)
        print(f"http://{shown}:{bound}/?token={token}", flush=True)

    asyncio.run(serve_until_stopped(server, host, port, ready))
    return 0
