"""From a script (and a hostfile) to everything a profile needs, with where each came from.

`import_script` never runs the script: it scans and expands it (`interp`), finds the
launch (`launch`), and decides each profile value, keeping the script line it came from
and a finding for everything the script does not say plainly (a broken continuation, a
key given twice, `"$@"`, an unset variable, a command substitution, a node count that
disagrees with the hostfile). `writer` turns the result into YAML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.core.errors import UsageError
from tui.core.importer.hostfile import Host, node_names, parse_hostfile
from tui.core.importer.hydraval import parse_value, split_override
from tui.core.importer.interp import Walk, walk
from tui.core.importer.launch import Launch, find_launches, parse_launch
from tui.core.importer.limits import MAX_NODES, Refused, read_text_bounded, shown
from tui.core.importer.shellexpand import PWD_PLACEHOLDER, has_placeholder
from tui.core.placeholders import is_placeholder

CHANGE_ME = "/CHANGE-ME"  # absolute, so the profile loads; obviously not a real path
TEMPLATE_NET = "192.0.2"  # RFC 5737 TEST-NET-1: documentation-only, never routed
_PROFILE_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-@]*(\.[A-Za-z_0-9][A-Za-z0-9_\-@]*)*$")
RENDER_ADDS = ("TENSORBOARD_DIR", "PYTHONPATH", "PYTHONUNBUFFERED")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Item:
    """One override as the profile will hold it."""

    prefix: str
    key: str
    value: Any
    line: int
    raw: str


@dataclass
class Finding:
    line: int
    message: str
    unresolved: bool = False
    placeholder: bool = False  # a script value left to fill in: `summary` prints it as SCRIPT:LINE: ...

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass
class ImportResult:
    script: str
    name: str
    launch: Launch
    overrides: list[Item]
    dropped: list[Item]  # what bash drops after a broken continuation
    keep_dropped: bool
    env: dict[str, tuple[str, int, str]]
    paths: dict[str, tuple[Any, int, str]]  # field -> (value, line, where from)
    python: str
    python_args: list[str]
    module: str
    config_path: tuple[str, int, str]
    config_name: tuple[str, int, str]
    hosts: list[Host] | None
    host_names: list[str]
    gpus_per_node: int
    nnodes: int
    dashboard_port: tuple[int, int] | None
    hostfile: str | None
    findings: list[Finding] = field(default_factory=list)
    departures: list[str] = field(default_factory=list)
    # an sbatch script's `#SBATCH` lines as the profile's `cluster:` (scheduler: slurm):
    # key -> (value, line); None for a script that is not one
    sbatch: dict[str, tuple[Any, int]] | None = None

    @property
    def unresolved(self) -> list[Finding]:
        return [f for f in self.findings if f.unresolved]


def _abs(v: Any) -> bool:
    return isinstance(v, str) and v.startswith("/") and not has_placeholder(v)


def _to_items(args: list[Any], findings: list[Finding]) -> list[Item]:
    out: list[Item] = []
    for a in args:
        sp = split_override(a.text)
        if sp is None:
            findings.append(Finding(a.line, f"argument {a.text!r} is not a Hydra override; not imported", True))
            continue
        prefix, key, raw = sp
        if prefix == "~" or "/" in key:
            findings.append(Finding(a.line, f"{a.text!r}: deletions and config-group overrides are "
                                            "not in the profile's schema; not imported", True))
            continue
        if not _PROFILE_KEY_RE.match(key):
            findings.append(Finding(a.line, f"{a.text!r}: not a key the profile can hold; not imported", True))
            continue
        try:
            if has_placeholder(raw):
                raise LookupError
            value = parse_value(raw)
        except LookupError:
            value = raw
        except ValueError as e:
            findings.append(Finding(a.line, f"{key}: {e}; kept as the string {raw!r}", True))
            value = raw
        if any(isinstance(x, str) and re.search(r"[\x00-\x1f\x7f]", x)
               for x in (value if isinstance(value, list) else [value])):
            findings.append(Finding(a.line, f"{key}: a line break or control character in the value; "
                                            "Hydra cannot take it from a profile; not imported", True))
            continue
        if has_placeholder(value):
            findings.append(Finding(a.line, f"{key}: its value needs a command to run; "
                                            "the profile holds a visible placeholder", True))
        out.append(Item(prefix, key, value, a.line, a.text))
    return out


def _dedupe(items: list[Item], findings: list[Finding]) -> list[Item]:
    """Hydra applies overrides in order, so the last one of a key wins."""
    last: dict[str, int] = {}
    for i, it in enumerate(items):
        last[it.key] = i
    out = []
    for i, it in enumerate(items):
        if last[it.key] != i:
            w = items[last[it.key]]
            findings.append(Finding(it.line, f"{it.key} given twice (lines {it.line} and {w.line}); "
                                             f"the later one wins: {w.raw!r}"))
            continue
        out.append(it)
    return out


def _first_var(state_vars: dict[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    for n in names:
        for k, v in state_vars.items():
            if k.upper() == n and _abs(v):
                return k, v
    return None


def _check_env_names(env: dict[str, tuple[str, int, str]]) -> None:
    """An env name becomes a profile key and a variable on every node: only a real one."""
    for n, (_, ln, src) in env.items():
        if not _ENV_NAME_RE.fullmatch(n):
            raise Refused(ln, f"{src} variable name {n!r} is not [A-Za-z_][A-Za-z0-9_]*; refused")


def _check_nodes(nn: Any, line: int) -> None:
    """A node count is a line per node in the profile: a huge one (`1e8` too) is refused."""
    if isinstance(nn, (int, float)) and not isinstance(nn, bool) and nn > MAX_NODES:
        raise Refused(line, f"trainer.nnodes={nn}: more than {MAX_NODES} nodes; refused")


def _read_hostfile(hostfile: str | Path) -> tuple[list[Host], list[tuple[int, str]]]:
    try:
        htext = read_text_bounded(hostfile)
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{shown(hostfile)}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    hosts, hnotes = parse_hostfile(htext)
    if not hosts:
        raise UsageError(f"{shown(hostfile)}: no hosts in it")
    if len(hosts) > MAX_NODES:
        raise UsageError(f"{shown(hostfile)}: {len(hosts)} hosts, more than {MAX_NODES}; refused")
    return hosts, hnotes


def import_script(script: str | Path, hostfile: str | Path | None = None, name: str | None = None,
                  keep_dropped: bool = False, home: str = "/root") -> ImportResult:
    """The script (never run) as a profile's values. Anything too big to read safely, or a
    name that cannot be an env var, is refused as one line naming the script and its line."""
    try:
        return _import(script, hostfile, name, keep_dropped, home)
    except Refused as e:
        raise UsageError(f"{shown(script)}: {e}") from None


@dataclass
class _Notes:
    """What the import reports as it goes, in the order the report lists it."""

    findings: list[Finding] = field(default_factory=list)
    departures: list[str] = field(default_factory=list)


def _import(script: str | Path, hostfile: str | Path | None, name: str | None,
            keep_dropped: bool, home: str) -> ImportResult:
    """The phases in order: read, expand (walk), find the launch, build each part."""
    path = Path(script)
    text = _read_script(script, path)
    w = walk(text, home=home, script_name=str(script))
    notes = _Notes()
    launch = _find_launch(script, path, w, notes)
    _walk_findings(w, launch, home, notes)
    all_items, dropped = _override_items(launch, keep_dropped, notes)
    ov = {it.key: it for it in all_items}
    module, verl, config_path, config_name = _training(launch, w, notes)
    paths = _paths(launch, w, verl, ov)
    _path_findings(launch, paths, all_items, config_path, config_name, notes)
    _placeholder_findings(launch, paths, all_items, config_path, config_name, notes)
    _env_departures(launch, dropped, keep_dropped, notes)
    sbatch = _sbatch(text, notes)
    if sbatch is not None:
        _slurm_counts(sbatch, text, ov, notes)
    hosts, names, gpn, nn = _nodes(launch, ov, None if sbatch is not None else hostfile, notes)
    if sbatch is not None:
        notes.findings = [f for f in notes.findings if not f.message.startswith("nodes: no hostfile")]
        sbatch.setdefault("gpus_per_node", (gpn, 0))
    dport = _dashboard_port(launch, notes)
    nm = name or re.sub(r"[^A-Za-z0-9_.\-]+", "-", path.stem).strip("-") or "imported"
    return ImportResult(
        script=str(script), name=nm, launch=launch, overrides=all_items, dropped=dropped,
        keep_dropped=keep_dropped, env=launch.env, paths=paths, python=launch.python,
        python_args=launch.python_args, module=module, config_path=config_path,
        config_name=config_name, hosts=hosts, host_names=names, gpus_per_node=gpn, nnodes=nn,
        dashboard_port=dport, hostfile=str(hostfile) if hostfile else None,
        findings=notes.findings, departures=notes.departures, sbatch=sbatch,
    )


_SBATCH_RE = re.compile(r"^#SBATCH\s+(.*)$")
_SBATCH_SHORT = {"-N": "--nodes", "-t": "--time", "-p": "--partition", "-A": "--account", "-q": "--qos",
                 "-C": "--constraint", "-c": "--cpus-per-task", "-J": "--job-name", "-o": "--output",
                 "-e": "--error", "-n": "--ntasks", "-G": "--gpus"}
_SBATCH_KEYS = {"--nodes": "nodes", "--time": "time", "--partition": "partition", "--account": "account",
                "--qos": "qos", "--constraint": "constraint"}
_SBATCH_SKIP = ("--job-name", "--output", "--error", "--ntasks", "--ntasks-per-node", "--chdir", "--mail-type",
                "--mail-user", "--array")
_SLURM_COUNT_VARS = {"trainer.nnodes": ("nodes", ("SLURM_NNODES", "SLURM_JOB_NUM_NODES")),
                     "trainer.n_gpus_per_node": ("gpus_per_node", ("SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE"))}


def _sbatch(text: str, notes: _Notes) -> dict[str, tuple[Any, int]] | None:
    """The `#SBATCH` lines sbatch reads (before the first command) as `cluster:` keys:
    nodes, gpus_per_node, time, partition, account, qos, constraint; the job's name and
    output files are the holder job's own (dropped); any other option goes to extra_sbatch."""
    import shlex

    out: dict[str, tuple[Any, int]] = {}
    extra: list[str] = []
    seen = False
    for i, raw in enumerate(text.splitlines()[:2000], 1):
        line = raw.strip()
        if i == 1 and line.startswith("#!"):
            continue
        m = _SBATCH_RE.match(line)
        if not m:
            if line and not line.startswith("#"):
                break  # sbatch stops reading options at the first command
            continue
        seen = True
        try:
            words = shlex.split(m.group(1), comments=True)
        except ValueError:
            notes.findings.append(Finding(i, f"#SBATCH line not read (unbalanced quotes): {shown(line)}", True))
            continue
        j = 0
        while j < len(words):
            w = words[j]
            if "=" in w and w.startswith("--"):
                opt, val = w.split("=", 1)
            elif j + 1 < len(words) and not words[j + 1].startswith("-"):
                opt, val = w, words[j + 1]
                j += 1
            else:
                opt, val = w, None
            j += 1
            opt = _SBATCH_SHORT.get(opt, opt)
            if opt in _SBATCH_KEYS and val is not None:
                key = _SBATCH_KEYS[opt]
                if key == "nodes":
                    num = re.match(r"\d+", val)
                    out[key] = (int(num.group(0)) if num else 1, i)
                else:
                    out[key] = (val, i)
            elif opt in ("--gpus-per-node", "--gres") and val is not None:
                num = re.search(r"(?:^|:)(\d+)$", val)
                if num and (opt == "--gpus-per-node" or val.startswith("gpu")):
                    out["gpus_per_node"] = (int(num.group(1)), i)
                elif opt == "--gres":
                    extra.append(f"{opt}={val}")
            elif opt in _SBATCH_SKIP:
                continue
            elif opt.startswith("-"):
                extra.append(opt if val is None else f"{opt}={val}")
    if not seen:
        return None
    if extra:
        out["extra_sbatch"] = (extra, 0)
    if "time" not in out:
        out["time"] = ("1:00:00", 0)
        notes.findings.append(Finding(0, "cluster.time: the script's #SBATCH lines give no --time; a placeholder "
                                         "of 1:00:00 (set the walltime you need)", True, placeholder=False))
    out.setdefault("nodes", (1, 0))
    notes.findings.append(Finding(0, "an sbatch script: its #SBATCH lines are the profile's cluster: "
                                     "(scheduler: slurm); the nodes come from the allocation, no hostfile needed"))
    return out


