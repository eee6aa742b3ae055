"""Where Ray keeps things on the head, from the profile alone: its temp dir (the
`--temp-dir` given to `ray start`) and, under it, a job's driver log. Read by the job
watcher (the log it follows) and the submit action (its reservation next to Ray's own
files); a module of its own so neither imports the other."""

from __future__ import annotations

from tui.core.profile import Profile


def ray_temp_dir(profile: Profile) -> str:
    """The head's Ray temp dir, from the `--temp-dir` the profile gives `ray start`."""
    args = [*profile.ray.start_args, *profile.ray.head_args, *profile.head.ray_args]
    for i, a in enumerate(args):
        if a.startswith("--temp-dir="):
            return a.split("=", 1)[1]
        if a == "--temp-dir" and i + 1 < len(args):
            return args[i + 1]
    return "/tmp/ray"


def driver_log_path(profile: Profile, job_id: str) -> str:
    return f"{ray_temp_dir(profile)}/session_latest/logs/job-driver-{job_id}.log"
