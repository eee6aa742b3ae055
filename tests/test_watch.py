"""`rlconsole watch`: headless, the console's alert rule set, notifications.

A real HTTP server on 127.0.0.1 receives the webhooks; a real command gets the JSON on
stdin; an unreachable URL is retried, logged, and the watch goes on. The live test runs
the watch on the simulated cluster and makes a card hot through the sim's card tool:
one notification for the episode, however many refreshes it lasts.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tui.backend.static import demo_backend, demo_state
from tui.core.notify import Notifier
from tui.core.profile import load_profile
from tui.cli.watch import watch

WAIT_S = 180.0


class Receiver:
    """A webhook receiver: every JSON body POSTed to it, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        rec = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                n = int(self.headers.get("Content-Length") or 0)
                rec.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def until(cond: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    end = time.monotonic() + timeout
    while not (v := cond()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)
    return v


async def test_watch_notifies_webhook_and_command_and_survives_a_dead_url(receiver: Receiver, tmp_path: Path) -> None:
    """On the static backend (the demo data go through the same AlertRules): node2 card 3
    is hot from the start. The dead URL's failures are printed and retried while the
    good targets get their one notification each; a later episode still goes out."""
    b = demo_backend()
    dead = f"http://127.0.0.1:{closed_port()}/hook"
    got = tmp_path / "cmd.jsonl"
    cmd = f"cat >> {got}; echo >> {got}"
    out = io.StringIO()
    stop = asyncio.Event()
    import tui.core.notify as notify_mod

    orig = Notifier.__init__

    def fast(self: Notifier, *a: Any, **kw: Any) -> None:
        orig(self, *a, **{**kw, "backoff_initial_s": 0.05, "retries": 3})

    mp = pytest.MonkeyPatch()
    mp.setattr(notify_mod.Notifier, "__init__", fast)
    try:
        task = asyncio.create_task(watch(b.profile, [dead, receiver.url, cmd], "warning", out, stop, backend=b))
        await until(lambda: any(x["key"] == "card:node71:3:hot" for x in receiver.bodies), "the hot card webhook", 30)
        await until(lambda: got.exists() and "card:node71:3:hot" in got.read_text(), "the command's JSON", 30)
        await until(lambda: "giving up after 4 attempts" in out.getvalue(), "the dead URL to be given up", 30)
        assert "attempt 1 failed" in out.getvalue() and "retrying in" in out.getvalue()
        # the watch goes on: a node goes down -> a new episode, delivered
        down = b.profile.nodes[2].name
        b.push_state(demo_state(b.profile, 813, down=[down]))
        await until(lambda: any(x["key"] == f"node:{down}" for x in receiver.bodies), "the node-down webhook", 30)
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0
    finally:
        stop.set()
        mp.undo()
    hot = [x for x in receiver.bodies if x["key"] == "card:node71:3:hot"]
    assert len(hot) == 1
    h = hot[0]
    assert h["profile"] == b.profile.name and h["level"] == "warning" and h["kind"] == "probe"
    assert h["message"].startswith("node71 card 3 at 88") and isinstance(h["time"], float)
    assert h["job_id"] == "raysubmit_8Hk2xQ4vTnB1"
    assert all(x["level"] in ("warning", "error") for x in receiver.bodies)  # info not sent
    keys = [x["key"] for x in receiver.bodies if x["key"]]
    assert len(keys) == len(set(keys))  # one notification per episode
    text = out.getvalue()
    assert "WARNING probe: node71 card 3 at 88" in text and f"ERROR probe: node {down} is down" in text


@pytest.mark.integration
async def test_watch_on_the_sim_one_notification_per_hot_card_episode(sim_as_up, receiver: Receiver,
                                                                     tmp_path: Path) -> None:
    from tui.core.ssh import SessionPool

    prof = load_profile(sim_as_up.profile_path)
    out = io.StringIO()
    stop = asyncio.Event()
    task = asyncio.create_task(watch(prof, [receiver.url], "warning", out, stop))
    pool = SessionPool(prof)
    key = "card:node2:6:hot"
    try:
        await asyncio.wait_for(pool.open(), WAIT_S)
        await until(lambda: "watching" in out.getvalue(), "the watch to start")
        sess = pool.session("node2")
        r = await asyncio.wait_for(sess.run(
            "sleep 600 >/dev/null 2>&1 & pid=$!; printf '{\"pid\": %s, \"util\": 50, \"temp_c\": 93}' $pid "
            "> $RLCONSOLE_SIM_NODE_DIR/gpu-load/6.hot.json; echo $pid", check=True), 60)
        pid = int(r.stdout.strip())
        try:
            await until(lambda: [x for x in receiver.bodies if x["key"] == key], "the hot card notification")
            # several refreshes with the card still hot: no second notification
            refreshes = prof.monitoring.refresh_s
            mark = out.getvalue().count("\n")
            await asyncio.sleep(4 * refreshes)
            del mark
        finally:
            await asyncio.wait_for(sess.run(f"kill {pid}; rm -f $RLCONSOLE_SIM_NODE_DIR/gpu-load/6.hot.json"), 60)
        await until(lambda: "node2 card 6 cooled down [ended]" in out.getvalue(), "the episode's end")
        stop.set()
        assert await asyncio.wait_for(task, 120) == 0
    finally:
        stop.set()
        await asyncio.wait_for(pool.close(), 60)
        if not task.done():
            await asyncio.wait_for(task, 120)
    hot = [x for x in receiver.bodies if x["key"] == key]
    assert len(hot) == 1, receiver.bodies
    assert hot[0]["message"].startswith("node2 card 6 at 93") and hot[0]["profile"] == prof.name
    assert out.getvalue().count(f"WARNING probe: node2 card 6 at") == 1


def test_profile_notify_section(tmp_path: Path) -> None:
    import yaml

    from tui.core.errors import ProfileError
    from tui.core.profile import packaged_profiles_dir

    data = yaml.safe_load((packaged_profiles_dir() / "qwen3-8b-grpo-32gpu.yaml").read_text())
    data["notify"] = {"to": ["http://127.0.0.1:9/x", "logger -t rl"], "level": "error"}
    p = tmp_path / "n.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    n = load_profile(p).notify
    assert n.to == ["http://127.0.0.1:9/x", "logger -t rl"] and n.level == "error"
    data["notify"] = {"to": "http://127.0.0.1:9/x", "level": "loud"}
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ProfileError) as e:
        load_profile(p)
    assert "notify.level: expected one of info, warning, error" in str(e.value) and e.value.line



async def test_the_console_sends_the_profiles_notifications(receiver: Receiver) -> None:
    from dataclasses import replace

    from tui.app import RlconsoleApp
    from tui.core.profile import NotifySettings

    b = demo_backend()
    b.profile = replace(b.profile, notify=NotifySettings(to=[receiver.url], level="warning"))
    app = RlconsoleApp(b)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await until(lambda: any(x["key"] == "card:node71:3:hot" for x in receiver.bodies), "the console's webhook", 30)
    assert len([x for x in receiver.bodies if x["key"] == "card:node71:3:hot"]) == 1