def _slurm_counts(sbatch: dict[str, tuple[Any, int]], text: str, ov: dict[str, Item], notes: _Notes) -> None:
    """`trainer.nnodes=$SLURM_NNODES` and `n_gpus_per_node=$SLURM_GPUS_PER_NODE` are the
    allocation's own counts: taken from the #SBATCH lines instead of the unset variable."""
    lines = text.splitlines()
    for key, (skey, names) in _SLURM_COUNT_VARS.items():
        it = ov.get(key)
        source = lines[it.line - 1] if it is not None and 0 < it.line <= len(lines) else ""
        name = next((n for n in names if re.search(rf"{re.escape(key)}=\S*\b{n}\b", source)), None)
        if it is None or name is None or skey not in sbatch or it.value not in ("", None):
            continue
        value, line = sbatch[skey]
        it.value = value
        where = f"#SBATCH line {line}" if line else "the launch"
        notes.findings.append(Finding(it.line, f"{key}: ${name} is the allocation's count: {value}, from {where}"))
    known = [n for _, names in _SLURM_COUNT_VARS.values() for n in names] + ["SLURM_CPUS_PER_TASK"]
    notes.findings = [f for f in notes.findings
                      if not any(f.message.startswith(f"${n} is never set") for n in known)]


def _read_script(script: str | Path, path: Path) -> str:
    """Read phase: the script's text, bounded; an unreadable one is a usage error."""
    try:
        return read_text_bounded(path)
    except OSError as e:
        raise UsageError(f"{shown(script)}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{shown(script)}: not UTF-8 text") from None


