"""`rlconsole watch --notify`: a target's credentials never printed, never logged (issue 27,
Medium 3).

Real parts: HTTP servers on 127.0.0.1 that record what they get (one answers 204, one
500), a port nobody listens on, a real command run by the shell, the real debug log
(`setup_logging`, its file and its stderr handler). The secrets are marked `Q...` strings
that appear nowhere else, so "not in the text" means not printed in any form.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import shlex
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import tui.core.debuglog as debuglog
import tui.core.notify as notify_mod
from tui.backend.static import demo_backend
from tui.cli.watch import watch
from tui.core.notify import Notifier

from .test_watch import closed_port, until

HOT = "card:node71:3:hot"  # the demo data's hot card: one warning from the start


class Server:
    """A webhook receiver answering `status`, recording each request's path, headers
    and body."""

    def __init__(self, status: int = 204) -> None:
        self.requests: list[dict[str, Any]] = []
        rec = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                n = int(self.headers.get("Content-Length") or 0)
                rec.requests.append({"path": self.path, "headers": dict(self.headers),
                                     "body": self.rfile.read(n).decode()})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def ok_server() -> Iterator[Server]:
    s = Server(204)
    yield s
    s.close()


@pytest.fixture
def failing_server() -> Iterator[Server]:
    s = Server(500)
    yield s
    s.close()


@pytest.fixture
def debug_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], Path]]:
    """The real debug log of a CLI run (file + `--verbose` stderr), in this test's state
    dir; set up by calling it in the test itself, so its stderr is the test's."""
    monkeypatch.setenv("RLCONSOLE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(debuglog, "_configured", False)
    logger = logging.getLogger("rlconsole")
    before = list(logger.handlers)

    def setup() -> Path:
        path = debuglog.setup_logging(verbose=True)
        assert path is not None
        return path

    yield setup
    for h in logger.handlers[:]:
        if h not in before:
            logger.removeHandler(h)
            h.close()


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    orig = Notifier.__init__

    def fast(self: Notifier, *a: Any, **kw: Any) -> None:
        orig(self, *a, **{**kw, "backoff_initial_s": 0.05, "retries": 2, "timeout_s": 10.0})

    monkeypatch.setattr(notify_mod.Notifier, "__init__", fast)


async def _watch_until(targets: list[str], cond: Any, what: str) -> str:
    b = demo_backend()
    out = io.StringIO()
    stop = asyncio.Event()
    task = asyncio.create_task(watch(b.profile, targets, "warning", out, stop, backend=b))
    try:
        await until(lambda: cond(out.getvalue()), what, 60)
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0
    return out.getvalue()


async def test_url_with_user_and_password_is_sent_as_basic_auth(ok_server: Server, debug_log: Callable[[], Path]) -> None:
    """The userinfo leaves the URL and rides in an `Authorization: Basic` header (urllib
    itself took `password@host` for a port and failed, quoting the password)."""
    log_file = debug_log()
    url = f"http://alice:p%40ss-Q7e3A9x@127.0.0.1:{ok_server.port}/hook?x=1"
    text = await _watch_until([url], lambda _: any(HOT in r["body"] for r in ok_server.requests),
                              "the webhook with basic auth")
    req = next(r for r in ok_server.requests if HOT in r["body"])
    assert req["path"] == "/hook?x=1"
    assert req["headers"]["Authorization"] == "Basic " + base64.b64encode(b"alice:p@ss-Q7e3A9x").decode()
    assert "Q7e3A9x" not in text and "Q7e3A9x" not in log_file.read_text()
    assert f"http://alice:***@127.0.0.1:{ok_server.port}/hook?x=1" in text  # who is notified: still said


async def test_failing_webhooks_retry_lines_hold_no_secret(failing_server: Server, debug_log: Callable[[], Path],
                                                           fast_retries: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A receiver answering 500 and a closed port: every attempt fails, is printed and
    logged; no password, query token or webhook path secret in any of it."""
    log_file = debug_log()
    closed = closed_port()
    secrets = ["Q5ecretPW1", "Q7okenVAL2", "Q9assWD3", "Q4pikey55", "Q8discordTOKEN9x", "Q3lackSECRET7"]
    targets = [
        f"http://bob:Q5ecretPW1@127.0.0.1:{failing_server.port}/hook?token=Q7okenVAL2&page=2",
        f"http://carol:Q9assWD3@127.0.0.1:{closed}/x?api_key=Q4pikey55",
        f"http://127.0.0.1:{failing_server.port}/api/webhooks/123456/Q8discordTOKEN9x",
        f"http://127.0.0.1:{closed}/hooks/T0001/B0002/Q3lackSECRET7",
    ]
    # the demo data raise two warnings: each target gives up on both
    text = await _watch_until(targets, lambda t: t.count("giving up after 3 attempts") >= 8,
                              "every target to be given up")
    cap = capsys.readouterr()
    logged = log_file.read_text()
    for where, got in (("watch output", text), ("stdout", cap.out), ("stderr", cap.err), ("debug log", logged)):
        leaked = [s for s in secrets if s in got]
        assert not leaked, (where, leaked, got)
    assert text.count("attempt 1 failed") >= 8 and "Internal Server Error" in text and "Connection refused" in text
    assert logged.count("giving up after 3 attempts") >= 8 and cap.err.count("giving up") >= 8
    assert len(failing_server.requests) >= 12  # both of its targets, three attempts a notification
    assert all(r["headers"].get("Authorization", "").startswith("Basic ") for r in failing_server.requests
               if "/hook?" in r["path"])
    # what is not a secret stays readable
    assert f"http://bob:***@127.0.0.1:{failing_server.port}/hook?token=***&page=2" in text
    assert "/api/webhooks/123456/***: giving up" in text and "/hooks/T0001/B0002/***: attempt 1" in text


async def test_command_target_authorization_header_masked_on_every_line(debug_log: Callable[[], Path],
                                                                        fast_retries: None,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A curl-like command with an `Authorization:` header that fails and echoes the
    header (and the bare token) on stderr, as `curl -v` does."""
    log_file = debug_log()
    echo = ("import sys; sys.stdin.read(); "
            "sys.stderr.write('> ' + sys.argv[2] + ' ' + sys.argv[3] + '\\n401 for token ' + sys.argv[2][-11:]); "
            "sys.exit(22)")
    cmd = (f"{shlex.quote(sys.executable)} -c {shlex.quote(echo)} "
           f"-H 'Authorization: Bearer Q6earerTOK7' http://127.0.0.1:9/x")
    text = await _watch_until([cmd], lambda t: "giving up after 3 attempts" in t, "the command to be given up")
    cap = capsys.readouterr()
    logged = log_file.read_text()
    lines = [ln for ln in text.splitlines() if "Bearer" in ln]
    assert len(lines) >= 4  # the start line, two retries, a give-up
    assert all("Authorization: Bearer ***" in ln for ln in lines), lines
    assert "command exited 22" in text and "401 for token" in text
    for where, got in (("watch output", text), ("stdout", cap.out), ("stderr", cap.err), ("debug log", logged)):
        assert "Q6earerTOK7" not in got, (where, got)


async def test_curl_users_api_key_headers_and_telegram_tokens_never_printed(
        failing_server: Server, debug_log: Callable[[], Path], fast_retries: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 39 N2: the forms round 3 left in clear on `watch`'s start line, its retry
    lines and its log: `curl -u bot:X`, `curl --user bot:X`, a quoted `X-Api-Key` header,
    a Telegram bot URL. The `curl` here is a stand-in on PATH that fails (exit 22) and
    echoes its whole command line on stderr, as `curl -v` echoes a header."""
    log_file = debug_log()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    curl = bin_dir / "curl"
    curl.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\n"
                    "sys.stderr.write('curl: (22) 401 for ' + ' '.join(sys.argv[1:]) + '\\n')\nsys.exit(22)\n")
    curl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    url = f"http://127.0.0.1:{failing_server.port}"
    secrets = ["QcurlUSER1x", "QcurlUSER2x", "QapiKEY3x", "QtgTOKEN4x-AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"]
    targets = [
        f"curl -sS -f -u bot:QcurlUSER1x -d @- {url}/u",
        f"curl -sS -f --user bot:QcurlUSER2x -d @- {url}/user",
        f"curl -sS -f -H 'X-Api-Key: QapiKEY3x' -d @- {url}/key",
        f"{url}/bot123456789:QtgTOKEN4x-AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage",
    ]
    text = await _watch_until(targets, lambda t: t.count("giving up after 3 attempts") >= 8,
                              "every target to be given up")
    cap = capsys.readouterr()
    logged = log_file.read_text()
    for where, got in (("watch output", text), ("stdout", cap.out), ("stderr", cap.err), ("debug log", logged)):
        leaked = [s for s in secrets if s in got or s[:9] in got]
        assert not leaked, (where, leaked, got)
    start = text.splitlines()[0]
    assert "notifying" in start
    for shown in ("curl -sS -f -u bot:*** -d @-", "curl -sS -f --user bot:*** -d @-",
                  "curl -sS -f -H 'X-Api-Key: ***' -d @-", "/bot123456789:***/sendMessage"):
        assert shown in start, start
        assert text.count(f"{shown}") >= 1 + 4 + 2, (shown, text)  # start, 2x2 retries, 2 give-ups
        assert f"{shown}" in logged
    assert "command exited 22" in text and "Internal Server Error" in text
    assert any("/bot123456789:" in r["path"] for r in failing_server.requests)  # sent as given
