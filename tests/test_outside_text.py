"""Text from outside never reaches a terminal as control sequences (issue 39 S1, S5, S10).

An SSH server's disconnect text (sent before its host key is checked: no login needed), a
job id from Ray's dashboard, a driver-log line, a TensorBoard tag, a process name: each
was printed raw by the console and the CLI, so a window-title (OSC 0) or clipboard-write
(OSC 52) sequence reached a real terminal. The one rule is `tui.core.safetext.shown`
(control characters made visible); a log keeps its colours only (`shown_log`); exports
escape for their format (`md_text`/`md_code`, `csv_cell`).

Each surface is fed the same sequences (OSC 0, OSC 52, CSI 2J, the 8-bit CSI 0x9b, `\\r`,
backspace) and what it outputs must hold no raw ESC, BEL, C1 or other control byte: the
console's screens as drawn (every segment of every line the compositor renders), the CLI
printers, the exports; and, through a real terminal (tmux), `rlconsole status` and the
console against an SSH server whose disconnect text carries them: the pane's title is
not changed and no clipboard buffer is written.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest

from tests.pilot_helpers import settle, until
from tui.core.safetext import csv_cell, md_code, md_text, shown, shown_log

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml"

SEQUENCES = {
    "osc0-title": "\x1b]0;pwned\x07",
    "osc52-clipboard": "\x1b]52;c;cHduZWQ=\x07",
    "csi-clear": "\x1b[2J",
    "csi-8bit": "\x9b31m",
    "cr": "\r",
    "backspace": "\x08",
}
EVIL = "x" + "".join(SEQUENCES.values()) + "y"
"""Every sequence in one string, as a hostile node, log or SSH server would send it."""
VISIBLE_TITLE = "\\x1b]0;pwned\\x07"
"""The title sequence as the rule shows it: readable, inert."""
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""A raw control byte in printed text (tab and newline are layout, allowed)."""
RAW_ON_SCREEN = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""A control character in a drawn line (a drawn line has no newline either)."""


def assert_inert(text: str, where: str) -> None:
    m = RAW.search(text)
    assert m is None, f"{where}: raw control {m.group()!r} at {m.start()} in {text[max(0, m.start() - 60):m.end() + 60]!r}"


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_shown_makes_each_sequence_visible(name: str) -> None:
    seq = SEQUENCES[name]
    out = shown(f"a{seq}b")
    assert_inert(out, name)
    assert out.startswith("a") and out.endswith("b") and len(out) > 2  # visible, not dropped
    assert shown(out) == out  # idempotent: made safe twice is made safe once


def test_shown_visible_forms_and_what_it_keeps() -> None:
    assert shown(EVIL) == ("x\\x1b]0;pwned\\x07\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\x9b31m\\r\\x08y")
    assert shown("ok: 88°C, 日本, ✓ [b]x[/b]") == "ok: 88°C, 日本, ✓ [b]x[/b]"  # printable text untouched
    assert shown("a\nb\tc") == "a\\nb\\tc"  # one line by default
    assert shown("a\r\nb\tc\x1b", lines=True) == "a\nb\tc\\x1b"  # lines: \n and \t kept, CRLF read as \n
    assert shown("\u202eevil\u200b") == "\\u202eevil\\u200b"  # bidi override, zero width: visible
    assert shown(None) == "None" and type(shown("x")) is str


def test_shown_log_keeps_colour_only() -> None:
    rest = " \x1b[?1049h\x1b[>4;2m\x1b7\x1b(B\x9d8;;http://x\x9c\x90q\x9czz\x1b"
    line = "\x1b[31mERROR\x1b[0m " + EVIL.replace("\r", "") + rest
    assert shown_log(line) == "\x1b[31mERROR\x1b[0m xy zz"  # colour kept; every other sequence dropped
    assert shown_log(line, colour=False) == "ERROR xy zz"
    assert shown_log("\x1b[31mERROR\x1b[0m " + EVIL + rest) == "\x08y zz".replace("\x08", "")  # CR: the last state
    assert shown_log("step:1 - loss:0.5\tok") == "step:1 - loss:0.5\tok"
    assert_inert(shown_log(line).replace("\x1b[31m", "").replace("\x1b[0m", ""), "shown_log")


def test_shown_log_is_linear_on_hostile_lines() -> None:
    """Every alternative of its one pattern stops at the next ESC: no line costs more than
    a few passes (a 64 KiB line of unterminated OSC starts, or of CSI parameters)."""
    import timeit

    for unit in ("\x1b]0;" + "a" * 30 + "\x1bX", "\x1b[" + "1;" * 30 + "\x1bé", "\x9b" + "9" * 40):
        line = unit * (65536 // len(unit))
        t = min(timeit.repeat(lambda line=line: shown_log(line), number=1, repeat=3))
        assert t < 0.5, (repr(unit), t)
        assert_inert(shown_log(line, colour=False), repr(unit))


def test_markdown_text_and_code_span() -> None:
    assert md_text(EVIL + " <b>x</b> [l](javascript:alert(1)) &lt; | `") == (
        "x\\\\x1b\\]0;pwned\\\\x07\\\\x1b\\]52;c;cHduZWQ=\\\\x07\\\\x1b\\[2J\\\\x9b31m \\\\x08y "
        "\\<b\\>x\\</b\\> \\[l\\]\\(javascript:alert\\(1\\)\\) \\&lt; \\| \\`")
    assert md_code("a`b``c") == "```a`b``c```"
    assert md_code("`x") == "`` `x ``"
    assert_inert(md_code(EVIL), "md_code")


def test_csv_cell_guards_formulas_keeps_numbers() -> None:
    for formula in ("=HYPERLINK(\"http://x\")", "+SUM(1)", "-2+3", "@A1", "-cmd|' /C calc'!A0"):
        assert csv_cell(formula) == "'" + formula
    assert csv_cell("\tx") == "\\tx" and csv_cell("\r=1") == "\\r=1"  # made visible: starts with a backslash
    for number in ("-0.5", "-2", "+3.5e-3", "-inf", "nan", "12"):
        assert csv_cell(number) == number
    assert csv_cell(-0.5) == -0.5 and csv_cell(3) == 3 and csv_cell(None) is None
    assert csv_cell("actor/loss") == "actor/loss"
    assert_inert(str(csv_cell(EVIL)), "csv_cell")


# --------------------------------------------------------------------------- the console


def _screen_text(app: Any) -> str:
    """Every line the current screen draws, as the segments that go to the terminal."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