def _find_launch(script: str | Path, path: Path, w: Walk, notes: _Notes) -> Launch:
    """Find-launch phase: the last training launch is imported; the others are named."""
    launches = find_launches(w.commands)
    if not launches:
        raise UsageError(f"{shown(script)}: no VeRL launch found (looked for `ray job submit ... -- python ...`, "
                         "`python -m verl.trainer.main_ppo`, `python .../main_ppo.py`)")
    cmd, kind, start = launches[-1]
    for other, k2, _ in launches[:-1]:
        notes.findings.append(Finding(other.line, f"another launch ({k2}); the last one, line {cmd.line}, "
                                                  "is imported"))
    launch = parse_launch(cmd, kind, start, path.parent)
    _check_env_names(launch.env)
    notes.findings.append(Finding(cmd.line, f"launch: {kind} ({launch.python} "
                                            f"{'-m ' + launch.module if launch.module else launch.script_path}), "
                                            f"{len(launch.overrides)} overrides"))
    return launch


def _walk_findings(w: Walk, launch: Launch, home: str, notes: _Notes) -> None:
    """What the walk and the launch parser noted, and the script state the import assumed."""
    findings = notes.findings
    for ln, msg in w.notes:
        findings.append(Finding(ln, msg, unresolved="placeholder" in msg or "not run" in msg
                                or "not followed" in msg or "not read" in msg))
    for ln, msg in launch.notes:
        findings.append(Finding(ln, msg, unresolved=True))
    for n, ln in sorted(w.state.unset_reads.items(), key=lambda kv: kv[1]):
        findings.append(Finding(ln, f"${n} is never set in the script: taken as empty (bash in a clean "
                                    "environment does the same; a calling shell that sets it would not)",
                                unresolved=True))
    if w.state.home_used:
        lines = sorted(set(w.state.home_used))
        findings.append(Finding(lines[0], f"$HOME/~ expanded to {home} (lines {', '.join(map(str, lines))}); "
                                          "pass --home DIR if the cluster's differs"))
    if w.state.pwd_used:
        lines = sorted(set(w.state.pwd_used))
        findings.append(Finding(lines[0], f"$PWD is the directory the script is launched from (lines "
                                          f"{', '.join(map(str, lines))}), which the import cannot know: written as "
                                          f"{PWD_PLACEHOLDER}; set it in the profile", unresolved=True))
    if w.state.args_used:
        lines = sorted(set(w.state.args_used))
        findings.append(Finding(lines[0], "\"$@\"/$*/$1.. pass the script's own arguments (lines "
                                          f"{', '.join(map(str, lines))}): the profile cannot know them; "
                                          "imported as if the script got none", unresolved=True))


