"""Run every benchmark, one after another, each with `--write`: each rewrites its own
section of BENCHMARKS.md and its rows of the summary table the file opens with.

    python benchmarks/run_all.py [--only watch,status] [--skip logmem]

Benchmarks are not tests: none fails because a machine is slow; each states its target
and whether this run met it. The whole set takes about 20-30 minutes on 2 cores (the sim
at 64 nodes, a 1 GB log, Ray brought up several times).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALL = ["tui", "watch", "nodes", "status", "refresh", "setupray", "logparse", "diagnosis", "logmem", "tensorboard", "soak", "chaos"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated names from: " + ", ".join(ALL))
    ap.add_argument("--skip", default="")
    a = ap.parse_args()
    names = [n for n in (a.only.split(",") if a.only else ALL) if n and n not in a.skip.split(",")]
    failed = []
    for name in names:
        script = HERE / f"bench_{name}.py"
        if not script.exists():
            print(f"== {name}: no {script.name}, skipped", flush=True)
            continue
        t = time.monotonic()
        print(f"== {name}", flush=True)
        rc = subprocess.run([sys.executable, str(script), "--write"], cwd=HERE.parent).returncode
        print(f"== {name}: exit {rc} in {time.monotonic() - t:.0f} s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