def assert_screen_inert(app: Any, where: str) -> str:
    text = _screen_text(app)
    for line in text.split("\n"):
        m = RAW_ON_SCREEN.search(line)
        assert m is None, f"{where}: {m.group()!r} drawn at {m.start()}: {line!r}"
    return text


def _hostile_state(profile: Any, ray_up: bool = True) -> Any:
    from tui.backend.static import demo_state
    from tui.core.state import ContainerState, GpuProcess, GpuReport, JobState, RayJobState

    st = demo_state(profile)
    n0, n1, n2, n3 = st.nodes[:4]
    n0.reachable, n0.error = False, f"127.0.0.2:22 disconnected: {EVIL}"  # an SSH server's words
    n1.container = ContainerState("train-rl", EVIL, image=EVIL, started_at=EVIL, error=EVIL)  # type: ignore[arg-type]
    n2.gpu = GpuReport(EVIL, [], parsed=False, error=EVIL, driver_version=EVIL)
    card = n3.gpus[0]
    card.name = EVIL
    card.processes = [GpuProcess(pid=7, name=EVIL, mem_used_mib=1.0)]
    if ray_up:
        st.ray.jobs = [RayJobState(id=EVIL, status="RUNNING", start_time=2.0, message=EVIL)]
        st.job = JobState(id=EVIL, status="RUNNING", step=3)  # type: ignore[arg-type]
    else:
        st.ray.available, st.ray.error = False, EVIL
    for rn in st.ray.nodes:
        rn.error = EVIL
    return st