def _override_items(launch: Launch, keep_dropped: bool, notes: _Notes) -> tuple[list[Item], list[Item]]:
    """(the overrides the profile holds, the ones bash drops after a broken continuation)."""
    findings = notes.findings
    overrides = _to_items(launch.overrides, findings)
    dropped = _to_items(launch.dropped, findings)
    for ln, how in launch.dropped_breaks:
        findings.append(Finding(ln, f"a {how} inside the backslash continuation ends the command: bash "
                                    f"drops the {len(dropped)} overrides after it "
                                    + ("(kept, --keep-dropped)" if keep_dropped
                                       else "(left out, as bash does; --keep-dropped keeps them)"),
                                unresolved=True))
    for d in dropped:
        findings.append(Finding(d.line, f"dropped by bash: {d.raw}"))
    all_items = _dedupe(overrides + (dropped if keep_dropped else []), findings)
    for a in launch.other_args:
        findings.append(Finding(a.line, f"argument {a.text!r} after the module is not an override; not imported",
                                unresolved=True))
    return all_items, dropped


_Sourced = tuple[Any, int, str]  # (value, line, where from)


def _training(launch: Launch, w: Walk, notes: _Notes) -> tuple[str, _Sourced, _Sourced, _Sourced]:
    """Training phase: (module, paths.verl, config path, config name)."""
    module = _module(launch, notes)
    verl = _verl_path(launch, w)
    config_path = _config_path(launch, verl, notes)
    config_name: _Sourced
    if launch.config_name:
        config_name = (launch.config_name[0], launch.config_name[1], "--config-name")
    else:
        config_name = ("ppo_trainer", 0, "VeRL's default")
        notes.departures.append("training.config_name: the script gives none; VeRL's default ppo_trainer "
                                "is written out (the profile always passes it)")
    if has_placeholder(config_path[0]) or has_placeholder(config_name[0]):
        notes.findings.append(Finding(config_path[1], "config path/name need a command to run", True))
    return module, verl, config_path, config_name


