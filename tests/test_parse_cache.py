"""The spool's parse cache holds data, never code, and only our own (issue 27, Low).

It was a pickle: whoever could write the spool directory's cache file ran code in the
next `status` or console. Now it is JSON, type-checked on load, written 0600; a cache
that another user owns, that group or world may write, or that is not the JSON we write,
is ignored: the spool is parsed from the start and the cache rebuilt, our own.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import pytest

from tui.backend.static import demo_profile
from tui.core.job.watcher import JobWatcher

LINES = ["(TaskRunner pid=1) Total training steps: 100"] + [
    f"(TaskRunner pid=1) step:{s} - critic/rewards/mean:{s / 100} - timing_s/step:10.0" for s in range(1, 41)]
STEPS = {s: {"critic/rewards/mean": s / 100, "timing_s/step": 10.0} for s in range(1, 41)}


def _spool(tmp_path: Path, cached: int = 30) -> JobWatcher:
    """A job's spool of LINES, with a genuine cache written after the first `cached`."""
    w = JobWatcher(demo_profile(), pool=None, job_id="j", root=tmp_path)
    w._consume(w.spool.append(("\n".join(LINES[:cached]) + "\n").encode()), notify=False)
    w.write_cache(w.cache_snapshot())
    w._consume(w.spool.append(("\n".join(LINES[cached:]) + "\n").encode()), notify=False)
    w.spool.close()
    return w


def _reattach(tmp_path: Path) -> tuple[JobWatcher, list[int]]:
    """A new watcher re-attaching to the spool; how many lines it had to parse."""
    fed: list[int] = []
    w = JobWatcher(demo_profile(), pool=None, job_id="j", root=tmp_path, wall_clock=False)
    orig = w.parser.feed_many
    w.parser.feed_many = lambda ls: (fed.append(len(ls)), orig(ls))[1]  # type: ignore[method-assign]
    w.reattach(0)
    w.spool.close()
    return w, fed


def _assert_rebuilt(w: JobWatcher) -> None:
    """The cache is ours again: JSON, 0600, covering the whole spool."""
    st = os.stat(w.cache_path)
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o600
    doc = json.loads(w.cache_path.read_text())
    assert doc["lines"] == len(LINES)


