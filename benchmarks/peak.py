"""A benchmark child's own peak resident memory.

`getrusage(RUSAGE_SELF).ru_maxrss` is not it: Linux carries the high-water mark of the
image before `exec` over to the new program, so a child started by a larger parent reads
the parent's resident size at the fork when its own peak is smaller (measured in
tests/test_import.py: a 300 MB parent's small child read 308 MB by `ru_maxrss`, 10 MB
by `VmHWM`). `VmHWM` in /proc/self/status counts the new address space only.
"""

from __future__ import annotations

import resource
from pathlib import Path


def own_peak_bytes() -> int:
    """This process's peak resident memory since its exec (`VmHWM`); `ru_maxrss` where
    /proc has no such line (not Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
