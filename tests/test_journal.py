"""The run journal (issue 30, item 3): appended as things happen, by whichever process
saw them, once; a torn line costs only itself; `journal --markdown` is a post-mortem page."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui.core.alert import Alert
from tui.core.job.history import RunRecord, record_run, runs
from tui.core.job.journal import (Journal, action_entry, alert_entry, checkpoint_entry, state_entry)
from tui.core.job.postmortem import markdown
from tui.core.job.runs import summarize_run

REPO = Path(__file__).resolve().parent.parent

WRITER = r"""
import sys, time
from pathlib import Path
from tui.core.alert import Alert
from tui.core.job.journal import Journal, alert_entry, checkpoint_entry, state_entry
j = Journal(Path(sys.argv[1]))
who = sys.argv[2]
go = Path(sys.argv[3])
while not go.exists():   # both writers start together
    time.sleep(0.001)
for i in range(50):
    at = time.time()
    j.append(state_entry("RUNNING", i, who, at=at))
    j.append(alert_entry(Alert("error", "probe", "node node3 is down", at=at, key="node:node3"), who))
    j.append(checkpoint_entry(10 * (i // 10), who))
    j.append(alert_entry(Alert("info", "probe", "node node3 is back", at=at + 0.5, key="node:node3", ends=True), who))
print("ok")
"""


def test_append_reads_back_masked_and_in_order(tmp_path: Path) -> None:
    j = Journal(tmp_path / "raysubmit_1")
    wrote = j.append([action_entry("submit", "cli", 100.0, "done", "submitted raysubmit_1 HF_TOKEN=hf_abcdefghijklmnop"),
                      state_entry("RUNNING", None, "console", at=101.0),
                      checkpoint_entry(20, "watch", at=102.0)])
    assert len(wrote) == 3
    es = Journal(tmp_path / "raysubmit_1").entries()
    assert [e.kind for e in es] == ["action", "state", "checkpoint"]
    assert "hf_abcdefghijklmnop" not in j.path.read_text() and "HF_TOKEN=***" in es[0].message
    assert es[0].who == "cli" and es[0].data["result"] == "done"
    assert (j.path.stat().st_mode & 0o777) == 0o600


def test_the_same_thing_seen_twice_is_written_once(tmp_path: Path) -> None:
    j1, j2 = Journal(tmp_path / "r"), Journal(tmp_path / "r")
    down = Alert("error", "probe", "node node3 is down", at=10.0, key="node:node3")
    assert j1.append(alert_entry(down, "console"))
    # another process saw it a second later: same episode, not a new one
    assert not j2.append(alert_entry(Alert("error", "probe", "node node3 is down", at=11.0, key="node:node3"), "watch"))
    assert j2.append(alert_entry(Alert("info", "probe", "node node3 is back", at=20.0, key="node:node3", ends=True), "watch"))
    back = Alert("info", "probe", "node node3 is back", at=21.0, key="node:node3", ends=True)
    assert not j1.append(alert_entry(back, "console"))
    # a second episode of the same key is new
    assert j1.append(alert_entry(Alert("error", "probe", "node node3 is down", at=30.0, key="node:node3"), "console"))
    assert j1.append(state_entry("RUNNING", 1, "console", at=1.0)) and not j2.append(state_entry("RUNNING", 2, "watch", at=2.0))
    assert j2.append(checkpoint_entry(20, "watch")) and not j1.append(checkpoint_entry(20, "console"))
    # a log finding points at one line: replayed at a re-attach, it is the same
    f = Alert("error", "log", "CUDA out of memory", line=41, at=5.0, diagnosis="cuda-oom")
    assert j1.append(alert_entry(f, "console")) and not j2.append(alert_entry(
        Alert("error", "log", "CUDA out of memory", line=41, at=9.0, diagnosis="cuda-oom"), "watch"))
    kinds = [(e.kind, e.data.get("ends")) for e in Journal(tmp_path / "r").entries()]
    assert kinds == [("node", False), ("node", True), ("node", False), ("state", None), ("checkpoint", None),
                     ("alert", None)]


def test_two_processes_appending_together_write_each_thing_once(tmp_path: Path) -> None:
    base, go = tmp_path / "raysubmit_2", tmp_path / "go"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(base), who, str(go)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for who in ("console", "watch")]
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "ok", err
    es = Journal(base).entries()
    raw = (base / "journal.jsonl").read_text().splitlines()
    assert len(raw) == len(es)  # every line whole: no interleaving
    assert sum(e.kind == "state" for e in es) == 1  # RUNNING once, whoever saw it first
    assert sorted(e.data["step"] for e in es if e.kind == "checkpoint") == [0, 10, 20, 30, 40]
    eps = [bool(e.data["ends"]) for e in es if e.kind == "node"]
    assert eps == [False, True] * (len(eps) // 2) and len(eps) >= 2  # down/back alternate, never doubled


def test_a_torn_line_costs_only_itself(tmp_path: Path) -> None:
    j = Journal(tmp_path / "r")
    j.append(checkpoint_entry(10, "console", at=1.0))
    with j.path.open("a") as f:
        f.write('{"kind": "checkpoint", "key": "checkpoint:2')  # a crash mid-entry
    # another process (a fresh Journal) appends after the crash
    assert Journal(tmp_path / "r").append(checkpoint_entry(20, "console", at=2.0))
    assert [e.data["step"] for e in Journal(tmp_path / "r").entries()] == [10, 20]
    assert j.path.read_text().count("\n") == 3


def test_markdown_post_mortem_names_submit_stop_alerts_and_escapes(tmp_path: Path) -> None:
    from tui.core.locations import spool_root

    base = spool_root() / "raysubmit_B"
    base.mkdir(parents=True)
    (base / "driver.log").write_text("Total training steps: 100\n"
                                     "(TaskRunner pid=1) step:1 - critic/rewards/mean:0.25 - perf/throughput:500.0\n"
                                     "(TaskRunner pid=1) step:2 - critic/rewards/mean:0.5 - perf/throughput:700.0\n")
    record_run(RunRecord(profile="p", profile_path="/x", job_id="raysubmit_B", submitted_at=1000.0,
                         entrypoint=["python3"], runtime_env={}, checkpoint_dir="/ck",
                         extra={"cards": 8, "run_name": "exp", "parent": {"job_id": "raysubmit_A", "step": 40}}))
    j = Journal(base)
    j.append([action_entry("submit", "console", 1000.0, "done", "submitted raysubmit_B"),
              state_entry("RUNNING", None, "console", at=1010.0),
              alert_entry(Alert("warning", "job", "reward | <b>falling</b>", at=2000.0, key="range:reward"), "watch"),
              alert_entry(Alert("error", "log", "CUDA out of memory", line=1, at=2500.0, diagnosis="cuda-oom"), "console"),
              action_entry("stop", "cli", 4600.0, "done", "raysubmit_B STOPPED; every card is free"),
              state_entry("STOPPED", 2, "console", at=4610.0)])
    s = summarize_run("raysubmit_B", runs()[0], base, now=5000.0)
    md = markdown(s, j.entries(), base / "driver.log")
    assert md.startswith("# Run raysubmit\\_B")
    assert "Resumed from step 40 of run raysubmit\\_A" in md
    assert "| GPU-hours | 8.00 |" in md  # 8 cards x 3600 s RUNNING
    assert "| steps | 2 / 100 |" in md and "| status | STOPPED |" in md
    timeline = md.split("## Timeline")[1].split("## Diagnosis")[0]
    assert "submit finished: submitted raysubmit\\_B" in timeline and "stop finished" in timeline
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(4600.0))
    assert f"stop finished: raysubmit\\_B STOPPED; every card is free (started {started})" in timeline
    assert "reward \\| \\<b\\>falling\\</b\\>" in timeline  # text, never a table cell or HTML
    assert "CUDA out of memory (log line 2)" in timeline
    assert "**cuda-oom**" in md.split("## Diagnosis")[1]
    assert f"({(base / 'driver.log').as_uri()}#L2)" in md
    json.dumps(s.to_json())


def test_journal_cli_prints_text_json_lines_and_refuses_a_bad_run(capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import main
    from tui.core.locations import spool_root

    profile = str(REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml")
    record_run(RunRecord(profile="qwen3-8b-grpo-32gpu", profile_path=profile, job_id="raysubmit_J",
                         submitted_at=1.0, entrypoint=[], runtime_env={}))
    j = Journal(spool_root() / "raysubmit_J")
    j.append([state_entry("RUNNING", None, "watch", at=10.0),
              alert_entry(Alert("error", "log", "boom\x1b[31m", line=3, at=11.0), "watch")])
    assert main(["journal", "-P", profile]) == 0  # the profile's last run
    text = capsys.readouterr().out.splitlines()
    assert len(text) == 2 and "STATE" in text[0] and "job RUNNING (watch)" in text[0]
    assert "\x1b" not in text[1] and "ERROR log: boom" in text[1]
    assert main(["journal", "raysubmit_J", "--json", "-P", profile]) == 0
    docs = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert [d["kind"] for d in docs] == ["state", "alert"] and docs[1]["data"]["line"] == 3
    assert main(["journal", "../x", "-P", profile]) == 2
    assert "path component" in capsys.readouterr().err


# ------------------------------------------------ issue 39 S7: never blocked, never a FIFO


def _bounded(fn, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    """fn() in a daemon thread, waited for at most `timeout`: (finished, its result)."""
    import threading

    box: list[object] = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    t.start()
    t.join(timeout)
    return (not t.is_alive()), (box[0] if box else None)


def test_a_peer_holding_the_lock_delays_an_append_but_never_blocks_it(tmp_path: Path) -> None:
    """A peer (a hung console, a stopped `watch`) keeps the journal's lock: an append waits
    a bounded moment and returns nothing written (before: flock waited forever, on the
    console's loop); what it could not write goes out with the next append."""
    import fcntl
    import os

    j = Journal(tmp_path / "r")
    assert j.append(checkpoint_entry(10, "console", at=1.0))
    peer = os.open(tmp_path / "r" / "journal.jsonl.lock", os.O_RDWR)
    fcntl.flock(peer, fcntl.LOCK_EX)
    try:
        done, wrote = _bounded(lambda: j.append(checkpoint_entry(20, "console", at=2.0)))
        assert done, "append blocked on a peer's lock"
        assert wrote == []
    finally:
        os.close(peer)  # (drops the peer's lock: an old, blocked append then finishes)
    assert [e.data["step"] for e in j.append(checkpoint_entry(30, "console", at=3.0))] == [20, 30]
    assert [e.data["step"] for e in Journal(tmp_path / "r").entries()] == [10, 20, 30]


@pytest.mark.parametrize("which", ["journal.jsonl", "journal.jsonl.lock"])
def test_a_fifo_is_never_a_journal(which: str, tmp_path: Path) -> None:
    """A FIFO in the journal's place (or the lock's): read and append return at once with
    nothing (before: reading waited forever for a writer; writing filled the pipe)."""
    import os

    base = tmp_path / "r"
    base.mkdir()
    fifo = base / which
    os.mkfifo(fifo)
    j = Journal(base)
    try:
        done, got = _bounded(j.entries)
        assert done and got == [], "entries() blocked on a FIFO"
        done, wrote = _bounded(lambda: j.append(checkpoint_entry(10, "console", at=1.0)))
        assert done and wrote == [], "append blocked on a FIFO"
    finally:  # a reader an old version left blocked in open() gets its EOF
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert stat_is_fifo(fifo)


def stat_is_fifo(p: Path) -> bool:
    import stat

    return stat.S_ISFIFO(p.lstat().st_mode)


def test_a_device_or_a_link_is_never_a_journal(tmp_path: Path) -> None:
    """`journal.jsonl` a link to /dev/zero (read forever) or to another file: not read, not
    written through."""
    base = tmp_path / "r"
    base.mkdir()
    (base / "journal.jsonl").symlink_to("/dev/zero")
    j = Journal(base)
    done, got = _bounded(j.entries)
    assert done and got == []
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    (base / "journal.jsonl").unlink()
    (base / "journal.jsonl").symlink_to(target)
    assert j.append(checkpoint_entry(10, "console", at=1.0)) == [] and target.read_text() == ""