def _hostile_backend() -> Any:
    from tui.backend.static import StaticBackend, demo_backend
    from tui.core.actions.events import ActionEvent
    from tui.core.alerts import Alert
    from tui.core.checks import CheckResult, check_event
    from tui.core.job.journal import Entry
    from tui.core.job.runs import RunSummary

    class Hostile(StaticBackend):
        async def run_action(self, name: str, **opts: Any) -> AsyncIterator[ActionEvent]:
            node = self.profile.nodes[0].name
            yield ActionEvent(name, "start", name)
            yield ActionEvent(name, "node", "running", node=node, status="running")
            yield ActionEvent(name, "output", f"{EVIL}\n\x1b[32mcoloured\x1b[0m {EVIL}", node=node)
            yield ActionEvent(name, "warn", EVIL)
            if name == "check":
                yield check_event(CheckResult(EVIL, "fail", EVIL, fix=EVIL, node=node))
                yield check_event(CheckResult("x", "warn", EVIL, cause=EVIL))
            yield ActionEvent(name, "fail", f"{name} failed: {EVIL}")

    d = demo_backend()
    b = Hostile(**{f.name: getattr(d, f.name) for f in dataclasses.fields(StaticBackend) if not f.name.startswith("_")})
    b.state = _hostile_state(b.profile)
    b.log_lines = [*b.log_lines, EVIL, "\x1b[31mERROR\x1b[0m " + EVIL.replace("\r", "")]
    b.series = {**b.series, EVIL: [(1, 1.0), (2, 2.0)], "=cmd|' /C calc'!A0": [(1, -1.0)]}
    raw = Alert("warning", "probe", "placeholder", at=1.0)
    raw.message, raw.source = EVIL, EVIL  # past the source's rule: the widgets apply it themselves
    b.alerts = [*b.alerts, Alert("error", "log", f"CUDA error: {EVIL}", line=3, at=2.0), raw]
    b.run_list = [RunSummary(id=EVIL, name=EVIL, status=EVIL, step=1, parent={"job_id": EVIL, "step": 1},
                             diagnosis=EVIL),
                  RunSummary(id="raysubmit_other", name="ok", status="SUCCEEDED", step=2)]
    b.journal_entries = [Entry(kind=EVIL, message=EVIL, key="k1", at=1.0, who=EVIL, data={"line": 2})]
    return b


async def _open(pilot: Any, key: str, screen_type: type) -> None:
    await pilot.press(key)
    await until(pilot, lambda: isinstance(pilot.app.screen, screen_type))
    await settle(pilot)


