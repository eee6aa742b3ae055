"""The local run history: what was submitted, where, when.

A 20-hour run outlives the console that started it. Each submit appends one JSON line
(profile, job id, rendered command, dashboard, time) so that a later console, or
`status`, can find the job again and re-attach to its log and scalars.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .debuglog import state_dir


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


def history_path() -> Path:
    return state_dir() / "runs.jsonl"


def record_run(rec: RunRecord) -> None:
    path = history_path()
    line = json.dumps(asdict(rec), sort_keys=True)
    # O_APPEND makes concurrent appends of one short line atomic on local filesystems.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
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
        if profile_name is None or rec.profile == profile_name:
            out.append(rec)
    return out


def last_run(profile_name: str) -> RunRecord | None:
    rs = runs(profile_name)
    return rs[-1] if rs else None

