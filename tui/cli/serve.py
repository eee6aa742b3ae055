"""`rlconsole serve`: the console in a browser, through textual-serve.

Each browser tab gets its own console process (textual-serve runs the command with its
web driver), so a tab sees exactly what a terminal would. What this module adds is the
part that makes handing out a URL safe:

* bound to 127.0.0.1 unless the user names another address *and* passes
  `--allow-remote` (the page is plain HTTP; from elsewhere, an SSH tunnel is the way);
* a random access token in the printed URL: a request without it, or without the
  cookie the first good request sets, gets 403 — the websocket that drives the console
  included, so knowing the port is not enough. The first good request is answered with a
  redirect to the same page without the token (the cookie carries it from there): the
  token does not stay in the address bar, the history or a screen share;
* the Host must name this machine (localhost, 127.x, ::1) unless `--allow-remote`: a
  page of another site whose name was made to resolve to 127.0.0.1 (DNS rebinding) sends
  its own name as Host and as Origin, which agree with each other but not with this;
* the page loads nothing from elsewhere (textual-serve's page asks Google for a font:
  that link is dropped, and a Content-Security-Policy allows this server only);
* the terminal size a tab asks for (the websocket's `width`/`height`, each `resize`) is
  bounded (`MAX_COLUMNS` x `MAX_ROWS`);
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
MAX_COLUMNS = 1000
MAX_ROWS = 500
"""A tab's terminal at most (a 4K screen at a 6-pixel font is ~640 columns)."""
_EXTERNAL_LINK_RE = re.compile(r"<link\b[^>]*\bhref=[\"']https?://[^>]*>", re.I)
# What a Host header may be before it is written into the page (the websocket address).
_HOST_RE = re.compile(r"^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$")

REMOTE_WHY = ("the page is plain HTTP: the token and everything the console shows cross the "
              "network in clear; prefer `ssh -L PORT:127.0.0.1:PORT head` and the default host")


def console_command(profile_path: str, read_only: bool, profile_commands: str | None = None) -> str:
    """The shell command textual-serve runs per tab: this interpreter's rlconsole, so the
    served console is the installed one even when `rlconsole` is not on PATH. A profile
    from the current directory that runs local commands: the tab does what `serve` was
    told at its start (`profile_commands`: "trusted" or "dropped"), never asks again."""
    argv = [sys.executable, "-m", "tui.cli", "--profile", profile_path]
    if read_only:
        argv.append("--read-only")
    if profile_commands == "trusted":
        argv.append("--trust-profile")
    elif profile_commands == "dropped":
        argv.append("--no-profile-commands")
    return shlex.join(argv)


def token_ok(given: str | None, token: str) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), token.encode())


def host_is_local(host: str) -> bool:
    """Whether a Host header (`name[:port]`, `[v6]:port`) names this machine."""
    name = host[1:].partition("]")[0] if host.startswith("[") else host.rpartition(":")[0] if ":" in host else host
    return name.lower() == "localhost" or is_loopback(name)


def _size_ok(value: str | None, top: int) -> bool:
    return value is None or (value.isascii() and value.isdigit() and len(value) <= 5 and 1 <= int(value) <= top)


def _bounded(value: Any, default: int, top: int) -> int:
    """A terminal size from the page: an integer in 1..top (anything else: `default`)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return default
    return min(max(value, 1), top)


def make_server(command: str, token: str, title: str, allow_remote: bool = False) -> Any:
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
        if not _HOST_RE.match(request.host or ""):
            return web.Response(status=400, text="rlconsole serve: bad Host header\n")
        if not allow_remote and not host_is_local(request.host):
            return web.Response(status=403, text="rlconsole serve: the Host does not name this machine "
                                                 "(serve --allow-remote to be reached by another name)\n")
        origin = request.headers.get("Origin")
        if origin and origin.split("://", 1)[-1] != request.host:
            return web.Response(status=403, text="rlconsole serve: cross-origin request refused\n")
        if request.path == "/ws" and not (_size_ok(request.query.get("width"), MAX_COLUMNS)
                                          and _size_ok(request.query.get("height"), MAX_ROWS)):
            return web.Response(status=400, text=f"rlconsole serve: a terminal of at most {MAX_COLUMNS} x "
                                                 f"{MAX_ROWS}\n")
        if from_query and request.path == "/" and request.method == "GET":
            # the token leaves the address bar: the cookie carries it from here
            location = request.rel_url.with_query([(k, v) for k, v in request.query.items() if k != "token"])
            redirect = web.Response(status=303, headers={"Location": str(location)})
            redirect.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
            return redirect
        return await handler(request)

    class ConsoleServer(Server):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(guard)
            return app

        async def _process_messages(self, websocket: web.WebSocketResponse, app_service: Any) -> None:
            """textual-serve's loop, with every `resize` bounded (MAX_COLUMNS x MAX_ROWS)."""
            resize = app_service.set_terminal_size

            async def bounded(width: Any, height: Any) -> None:
                await resize(_bounded(width, 80, MAX_COLUMNS), _bounded(height, 24, MAX_ROWS))

            app_service.set_terminal_size = bounded
            await super()._process_messages(websocket, app_service)

        async def on_startup(self, app: web.Application) -> None:
            """textual-serve prints a banner with its URL here; `serve` prints its own,
            with the token, once the port is bound."""

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            # Addresses built from the request's own Host, not the bind address: through
            # `ssh -L 9000:127.0.0.1:8765` the browser's host is localhost:9000.
            scheme = "https" if request.secure else "http"
            ws = "wss" if request.secure else "ws"
            context = {
                "font_size": min(max(to_int(request.query.get("fontsize", "16"), 16), 6), 72),
                "app_websocket_url": f"{ws}://{request.host}/ws",
                "config": {"static": {"url": f"{scheme}://{request.host}/static/"}},
                "application": {"name": self.title},
            }
            response = aiohttp_jinja2.render_template("app_index.html", request, context)
            # nothing from elsewhere: textual-serve's page links a Google font
            response.text = _EXTERNAL_LINK_RE.sub("", response.text or "")
            response.headers["Content-Security-Policy"] = (
                "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
                f"img-src 'self' data:; font-src 'self' data:; connect-src 'self' {ws}://{request.host}; "
                "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
            response.headers["Referrer-Policy"] = "no-referrer"
            return response

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


def run_serve(profile: Any, host: str, port: int, allow_remote: bool, allow_actions: bool,
              profile_commands: str | None = None) -> int:
    if not is_loopback(host) and not allow_remote:
        raise UsageError(f"serve: --host {host} is not a loopback address; add --allow-remote to "
                         f"serve it anyway ({REMOTE_WHY})")
    read_only = profile.console.read_only or not allow_actions
    token = secrets.token_urlsafe(24)
    server = make_server(console_command(str(profile.path), read_only, profile_commands), token,
                         title=f"rlconsole {profile.name}", allow_remote=allow_remote)

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