async def test_console_main_screen_draws_no_control_sequence() -> None:
    """Node grid (an SSH server's disconnect text, a container state, a card tool's error),
    alert bar, Ray pane (a job id), training pane (the job id), log pane (colours kept, the
    rest dropped); then the Ray pane's error, and the dense grid."""
    from tui.app import RlconsoleApp
    from tui.backend.static import demo_state
    from tui.core.alerts import Alert
    from tui.core.job.metrics import MetricsSummary
    from widgets.alerts_bar import AlertsBar
    from widgets.log_pane import LogPane

    b = _hostile_backend()
    app = RlconsoleApp(b, bell=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        b.push_metrics(MetricsSummary(on_cluster=False, job_id=EVIL, step=3, last_checkpoint=EVIL), {})  # type: ignore[arg-type]
        bar = app.screen.query_one(AlertsBar)
        hostile = Alert("error", "probe", "placeholder", at=time.time() + 100)
        hostile.message = EVIL  # past the source's rule
        b.push_alert(hostile)
        await until(pilot, lambda: any(a is hostile for a in bar.alerts))
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        assert any("\x1b[31m" in str(line) for line in pane.log_widget.lines)  # its colour kept (drawn as style)
        text = assert_screen_inert(app, "main screen")
        assert "pwned" in text and VISIBLE_TITLE in text  # shown, as text
        st = _hostile_state(b.profile, ray_up=False)
        b.push_state(st)
        await settle(pilot)
        assert_screen_inert(app, "main screen, Ray down")
        await pilot.press("d")  # dense grid: the error on the node's line
        await settle(pilot)
        assert_screen_inert(app, "dense grid")
        b.push_state(demo_state(b.profile))
        await settle(pilot)


async def test_console_lists_and_pickers_draw_no_control_sequence() -> None:
    """Alerts list and the run's journal (a, j), node detail (Enter), runs (R), graph's
    scalar list and plot titles (g), the compare picker (c)."""
    from tui.app import RlconsoleApp
    from tui.screens.alerts import AlertsScreen
    from tui.screens.graph import ComparePicker, GraphScreen
    from tui.screens.node_detail import NodeDetailScreen
    from tui.screens.runs import RunsScreen

    b = _hostile_backend()
    app = RlconsoleApp(b, bell=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await _open(pilot, "a", AlertsScreen)
        assert VISIBLE_TITLE in assert_screen_inert(app, "alerts list")
        await pilot.press("j")
        await settle(pilot)
        assert VISIBLE_TITLE in assert_screen_inert(app, "journal view")
        await pilot.press("escape")
        await settle(pilot)
        for node in b.profile.nodes:
            app.push_screen(NodeDetailScreen(node.name, 0))
            await settle(pilot)
            assert isinstance(app.screen, NodeDetailScreen)
            assert_screen_inert(app, f"node detail {node.name}")
            await pilot.press("escape")
            await settle(pilot)
        await _open(pilot, "R", RunsScreen)
        assert_screen_inert(app, "runs")
        await pilot.press("escape")
        await settle(pilot)
        await _open(pilot, "g", GraphScreen)
        sl = app.screen.query_one("#scalars")
        sl.select(EVIL)  # type: ignore[attr-defined]
        await settle(pilot)
        text = assert_screen_inert(app, "graph")
        assert "\\x1b]0;pwned" in text
        await _open(pilot, "c", ComparePicker)
        assert_screen_inert(app, "compare picker")


async def test_console_actions_toasts_preflight_and_questions_draw_no_control_sequence() -> None:
    """The action panel (a command's output, a warning, the failure), the failure's toast,
    the preflight table (p), and a question naming the running job (its id is Ray's)."""
    from tui.app import RlconsoleApp
    from tui.screens.preflight import PreflightScreen
    from widgets.action_panel import ActionPanel
    from widgets.confirm import ConfirmationModal

    b = _hostile_backend()
    app = RlconsoleApp(b, bell=False)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("u")  # a job runs: the question names it
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        await settle(pilot)
        assert_screen_inert(app, "confirmation naming the job")
        await pilot.press("y")
        await until(pilot, lambda: app.screen.query_one(ActionPanel).state == "failed")
        await settle(pilot)
        assert_screen_inert(app, "action panel and toast")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PreflightScreen), timeout=10)
        await settle(pilot)
        assert_screen_inert(app, "preflight")


# --------------------------------------------------------------------------- the CLI


def _profile() -> Any:
    from tui.backend.static import demo_profile

    return demo_profile()


def test_status_prints_no_control_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.cli.status as status

    p = _profile()
    st = _hostile_state(p)

    async def snap(_profile: Any) -> Any:
        return st

    monkeypatch.setattr(status, "_snapshot_with_job", snap)
    out = io.StringIO()
    assert status.run_status(p, out=out) == 0
    text = out.getvalue()
    assert_inert(text, "status")
    assert VISIBLE_TITLE in text.replace("\n    ", "")
    st = _hostile_state(p, ray_up=False)
    out = io.StringIO()
    assert status.run_status(p, out=out) == 0
    assert_inert(out.getvalue(), "status, Ray down")
    out = io.StringIO()
    assert status.run_status(p, json=True, out=out) == 0  # JSON: escaped as JSON
    assert_inert(out.getvalue(), "status --json")
    assert json.loads(out.getvalue())["ray"]["error"] == EVIL


