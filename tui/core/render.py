"""From a profile to exactly what `submit` sends: the runtime env and the entrypoint argv.

Two layers of quoting meet here and both must be exact. Hydra parses each override's
value with its own grammar (quotes, lists, interpolations), and the shell (Ray runs the
entrypoint string through `/bin/sh`) splits the whole command into words. Values are
first written as Hydra literals, then each argv word is shell-quoted with
`shlex.quote`, so `shlex.split(entrypoint)` gives back the argv word for word.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import time
from dataclasses import dataclass
from typing import Any

from tui.core.profile import Override, Profile
from tui.core.rayapi import dashboard_connect_host

# Characters Hydra accepts in an unquoted value without changing its meaning.
_BARE_RE = re.compile(r"^[A-Za-z0-9_\-+./:@%*?]+$")
_INTERP_RE = re.compile(r"^\$\{[^{}'\"\\\s]+\}$")
# Bare words Hydra would read as something other than the string the user wrote.
_RESERVED = {"null", "true", "false", "nan", "inf", "-inf", "+inf", "+nan", "-nan"}
_NUMBER_RE = re.compile(r"^[+-]?(?=\.?\d)[\d_]*(\.[\d_]*)?([eE][+-]?[\d_]+)?$")


def hydra_quote(s: str) -> str:
    """Quote a string for Hydra: escape the quote character and the backslashes that
    precede a quote or the closing quote, and `${` so it is not an interpolation.
    Double quotes are preferred: inside the shell's single quotes they stay readable
    (`'trainer.logger=["console","tensorboard"]'`, as the seed writes it)."""
    q = "'" if ('"' in s and "'" not in s) else '"'
    out: list[str] = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "\\":
            j = i
            while j < len(s) and s[j] == "\\":
                j += 1
            run = j - i
            # A run of backslashes before a quote, at the end, or before a `${` (which is
            # escaped next) must be doubled: OmegaConf reads `\\${` as a backslash and
            # then an interpolation, so `\${x}` needs `\\\${x}` to stay literal.
            if j == len(s) or s[j] == q or s.startswith("${", j):
                out.append("\\" * (2 * run))
            else:
                out.append("\\" * run)
            i = j
            continue
        if ch == q:
            out.append("\\" + q)
        elif ch == "$" and s.startswith("${", i):
            out.append("\\$")
        else:
            out.append(ch)
        i += 1
    return q + "".join(out) + q


def hydra_value(value: Any, in_list: bool = False) -> str:
    """Render a YAML value as a Hydra override value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v, in_list=True) for v in value) + "]"
    if isinstance(value, dict):
        items = ",".join(f"{k}:{hydra_value(v, in_list=True)}" for k, v in value.items())
        return "{" + items + "}"
    s = str(value)
    if in_list:
        return hydra_quote(s)
    if _INTERP_RE.match(s):
        return s  # an intended Hydra interpolation such as ${data.max_prompt_length}
    if _BARE_RE.match(s) and s.lower() not in _RESERVED and not _NUMBER_RE.match(s):
        return s
    return hydra_quote(s)


def override_arg(o: Override) -> str:
    return f"{o.prefix}{o.key}={hydra_value(o.value)}"


@dataclass
class RenderedJob:
    runtime_env: dict[str, Any]
    entrypoint: list[str]
    submission_id: str
    address: str

    @property
    def entrypoint_str(self) -> str:
        return shlex.join(self.entrypoint)

    def masked(self) -> RenderedJob:
        """The same job with credentials masked (secrets.py's rule): what `render`
        prints unless --show-secrets, and what the run history stores."""
        from tui.core.secrets import mask_argv, mask_data, mask_secrets

        return RenderedJob(runtime_env=mask_data(self.runtime_env),
                           entrypoint=mask_argv(self.entrypoint),
                           submission_id=self.submission_id, address=mask_secrets(self.address))

    def to_json(self) -> dict[str, Any]:
        return {
            "submission_id": self.submission_id,
            "address": self.address,
            "runtime_env": self.runtime_env,
            "entrypoint": self.entrypoint,
            "entrypoint_str": self.entrypoint_str,
        }

    def to_text(self) -> str:
        """A runnable shell equivalent of what submit does, one override per line."""
        env_json = json.dumps(self.runtime_env, sort_keys=True)
        lines = [
            "# what `rlconsole submit` sends through Ray's job API (nothing has been run)",
            f"# runtime env: {json.dumps(self.runtime_env, sort_keys=True, indent=None)}",
            f"RAY_ADDRESS={shlex.quote(self.address)} ray job submit \\",
            f"  --submission-id={shlex.quote(self.submission_id)} \\",
            f"  --runtime-env-json={shlex.quote(env_json)} \\",
            "  --no-wait \\",
        ]
        argv = self.entrypoint
        head_end = next((i for i, a in enumerate(argv) if a.startswith("--config-name")), 0)
        head = argv[: head_end + 1] if head_end else argv[:4]
        rest = argv[len(head):]
        lines.append("  -- " + shlex.join(head[:4]) + (" \\" if len(head) > 4 or rest else ""))
        for i, a in enumerate(head[4:] + rest):
            last = i == len(head[4:] + rest) - 1
            lines.append("    " + shlex.quote(a) + ("" if last else " \\"))
        return "\n".join(lines) + "\n"


def runtime_env(profile: Profile) -> dict[str, Any]:
    """The job's runtime env: profile env, training env, and what the console needs.

    No `working_dir`: Ray would upload the submitter's local directory. The code lives on
    the cluster's shared storage and is found through PYTHONPATH."""
    env: dict[str, str] = {}
    env.update(profile.env)
    env.update(profile.training.env)
    env.setdefault("TENSORBOARD_DIR", profile.paths.tensorboard_dir)
    py = [p for p in (profile.paths.megatron, profile.paths.verl) if p]
    env.setdefault("PYTHONPATH", ":".join(py))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return {"env_vars": env}


def entrypoint(profile: Profile) -> list[str]:
    t = profile.training
    argv = [t.python, *t.python_args, "-m", t.module,
            f"--config-path={t.config_path}", f"--config-name={t.config_name}"]
    argv.extend(override_arg(o) for o in t.overrides)
    return argv


def submission_id(profile: Profile, now: float | None = None) -> str:
    """`<experiment>-<UTC time>`: names the run in `ray job list` and stays unique."""
    base = profile.training.submission_prefix or str(
        profile.override_value("trainer.experiment_name") or profile.name)
    base = re.sub(r"[^A-Za-z0-9_.\-]+", "-", base).strip("-") or "rlconsole"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{base}-{stamp}"


def dashboard_address(profile: Profile, local_port: int | None = None) -> str:
    if local_port is not None:
        return f"http://127.0.0.1:{local_port}"
    host = dashboard_connect_host(profile.ray.dashboard_host, profile.head.address)
    return f"http://{host}:{profile.ray.dashboard_port}"


def render(profile: Profile, now: float | None = None) -> RenderedJob:
    return RenderedJob(
        runtime_env=runtime_env(profile),
        entrypoint=entrypoint(profile),
        submission_id=submission_id(profile, now),
        address=dashboard_address(profile),
    )
