"""Write an `ImportResult` as a profile: YAML with a comment on each value naming its line.

Written by hand rather than by a YAML dumper because the comments are the point: every
value says which script line it came from, placeholders say they are placeholders, and
paths that overrides repeat are YAML anchors, set once under `paths:` and aliased below.
The script is untrusted, so the layout is the writer's alone: every value and every key
that holds script text goes through yaml's emitter (`scalar`, `_yaml_key`), every piece of
script text in a comment through `shown` (one printable line), and `_check_shape` refuses
a text whose top-level keys are not the ones written.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import yaml

from tui.core.errors import UsageError
from tui.core.importer.build import TEMPLATE_NET, ImportResult, Item
from tui.core.importer.limits import shown

TOP_KEYS = ("version", "name", "description", "nodes", "container", "paths", "ray", "env", "training")


def scalar(v: Any) -> str:
    """One YAML value on one line that loads back as exactly `v`."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return ".nan" if math.isnan(v) else (".inf" if v > 0 else "-.inf")
    if isinstance(v, dict) and not v:
        return "{}"
    # A line break or control character anywhere: double quotes, the one style that escapes
    # them all (PyYAML writes `\x85` in single quotes as a raw line break that loads as a space).
    odd = any(isinstance(x, str) and not x.isprintable() for x in (v if isinstance(v, list) else [v]))
    text = yaml.safe_dump(v, default_flow_style=True, width=1 << 30, allow_unicode=True,
                          default_style='"' if odd else None).strip()
    if text.endswith("\n..."):
        text = text[:-4].strip()
    if text.endswith("..."):
        text = text[:-3].strip()
    return text