class _Payload:
    """What a planted pickle does when loaded: create a file (here, harmlessly)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


def test_a_planted_pickle_runs_no_code_and_the_cache_is_rebuilt(tmp_path: Path) -> None:
    w = _spool(tmp_path)
    marker = tmp_path / "pwned"
    evil = pickle.dumps((_Payload(marker),))
    # at the old cache's name and at the current one, owned by us, mode 0600
    for name in ("parsed.pickle", w.cache_path.name):
        f = w.cache_path.with_name(name)
        f.write_bytes(evil)
        f.chmod(0o600)
    w2, fed = _reattach(tmp_path)
    assert not marker.exists()
    assert sum(fed) == len(LINES) and w2.parser.steps == STEPS  # a full parse
    _assert_rebuilt(w2)
    # and the rebuilt cache serves the next re-attach
    w3, fed3 = _reattach(tmp_path)
    assert sum(fed3) == 0 and w3.parser.steps == STEPS and w3.parser.total_steps == 100


def test_a_group_or_world_writable_cache_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    for mode in (0o666, 0o620):
        w = _spool(tmp_path)
        w.cache_path.chmod(mode)
        w2, fed = _reattach(tmp_path)
        assert sum(fed) == len(LINES), oct(mode)  # not the 10 lines after the cache
        assert w2.parser.steps == STEPS
        _assert_rebuilt(w2)
        for p in w.spool.path.parent.iterdir():
            p.unlink()


def test_a_cache_owned_by_another_user_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the cache to another user")
    w = _spool(tmp_path)
    os.chown(w.cache_path, 65534, 65534)
    w2, fed = _reattach(tmp_path)
    assert sum(fed) == len(LINES) and w2.parser.steps == STEPS
    _assert_rebuilt(w2)


def _run_lines(steps: int, start: int = 1) -> list[str]:
    """VeRL step lines: 20 metrics a step, a validation key every 10th step, a key that
    is NaN from step 50 on (its latest finite value is old), one only in early steps."""
    out = []
    for s in range(start, start + steps):
        m = {"critic/rewards/mean": 0.3 + (s % 7) / 100, "critic/score/mean": 0.5, "timing_s/step": 10.0 + s % 3,
             "perf/throughput": 700.0 + s % 13, "perf/mfu/actor": 0.31, "response_length/mean": 4800.0 + s}
        m.update({f"actor/m{j:02d}": j + s / 1000 for j in range(14)})
        m["actor/nan_late"] = float("nan") if s >= 50 else s / 10
        if s % 10 == 0:
            m["val-core/gsm8k/reward/mean@1"] = s / 1000
        if s <= 5:
            m["early/only"] = float(s)
        out.append(f"(TaskRunner pid=1) step:{s} - " + " - ".join(f"{k}:{v}" for k, v in m.items()))
    return out


def _summary_spool(tmp_path: Path) -> JobWatcher:
    w = JobWatcher(demo_profile(), pool=None, job_id="j", root=tmp_path)
    text = "\n".join(["(TaskRunner pid=1) Total training steps: 1000", *_run_lines(300)]) + "\n"
    w._consume(w.spool.append(text.encode()), notify=False)
    w.write_cache(w.cache_snapshot())
    w._consume(w.spool.append(("\n".join(_run_lines(7, 301)) + "\n").encode()), notify=False)
    w.spool.close()
    return w


def _state(tmp_path: Path, summary: bool) -> tuple[JobWatcher, dict[str, Any]]:
    w = JobWatcher(demo_profile(), pool=None, job_id="j", root=tmp_path, wall_clock=False, diagnose=False,
                   summary=summary)
    w.observe("RUNNING", True)
    w.reattach(0)
    from dataclasses import asdict

    js = json.loads(json.dumps(asdict(w.job_state()), default=str))  # what status --json prints of it
    w.spool.close()
    return w, js


def test_status_reads_the_small_summary_and_reports_what_the_whole_cache_says(tmp_path: Path) -> None:
    """A one-shot `status` re-attaches from the summary file beside the parse cache (the
    run's last steps, per-key counts, sums and last points of the others), not from the
    whole run's cache, and reports exactly what a full re-attach reports."""
    _summary_spool(tmp_path)
    full_w, full = _state(tmp_path, summary=False)
    small_w, small = _state(tmp_path, summary=True)
    assert len(full_w.parser.steps) == 307
    from tui.core.job.parsecache import SUMMARY_STEPS
    assert len(small_w.parser.steps) == SUMMARY_STEPS + 7  # the last steps only
    assert small == full
    assert small["summary"]["steps_seen"] == 307 and small["step"] == 307
    assert small["summary"]["validation"] == {"val-core/gsm8k/reward/mean@1": 0.3}
    cache = tmp_path / "j" / "parsed.json"
    summary = tmp_path / "j" / "parsed-summary.json"
    assert stat.S_IMODE(summary.stat().st_mode) == 0o600
    assert summary.stat().st_size * 3 < cache.stat().st_size  # 300 steps; a 2710-step run: 0.34 vs 11 MB
    # what such a status saves is the summary alone: the full cache is never replaced
    # by a parser holding only the last steps
    before = cache.read_bytes()
    small_w.spool = type(small_w.spool)(small_w.spool.path)
    small_w.write_cache(small_w.cache_snapshot())
    small_w.spool.close()
    assert cache.read_bytes() == before
    assert _state(tmp_path, summary=True)[1] == full == _state(tmp_path, summary=False)[1]


@pytest.mark.parametrize("tamper", ["mode", "types", "points"])
def test_an_unsafe_or_tampered_summary_is_ignored_for_the_full_cache(tmp_path: Path, tamper: str) -> None:
    """The summary file gets the parse cache's checks: not group/world writable, ours, and
    exactly the JSON written (types, the points it must hold). Refused, the full cache
    is read instead and the figures are the same."""
    _summary_spool(tmp_path)
    _, full = _state(tmp_path, summary=False)
    path = tmp_path / "j" / "parsed-summary.json"
    if tamper == "mode":
        doc = json.loads(path.read_text())
        doc["base"]["keys"]["critic/rewards/mean"][1] = 1e9  # a planted figure ...
        path.write_text(json.dumps(doc))
        path.chmod(0o620)  # ... in a file group members could have written
    elif tamper == "types":
        doc = json.loads(path.read_text())
        doc["base"]["keys"]["timing_s/step"][1] = "1e9"
        path.write_text(json.dumps(doc))
    else:
        doc = json.loads(path.read_text())
        doc["base"]["keys"]["critic/rewards/mean"][2] = []  # counts without their points
        path.write_text(json.dumps(doc))
    w, small = _state(tmp_path, summary=True)
    assert w.cache.base is None and len(w.parser.steps) == 307
    assert small == full


def test_each_save_folds_only_the_steps_new_to_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The console saves the cache every 200k lines of a 20-hour run: the summary beside it
    is folded on from the last save's (the steps that became old since), not from the
    run's first step (~0.2 s of the console's CPU a save at 2710 steps), and it is the
    summary a fold from scratch gives."""
    from tui.core.job import parsecache

    w = JobWatcher(demo_profile(), pool=None, job_id="j", root=tmp_path)
    w._consume(w.spool.append(("\n".join(_run_lines(300)) + "\n").encode()), notify=False)
    w.write_cache(w.cache_snapshot())
    folded: list[int] = []
    orig = parsecache.fold

    def counting(base: Any, steps: Any) -> dict[str, Any]:
        steps = list(steps)
        folded.append(len(steps))
        return orig(base, steps)

    monkeypatch.setattr(parsecache, "fold", counting)
    w._consume(w.spool.append(("\n".join(_run_lines(10, 301)) + "\n").encode()), notify=False)
    w.write_cache(w.cache_snapshot())
    assert folded == [10]
    doc = json.loads((tmp_path / "j" / "parsed-summary.json").read_text())
    cut = 310 - parsecache.SUMMARY_STEPS
    scratch = json.loads(json.dumps(orig(None, ((s, w.parser.steps[s]) for s in range(1, cut + 1)))))
    assert doc["base"] == scratch and [s for s, _ in doc["state"]["steps"]] == list(range(cut + 1, 311))
    w.spool.close()


_HUGE = 10**400  # JSON holds it; float() of it raises OverflowError


def _tamper_full(doc: dict[str, Any], what: str) -> None:
    st = doc["state"]
    if what == "metric":
        st["steps"][0][1]["critic/rewards/mean"] = _HUGE
    elif what == "step":
        st["steps"][0][0] = _HUGE
    elif what == "negative-step":
        st["steps"][0][0] = -5
    elif what == "total_steps":
        st["total_steps"] = _HUGE
    elif what == "last_checkpoint":
        st["last_checkpoint"] = _HUGE
    elif what == "negative-lines":
        doc["lines"] = -3
    elif what == "progress":
        st["progress"] = {"n": _HUGE, "total": 1, "percent": 1, "elapsed_s": None, "remaining_s": None,
                          "s_per_it": None}
    elif what == "progress-types":
        st["progress"] = {"n": 1, "total": 1, "percent": 1, "elapsed_s": "soon"}
    elif what == "malformed":
        st["malformed"] = _HUGE


@pytest.mark.parametrize("what", ["metric", "step", "negative-step", "total_steps", "last_checkpoint",
                                  "negative-lines", "progress", "progress-types", "malformed"])
def test_a_cache_with_huge_or_negative_numbers_is_ignored_and_rebuilt(
        what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 39 S8: a parse cache holding 10**400 as a metric crashed `runs` (float() of it
    raised OverflowError, which the type check did not expect); others (a 400-digit step,
    total or checkpoint, a negative line count, a tqdm bar of any types) were taken as they
    were. Every integer is a count, a step or a line: 0 <= n < 10**18, as the parser's own;
    a cache outside that is refused, the spool parsed from the start, the cache rebuilt."""
    from tui.cli import main
    from tui.core.job.runs import summarize_run

    w = _spool(tmp_path)
    doc = json.loads(w.cache_path.read_text())
    _tamper_full(doc, what)
    w.cache_path.write_text(json.dumps(doc))
    s = summarize_run("j", None, tmp_path / "j")  # what `runs` does per run
    assert s.step == 40 and s.total_steps == 100 and s.last_checkpoint is None, s
    w2, fed = _reattach(tmp_path)
    assert sum(fed) == len(LINES) and w2.parser.steps == STEPS and w2.cache.bad
    _assert_rebuilt(w2)
    # and the command itself, on a spool root holding it (every spool is summarised)
    import shutil

    from tui.core.locations import spool_root

    doc = json.loads(w.cache_path.read_text())
    _tamper_full(doc, what)
    w.cache_path.write_text(json.dumps(doc))
    spool_root().mkdir(parents=True, exist_ok=True)
    shutil.copytree(tmp_path / "j", spool_root() / "raysubmit_tampered")
    from tui.core.job.journal import Journal, state_entry

    e = state_entry("RUNNING", None, "watch", at=100.0)
    e.data["profile"] = "qwen3-8b-grpo-32gpu"
    Journal(spool_root() / "raysubmit_tampered").append(e)
    assert main(["runs", "--json", "-P", str(Path(__file__).resolve().parent.parent / "profiles"
                                             / "qwen3-8b-grpo-32gpu.yaml")]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["step"], r["total_steps"]) for r in got] == [("raysubmit_tampered", 40, 100)]


@pytest.mark.parametrize("where", ["count", "sum", "point-step", "point-value"])
def test_a_summary_with_huge_numbers_is_ignored_for_the_full_cache(tmp_path: Path, where: str) -> None:
    """The summary file's base (what `status` reads): 10**400 as a count, a sum or a point
    crashed in float() or was taken; now it is refused and the full cache read instead."""
    _summary_spool(tmp_path)
    _, full = _state(tmp_path, summary=False)
    path = tmp_path / "j" / "parsed-summary.json"
    doc = json.loads(path.read_text())
    e = doc["base"]["keys"]["critic/rewards/mean"]
    if where == "count":
        e[0] = _HUGE
    elif where == "sum":
        e[1] = _HUGE
    elif where == "point-step":
        e[2][0][0] = _HUGE
    else:
        e[2][0][1] = _HUGE
    path.write_text(json.dumps(doc))
    w, small = _state(tmp_path, summary=True)
    assert w.cache.base is None and len(w.parser.steps) == 307
    assert small == full
