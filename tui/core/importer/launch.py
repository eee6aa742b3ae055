"""Find the training launch among a script's commands and take it apart.

Recognised: `ray job submit [opts] -- python ...`, `python[3] [opts] -m verl.trainer.X`,
and `python[3] [opts] path/to/verl/trainer/main_ppo.py`, each with or without
`--config-path/--config-name` (or `-cp/-cn`). What comes out is what the profile needs:
the interpreter and its options, the module, the config, the overrides with their
lines, the environment the launch would see, the working directory and the Ray address.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tui.core.importer.interp import Command, Word
from tui.core.importer.limits import Refused, read_text_bounded

_PY_RE = re.compile(r"^(.*/)?python(3(\.\d+)?)?$")
# Variables for the submitting client, not for the job.
CLIENT_VARS = {"RAY_ADDRESS", "RAY_JOB_HEADERS", "RAY_API_SERVER_ADDRESS"}


@dataclass
class Arg:
    text: str
    line: int


@dataclass
class Launch:
    command: Command
    kind: str  # "ray job submit" or "python"
    python: str
    python_args: list[str]
    module: str | None
    script_path: str | None
    config_path: tuple[str, int] | None
    config_name: tuple[str, int] | None
    overrides: list[Arg]
    other_args: list[Arg]
    env: dict[str, tuple[str, int, str]]  # name -> (value, line, where from)
    address: tuple[str, int] | None = None
    working_dir: tuple[str, int] | None = None
    notes: list[tuple[int, str]] = field(default_factory=list)
    dropped: list[Arg] = field(default_factory=list)
    dropped_breaks: list[tuple[int, str]] = field(default_factory=list)  # (line, comment|blank line)


def _is_python(word: str) -> bool:
    return bool(_PY_RE.match(word))


def _python_entry(argv: list[Word]) -> tuple[str, list[str], str | None, str | None, int] | None:
    """(python, python options, module, script path, index after them) or None."""
    if not argv or not _is_python(argv[0].text):
        return None
    i = 1
    opts: list[str] = []
    while i < len(argv):
        a = argv[i].text
        if a == "-m" and i + 1 < len(argv):
            return argv[0].text, opts, argv[i + 1].text, None, i + 2
        if a.startswith("-m") and len(a) > 2:
            return argv[0].text, opts, a[2:], None, i + 1
        if a in ("-X", "-W") and i + 1 < len(argv):
            opts += [a, argv[i + 1].text]
            i += 2
            continue
        if a.startswith("-"):
            opts.append(a)
            i += 1
            continue
        return argv[0].text, opts, None, a, i + 1
    return None


def _is_training(module: str | None, script: str | None) -> bool:
    if module:
        return module.startswith("verl.") or module.endswith("main_ppo")
    return script is not None and (script.endswith("main_ppo.py") or "/verl/trainer/" in script)


_WRAPPERS = {"nohup", "exec", "command", "time", "env"}


def _unwrap(c: Command) -> int:
    """Index of the real command after `nohup`/`exec`/`env A=B` wrappers; `env`'s
    assignments join the command's prefix environment."""
    i = 0
    while i < len(c.argv) and os.path.basename(c.argv[i].text) in _WRAPPERS:
        wrapper = os.path.basename(c.argv[i].text)
        i += 1
        while wrapper == "env" and i < len(c.argv) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", c.argv[i].text):
            n, _, v = c.argv[i].text.partition("=")
            c.prefix_env[n] = (v, c.argv[i].line)
            i += 1
        while i < len(c.argv) and c.argv[i].text.startswith("-") and wrapper != "exec":
            i += 1
    return i


# Slurm's and the container runtimes' launchers, as VeRL's examples/slurm/ray_on_slurm.slurm
# writes them: `srun --nodes=1 --ntasks=1 -w "$head_node" apptainer run --nv IMAGE python3 ...`.
# Their options that take a separate value (the rest are flags, or `--opt=value`).
_SRUN_VALUED = {"-A", "-c", "-C", "-d", "-D", "-e", "-G", "-i", "-J", "-L", "-m", "-n", "-N", "-o", "-p", "-q", "-r",
                "-t", "-w", "-x", "--account", "--cpus-per-task", "--constraint", "--dependency", "--chdir",
                "--error", "--gpus", "--gres", "--input", "--job-name", "--jobid", "--licenses", "--distribution",
                "--ntasks", "--nodes", "--output", "--partition", "--qos", "--relative", "--time", "--nodelist",
                "--exclude", "--gpus-per-node", "--ntasks-per-node", "--mem", "--mem-per-cpu", "--export"}
