"""Where Ray keeps things on a node, from the profile alone: its temp dir (the
`--temp-dir` given to `ray start`) and, under it, a job's driver log on the head and
each node's raylet log (read by setup-ray when a node's start timed out). Read by the job
watcher (the log it follows) and the submit action (its reservation next to Ray's own
files); a module of its own so neither imports the other."""

from __future__ import annotations

from tui.core.profile import Node, Profile


def ray_temp_dir(profile: Profile) -> str:
    """The head's Ray temp dir, from the `--temp-dir` the profile gives `ray start`."""
    return node_temp_dir(profile, profile.head)


def node_temp_dir(profile: Profile, node: Node) -> str:
    """A node's Ray temp dir: the `--temp-dir` its `ray start` is given (the head's own
    arguments count only on the head), else Ray's default."""
    head = profile.ray.head_args if node.name == profile.head.name else []
    args = [*profile.ray.start_args, *head, *node.ray_args]
    for i, a in enumerate(args):
        if a.startswith("--temp-dir="):
            return a.split("=", 1)[1]
        if a == "--temp-dir" and i + 1 < len(args):
            return args[i + 1]
    return "/tmp/ray"


def driver_log_path(profile: Profile, job_id: str) -> str:
    return f"{ray_temp_dir(profile)}/session_latest/logs/job-driver-{job_id}.log"