def _module(launch: Launch, notes: _Notes) -> str:
    """The profile runs a module: a script path under verl/ becomes its module name."""
    module = launch.module or ""
    if not module:
        sp = launch.script_path or ""
        m = re.search(r"(?:^|/)(verl/.*)\.py$", sp)
        module = m.group(1).replace("/", ".") if m else "verl.trainer.main_ppo"
        notes.departures.append(f"training.module: `python -m {module}` instead of the script's `{sp}` "
                                "(the profile runs modules; paths.verl is on PYTHONPATH)")
    return module


def _verl_path(launch: Launch, w: Walk) -> _Sourced:
    """paths.verl from the first source that says it, most explicit first."""
    cmd = launch.command
    cp_raw = launch.config_path
    fv = _first_var(dict(w.state.vars), ("VERL_PATH", "VERL_HOME", "VERL_DIR", "VERL_ROOT"))
    if fv:
        return (fv[1], w.set_lines.get(fv[0], 0), f"${fv[0]}")
    if cp_raw and _abs(cp_raw[0]) and cp_raw[0].rstrip("/").endswith("/verl/trainer/config"):
        return (cp_raw[0].rstrip("/")[: -len("/verl/trainer/config")], cp_raw[1], "--config-path")
    if launch.script_path and "/verl/trainer/" in launch.script_path and launch.script_path.startswith("/"):
        return (launch.script_path.split("/verl/trainer/")[0], cmd.line, "the script path")
    if launch.working_dir and _abs(launch.working_dir[0]):
        return (launch.working_dir[0], launch.working_dir[1], "--working-dir")
    if cmd.cwd and _abs(cmd.cwd):
        return (cmd.cwd, cmd.line, "cd")
    return (f"{CHANGE_ME}/verl", 0, "placeholder")