_CONTAINER_VALUED = {"-B", "--bind", "--env", "--env-file", "-H", "--home", "-W", "--workdir", "--overlay",
                     "-o", "--pwd", "--mount", "--security", "--network", "--app"}


def _unwrap_launchers(c: Command) -> int:
    """Index of the command after `srun [opts]` and `apptainer|singularity run|exec [opts]
    IMAGE` (as many as are nested); 0 when the command is neither."""
    i = 0
    names = [w.text for w in c.argv]
    while i < len(names):
        base = os.path.basename(names[i])
        if base == "srun":
            i += 1
            while i < len(names) and names[i].startswith("-"):
                i += 2 if names[i] in _SRUN_VALUED else 1
            continue
        if base in ("apptainer", "singularity") and i + 1 < len(names) and names[i + 1] in ("run", "exec"):
            i += 2
            while i < len(names) and names[i].startswith("-"):
                i += 2 if names[i] in _CONTAINER_VALUED else 1
            if i < len(names) and not _is_python(names[i]):
                i += 1  # the image (an unset image variable leaves none)
            continue
        break
    return i if i < len(names) else 0


def find_launches(commands: list[Command]) -> list[tuple[Command, str, int]]:
    """Every command that starts training: (command, kind, index of the python word)."""
    out = []
    for c in commands:
        skip = _unwrap(c)
        if skip:
            c.argv = c.argv[skip:]
        skip = _unwrap_launchers(c)
        if skip:
            c.argv = c.argv[skip:]
        argv = c.argv
        names = [w.text for w in argv]
        if len(names) >= 3 and os.path.basename(names[0]) == "ray" and names[1:3] == ["job", "submit"]:
            if "--" in names:
                j = names.index("--") + 1
                e = _python_entry(argv[j:])
                if e and _is_training(e[2], e[3]):
                    out.append((c, "ray job submit", j))
            continue
        e = _python_entry(argv)
        if e and _is_training(e[2], e[3]):
            out.append((c, "python", 0))
    return out


def _submit_options(argv: list[Word], end: int, base_dir: Path, launch: Launch) -> dict[str, Any]:
    """Options of `ray job submit` before `--`; returns the runtime env it gives."""
    renv: dict[str, Any] = {}
    renv_line = 0
    i = 3
    while i < end - 1:
        a = argv[i].text
        ln = argv[i].line
        name, eq, val = a.partition("=")
        takes = name in ("--runtime-env-json", "--runtime-env", "--address", "--working-dir",
                         "--submission-id", "--job-id", "--entrypoint-num-cpus",
                         "--entrypoint-num-gpus", "--entrypoint-memory", "--entrypoint-resources",
                         "--metadata-json", "--headers", "--entrypoint-label-selector")
        if takes and not eq and i + 1 < end - 1:
            val = argv[i + 1].text
            ln = argv[i + 1].line
            i += 1
        i += 1
        if name == "--runtime-env-json":
            try:
                data = json.loads(val)
            except json.JSONDecodeError as e:
                launch.notes.append((ln, f"--runtime-env-json is not JSON ({e.msg}); not imported"))
                continue
            except RecursionError:
                raise Refused(ln, "--runtime-env-json nested too deeply; refused") from None
            if isinstance(data, dict):
                renv.update(data)
                renv_line = ln
        elif name == "--runtime-env":
            p = Path(val)
            if not p.is_absolute():
                p = base_dir / p
            try:
                data = yaml.safe_load(read_text_bounded(p))
            except RecursionError:
                raise Refused(ln, f"--runtime-env {val}: nested too deeply; refused") from None
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
                launch.notes.append((ln, f"--runtime-env {val}: cannot read it here ({type(e).__name__}); "
                                         "its env vars are not imported: add them to `env:`"))
                continue
            if isinstance(data, dict):
                for k, v in data.items():
                    renv.setdefault(k, v)
                renv_line = ln
        elif name == "--address":
            launch.address = (val, ln)
        elif name == "--working-dir":
            launch.working_dir = (val, ln)
        elif name in ("--no-wait", "--verify", "--log-style", "--log-color", "-v", "--verbose"):
            continue
        elif takes:
            launch.notes.append((ln, f"ray job submit {name}: rlconsole sets this itself; not imported"))
        else:
            launch.notes.append((ln, f"ray job submit option {a}: not imported"))
    if renv:
        for k in renv:
            if k == "env_vars" and isinstance(renv[k], dict):
                continue
            if k == "working_dir" and isinstance(renv[k], str):
                launch.working_dir = launch.working_dir or (str(renv[k]), renv_line)
                launch.notes.append((renv_line, "runtime env working_dir: rlconsole uploads no directory; "
                                                "the code is found through paths.verl (PYTHONPATH)"))
                continue
            launch.notes.append((renv_line, f"runtime env {k!r}: not imported (only env_vars)"))
    renv["_line"] = renv_line
    return renv