def test_diagnose_prints_no_control_sequence(tmp_path: Path) -> None:
    from tui.cli.diagnose import run_diagnose

    log = tmp_path / "driver.log"
    log.write_text(f"step 1\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB {EVIL}\n",
                   encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    assert run_diagnose(str(log), out=out, err=err) == 0
    assert "CUDA out of memory" in out.getvalue() and VISIBLE_TITLE in out.getvalue()
    assert_inert(out.getvalue() + err.getvalue(), "diagnose")


def test_metrics_csv_escapes_cells_and_keeps_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """S5: a key (a TensorBoard tag, a file-logger key) that starts a formula gets a leading
    `'`; its control characters are made visible; negative numbers stay numbers."""
    from tui.cli import main
    from tui.core.job.series import to_csv

    keys = {EVIL: 1.0, "=HYPERLINK(\"http://x\",\"y\")": -2.5, "+SUM(1)": 1.0, "-2+3": 2.0, "@A1": 3.0,
            "actor/loss": -0.5}
    src = tmp_path / "metrics.jsonl"
    src.write_text(json.dumps({"step": 1, "data": keys}) + "\n", encoding="utf-8")
    assert main(["metrics", str(src), "--csv"]) == 0
    text = capsys.readouterr().out
    assert_inert(text, "metrics --csv")
    for produced in (text, to_csv({k: [(1, v)] for k, v in keys.items()})):  # the graph's `e` export too
        rows = list(csv.reader(io.StringIO(produced)))
        head, row = rows[0], dict(zip(rows[0], rows[1]))
        assert "'=HYPERLINK(\"http://x\",\"y\")" in head and "'+SUM(1)" in head and "'-2+3" in head and "'@A1" in head
        assert not any(h[:1] in "=+-@" for h in head)
        assert row["actor/loss"] == "-0.5" and row["'=HYPERLINK(\"http://x\",\"y\")"] == "-2.5"
        assert shown(EVIL) in head


def _journal_run(run: str) -> None:
    from tui.core.alerts import Alert
    from tui.core.job.history import RunRecord, record_run
    from tui.core.job.journal import Journal, action_entry, alert_entry
    from tui.core.locations import spool_root

    base = spool_root() / run
    base.mkdir(parents=True)
    (base / "driver.log").write_text("Total training steps: 10\n")
    record_run(RunRecord(profile="qwen3-8b-grpo-32gpu", profile_path=str(SEED), job_id=run, submitted_at=1.0,
                         entrypoint=[], runtime_env={}, extra={"run_name": f"<b>{EVIL}</b>"}))
    alert = Alert("error", "log", "placeholder", line=1, at=3.0, diagnosis="cuda-oom")
    alert.message = f"{EVIL} <img src=x onerror=alert(1)> [l](javascript:alert(1)) `x` |"
    Journal(base).append([action_entry("submit", "cli", 2.0, "done", f"submitted {run}"), alert_entry(alert, "watch")])


def test_journal_markdown_and_text_print_no_control_sequence_and_no_markup(
        capsys: pytest.CaptureFixture[str]) -> None:
    """S10: the run's id (Ray's: backticks, `<`, `|` pass the path rule) and the messages
    are text in the post-mortem page: rendered, it holds no tag, no link but the log's,
    and the id's backtick cannot close the code span around it."""
    from markdown_it import MarkdownIt

    from tui.cli import main

    run = "raysubmit_`<img src=x onerror=alert(1)>`"
    _journal_run(run)
    assert main(["journal", run, "--markdown", "--profile", str(SEED)]) == 0
    md = capsys.readouterr().out
    assert_inert(md, "journal --markdown")
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<img" not in html and "<b>" not in html, html
    assert all(h.startswith("file://") for h in re.findall(r"<a href=\"([^\"]*)\"", html)), html  # the log's only
    assert "<code>rlconsole logs --job raysubmit_`&lt;img src=x onerror=alert(1)&gt;`</code>" in html  # one span
    assert "onerror" in html  # shown, as text
    assert main(["journal", run, "--profile", str(SEED)]) == 0
    text = capsys.readouterr().out
    assert_inert(text, "journal")
    assert VISIBLE_TITLE in text


def test_runs_prints_no_control_sequence(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import tui.cli.runs as runs_cli
    from tui.core.job.runs import RunSummary

    monkeypatch.setattr(runs_cli, "list_runs", lambda *a, **k: [
        RunSummary(id=EVIL, status=EVIL, diagnosis=EVIL, parent={"job_id": EVIL, "step": 2})])
    assert runs_cli.run_runs(_profile(), as_json=False) == 0
    text = capsys.readouterr().out
    assert_inert(text, "runs")
    assert "diagnosis: x" + VISIBLE_TITLE in text


def test_logs_keeps_colour_and_prints_no_other_sequence(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`logs` prints the job's log as a terminal shows it: its colours, nothing else
    (spooled lines and followed ones alike)."""
    import tui.core.job.watcher as watcher
    import tui.core.ssh as ssh
    from tui.cli.logs import run_logs

    no_cr = EVIL.replace("\r", "")
    logged = [f"\x1b[32mstep:1\x1b[0m {no_cr}", EVIL, f"progress 10%\rprogress 20%{SEQUENCES['osc52-clipboard']}"]

    class Pool:
        def __init__(self, profile: Any) -> None:
            self.head = type("Head", (), {"connected": True, "reason": None})()

        async def open(self) -> None:
            return None

        async def close(self) -> None:
            return None

    class Spool:
        line_count = len(logged)

        def lines(self, a: int, b: int) -> list[str]:
            return logged[a:b]

        def tail(self, n: int) -> list[str]:
            return logged[-n:]

        def close(self) -> None:
            return None

    class Watcher:
        def __init__(self, profile: Any, pool: Any, job_id: str, on_lines: Any = None, **kw: Any) -> None:
            self.on_lines, self.spool, self.reattached = on_lines, Spool(), False

        async def follow_log(self, once: bool = False) -> None:
            self.on_lines([f"followed {no_cr}"])

    monkeypatch.setattr(ssh, "SessionPool", Pool)
    monkeypatch.setattr(watcher, "JobWatcher", Watcher)
    assert run_logs(_profile(), "raysubmit_X") == 0
    out = capsys.readouterr().out
    # colour kept; a carriage return's redraw as its last state; every other sequence dropped
    assert out.splitlines() == ["\x1b[32mstep:1\x1b[0m xy", "y", "progress 20%", "followed xy"]
    assert_inert(out.replace("\x1b[32m", "").replace("\x1b[0m", ""), "logs")


def test_watch_lines_check_lines_action_lines_and_errors_print_no_control_sequence(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import tui.cli.check as check_cli
    import tui.cli.status as status
    from tui.cli import main
    from tui.cli.actions import _print
    from tui.cli.watch import Watch
    from tui.core.actions.events import ActionEvent
    from tui.core.alerts import Alert
    from tui.core.checks import CheckResult
    from tui.core.errors import ActionError

    p = _profile()

    class Notifier:
        def offer(self, *a: Any) -> None:
            return None

    out = io.StringIO()
    w = Watch(p, Notifier(), out)  # type: ignore[arg-type]
    w.on_state(_hostile_state(p))
    w.on_alert(Alert("error", "log", f"CUDA error: {EVIL}"))
    assert_inert(out.getvalue(), "watch")
    assert out.getvalue().count(VISIBLE_TITLE) == 2

    monkeypatch.setattr(check_cli, "static_checks", lambda _p: [
        CheckResult(EVIL, "fail", EVIL, fix=EVIL, node=EVIL), CheckResult("x", "skip", EVIL, cause=EVIL)])
    monkeypatch.setattr(check_cli, "use_colour", lambda _s: True)
    assert check_cli.run_check_cli(p, static=True) == 1
    text = capsys.readouterr().out
    assert "\x1b[1;31mFAIL\x1b[0m" in text  # its own colour stays
    assert_inert(text.replace("\x1b[1;31m", "").replace("\x1b[2m", "").replace("\x1b[0m", ""), "check")

    for ev in (ActionEvent("containers", "output", f"{EVIL}\n\x1b[33mpulling\x1b[0m", node="n1"),
               ActionEvent("containers", "fail", EVIL), ActionEvent("submit", "warn", EVIL)):
        _print(ev, as_json=False)
        _print(ev, as_json=True)
    assert_inert(capsys.readouterr().out, "actions")

    def fail(*a: Any, **k: Any) -> int:
        raise ActionError(f"head unreachable: {EVIL}", node="node125", output_tail=EVIL)

    monkeypatch.setattr(status, "run_status", fail)
    assert main(["status", "--profile", str(SEED)]) == 1
    err = capsys.readouterr().err
    assert_inert(err, "an error")
    assert VISIBLE_TITLE in err


def test_ssh_disconnect_text_and_the_debug_log_are_made_visible(tmp_path: Path) -> None:
    import asyncssh

    from tui.core.debuglog import SecretMaskingFilter
    from tui.core.ssh import SshError, _describe_connect_error

    node = _profile().nodes[0]
    for exc in (asyncssh.ProtocolError(EVIL), asyncssh.DisconnectError(11, EVIL)):
        msg = _describe_connect_error(exc, node, _profile().ssh)
        assert_inert(msg, "SSH disconnect")
        assert VISIBLE_TITLE in msg
    assert_inert(SshError("n", f"cannot open a channel: {EVIL}").message, "SshError")
    rec = logging.LogRecord("rlconsole.x", logging.WARNING, __file__, 1, "node down: %s", (EVIL,), None)
    assert SecretMaskingFilter().filter(rec)
    assert_inert(rec.getMessage(), "debug log")


# --------------------------------------------------------------------------- a real terminal


def _packet(payload: bytes) -> bytes:
    pad = 8 - (5 + len(payload)) % 8
    pad += 8 if pad < 4 else 0
    return struct.pack(">IB", 1 + len(payload) + pad, pad) + payload + b"\0" * pad


class HostileSshServer:
    """Speaks just enough SSH to say goodbye: its version line, then SSH_MSG_DISCONNECT
    with `EVIL` as the reason, before any key exchange (so before any host key is checked,
    as a real server may). One thread, loopback only."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.accepted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        reason = EVIL.encode()
        bye = _packet(b"\x01" + struct.pack(">I", 2) + struct.pack(">I", len(reason)) + reason + b"\0\0\0\0")
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            with conn:
                try:
                    conn.settimeout(2)
                    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
                    conn.recv(4096)  # the client's version line (and maybe its KEXINIT)
                    conn.sendall(bye)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def hostile_ssh() -> Iterator[HostileSshServer]:
    s = HostileSshServer()
    yield s
    s.close()


def _profile_at(server: HostileSshServer, tmp_path: Path) -> Path:
    """The seed's profile with every node's SSH on the hostile server (each node its own
    loopback address, all reached at 127.0.0.1 on the server's port)."""
    text = SEED.read_text()
    seen: dict[str, str] = {}
    text = re.sub(r"address: (10\.10\.\d+\.\d+),",
                  lambda m: f"address: {seen.setdefault(m.group(1), f'127.0.0.{len(seen) + 2}')}, "
                            "ssh: {host: 127.0.0.1},", text)
    assert len(seen) == 4
    text = text.replace("  port: 22\n", f"  port: {server.port}\n  connect_timeout_s: 5\n", 1)
    p = tmp_path / "hostile-ssh.yaml"
    p.write_text(text)
    return p


class Term:
    """One private tmux server; OSC 52 would land in a paste buffer (`set-clipboard on`),
    OSC 0 in the pane's title."""

    def __init__(self, tmux: str) -> None:
        self.tmux, self.socket = tmux, f"rlconsole-s1-{uuid.uuid4().hex[:8]}"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.tmux, "-L", self.socket, *args], capture_output=True, text=True, check=check,
                              timeout=10)

    def start(self, cmd: str) -> None:
        self.run("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "160", "-y", "50", "-c", str(REPO),
                 "sleep 3600")
        self.run("set-option", "-g", "set-clipboard", "on")
        self.run("select-pane", "-t", "main", "-T", "before")
        self.run("respawn-pane", "-k", "-t", "main", cmd)

    def title(self) -> str:
        return self.run("display-message", "-p", "-t", "main", "#{pane_title}").stdout.strip()

    def buffers(self) -> str:
        return self.run("list-buffers", check=False).stdout.strip()

    def screen(self) -> str:
        res = self.run("capture-pane", "-p", "-t", "main", check=False)
        return res.stdout if res.returncode == 0 else ""

    def wait(self, cond: Any, what: str, timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        text = ""
        while time.monotonic() < end:
            text = self.screen()
            if cond(text):
                return text
            time.sleep(0.1)
        pytest.fail(f"timed out waiting for {what}; screen:\n{text}")

    def kill(self) -> None:
        self.run("kill-server", check=False)


@pytest.fixture
def term() -> Iterator[Term]:
    from tests.conftest import require_command

    t = Term(require_command("tmux", "tmux"))
    yield t
    t.kill()


def _cli(tmp_path: Path, *args: str) -> str:
    env = {"RLCONSOLE_STATE_DIR": str(tmp_path / "state"), "RLCONSOLE_CONFIG_DIR": str(tmp_path / "config"),
           "TERM": "xterm-256color", "LANG": "C.UTF-8", "PYTHONPATH": str(REPO)}
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    return f"env -u COLUMNS -u LINES {exports} {sys.executable} -m tui.cli {' '.join(args)}"


def test_status_in_a_real_terminal_changes_no_title_and_no_clipboard(
        term: Term, hostile_ssh: HostileSshServer, tmp_path: Path) -> None:
    """`rlconsole status` against nodes whose SSH server says goodbye with a title and a
    clipboard write: the terminal (tmux) keeps its title, gets no buffer, and shows the
    sequences as text."""
    profile = _profile_at(hostile_ssh, tmp_path)
    done = tmp_path / "rc"
    term.start(f"sh -c '{_cli(tmp_path, '--profile', str(profile), 'status')}; echo $? > {done}; sleep 600'")
    screen = term.wait(lambda s: done.exists(), "status to finish")
    assert done.read_text().strip() == "0", screen
    assert hostile_ssh.accepted >= 1
    assert term.title() == "before"  # OSC 0 did not reach the terminal
    assert term.buffers() == ""  # nor OSC 52
    screen = term.screen()
    assert "reachable" in screen and "\\x1b]0;pwned\\x07" in screen.replace("\n    ", ""), screen  # as text


def test_console_in_a_real_terminal_changes_no_title_and_no_clipboard(
        term: Term, hostile_ssh: HostileSshServer, tmp_path: Path) -> None:
    """The console (live backend) on the same nodes: the grid and the alert bar show the
    disconnect text; the terminal's title and clipboard stay untouched."""
    profile = _profile_at(hostile_ssh, tmp_path)
    done = tmp_path / "rc"
    term.start(f"sh -c '{_cli(tmp_path, '--profile', str(profile))}; echo $? > {done}; sleep 600'")
    term.wait(lambda s: "Job log" in s and hostile_ssh.accepted >= 4, "the console, every node tried")
    time.sleep(1.5)  # the grid, the alerts and the bar drawn
    assert term.title() == "before"  # OSC 0 did not reach the terminal
    assert term.buffers() == ""  # nor OSC 52
    term.wait(lambda s: "DOWN" in s and "Nodes 0/4 up" in s and "\\x1b]0;pwned" in s, "the nodes down, the text")
    term.run("send-keys", "-t", "main", "q")
    end = time.monotonic() + 30
    while not done.exists() and time.monotonic() < end:
        time.sleep(0.1)
    assert done.exists() and done.read_text().strip() == "0", term.screen()
    assert term.title() == "before" and term.buffers() == ""