def _config_path(launch: Launch, verl: _Sourced, notes: _Notes) -> _Sourced:
    """--config-path, made absolute the way Hydra resolves it for main_ppo."""
    cp_raw = launch.config_path
    if cp_raw and _abs(cp_raw[0]):
        return (cp_raw[0], cp_raw[1], "--config-path")
    if cp_raw:
        base = f"{verl[0]}/verl/trainer"
        notes.departures.append(f"training.config_path: the script's relative {cp_raw[0]!r} resolved against "
                                f"verl/trainer (Hydra's rule for main_ppo) under paths.verl")
        return (f"{base}/{cp_raw[0]}".replace("/./", "/"), cp_raw[1], "--config-path, made absolute")
    notes.departures.append("training.config_path: the script gives none; VeRL's default "
                            "verl/trainer/config is written out (the profile always passes it)")
    return (f"{verl[0]}/verl/trainer/config", 0, "VeRL's default")


def _paths(launch: Launch, w: Walk, verl: _Sourced, ov: dict[str, Item]) -> dict[str, _Sourced]:
    """Paths phase: each profile path from the override or variable that gives it, or a placeholder."""
    cmd = launch.command
    paths: dict[str, tuple[Any, int, str]] = {"verl": verl}
    mg = _first_var(dict(w.state.vars), ("MEGATRON_PATH", "MEGATRON_HOME", "MEGATRON_LM_PATH", "MEGATRON_DIR"))
    if mg:
        paths["megatron"] = (mg[1], w.set_lines.get(mg[0], 0), f"${mg[0]}")

    def from_override(field_: str, key: str, placeholder: str, listy: bool = False) -> None:
        it = ov.get(key)
        v = it.value if it else None
        ok = (_abs(v) or (listy and isinstance(v, list) and v and all(_abs(x) for x in v)))
        if it and ok:
            paths[field_] = (v, it.line, key)
        elif placeholder:
            paths[field_] = (placeholder, 0, "placeholder")

    from_override("hf_model", "actor_rollout_ref.model.path", f"{CHANGE_ME}/hf-model")
    from_override("mcore_checkpoint", "actor_rollout_ref.actor.megatron.dist_checkpointing_path",
                  f"{CHANGE_ME}/mcore-checkpoint")
    if "mcore_checkpoint" in paths and paths["mcore_checkpoint"][2] == "placeholder":
        from_override("mcore_checkpoint", "actor_rollout_ref.ref.megatron.dist_checkpointing_path",
                      f"{CHANGE_ME}/mcore-checkpoint")
    from_override("train_files", "data.train_files", f"{CHANGE_ME}/train.parquet", listy=True)
    from_override("val_files", "data.val_files", "", listy=True)
    tb = launch.env.get("TENSORBOARD_DIR")
    if tb and _abs(tb[0]):
        paths["tensorboard_dir"] = (tb[0], tb[1], "TENSORBOARD_DIR")
    else:
        paths["tensorboard_dir"] = (f"{CHANGE_ME}/tensorboard", 0, "placeholder")
    from_override("checkpoint_dir", "trainer.default_local_dir", f"{CHANGE_ME}/checkpoints")
    wd = launch.working_dir if launch.working_dir and _abs(launch.working_dir[0]) else (
        (cmd.cwd, cmd.line) if cmd.cwd and _abs(cmd.cwd) else None)
    if wd:
        paths["workdir"] = (wd[0], wd[1], "working directory")
    return paths


