"""Where a submit resumes: the step in the checkpoint dir's tracker, and the earlier run
that wrote it. Apart from `plan.py` (which runs the preflight) so that `jobs.submit` can
ask without importing the checks (the checks import the actions: a cycle)."""

from __future__ import annotations

import dataclasses
import re

from tui.core.actions.base import Remote
from tui.core.profile import Override, Profile

TRACKER = "latest_checkpointed_iteration.txt"
"""The file VeRL's trainer writes in its checkpoint directory after each save."""


FRESH_OVERRIDE = Override("", "trainer.resume_mode", "disable")
"""What `submit --fresh` adds: VeRL's own switch to start at step 0 whatever checkpoint its
directory holds (the profile's resume_mode / resume_from_path give way to it)."""


def fresh_profile(profile: Profile) -> Profile:
    """The profile as `submit --fresh` launches it (the profile file is not changed)."""
    keep = [o for o in profile.training.overrides if o.key not in ("trainer.resume_mode", "trainer.resume_from_path")]
    training = dataclasses.replace(profile.training, overrides=[*keep, FRESH_OVERRIDE])
    return dataclasses.replace(profile, training=training)


def resume_parent(profile: Profile, step: int | None) -> str | None:
    """The earlier run whose checkpoint a submit resumes from (None: from scratch, an
    explicit resume path, or no run of this machine's history used that checkpoint dir).
    The run whose journal saw the checkpoint of `step` written; else the last run that
    wrote to the same checkpoint dir (the history records each run's)."""
    from tui.core.job.history import runs
    from tui.core.job.journal import Journal

    if step is None or str(profile.override_value("trainer.resume_mode", "auto") or "auto") != "auto":
        return None
    ckpt = profile.paths.checkpoint_dir.rstrip("/")
    same = [r for r in runs() if (r.checkpoint_dir or "").rstrip("/") == ckpt]
    for r in reversed(same):
        try:
            seen = Journal.for_job(r.job_id).entries()
        except ValueError:  # an id that names no spool
            continue
        if any(e.kind == "checkpoint" and e.data.get("step") == step for e in seen):
            return r.job_id
    return same[-1].job_id if same else None


async def resume_step(profile: Profile, remote: Remote) -> int | None:
    """The step VeRL would resume from: its tracker file in the checkpoint directory
    (read on the head, in the container; the answer is untrusted, so only a plain
    integer at its start counts). None: no checkpoint, or the head cannot say."""
    if not remote.reachable(profile.head.name)[0]:
        return None
    path = f"{profile.paths.checkpoint_dir.rstrip('/')}/{TRACKER}"
    r = await remote.run(profile.head.name, ["sh", "-c", 'head -c 32 "$1" 2>/dev/null', "sh", path],
                         container=True, timeout=30)
    m = re.match(r"\s*([0-9]{1,12})\s*$", r.stdout[:32]) if r.ok else None
    return int(m.group(1)) if m else None
