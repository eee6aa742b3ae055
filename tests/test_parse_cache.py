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