def _path_findings(launch: Launch, paths: dict[str, _Sourced], all_items: list[Item],
                   config_path: _Sourced, config_name: _Sourced, notes: _Notes) -> None:
    """The paths and env found, the shared ones (YAML anchors) and the placeholders left."""
    findings = notes.findings
    shared = sorted({f for f, (v, _, src) in paths.items() if src != "placeholder"
                     and any(it.value == v for it in all_items)})
    if shared:
        findings.append(Finding(0, "paths the overrides repeat, written once as YAML anchors: "
                                   + ", ".join(f"paths.{f}" for f in shared)))
    found_env = sorted(launch.env)
    if found_env:
        findings.append(Finding(0, f"env the launch sees: {', '.join(found_env)}"))
    findings.append(Finding(config_path[1], f"config: {config_path[0]} / {config_name[0]}"))
    for f, (v, _ln, src) in paths.items():
        if src == "placeholder":
            findings.append(Finding(0, f"paths.{f}: the script does not say; placeholder {v} (fill it in)", True))


def _placeholder_findings(launch: Launch, paths: dict[str, _Sourced], all_items: list[Item],
                          config_path: _Sourced, config_name: _Sourced, notes: _Notes) -> None:
    """Every value the profile takes from a script line that is a placeholder (`<path_to_model>`,
    `/path/to/`, `CHANGE_ME`, `YOUR_KEY`, `xxx`: `tui.core.placeholders`), one finding each, by
    line. Left out: the importer's own placeholders (line 0, or a path under `/CHANGE-ME/`:
    reported as "the script does not say"), `<unresolved: ...>` (reported as needing a
    command), a path the profile takes from an override (the override is reported) and what
    bash drops (not in the profile)."""
    from_override = {it.key for it in all_items}
    found: list[tuple[int, str]] = [(it.line, it.raw) for it in all_items if is_placeholder(it.value)
                                    and not has_placeholder(it.value)]
    sourced: list[tuple[str, _Sourced]] = [(f"paths.{f}", v) for f, v in paths.items() if v[2] not in from_override]
    sourced += [(f"env.{n}", v) for n, v in launch.env.items()]
    sourced += [("training.config_path", config_path), ("training.config_name", config_name),
                ("training.python", (launch.python, launch.command.line, "launch"))]
    own = CHANGE_ME + "/"  # a relative --config-path made absolute under the placeholder paths.verl
    for key, (v, ln, _src) in sourced:
        if ln and is_placeholder(v) and not has_placeholder(v) and not (isinstance(v, str) and v.startswith(own)):
            found.append((ln, f"{key}={v}"))
    for ln, what in sorted(found, key=lambda f: f[0]):
        notes.findings.append(Finding(ln, f"placeholder in {what}: set it in the profile before running",
                                      unresolved=True, placeholder=True))


def _env_departures(launch: Launch, dropped: list[Item], keep_dropped: bool, notes: _Notes) -> None:
    """Env phase: where the job's environment and submission differ from the script's."""
    departures = notes.departures
    kind = launch.kind
    adds = [k for k in RENDER_ADDS if k not in launch.env]
    if adds:
        departures.append("the job's env gets " + ", ".join(adds) + " from rlconsole itself "
                          "(TENSORBOARD_DIR = paths.tensorboard_dir, PYTHONPATH = paths.megatron:paths.verl, "
                          "PYTHONUNBUFFERED=1); the script does not set them")
    exported = sorted(n for n, (_, _, src) in launch.env.items() if src == "export")
    if kind != "python" and exported:
        departures.append("the job's env gets what the script exports before `ray job submit` ("
                          + ", ".join(exported) + "): Ray does not pass the submitting shell's "
                          "environment to the job, the profile's env does")
    if kind == "python":
        departures.append("the script runs python directly; rlconsole submits the same command "
                          "through Ray's job API (`rlconsole submit`)")
    if dropped and keep_dropped:
        departures.append(f"training.overrides: the {len(dropped)} overrides bash drops after the "
                          "broken continuation are kept (--keep-dropped)")


