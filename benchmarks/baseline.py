"""The code as first landed, for side-by-side comparisons in one run.

Benchmarks that measure an optimisation run the same work on this checkout and on the
landed tree (extracted with `git archive`, so no worktree or checkout is touched), each in
its own child process, alternately, and report the ratio.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE_REV = "b436d23eb72f7295acf65d4a64d1a2097e627b0f"  # main as first landed (issues 2-7)


def extract_baseline(dest: Path, rev: str = BASELINE_REV) -> Path:
    """The tree at `rev` under `dest` (created); returns `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest
