"""The local run history: what was submitted, where, when.

A 20-hour run outlives the console that started it. Each submit appends one JSON line
(profile, job id, rendered command, dashboard, time) so that a later console, or
`status`, can find the job again and re-attach to its log and scalars.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from tui.core.locations import history_path
from tui.core.secrets import mask_argv, mask_data


@dataclass
class RunRecord:
    profile: str
    profile_path: str
    job_id: str
    submitted_at: float
    entrypoint: list[str]
    runtime_env: dict[str, Any]
    tensorboard_dir: str | None = None
    checkpoint_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class HistoryWriteError(OSError):
    """A run record was not (wholly) written: the run is not in the history."""


def record_run(rec: RunRecord) -> None:
    """Append one record as one whole line, credentials masked (the history is a plain
    file that outlives the run; secrets.py's rule).

    One `os.write` of the full line on an O_APPEND descriptor: concurrent appends of a
    short line do not interleave on local filesystems. A short write (a full disk) is
    an error, not ignored; and a line left torn by an earlier short write gets a newline
    before this record, so the torn line costs only itself, never the next record."""
    path = history_path()
    d = asdict(rec)
    d["runtime_env"] = mask_data(d["runtime_env"])
    d["entrypoint"] = mask_argv(list(d["entrypoint"]))
    d["extra"] = mask_data(d["extra"])
    data = (json.dumps(d, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        n = os.write(fd, data)
        if n != len(data):
            raise HistoryWriteError(f"run history {path}: only {n} of {len(data)} bytes written "
                                    "(disk full?): this run is not recorded")
    finally:
        os.close(fd)


def runs(profile_name: str | None = None) -> list[RunRecord]:
    path = history_path()
    out: list[RunRecord] = []
    if not path.exists():
        return out
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            d = json.loads(raw)
            rec = RunRecord(**d)
        except (ValueError, TypeError):
            continue  # a torn or foreign line must not hide the others
        if not (isinstance(rec.job_id, str) and isinstance(rec.profile, str)):
            continue  # e.g. an integer job_id (hand-edited, foreign): it names a spool dir
        if profile_name is None or rec.profile == profile_name:
            out.append(rec)
    return out


def last_run(profile_name: str) -> RunRecord | None:
    rs = runs(profile_name)
    return rs[-1] if rs else None