def _positive_int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def _nodes(launch: Launch, ov: dict[str, Item], hostfile: str | Path | None,
           notes: _Notes) -> tuple[list[Host] | None, list[str], int, int]:
    """Nodes phase: (hosts, their names, GPUs per node, node count), checked against each other."""
    hosts: list[Host] | None = None
    names: list[str] = []
    gpn_v = ov["trainer.n_gpus_per_node"].value if "trainer.n_gpus_per_node" in ov else None
    nn_v = ov["trainer.nnodes"].value if "trainer.nnodes" in ov else None
    gpn = _positive_int(gpn_v, 8)
    nn = _positive_int(nn_v, 1)
    _check_nodes(nn_v, ov["trainer.nnodes"].line if "trainer.nnodes" in ov else 0)
    if gpn_v is None or nn_v is None:
        notes.findings.append(Finding(launch.command.line, "trainer.nnodes / trainer.n_gpus_per_node not both "
                                                           "given; VeRL's defaults apply", True))
    if hostfile:
        hosts = _hostfile_hosts(hostfile, ov, gpn, nn, nn_v, notes)
        names = node_names(hosts)
    else:
        notes.findings.append(Finding(0, f"nodes: no hostfile; a template of {nn} x {gpn} GPUs with "
                                         f"{TEMPLATE_NET}.x placeholder addresses (fill them in)", True))
    return hosts, names, gpn, nn


def _hostfile_hosts(hostfile: str | Path, ov: dict[str, Item], gpn: int, nn: int, nn_v: Any,
                    notes: _Notes) -> list[Host]:
    """The hostfile's hosts (GPUs per node filled in), and where they disagree with the launch."""
    findings = notes.findings
    hosts, hnotes = _read_hostfile(hostfile)
    for ln, msg in hnotes:
        findings.append(Finding(0, f"{msg} (hostfile line {ln})", True))
    for h in hosts:
        if h.gpus is None:
            h.gpus = gpn
    if len(hosts) != nn:
        findings.append(Finding(ov["trainer.nnodes"].line if "trainer.nnodes" in ov else 0,
                                f"trainer.nnodes={nn}"
                                + ("" if nn_v is not None else " (VeRL default: the launch does not pass it)")
                                + f" but the hostfile lists {len(hosts)} hosts", True))
    odd = [h for h in hosts if h.gpus != gpn]
    if odd:
        findings.append(Finding(ov["trainer.n_gpus_per_node"].line if "trainer.n_gpus_per_node" in ov else 0,
                                f"trainer.n_gpus_per_node={gpn} but the hostfile gives "
                                + ", ".join(f"{h.address} {h.gpus}" for h in odd), True))
    if len(hosts) == nn and not odd:
        findings.append(Finding(0, f"nodes: {nn} x {gpn} GPUs, as the hostfile says"))
    return hosts


def _dashboard_port(launch: Launch, notes: _Notes) -> tuple[int, int] | None:
    """Only the port of the script's Ray address is kept: rlconsole reaches it through SSH."""
    dport = None
    if launch.address:
        m = re.match(r"^(?:https?://)?([^:/]+)(?::([0-9]{1,5})(?![0-9]))?", launch.address[0])
        if m and m.group(2):
            dport = (int(m.group(2)), launch.address[1])
        notes.findings.append(Finding(launch.address[1], f"Ray address {launch.address[0]}: rlconsole reaches "
                                                         "the dashboard through SSH; only the port is kept"))
    return dport
