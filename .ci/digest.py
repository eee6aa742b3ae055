"""What a failed test run printed far above its last lines, repeated at its end.

CI's report keeps only the tail of `.ci/run`'s output. When an xdist worker dies or ends
its session early, the controller's own INTERNALERROR (an assertion naming the test the
worker was running) is what reaches the tail, and the worker's traceback -- the cause --
was printed minutes earlier. This prints, bounded: each INTERNALERROR block's first and
last lines, the lines that say a worker crashed or a session ended unexpectedly, and the
short test summary; then pytest's closing line again, so the tail still ends with it.

Usage: python3 .ci/digest.py PYTEST_LOG
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MARKERS = re.compile(r"crashed while running|replacing crashed worker|mainloop: caught unexpected"
                     r"|Timeout >|worker .* crashed|Fatal Python error|Killed|Segmentation fault")
CLOSING = re.compile(r"^=*\s*(\d+ (passed|failed|error|errors)|no tests ran)\b.* in [\d.]+s")
HEAD, TAIL, BLOCKS, SUMMARY = 6, 24, 4, 60


def blocks(lines: list[str]) -> list[list[str]]:
    """Runs of consecutive INTERNALERROR lines (one per traceback)."""
    out: list[list[str]] = []
    run: list[str] = []
    for line in lines:
        if line.startswith("INTERNALERROR>"):
            run.append(line)
        elif run:
            out.append(run)
            run = []
    if run:
        out.append(run)
    return out


def digest(text: str) -> list[str]:
    lines = text.splitlines()
    said: list[str] = []
    for i, b in enumerate(blocks(lines)[:BLOCKS]):
        said.append(f"--- INTERNALERROR block {i + 1} ({len(b)} lines)")
        said += b if len(b) <= HEAD + TAIL else b[:HEAD] + ["INTERNALERROR> ..."] + b[-TAIL:]
    hits = [ln for ln in lines if MARKERS.search(ln)]
    if hits:
        said.append("--- workers")
        said += hits[:20]
    if "short test summary info" in text:
        start = next(i for i, ln in enumerate(lines) if "short test summary info" in ln)
        said.append("--- " + lines[start].strip("= "))
        said += [ln for ln in lines[start + 1:] if not CLOSING.match(ln)][:SUMMARY]
    closing = [ln for ln in lines if CLOSING.match(ln)]
    if closing:
        said.append(closing[-1])
    return [ln[:400] for ln in said]


def main(argv: list[str]) -> int:
    try:
        text = Path(argv[1]).read_text(errors="replace")
    except (IndexError, OSError) as e:
        print(f"digest: {e}", file=sys.stderr)
        return 2
    print("=" * 20 + " what the failed run printed above (.ci/digest.py) " + "=" * 20)
    print("\n".join(digest(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