def _text(s: str) -> str:
    """A file name's undecodable bytes (lone surrogates, which no YAML reader takes back)
    written as `\\udcff` text."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _src(line: int, what: str = "") -> str:
    what = shown(what)
    if line:
        return f"  # line {line}" + (f" ({what})" if what else "")
    return f"  # {what}" if what else ""


def _tree(items: list[Item]) -> dict[str, Any]:
    """Nested dict of overrides. A key that is both a leaf and a parent (Hydra allows
    `a=x` next to `a.b=y`) is written dotted (`a.b:`) next to the leaf."""
    root: dict[str, Any] = {}
    for it in items:
        parts = it.key.split(".")
        node = root
        k = 0
        while k < len(parts) - 1:
            nxt = node.get(parts[k])
            if isinstance(nxt, Item):
                break
            node = node.setdefault(parts[k], {})
            k += 1
        key = ".".join(parts[k:])
        old = node.get(key)
        if isinstance(old, dict) and not it.prefix:
            del node[key]
            for ck, cv in old.items():
                node[f"{key}.{ck}"] = cv
        node[it.prefix + key] = it
    return root


def _leaves(node: dict[str, Any]) -> list[Item]:
    out: list[Item] = []
    for v in node.values():
        out.extend(_leaves(v) if isinstance(v, dict) else [v])
    return out


def _strip_prefix(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in node.items():
        if isinstance(v, dict):
            out[k] = _strip_prefix(v)
        else:
            out[k[len(v.prefix):]] = v
    return out


def _group_prefixes(node: dict[str, Any]) -> dict[str, Any]:
    """A section whose every leaf has the same `+`/`++` is written once as `+section:`,
    as the shipped profile does (`+override_transformer_config:`)."""
    out: dict[str, Any] = {}
    for k, v in node.items():
        if isinstance(v, dict):
            prefixes = {it.prefix for it in _leaves(v)}
            if len(prefixes) == 1 and "" not in prefixes and not k.startswith("+") and len(_leaves(v)) > 1:
                p = prefixes.pop()
                if p + k not in node:
                    out[p + k] = _strip_prefix(v)
                    continue
            out[k] = _group_prefixes(v)
        else:
            out[k] = v
    return out


def _yaml_key(k: str) -> str:
    """A mapping key that YAML reads back as this very string (`on`, `null`, `1` would not)."""
    plain = all(c.isalnum() or c in "_-.+@" for c in k)
    try:
        same = plain and yaml.safe_load(f"{k}: 0") == {k: 0}
    except yaml.YAMLError:
        same = False
    return k if same else scalar(k)


def _emit_tree(node: dict[str, Any], indent: int, aliases: dict[str, Any], out: list[str]) -> None:
    pad = "  " * indent
    for k, v in node.items():
        if isinstance(v, Item):
            alias = next((a for a, pv in aliases.items() if pv == v.value), None)
            val = f"*{alias}" if alias else scalar(v.value)
            out.append(f"{pad}{_yaml_key(k)}: {val}{_src(v.line)}")
        else:
            out.append(f"{pad}{_yaml_key(k)}:")
            _emit_tree(v, indent + 1, aliases, out)


def _comment_item(text: str) -> list[str]:
    """A header bullet, wrapped; line breaks and control characters (a value's `\\n`, a
    `\\u2028`) made visible so a comment can never end early and turn the rest into YAML."""
    clean = shown(text)
    lines = textwrap.wrap(clean, width=88, break_long_words=False, break_on_hyphens=False) or [""]
    return [f"#   - {lines[0]}"] + [f"#     {ln}" for ln in lines[1:]]


def render_profile(r: ImportResult) -> str:
    out: list[str] = []
    out.append(f"# Imported by `rlconsole import` from {shown(r.script)}"
               + (f" and {shown(r.hostfile)}" if r.hostfile else "") + ".")
    out.append("# Nothing in the script was run. Each value's comment names the script line it came")
    out.append("# from; CHANGE-ME values and 192.0.2.x addresses are placeholders the script does not give.")
    out.append("# Departures from what the script does:")
    for d in r.departures or ["none"]:
        out.extend(_comment_item(d))
    unresolved = r.unresolved
    if unresolved:
        out.append("# Not resolved (see `rlconsole import`'s summary):")
        for f in unresolved:
            out.extend(_comment_item(str(f)))
    out.append("version: 1")
    out.append(f"name: {scalar(r.name)}")
    out.append(f"description: {scalar('imported from ' + _text(r.script))}")
    out.append("")
    if r.sbatch is not None:
        _emit_cluster(r, out)
    else:
        _emit_nodes(r, out)
    out.append("")
    out.append("container:  # the script does not say: placeholders")
    out.append("  name: verl")
    out.append("  image: CHANGE-ME/verl-image:tag")
    out.append("")
    out.append("paths:")
    aliases: dict[str, Any] = {}
    used_by_overrides = [it.value for it in r.overrides]
    for field in ("verl", "megatron", "hf_model", "mcore_checkpoint", "train_files", "val_files",
              "tensorboard_dir", "checkpoint_dir", "workdir"):
        if field not in r.paths:
            continue
        v, ln, src = r.paths[field]
        anchor = ""
        if src != "placeholder" and v in used_by_overrides and v not in aliases.values():
            anchor = f"&{field} "
            aliases[field] = v
        what = "placeholder" if src == "placeholder" else src
        out.append(f"  {field}: {anchor}{scalar(v)}{_src(ln, what)}")
    out.append("")
    out.append("ray:")
    if r.dashboard_port:
        out.append(f"  dashboard_port: {r.dashboard_port[0]}{_src(r.dashboard_port[1], 'Ray address')}")
    else:
        out.append("  dashboard_port: 8265  # Ray's default; the script gives no address")
    out.append("")
    env = {k: v for k, v in r.env.items()}
    if env:
        out.append("env:  # the environment the launch sees (exports, prefixes, runtime env)")
        for k in env:
            v, ln, src = env[k]
            out.append(f"  {_yaml_key(k)}: {scalar(v)}{_src(ln, src)}")
        out.append("")
    out.append("training:")
    out.append(f"  module: {scalar(r.module)}{_src(r.launch.command.line)}")
    out.append(f"  python: {scalar(r.python)}{_src(r.launch.command.line)}")
    out.append(f"  python_args: {scalar(r.python_args)}{_src(r.launch.command.line)}")
    cp, cpl, cps = r.config_path
    out.append(f"  config_path: {scalar(cp)}{_src(cpl, '' if cpl else cps)}")
    cn, cnl, cns = r.config_name
    out.append(f"  config_name: {scalar(cn)}{_src(cnl, '' if cnl else cns)}")
    out.append("  overrides:")
    if r.overrides:
        _emit_tree(_group_prefixes(_tree(r.overrides)), 2, aliases, out)
    else:
        out[-1] += " {}"
    text = "\n".join(out) + "\n"
    _check_shape(text, env=bool(env))
    return text


def _emit_cluster(r: ImportResult, out: list[str]) -> None:
    """An sbatch script's `#SBATCH` lines as `cluster:`: the nodes are the allocation's."""
    sb = r.sbatch or {}
    out.append("cluster:  # the script's #SBATCH lines: rlconsole asks Slurm for the same (`rlconsole containers`)")
    out.append("  scheduler: slurm")
    for key in ("partition", "nodes", "gpus_per_node", "time", "account", "qos", "constraint", "extra_sbatch"):
        if key in sb:
            v, ln = sb[key]
            why = {"time": "placeholder", "extra_sbatch": "the #SBATCH lines",
                   "gpus_per_node": "the launch's trainer.n_gpus_per_node, or VeRL's default"}.get(key, "default")
            out.append(f"  {key}: {scalar(v)}{_src(ln, '' if ln else why)}")
    out.append("  transport: srun  # commands reach the nodes as job steps (srun --overlap --jobid J -w NODE)")


def _emit_nodes(r: ImportResult, out: list[str]) -> None:
    out.append("nodes:")
    if r.hosts:
        out.append(f"  # from {shown(r.hostfile)}; the first host is the head unless one is marked")
        for h, n in zip(r.hosts, r.host_names):
            out.append(f"  - {{name: {scalar(n)}, address: {scalar(h.address)}, gpus: {int(h.gpus or 0)}, "
                       f"role: {'head' if h.head else 'worker'}}}  # hostfile line {h.line}")
    else:
        out.append(f"  # No hostfile given: a template for trainer.nnodes={r.nnodes} x "
                   f"n_gpus_per_node={r.gpus_per_node}.")
        out.append(f"  # {TEMPLATE_NET}.x is the documentation range (RFC 5737), never routed: a profile")
        out.append("  # needs one head node to load, so one placeholder head is active; replace it and")
        out.append("  # uncomment the workers with the real addresses.")
        out.append(f"  - {{name: node1, address: {TEMPLATE_NET}.1, gpus: {r.gpus_per_node}, role: head}}"
                   "  # placeholder")
        for i in range(2, r.nnodes + 1):
            out.append(f"  # - {{name: node{i}, address: {TEMPLATE_NET}.{i}, gpus: {r.gpus_per_node}, role: worker}}")


def _check_shape(text: str, env: bool) -> None:
    """The second line of defence: the top-level keys are exactly the writer's own, so no
    script text became YAML structure (a `notify:` whose commands the console would run)."""
    try:
        keys = list(yaml.safe_load(text) or {})
    except yaml.YAMLError as e:
        raise UsageError(f"the imported profile is not YAML ({shown(e)}); refused") from None
    want = [k for k in TOP_KEYS if env or k != "env"]
    if "cluster" in keys:
        want = [("cluster" if k == "nodes" else k) for k in want]
    if keys != want:
        raise UsageError(f"the imported profile's top-level keys would be {shown(keys)}, "
                         f"not {want}; refused")


def summary(r: ImportResult, written: str | None) -> str:
    lines = [f"imported {shown(r.script)}: {r.launch.kind} launch at line {r.launch.command.line}, "
             f"{len(r.overrides)} overrides, {len(r.env)} env vars, "
             f"{len(r.hosts) if r.hosts else 0} hosts" + (f" -> {shown(written)}" if written else "")]
    found = [f for f in r.findings if not f.unresolved]
    if found:
        lines.append("found:")
        lines += [f"  {shown(f)}" for f in found]
    if r.departures:
        lines.append("departures (also in the profile's header):")
        lines += [f"  {shown(d)}" for d in r.departures]
    unresolved = [f for f in r.unresolved if not f.placeholder]
    if unresolved:
        lines.append("not resolved / to check:")
        lines += [f"  {shown(f)}" for f in unresolved]
    # Placeholders last, as SCRIPT:LINE: (the form editors and `grep -n` jump to), one line each.
    lines += [f"{shown(r.script)}:{f.line}: {shown(f.message)}" for f in r.findings if f.placeholder]
    return "\n".join(lines) + "\n"