def parse_launch(cmd: Command, kind: str, start: int, base_dir: Path) -> Launch:
    argv = cmd.argv
    py = _python_entry(argv[start:])
    assert py is not None
    python, opts, module, script, after = py
    launch = Launch(cmd, kind, python, opts, module, script, None, None, [], [], {})
    launch.env = _launch_env(cmd, kind, start, base_dir, launch)
    _hydra_args(argv[start + after:], launch)
    for _raw, words in cmd.dropped:
        launch.dropped.extend(Arg(w.text, w.line) for w in words)
    rc = cmd.raw
    if rc.broken_by:
        launch.dropped_breaks.append((rc.broken_line, rc.broken_by))
    for raw, _ in cmd.dropped[:-1]:
        if raw.broken_by:
            launch.dropped_breaks.append((raw.broken_line, raw.broken_by))
    return launch


def _launch_env(cmd: Command, kind: str, start: int, base_dir: Path, launch: Launch) -> dict[str, tuple[str, int, str]]:
    """The env the job sees (exports, NAME=value prefixes, the runtime env); the Ray address."""
    argv = cmd.argv
    env: dict[str, tuple[str, int, str]] = {}
    for n, (v, ln) in cmd.exported.items():
        if n not in CLIENT_VARS or kind == "python":
            env[n] = (v, ln, "export")
    for n, (v, ln) in cmd.prefix_env.items():
        if kind == "python" or n not in CLIENT_VARS:
            env[n] = (v, ln, "prefix")
        if n == "RAY_ADDRESS" and kind != "python":
            launch.address = (v, ln)
    if kind != "python" and "RAY_ADDRESS" in cmd.exported and not launch.address:
        launch.address = (cmd.exported["RAY_ADDRESS"][0], cmd.exported["RAY_ADDRESS"][1])
    if kind != "python":
        renv = _submit_options(argv, start, base_dir, launch)
        for n, v in (renv.get("env_vars") or {}).items():
            if not isinstance(v, (str, int, float)):  # (a YAML alias tree's str() is exponential)
                launch.notes.append((renv["_line"], f"runtime env var {n!r}: a {type(v).__name__}, "
                                                    "not a string; not imported"))
                continue
            env[str(n)] = (str(v) if not isinstance(v, bool) else str(v).lower(), renv["_line"], "runtime env")
    return env


def _hydra_args(rest: list[Word], launch: Launch) -> None:
    """The words after the module: --config-path/-name, Hydra overrides, anything else."""
    i = 0
    while i < len(rest):
        w = rest[i]
        a = w.text
        for opt, short, attr in (("--config-path", "-cp", "config_path"), ("--config-name", "-cn", "config_name")):
            if a == opt or a == short:
                if i + 1 < len(rest):
                    setattr(launch, attr, (rest[i + 1].text, rest[i + 1].line))
                    i += 1
                break
            if a.startswith(opt + "="):
                setattr(launch, attr, (a[len(opt) + 1:], w.line))
                break
        else:
            if "=" in a and not a.startswith("-"):
                launch.overrides.append(Arg(a, w.line))
            else:
                launch.other_args.append(Arg(a, w.line))
        i += 1
