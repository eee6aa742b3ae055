"""Preflight: catch a broken run in seconds instead of 15 minutes into the first step.

One implementation, one result shape: every check is a small named function that gives
`CheckResult`s (pass / warn / fail / skip, one line of what and where, and how to fix it).
`rlconsole check` prints them, `submit` refuses on a failure, and the console's preflight
screen lists them; all three read the same results, in the same order (by check, then by
node in the profile's order), never in the order the probes happened to finish.

Static checks read only the profile (for use away from the cluster: they open no
connection). Live checks ask the nodes, concurrently, and each declares what it needs (the
node reachable, the container running, Ray up, the job's Python able to run): when that is
missing the check is *skipped* with the reason and the check that reported the cause, so one
cause gives one failure with its own fix instead of a cascade of misleading ones.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Literal

from tui.core.actions.events import ActionEvent
from tui.core.placeholders import placeholder_reason
from tui.core.profile import Node, Profile
from tui.core.rayapi import dashboard_exposed
from tui.core.secrets import mask_data, mask_secrets
from tui.core.state import ACTIVE_JOB_STATUSES

log = logging.getLogger("rlconsole.checks")


class CheckStatus(str, Enum):
    """A check's verdict. A `str` enum (Python 3.10 has no StrEnum) so that it compares
    equal to, and serialises as, the plain strings of the JSON contract."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"

    def __str__(self) -> str:
        return self.value


# The verdicts by their short names: the checks below are a table of calls that read
# better as `CheckResult("cards.total", FAIL, ...)`.
PASS, WARN, FAIL, SKIP = CheckStatus.PASS, CheckStatus.WARN, CheckStatus.FAIL, CheckStatus.SKIP


@dataclass
class CheckResult:
    """One verdict of one check, on one node (or cluster-wide when `node` is None).

    `cause` is set on a skip: the id of the check whose failure this one needed to pass
    (e.g. "container.running"), so that the fix is read there, once."""

    id: str
    status: CheckStatus
    message: str
    fix: str | None = None
    node: str | None = None
    cause: str | None = None

    def __post_init__(self) -> None:
        # accept the plain strings too (static checks, JSON read back): one type after this
        self.status = CheckStatus(self.status)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CheckResult:
        return cls(id=str(d["id"]), status=CheckStatus(d["status"]), message=str(d.get("message", "")),
                   fix=d.get("fix"), node=d.get("node"), cause=d.get("cause"))


def _ov(p: Profile, key: str, default: Any = None) -> Any:
    return p.override_value(key, default)


def _int(v: Any, default: int) -> int:
    """An override as an integer for arithmetic; anything that is not one (a string,
    `.nan`, `.inf`: OverflowError) is the default. The profile loader has already
    refused 0, `.inf` and `.nan` for the sizes this module divides by."""
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return default


# --------------------------------------------------------------------------- static


_MEGATRON = "actor_rollout_ref.actor.megatron."


@dataclass(frozen=True)
class _Layout:
    """The parallel layout the overrides ask for, derived once for every static check."""

    nnodes: int
    per_node: int
    tp: int
    pp: int
    cp: int

    @property
    def cards(self) -> int:
        return self.nnodes * self.per_node

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp

    @property
    def dp(self) -> int:
        """The actor's data-parallel size; 0 when TP x PP x CP does not divide the cards."""
        return 0 if self.cards % self.model_parallel else self.cards // self.model_parallel


def _layout(p: Profile) -> _Layout:
    return _Layout(nnodes=_int(_ov(p, "trainer.nnodes"), len(p.nodes)),
                   per_node=_int(_ov(p, "trainer.n_gpus_per_node"), p.nodes[0].gpus),
                   tp=_int(_ov(p, _MEGATRON + "tensor_model_parallel_size"), 1),
                   pp=_int(_ov(p, _MEGATRON + "pipeline_model_parallel_size"), 1),
                   cp=_int(_ov(p, _MEGATRON + "context_parallel_size"), 1))


StaticCheck = Callable[[Profile, _Layout], list[CheckResult]]


def static_cards(p: Profile, L: _Layout) -> list[CheckResult]:
    out = []
    if L.cards != p.total_gpus or L.nnodes != len(p.nodes):
        out.append(CheckResult("cards.total", FAIL, f"trainer.nnodes x n_gpus_per_node = {L.nnodes} x {L.per_node} = "
                               f"{L.cards}, the profile has {len(p.nodes)} nodes with {p.total_gpus} cards",
                               "make trainer.nnodes and trainer.n_gpus_per_node match the nodes list"))
    else:
        out.append(CheckResult("cards.total", PASS, f"{L.nnodes} nodes x {L.per_node} cards = {L.cards}"))
    odd = [n.name for n in p.nodes if n.gpus != L.per_node]
    if odd:
        out.append(CheckResult("cards.per_node", WARN,
                               f"nodes {', '.join(odd)} have a card count other than n_gpus_per_node={L.per_node}"))
    return out


def static_rollout_parallel(p: Profile, L: _Layout) -> list[CheckResult]:
    r_tp = _int(_ov(p, "actor_rollout_ref.rollout.tensor_model_parallel_size"), 1)
    r_dp = _ov(p, "actor_rollout_ref.rollout.data_parallel_size")
    if r_dp is not None:
        if r_tp * _int(r_dp, 1) != L.cards:
            return [CheckResult("rollout.parallel", FAIL,
                                f"rollout TP x DP = {r_tp} x {r_dp} = {r_tp * _int(r_dp, 1)}, cards in use = {L.cards}",
                                "set actor_rollout_ref.rollout.data_parallel_size to cards / TP")]
        return [CheckResult("rollout.parallel", PASS, f"rollout TP x DP = {r_tp} x {r_dp} = {L.cards}")]
    if L.cards % r_tp:
        return [CheckResult("rollout.parallel", FAIL, f"rollout TP={r_tp} does not divide {L.cards} cards")]
    return []


def static_actor_parallel(p: Profile, L: _Layout) -> list[CheckResult]:
    if L.dp == 0:
        return [CheckResult("actor.parallel", FAIL, f"actor TP x PP x CP = {L.tp} x {L.pp} x {L.cp} = "
                            f"{L.model_parallel} does not divide {L.cards} cards",
                            "choose TP, PP, CP whose product divides the card count")]
    return [CheckResult("actor.parallel", PASS, f"actor TP x PP x CP = {L.model_parallel}, data parallel = {L.dp}")]


def static_pipeline_layers(p: Profile, L: _Layout) -> list[CheckResult]:
    layers = p.model.num_layers
    tc = _MEGATRON + "override_transformer_config."
    uneven = any(_ov(p, tc + k) is not None for k in
                 ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"))
    if layers is None:
        return [CheckResult("actor.pipeline_layers", WARN,
                            "model.num_layers is not in the profile: cannot check PP against it",
                            "add model.num_layers (num_hidden_layers in the HF config.json)")]
    if layers % L.pp and not uneven:
        fits = ", ".join(str(d) for d in range(2, 13) if layers % d == 0 and L.cards % (d * L.tp * L.cp) == 0)
        return [CheckResult("actor.pipeline_layers", FAIL, f"the model has {layers} layers, which PP={L.pp} does "
                            f"not divide (key {_MEGATRON}pipeline_model_parallel_size)",
                            f"use a PP that divides {layers} (e.g. {fits}) or set num_layers_in_first/last_pipeline_stage")]
    return [CheckResult("actor.pipeline_layers", PASS,
                        f"{layers} layers over PP={L.pp}" + (" (uneven stages given)" if uneven else ""))]


def static_batch(p: Profile, L: _Layout) -> list[CheckResult]:
    bs = _int(_ov(p, "data.train_batch_size"), 0)
    if not bs:
        return []
    n = _int(_ov(p, "actor_rollout_ref.rollout.n"), 1)
    mini = _int(_ov(p, "actor_rollout_ref.actor.ppo_mini_batch_size"), bs)
    problems = []
    if L.dp and (bs * n) % L.dp:
        problems.append(f"train_batch_size x n = {bs * n} is not divisible by the actor's data parallel size {L.dp}")
    if mini and bs % mini:
        problems.append(f"train_batch_size {bs} is not divisible by ppo_mini_batch_size {mini}")
    if problems:
        return [CheckResult("batch.divisible", FAIL, "; ".join(problems), "adjust data.train_batch_size or the mini-batch")]
    return [CheckResult("batch.divisible", PASS,
                        f"batch {bs} x n {n} = {bs * n} splits over DP {L.dp or '?'} and mini-batch {mini}")]


def static_lengths(p: Profile, L: _Layout) -> list[CheckResult]:
    pl = _int(_ov(p, "data.max_prompt_length"), 0)
    rl = _int(_ov(p, "data.max_response_length"), 0)
    if not (pl and rl):
        return []
    out = []
    total = pl + rl
    ctx = p.model.max_position_embeddings
    if ctx and total > ctx:
        out.append(CheckResult("length.context", FAIL, f"prompt + response = {total} tokens exceeds the model's "
                               f"context {ctx}", "lower data.max_response_length"))
    else:
        out.append(CheckResult("length.context", PASS,
                               f"prompt + response = {total} tokens" + (f" <= context {ctx}" if ctx else "")))
    budgets = ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
               "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
               "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"]
    low = [f"{k}={_ov(p, k)}" for k in budgets if _ov(p, k) is not None and _int(_ov(p, k), 0) < total]
    if low:
        out.append(CheckResult("length.token_budget", FAIL, f"token budgets below prompt + response ({total}): "
                               f"{', '.join(low)}", "raise them to at least max_prompt_length + max_response_length"))
    else:
        out.append(CheckResult("length.token_budget", PASS, f"token budgets >= {total}"))
    return out


def static_expert_parallel(p: Profile, L: _Layout) -> list[CheckResult]:
    ep = {k: _int(_ov(p, k), 1) for k in (_MEGATRON + "expert_model_parallel_size",
                                          "actor_rollout_ref.ref.megatron.expert_model_parallel_size",
                                          "critic.megatron.expert_model_parallel_size")}
    ep_set = {k: v for k, v in ep.items() if v > 1}
    if ep_set and not p.model.moe:
        return [CheckResult("model.expert_parallel", WARN, "expert parallelism set for a dense model: "
                            + ", ".join(f"{k}={v}" for k, v in ep_set.items()),
                            "remove expert_model_parallel_size (model.moe is false)")]
    return [CheckResult("model.expert_parallel", PASS,
                        "no expert parallelism on a dense model" if not p.model.moe else "MoE model")]


def static_paths_consistent(p: Profile, L: _Layout) -> list[CheckResult]:
    mismatches = []
    if _ov(p, "actor_rollout_ref.model.path") not in (None, p.paths.hf_model):
        mismatches.append(f"actor_rollout_ref.model.path={_ov(p, 'actor_rollout_ref.model.path')} "
                          f"vs paths.hf_model={p.paths.hf_model}")
    for k in (_MEGATRON + "dist_checkpointing_path", "actor_rollout_ref.ref.megatron.dist_checkpointing_path"):
        if _ov(p, k) not in (None, p.paths.mcore_checkpoint):
            mismatches.append(f"{k}={_ov(p, k)} vs paths.mcore_checkpoint={p.paths.mcore_checkpoint}")
    if mismatches:
        return [CheckResult("paths.consistent", FAIL, "; ".join(mismatches), "point the overrides at the profile's paths")]
    return [CheckResult("paths.consistent", PASS, "overrides use the profile's model and checkpoint paths")]


def static_tensorboard(p: Profile, L: _Layout) -> list[CheckResult]:
    logger = _ov(p, "trainer.logger") or []
    if "tensorboard" not in (logger if isinstance(logger, list) else [logger]):
        return [CheckResult("monitor.tensorboard", WARN,
                            "trainer.logger lacks tensorboard: the console gets no scalars, only the log")]
    return []


def static_dashboard(p: Profile, L: _Layout) -> list[CheckResult]:
    if p.cluster.slurm and p.cluster.transport == "srun":
        return [CheckResult("ray.dashboard", WARN, "transport: srun has no tunnel: the dashboard listens on the "
                            "head's address (the allocation's first node) for this machine to reach it; its job API "
                            "is unauthenticated and open to the cluster's network",
                            "transport: ssh keeps it on the head's loopback, reached through SSH")]
    if dashboard_exposed(p.ray.dashboard_host):
        return [CheckResult("ray.dashboard", WARN, f"dashboard bound to {p.ray.dashboard_host}: an unauthenticated "
                            "job API (run any command on the cluster) reachable from the network",
                            "bind it to 127.0.0.1; rlconsole reaches it through SSH")]
    return [CheckResult("ray.dashboard", PASS, f"dashboard on {p.ray.dashboard_host}")]


def static_checkpoint_deletable(p: Profile, L: _Layout) -> list[CheckResult]:
    from tui.core.actions.model import deletion_problem

    unsafe = deletion_problem(p)
    if unsafe:
        return [CheckResult("paths.mcore_checkpoint", FAIL,
                            f"`convert --force` deletes this directory, and would refuse: {unsafe}",
                            "give paths.mcore_checkpoint its own directory, e.g. next to the model as <model>-mcore")]
    return []


def static_user_catalog(p: Profile, L: _Layout) -> list[CheckResult]:
    """The user's diagnosis.yaml: a broken one is ignored by the console (which says so
    once); here it is named before a run whose failures it was meant to explain."""
    from tui.core.diagnosis import CatalogError, load_catalog
    from tui.core.locations import user_catalog_path

    path = user_catalog_path()
    if not path.is_file():
        return []
    try:
        sigs = load_catalog(path)
    except CatalogError as e:
        return [CheckResult("diagnosis.user_catalog", WARN, f"ignored: {e}",
                            "fix the entry (README: Alerts, adding a failure signature)")]
    return [CheckResult("diagnosis.user_catalog", PASS, f"{len(sigs)} user failure signature(s) from {path}")]


def _profile_values(p: Profile) -> list[tuple[str, Any, int]]:
    """(profile key, value, line or 0) of every value a run takes from the profile: the
    overrides (the loader keeps their lines), paths, env, container, training and convert
    settings. Free text (name, description) and the nodes are not values a run is given."""
    out: list[tuple[str, Any, int]] = [(f"training.overrides.{o.prefix}{o.key}", o.value, o.line)
                                       for o in p.training.overrides]
    out += [(f"paths.{f.name}", getattr(p.paths, f.name), 0) for f in fields(p.paths)]
    out += [(f"env.{k}", v, 0) for k, v in p.env.items()]
    out += [(f"training.env.{k}", v, 0) for k, v in p.training.env.items()]
    out += [(f"container.{k}", getattr(p.container, k), 0) for k in ("name", "image")]
    out += [(f"training.{k}", getattr(p.training, k), 0)
            for k in ("module", "python", "python_args", "config_path", "config_name", "submission_prefix")]
    out += [("model.source", p.model.source, 0)]
    if p.convert is not None:
        out += [(f"convert.{k}", getattr(p.convert, k), 0) for k in ("script", "python", "extra_args")]
    return out


def static_placeholders(p: Profile, L: _Layout) -> list[CheckResult]:
    """A value still holding an example script's placeholder (`<path_to_model>`, `/path/to/`,
    CHANGE-ME, YOUR_KEY, xxx: the rule is `tui.core.placeholders`): the run would start and
    fail on it (or use it) minutes later. `rlconsole import` names them as it writes them."""
    found = []
    for key, value, line in _profile_values(p):
        why = placeholder_reason(value)
        if why:
            shown = value if isinstance(value, str) else json.dumps(value, default=str)
            at = f" ({p.path}:{line})" if line and p.path else (f" (line {line})" if line else "")
            found.append(f"{key}={shown}{at}")
    if found:
        return [CheckResult("profile.placeholders", FAIL, f"{len(found)} placeholder value(s) left: "
                            + "; ".join(found), "replace the placeholder with the real value")]
    return [CheckResult("profile.placeholders", PASS, "no placeholder values (<...>, /path/to/, CHANGE-ME, "
                        "TODO, YOUR_..., xxx)")]


STATIC_CHECKS: tuple[StaticCheck, ...] = (
    static_placeholders, static_cards, static_rollout_parallel, static_actor_parallel, static_pipeline_layers,
    static_batch, static_lengths, static_expert_parallel, static_paths_consistent, static_tensorboard,
    static_dashboard, static_checkpoint_deletable, static_user_catalog,
)
"""The checks that read the profile alone, in the order they print: each one small, named
and testable on its own (`static_batch(profile, _layout(profile))`)."""


def static_checks(p: Profile) -> list[CheckResult]:
    """Every static check on `p`: what can be known wrong before touching a node."""
    layout = _layout(p)
    return [r for check in STATIC_CHECKS for r in check(p, layout)]


# --------------------------------------------------------------------------- live

DEBUG_SAVE_SCRIPT = r"""
import os, re, sys
root = sys.argv[1]
pat = re.compile(r"^\s*[^#\n]*torch\.save\(")
lit = re.compile(r"['\"](/[^'\"]+)['\"]")
for d, _, files in os.walk(os.path.join(root, "verl")):
    for f in files:
        if not f.endswith(".py"):
            continue
        path = os.path.join(d, f)
        try:
            lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
        except OSError:
            continue
        for i, line in enumerate(lines):
            if pat.match(line):
                # the path may be assigned a few lines above (the seed: p = '/mnt/...')
                for j in range(max(0, i - 4), i + 1):
                    if lines[j].lstrip().startswith("#"):
                        continue
                    for m in lit.finditer(lines[j]):
                        parent = os.path.dirname(m.group(1))
                        if parent and not os.path.isdir(parent):
                            print(f"{path}:{i + 1}: torch.save to {m.group(1)} (parent {parent} does not exist)")
print("@@rlconsole-done")
"""

COMPOSE_SCRIPT = r"""
import difflib, json, os, sys
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
cfg_dir, name, *ov = sys.argv[1:]
name = name[:-5] if name.endswith(".yaml") else name


def one_line(e):
    return " ".join(x.strip() for x in str(e).splitlines() if x.strip()) or repr(e)


def attempt(overrides):
    try:
        with initialize_config_dir(config_dir=cfg_dir, version_base=None):
            return compose(config_name=name, overrides=overrides), None
    except Exception as e:
        return None, one_line(e)


def key_of(o):
    return o.split("=", 1)[0].lstrip("~+")


def culprit(rest, err):
    for i, o in enumerate(rest):
        k = key_of(o)
        if "'" + k + "'" in err or "'" + k + "." in err or "override " + o in err:
            return i
    return None


def flat(node, prefix=""):
    out = {}
    if isinstance(node, dict):
        for k, v in node.items():
            path = prefix + "." + str(k) if prefix else str(k)
            out[path] = v
            out.update(flat(v, path))
    return out


def config_names():
    try:
        return sorted(f[:-5] for f in os.listdir(cfg_dir) if f.endswith(".yaml") and not f.startswith("_"))
    except OSError:
        return []


def fix_for(o, err, keys):
    k = key_of(o)
    if "Could not append to config. An item is already at" in err:
        return "drop the +: " + k + " exists in the config (write " + k + "=...)"
    if "Could not override" not in err and "is not in struct" not in err:
        return None
    parts = k.split(".")
    for n in range(len(parts) - 1, 0, -1):
        tail = "." + ".".join(parts[-n:])
        hits = [x for x in keys if x.endswith(tail) and x != k]
        same_root = [x for x in hits if x.split(".")[0] == parts[0]]
        hits = same_root or hits
        if hits and (n > 1 or len(hits) == 1) and len(hits) <= 3:
            return "moved to " + " or ".join(hits) + " in this VeRL: write " + hits[0] + "=..."
    parent, leaf = k.rsplit(".", 1) if "." in k else ("", k)
    siblings = [x for x in keys if (x.rsplit(".", 1)[0] if "." in x else "") == parent]
    near = difflib.get_close_matches(leaf, [x.rsplit(".", 1)[-1] for x in siblings], n=3, cutoff=0.7)
    if near:
        return ("no such key in this VeRL (renamed or removed?); the nearest: "
                + ", ".join((parent + "." if parent else "") + x for x in near))
    if parent and isinstance(keys.get(parent), dict):
        return ("not a key of " + parent + " in this VeRL: if it is meant to be a new key, prefix it with + "
                "(write +" + k + " under its section); otherwise check its spelling")
    return "no such key or section in this VeRL's config: check its spelling and the VeRL version"


rest, rejected = list(ov), []
for _ in range(len(ov) + 1):
    cfg, err = attempt(rest)
    if err is None:
        break
    if "Cannot find primary config" in err or "Primary config" in err:
        names = config_names()
        fix = "config names in " + cfg_dir + ": " + (", ".join(names) or "none")
        if name.startswith("ppo_megatron_trainer") and "ppo_megatron_trainer" in names:
            fix = (name + " is not in this VeRL tree (a vendor file, in no upstream release): use "
                   "--config-name=ppo_megatron_trainer, or add " + name + ".yaml with defaults "
                   "[ppo_megatron_trainer, _self_]; " + fix)
        print("REJECTED:" + json.dumps({"override": None, "error": err, "fix": fix}))
        rest = None
        break
    i = culprit(rest, err)
    if i is None:
        print("REJECTED:" + json.dumps({"override": None, "error": err, "fix": None}))
        rest = None
        break
    rejected.append((rest[i], err))
    del rest[i]
if rejected:
    base, _ = attempt([])
    keys = flat(OmegaConf.to_container(base, resolve=False)) if base is not None else {}
    for o, err in rejected:
        print("REJECTED:" + json.dumps({"override": o, "error": err, "fix": fix_for(o, err, keys)}))
if rest is not None and not rejected:
    print("OK")
print("DONE", len(ov), len(rejected))
"""

TC_SCRIPT = r"""
import dataclasses, os, sys
root, keys = sys.argv[1], sys.argv[2:]
ver = ""
try:
    ver = open(os.path.join(root, "verl", "version", "version")).read().strip()
except OSError:
    try:
        from importlib.metadata import version
        ver = version("verl")
    except Exception:
        pass
print("VERSION:" + ver.splitlines()[0][:40] if ver else "VERSION:", flush=True)
from megatron.core.transformer.transformer_config import TransformerConfig
names = {f.name for f in dataclasses.fields(TransformerConfig)}
print("MISSING:" + ",".join(k for k in keys if k not in names))
"""

DROPS_UNKNOWN_TC_KEYS = (0, 5)
"""From this VeRL release on, `override_transformer_config` keys Megatron's TransformerConfig
lacks are dropped with a warning ("The following keys are not supported in the current
Megatron version and will be removed: [...]", verl/models/mcore/config_converter.py
`check_and_construct_configs`) and the run goes on; VeRL 0.4.x passes them to
`TransformerConfig(...)`, a TypeError at start."""


def _verl_version(text: str) -> tuple[int, ...] | None:
    m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


PARQUET_SCRIPT = r"""
import sys
try:
    import pyarrow.parquet as pq
except ImportError:
    print("NOPYARROW"); sys.exit(0)
for f in sys.argv[1:]:
    try:
        print(f"{f}\t{pq.ParquetFile(f).metadata.num_rows}")
    except Exception as e:  # one broken probe must not hide the others' results
        print(f"{f}\tERROR {str(e).splitlines()[0] if str(e) else repr(e)}")
"""



DEPS_SCRIPT = r"""
import importlib.util, sys
print("MISSING:" + ",".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))
"""

JOB_DEPS: tuple[tuple[str, str], ...] = (("hydra", "hydra-core"), ("omegaconf", "omegaconf"), ("ray", "ray"))
"""What the job's entry point (`python -m verl.trainer.main_ppo`, a `@hydra.main` app that
starts Ray actors) imports before anything else, with the package that provides each. A
Python lacking one of these fails the job at its first line, so the preflight fails too."""

DONE = "@@rlconsole-done"
"""Printed by a probe's last line: output without it means the probe did not run to the end
(not "found nothing")."""


class Need(str, Enum):
    """What a live check needs before it can say anything true. Each is provided by one
    check (`PROVIDERS`); when it is missing, the dependent check is skipped, naming it."""

    NODE = "node"              # the node answers over SSH
    CONTAINER = "container"    # the container runs there (docker-exec access)
    RAY = "ray"                # the head's Ray answers
    PYTHON = "python"          # the job's Python runs on the head
    JOB_DEPS = "job-deps"      # ... and has the job's own dependencies (JOB_DEPS)


PROVIDERS: dict[Need, str] = {
    Need.NODE: "ssh.reachable", Need.CONTAINER: "container.running", Need.RAY: "ray.cluster",
    Need.PYTHON: "code.python", Need.JOB_DEPS: "code.python",
}

Scope = Literal["node", "head"]


@dataclass
class _Run:
    """One preflight run: the profile, the remote, and the facts the providing checks
    found (None = fine, else why not), which the dependent checks read."""

    p: Profile
    remote: Any
    before_submit: bool
    unreachable: dict[str, str] = field(default_factory=dict)
    container_down: dict[str, str] = field(default_factory=dict)
    ray_down: str | None = None
    python_broken: str | None = None
    deps_missing: str | None = None
    ready: dict[str, asyncio.Event] = field(default_factory=dict)
    _missing: dict[str, asyncio.Task[list[str] | None]] = field(default_factory=dict)
    _jobs: asyncio.Task[list[str] | str] | None = None

    @property
    def head(self) -> str:
        return self.p.head.name

    @property
    def py(self) -> str:
        return self.p.training.python

    def job_env(self) -> list[str]:
        """`env PYTHONPATH=...` as the job has it (Megatron and VeRL from the shared tree)."""
        return ["env", f"PYTHONPATH={':'.join(x for x in (self.p.paths.megatron, self.p.paths.verl) if x)}"]

    def unmet(self, need: Need, node: str) -> str | None:
        """Why `need` is not met on `node` (a phrase for "needs X, which ..."), or None."""
        if need is Need.NODE:
            why = self.unreachable.get(node)
            return None if node not in self.unreachable else f"needs the node, which is unreachable ({why})"
        if need is Need.CONTAINER:
            st = self.container_down.get(node)
            return None if st is None else f"needs container {self.p.container.name}, which is {st}"
        if need is Need.RAY:
            return None if self.ray_down is None else f"needs Ray on the head, which {self.ray_down}"
        if need is Need.PYTHON:
            return None if self.python_broken is None else f"needs the job's Python, which {self.python_broken}"
        if need is Need.JOB_DEPS:
            if self.python_broken is not None:
                return f"needs the job's Python, which {self.python_broken}"
            return None if self.deps_missing is None else f"needs the job's Python, which {self.deps_missing}"
        raise ValueError(need)

    def broken(self, need: Need, node: str, why: str) -> None:
        """Record that the check providing `need` could not tell (it raised): the checks
        that need it are skipped rather than run on an assumption."""
        if need is Need.NODE:
            self.unreachable.setdefault(node, why)
        elif need is Need.CONTAINER:
            self.container_down.setdefault(node, f"unknown ({why})")
        elif need is Need.RAY:
            self.ray_down = self.ray_down or f"is unknown ({why})"
        else:
            self.python_broken = self.python_broken or f"is unknown ({why})"

    def running_jobs(self) -> Awaitable[list[str] | str]:
        """The Ray jobs running now, or why that cannot be said: asked once a preflight
        (ray.jobs reports it; cards.free reads it, since cards busy with a running job's
        workers are what a running job looks like, not a finding)."""
        if self._jobs is None:
            self._jobs = asyncio.ensure_future(self._list_running())
        return self._jobs

    async def _list_running(self) -> list[str] | str:
        try:
            from tui.core.actions.jobs import job_client, list_jobs

            jobs = await asyncio.wait_for(list_jobs(await job_client(self.remote)), 60)
        except Exception as e:  # noqa: BLE001 - the job API's errors are many; all mean "cannot say"
            return f"cannot list jobs: {e}"
        return [j.id for j in jobs if j.status in ACTIVE_JOB_STATUSES]

    def paths_missing(self, node: str) -> Awaitable[list[str] | None]:
        """The profile's paths that do not exist on `node` (in the container), asked once
        per node and shared by the checks that want it; None when the probe failed."""
        if node not in self._missing:
            self._missing[node] = asyncio.ensure_future(self._probe_paths(node))
        return self._missing[node]

    async def _probe_paths(self, node: str) -> list[str] | None:
        paths = profile_paths(self.p)
        r = await self.remote.run(node, ["sh", "-c", f'for d; do [ -e "$d" ] || echo "$d"; done; echo {DONE}',
                                         "sh", *paths.values()], container=True)
        if DONE not in r.stdout:
            return None
        return [ln for ln in r.stdout.splitlines() if ln.strip() and ln != DONE]


LiveFn = Callable[[_Run, Node], Awaitable[list[CheckResult]]]


@dataclass(frozen=True)
class LiveCheck:
    """A live check: its function, the result ids it always gives (a skip gives one of
    each; `also` are ids it gives only sometimes, listed for the order), what it needs,
    and where it runs (every node, or once on the head)."""

    fn: LiveFn
    ids: tuple[str, ...]
    needs: tuple[Need, ...]
    scope: Scope
    also: tuple[str, ...] = ()
    provides: tuple[Need, ...] = ()
    applies: Callable[[Profile], bool] | None = None  # None: always; else whether there is anything to check


def profile_paths(p: Profile) -> dict[str, str]:
    """The profile's paths that must exist on every node, by their key under `paths`."""
    keys = ("verl", "megatron", "hf_model", "mcore_checkpoint", "workdir", "data_dir")
    return {k: getattr(p.paths, k) for k in keys if getattr(p.paths, k, None)}


PATH_OWNERS = {"hf_model": "model.hf", "mcore_checkpoint": "model.mcore"}
"""Paths another check reports with the right fix (`rlconsole model` / `convert`), so that
`storage.paths` does not report them a second time with a wrong one."""


# -- the checks -------------------------------------------------------------------


async def check_ssh(r: _Run, n: Node) -> list[CheckResult]:
    """The node answers over SSH with a host key we know (the pool connected already)."""
    ok, why = r.remote.reachable(n.name)
    if ok:
        return [CheckResult("ssh.reachable", PASS, "reachable, host key verified", node=n.name)]
    r.unreachable[n.name] = why or "no connection"
    return [CheckResult("ssh.reachable", FAIL, f"unreachable: {why}",
                        "check the address/port, and that its host key is in known_hosts", n.name)]


async def check_container(r: _Run, n: Node) -> list[CheckResult]:
    """The profile's container runs on the node, from the profile's image."""
    from tui.core.parsers.docker import parse_docker_inspect

    p = r.p
    res = await r.remote.run(n.name, [*p.container.docker, "inspect", "--type", "container", p.container.name])
    st = parse_docker_inspect(res.output, p.container.name, res.rc)
    if st.status != "running":
        r.container_down[n.name] = str(st.status) if st.status != "unknown" or not st.error else f"unknown ({st.error})"
        return [CheckResult("container.running", FAIL, f"container {p.container.name} is {r.container_down[n.name]}",
                            "run `rlconsole containers`", n.name)]
    out = [CheckResult("container.running", PASS, f"{p.container.name} running", node=n.name)]
    if st.image and st.image != p.container.image:
        out.append(CheckResult("container.image", FAIL, f"runs image {st.image}, the profile says {p.container.image}",
                               "recreate the container from the profile's image (or fix container.image)", n.name))
    return out


async def check_cards(r: _Run, n: Node) -> list[CheckResult]:
    """The node's card tool sees the profile's cards, and none is busy."""
    from tui.core.parsers.detect import GPU_PROBE_SCRIPT, parse_probe_output

    res = await r.remote.run(n.name, ["sh", "-c", GPU_PROBE_SCRIPT], container=True, timeout=60)
    rep = parse_probe_output(res.stdout)
    if not rep.parsed:
        return [CheckResult("cards.count", FAIL, f"card tool output not understood: {rep.error}", node=n.name)]
    if len(rep.cards) != n.gpus:
        out = [CheckResult("cards.count", FAIL, f"sees {len(rep.cards)} cards, the profile says {n.gpus}", node=n.name)]
    else:
        out = [CheckResult("cards.count", PASS, f"{n.gpus} cards ({rep.tool})", node=n.name)]
    busy = [f"card {c.index}: pid {', '.join(str(x.pid) for x in c.processes)}" for c in rep.cards if c.processes]
    if busy and not r.before_submit and not r.ray_down:
        running = await r.running_jobs()
        if isinstance(running, list) and running:  # what a running job looks like (ray.jobs says it runs)
            out.append(CheckResult("cards.free", PASS, f"{len(busy)} of {len(rep.cards)} cards busy while job "
                                   f"{', '.join(running)} runs", node=n.name))
            return out
    if busy:
        out.append(CheckResult("cards.free", FAIL if r.before_submit else WARN,
                               "busy with processes: " + "; ".join(busy), "stop what runs there", n.name))
    return out


def _ifnames(p: Profile) -> list[str]:
    return sorted({v for k, v in p.env.items() if k in ("MCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")})


def _tc_keys(p: Profile) -> list[str]:
    return [o.key.rsplit(".", 1)[-1] for o in p.training.overrides if ".override_transformer_config." in o.key]


async def check_interface(r: _Run, n: Node) -> list[CheckResult]:
    """The socket interface the collectives are told to use exists on the node."""
    out = []
    for name in _ifnames(r.p):
        res = await r.remote.run(n.name, ["sh", "-c", f'test -e "/sys/class/net/$1" && echo yes; echo {DONE}',
                                          "sh", name.lstrip("=^")], container=True)
        if DONE not in res.stdout:
            out.append(CheckResult("net.interface", FAIL, f"cannot look for interface {name}: {res.tail(1)}", node=n.name))
            continue
        ok = "yes" in res.stdout.split()
        out.append(CheckResult("net.interface", PASS if ok else FAIL,
                               f"interface {name} {'exists' if ok else 'does not exist'}",
                               None if ok else "set MCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to an interface of this node",
                               n.name))
    return out


async def check_paths(r: _Run, n: Node) -> list[CheckResult]:
    """Every profile path exists on the node. A path the head lacks too is not a mount
    problem: it is reported once, on the head (the model's by model.hf / model.mcore)."""
    paths = profile_paths(r.p)
    key_of = {v: k for k, v in paths.items()}
    missing = await r.paths_missing(n.name)
    if missing is None:
        return [CheckResult("storage.paths", FAIL, "the path probe did not run to its end",
                            "see `rlconsole logs --debug`", n.name)]
    if n.name == r.head:
        mine = [m for m in missing if key_of.get(m) not in PATH_OWNERS]
        owned = sorted({PATH_OWNERS[key_of[m]] for m in missing if key_of.get(m) in PATH_OWNERS})
        if mine:
            return [CheckResult("storage.paths", FAIL, "missing: " + ", ".join(f"{m} (paths.{key_of.get(m)})" for m in mine),
                                "create them, or fix these paths in the profile", n.name)]
        return [CheckResult("storage.paths", PASS, f"{len(paths) - len(missing)} profile paths exist"
                            + (f" (the model's paths are for {' and '.join(owned)})" if owned else ""), node=n.name)]
    on_head = None
    if r.unmet(Need.CONTAINER, r.head) is None and r.unmet(Need.NODE, r.head) is None:
        on_head = await r.paths_missing(r.head)
    if on_head is not None:
        missing = [m for m in missing if m not in on_head]
    if missing:
        return [CheckResult("storage.paths", FAIL,
                            f"missing here: {', '.join(missing)}" + (" (the head has them)" if on_head is not None else ""),
                            "mount the shared storage on this node as on the head" if on_head is not None
                            else "mount the shared storage / fix paths", n.name)]
    return [CheckResult("storage.paths", PASS, f"{len(paths)} profile paths exist"
                        if on_head is None or not on_head else "the profile paths the head has exist here too", node=n.name)]


async def check_shared(r: _Run, n: Node) -> list[CheckResult]:
    """A marker written on the head is read back on every worker: really shared storage."""
    head, out = r.head, []
    others = [m for m in r.p.nodes if m.name != head]
    readers = [m for m in others if r.unmet(Need.CONTAINER, m.name) is None and r.unmet(Need.NODE, m.name) is None]
    unchecked = [m.name for m in others if m not in readers]
    for root in r.p.paths.shared:
        token = secrets.token_hex(8)
        marker = f"{root.rstrip('/')}/.rlconsole-shared-check-{token}"
        w = await r.remote.run(head, ["sh", "-c", 'printf %s "$2" > "$1"', "sh", marker, token], container=True)
        if not w.ok:
            out.append(CheckResult("storage.shared", FAIL, f"cannot write {marker} on {head}: {w.tail(1)}",
                                   f"make {root} exist and be writable on the head", head))
            continue
        try:
            bad = []
            for m in readers:
                res = await r.remote.run(m.name, ["cat", marker], container=True)
                if res.stdout != token:
                    bad.append(m.name)
            note = f" (not checked on {', '.join(unchecked)}: see ssh.reachable / container.running)" if unchecked else ""
            out.append(CheckResult("storage.shared", FAIL if bad else PASS,
                                   (f"{root} is not shared with {', '.join(bad)} (a marker written on {head} is not seen there)"
                                    if bad else f"{root} is shared by every node") + note,
                                   "mount the same NFS share on every node" if bad else None))
        finally:
            await r.remote.run(head, ["rm", "-f", marker], container=True)
    return out


async def check_data(r: _Run, n: Node) -> list[CheckResult]:
    """The train and validation files are readable parquet (row counts when pyarrow is there)."""
    files = [*r.p.paths.train_files, *r.p.paths.val_files]
    res = await r.remote.run(r.head, [r.py, "-c", PARQUET_SCRIPT, *files], container=True, timeout=120)
    if "NOPYARROW" in res.stdout or not res.ok:
        rr = await r.remote.run(r.head, ["sh", "-c", f'for f; do [ -r "$f" ] || echo "$f"; done; echo {DONE}', "sh", *files],
                                container=True)
        if DONE not in rr.stdout:
            return [CheckResult("data.files", FAIL, f"cannot look for the data files: {rr.tail(1)}")]
        missing = [x for x in rr.stdout.splitlines() if x and x != DONE]
        return [CheckResult("data.files", FAIL if missing else PASS,
                            f"missing: {', '.join(missing)}" if missing else f"{len(files)} data files present",
                            "fix paths.train_files / val_files, or put the files there" if missing else None)]
    bad: list[str] = []
    rows: list[str] = []
    for line in res.stdout.splitlines():
        f, _, v = line.partition("\t")
        (bad if v.startswith("ERROR") else rows).append(f"{f.rsplit('/', 1)[-1]} ({v})")
    return [CheckResult("data.files", FAIL if bad else PASS,
                        ("unreadable: " + ", ".join(bad)) if bad else "parquet rows: " + ", ".join(rows))]


async def check_model(r: _Run, n: Node) -> list[CheckResult]:
    """The HF model is complete and matches the profile's model facts; the MCore
    checkpoint is complete. A missing HF model is one failure: the checkpoint made from it
    and the facts read from it are skipped, naming it."""
    from tui.core.actions.model import hf_missing, list_dir, mcore_missing

    p, head = r.p, r.head
    m = hf_missing(await list_dir(r.remote, head, p.paths.hf_model))
    c = mcore_missing(await list_dir(r.remote, head, p.paths.mcore_checkpoint))
    out = []
    if m:
        fix = "run `rlconsole model`" + (", then `rlconsole convert`" if c else "")
        out.append(CheckResult("model.hf", FAIL, f"{p.paths.hf_model} lacks {', '.join(m)}", fix, head))
        if c:
            out.append(CheckResult("model.mcore", SKIP, f"needs the HF model it is converted from, which lacks {', '.join(m)}",
                                   node=head, cause="model.hf"))
    else:
        out.append(CheckResult("model.hf", PASS, "HF model has config and weights", node=head))
    if c and not m:
        out.append(CheckResult("model.mcore", FAIL, f"{p.paths.mcore_checkpoint} lacks {', '.join(c)}",
                               "run `rlconsole convert`", head))
    elif not c:
        out.append(CheckResult("model.mcore", PASS, "MCore checkpoint complete", node=head))
    res = await r.remote.run(head, ["cat", f"{p.paths.hf_model}/config.json"], container=True)
    try:
        cfg = json.loads(res.stdout)
        if not isinstance(cfg, dict):
            raise ValueError("not an object")
    except ValueError:
        if m:
            out.append(CheckResult("model.facts", SKIP, "needs the HF model's config.json", node=head, cause="model.hf"))
        else:
            out.append(CheckResult("model.facts", FAIL, f"{p.paths.hf_model}/config.json is not a JSON object",
                                   "download the model again (`rlconsole model`)", head))
        return out
    diffs = []
    if p.model.num_layers and cfg.get("num_hidden_layers") not in (None, p.model.num_layers):
        diffs.append(f"num_layers {p.model.num_layers} vs config.json {cfg.get('num_hidden_layers')}")
    if p.model.max_position_embeddings and cfg.get("max_position_embeddings") not in (None, p.model.max_position_embeddings):
        diffs.append(f"max_position_embeddings {p.model.max_position_embeddings} vs {cfg.get('max_position_embeddings')}")
    moe = any(k in cfg for k in ("num_experts", "num_local_experts", "n_routed_experts"))
    if moe != p.model.moe:
        diffs.append(f"moe {p.model.moe} vs config.json {'has' if moe else 'has no'} experts")
    out.append(CheckResult("model.facts", FAIL if diffs else PASS,
                           "profile model facts differ from config.json: " + "; ".join(diffs) if diffs
                           else "profile model facts match config.json",
                           "make the profile's model section match config.json" if diffs else None, head))
    return out


async def check_job_python(r: _Run, n: Node) -> list[CheckResult]:
    """The job's Python runs where the job runs and imports what the job imports first.
    Without this, a missing Hydra would only be a probe that "cannot run", and the job
    would die at `import hydra` a minute after submit."""
    where = f"{r.py} on {r.head}" + (f" in {r.p.container.name}" if r.p.container.access == "docker-exec" else "")
    res = await r.remote.run(r.head, [*r.job_env(), r.py, "-c", DEPS_SCRIPT, *(m for m, _ in JOB_DEPS)],
                             container=True, timeout=120)
    line = next((x for x in res.stdout.splitlines() if x.startswith("MISSING:")), None)
    if line is None:
        r.python_broken = f"does not run ({res.tail(1) or f'exit {res.rc}'})"
        return [CheckResult("code.python", FAIL, f"the job's Python {where} does not run: {res.tail(1) or f'exit {res.rc}'}",
                            "set training.python to the container's Python (the one with VeRL's dependencies)", r.head)]
    missing = [x for x in line[8:].split(",") if x]
    if missing:
        pkgs = " ".join(pip for m, pip in JOB_DEPS if m in missing)
        r.deps_missing = f"lacks {', '.join(missing)}"
        return [CheckResult("code.python", FAIL,
                            f"the job's Python ({where}) cannot import {', '.join(missing)}: the job would die at "
                            f"`import {missing[0]}`",
                            f"install them where the job runs (`{r.py} -m pip install {pkgs}` in the container), "
                            "or set training.python to the Python that has VeRL's dependencies", r.head)]
    return [CheckResult("code.python", PASS, f"the job's Python ({where}) imports {', '.join(m for m, _ in JOB_DEPS)}",
                        node=r.head)]


def missing_module(output: str) -> str | None:
    """The module a Python traceback says is not installed ("No module named 'x'"), or None."""
    import re

    m = re.search(r"No module named '([^']+)'", output)
    return m.group(1) if m else None


def _dependency_failure(check_id: str, r: _Run, module: str) -> CheckResult:
    """A probe that cannot run because the job's own dependency is missing where the job
    runs: the job would fail the same way, so this is a failure with that as its fix."""
    return CheckResult(check_id, FAIL, f"the job's Python ({r.py} on {r.head}) cannot import {module}: "
                       "the job would fail the same way",
                       f"install {module.split('.')[0]} where the job runs, or fix paths.megatron / paths.verl "
                       "(the job's PYTHONPATH)", r.head)


async def check_debug_save(r: _Run, n: Node) -> list[CheckResult]:
    """The VeRL tree has no debug `torch.save` to a missing absolute path (the seed's appendix)."""
    res = await r.remote.run(r.head, [r.py, "-c", DEBUG_SAVE_SCRIPT, r.p.paths.verl], container=True, timeout=120)
    if DONE not in res.stdout:
        return [CheckResult("code.debug_save", FAIL, f"the scan of the VeRL tree did not finish: {res.tail(1)}", node=r.head)]
    hits = [x for x in res.stdout.splitlines() if x.strip() and x != DONE]
    return [CheckResult("code.debug_save", FAIL if hits else PASS,
                        "; ".join(hits[:3]) + (f" (+{len(hits) - 3} more)" if len(hits) > 3 else "") if hits
                        else "no torch.save to missing absolute paths in the VeRL tree",
                        "comment out these debug saves (seed appendix)" if hits else None, r.head)]


async def check_overrides(r: _Run, n: Node) -> list[CheckResult]:
    """The overrides compose against the cluster's own Hydra config (the `+` rules): every
    rejected override in one pass, each with its own fix (COMPOSE_SCRIPT, run on the head,
    where VeRL's config is)."""
    from tui.core.render import entrypoint

    p = r.p
    ov = [a for a in entrypoint(p) if "=" in a and not a.startswith("--")]
    res = await r.remote.run(r.head, [*r.job_env(), r.py, "-c", COMPOSE_SCRIPT, p.training.config_path,
                                      p.training.config_name, *ov], container=True, timeout=180)
    lines = res.stdout.splitlines()
    if res.ok and "OK" in lines:
        return [CheckResult("code.overrides", PASS, f"{len(ov)} overrides compose against {p.training.config_name}",
                            node=r.head)]
    rejected = []
    for x in lines:
        if x.startswith("REJECTED:"):
            try:
                d = json.loads(x[9:])
            except ValueError:
                continue
            if isinstance(d, dict):
                rejected.append(d)
    if not rejected:
        mod = missing_module(res.output)
        if mod is not None:
            return [_dependency_failure("code.overrides", r, mod)]
        return [CheckResult("code.overrides", FAIL, f"the composition did not finish: {res.tail(1)}", node=r.head)]
    out = []
    for d in rejected:
        o, err, fix = d.get("override"), str(d.get("error") or ""), d.get("fix")
        msg = f"{o}: {err}" if o else err
        out.append(CheckResult("code.overrides", FAIL, msg, str(fix) if fix else None, r.head))
    return out


async def check_transformer_config(r: _Run, n: Node) -> list[CheckResult]:
    """`override_transformer_config` keys Megatron's TransformerConfig lacks: what the head's
    VeRL does with them decides the verdict (DROPS_UNKNOWN_TC_KEYS): dropped with a warning
    (WARN: they have no effect, the run starts) or a TypeError at start (FAIL)."""
    keys = _tc_keys(r.p)
    res = await r.remote.run(r.head, [*r.job_env(), r.py, "-c", TC_SCRIPT, r.p.paths.verl or "", *keys],
                             container=True, timeout=120)
    out = res.stdout.splitlines()
    line = next((x for x in out if x.startswith("MISSING:")), None)
    if line is None:
        mod = missing_module(res.output)
        if mod is not None and mod.split(".")[0] == "megatron":
            gone = await r.paths_missing(r.head)
            if gone and r.p.paths.megatron in gone:
                return [CheckResult("code.transformer_config", SKIP, "needs the Megatron tree (paths.megatron), "
                                    "which is missing", node=r.head, cause="storage.paths")]
        if mod is not None:
            return [_dependency_failure("code.transformer_config", r, mod)]
        return [CheckResult("code.transformer_config", WARN,
                            f"cannot import Megatron's TransformerConfig on the head: {res.tail(1)}", node=r.head)]
    missing = [k for k in line[8:].split(",") if k]
    if not missing:
        return [CheckResult("code.transformer_config", PASS, f"{len(keys)} override_transformer_config keys exist",
                            node=r.head)]
    text = next((x[8:].strip() for x in out if x.startswith("VERSION:")), "")
    return [transformer_config_verdict(missing, text, r.head)]


def transformer_config_verdict(missing: list[str], verl_version: str, node: str | None = None) -> CheckResult:
    """The verdict on `missing` (keys TransformerConfig lacks) for the head's VeRL version."""
    ver = _verl_version(verl_version)
    keys = ", ".join(missing)
    fix = ("remove them from the profile: they are Megatron command-line flags, not TransformerConfig fields "
           "(set the fields they stand for instead, e.g. gradient_accumulation_fusion: false for "
           "no_gradient_accumulation_fusion)")
    if ver is not None and ver >= DROPS_UNKNOWN_TC_KEYS:
        return CheckResult("code.transformer_config", WARN,
                           f"dropped with a warning by VeRL {verl_version}: {keys} "
                           f"{'has' if len(missing) == 1 else 'have'} no effect", fix, node)
    if ver is not None:
        return CheckResult("code.transformer_config", FAIL,
                           f"VeRL {verl_version} passes override_transformer_config to TransformerConfig, which "
                           f"lacks {keys}: the run fails at start (TypeError)", fix, node)
    return CheckResult("code.transformer_config", WARN,
                       f"override_transformer_config keys TransformerConfig lacks: {keys}; the head's VeRL version is "
                       "unknown: VeRL >= 0.5 drops them with a warning (no effect), 0.4.x fails at start", fix, node)


async def check_ray(r: _Run, n: Node) -> list[CheckResult]:
    """Ray runs with every node and GPU of the profile."""
    from tui.core.actions.ray_setup import cluster_is_right, expected_gpus, ray_state

    st = await ray_state(r.p, r.remote)
    if not st.available:
        r.ray_down = "is not running"
    if not cluster_is_right(r.p, st):
        return [CheckResult("ray.cluster", FAIL if r.before_submit else WARN,
                            f"Ray reports {st.nodes_alive}/{len(r.p.nodes)} nodes, {st.gpus_total:g}/{expected_gpus(r.p)} GPUs"
                            + (f" ({st.error})" if st.error else ""), "run `rlconsole setup-ray`")]
    return [CheckResult("ray.cluster", PASS, f"{st.nodes_alive} nodes, {st.gpus_total:g} GPUs")]


async def check_ray_jobs(r: _Run, n: Node) -> list[CheckResult]:
    """No job runs already (a second one would fight it for the cards)."""
    running = await r.running_jobs()
    if isinstance(running, str):
        return [CheckResult("ray.jobs", WARN, running)]
    return [CheckResult("ray.jobs", (FAIL if r.before_submit else WARN) if running else PASS,
                        f"a job is running: {', '.join(running)}" if running else "no job running",
                        "stop it first (`rlconsole stop`, or x in the console)" if running else None)]


_IN = (Need.NODE, Need.CONTAINER)

LIVE_CHECKS: tuple[LiveCheck, ...] = (
    LiveCheck(check_ssh, ("ssh.reachable",), (), "node", provides=(Need.NODE,)),
    LiveCheck(check_container, ("container.running",), (Need.NODE,), "node", also=("container.image",),
              provides=(Need.CONTAINER,)),
    LiveCheck(check_cards, ("cards.count",), _IN, "node", also=("cards.free",)),
    LiveCheck(check_interface, ("net.interface",), _IN, "node", applies=lambda p: bool(_ifnames(p))),
    LiveCheck(check_paths, ("storage.paths",), _IN, "node"),
    LiveCheck(check_shared, ("storage.shared",), _IN, "head", applies=lambda p: bool(p.paths.shared)),
    LiveCheck(check_data, ("data.files",), _IN, "head"),
    LiveCheck(check_model, ("model.hf", "model.mcore", "model.facts"), _IN, "head"),
    LiveCheck(check_job_python, ("code.python",), _IN, "head", provides=(Need.PYTHON, Need.JOB_DEPS)),
    LiveCheck(check_debug_save, ("code.debug_save",), (*_IN, Need.PYTHON), "head"),
    LiveCheck(check_overrides, ("code.overrides",), (*_IN, Need.JOB_DEPS), "head"),
    LiveCheck(check_transformer_config, ("code.transformer_config",), (*_IN, Need.PYTHON), "head",
              applies=lambda p: bool(_tc_keys(p))),
    LiveCheck(check_ray, ("ray.cluster",), _IN, "head", provides=(Need.RAY,)),
    LiveCheck(check_ray_jobs, ("ray.jobs",), (*_IN, Need.RAY), "head"),
)
"""Every live check, in the order results are shown (a check that does not apply to the
profile, e.g. no socket interface named, is left out)."""


def check_order(static: Iterable[str] = ()) -> dict[str, int]:
    """Result id -> its rank: the static checks in the order given, then the live ones."""
    order: dict[str, int] = {}
    for i in [*static, *(i for c in LIVE_CHECKS for i in (*c.ids, *c.also))]:
        order.setdefault(i, len(order))
    return order


def sort_results(p: Profile, results: list[CheckResult]) -> list[CheckResult]:
    """By check (declaration order; ids not declared in the order first seen), then by
    node in the profile's order (cluster-wide results first). Stable, so a check's own
    order within one node is kept."""
    order = check_order(r.id for r in results if r.id not in {i for c in LIVE_CHECKS for i in (*c.ids, *c.also)})
    nodes = {n.name: i for i, n in enumerate(p.nodes)}
    return sorted(results, key=lambda r: (order.get(r.id, len(order)), -1 if r.node is None else nodes.get(r.node, len(nodes))))


async def _run_one(run: _Run, check: LiveCheck, node: Node) -> list[CheckResult]:
    """One check on one node: wait for the checks that provide what it needs, skip with
    their reason when it is missing, else run it (an exception is its failure)."""
    for need in check.needs:
        ev = run.ready.get(PROVIDERS[need])
        if ev is not None:
            await ev.wait()
    for need in check.needs:
        why = run.unmet(need, node.name)
        if why is not None:
            return [CheckResult(i, SKIP, why, node=node.name, cause=PROVIDERS[need]) for i in check.ids]
    try:
        return await check.fn(run, node)
    except Exception as e:
        log.exception("check %s on %s", check.fn.__name__, node.name)
        for need in check.provides:  # what it should have found out is not known: not met
            run.broken(need, node.name, f"{type(e).__name__} in {check.ids[0]}")
        return [CheckResult(check.ids[0], FAIL, f"the check itself failed: {type(e).__name__}: {e}",
                            "see `rlconsole logs --debug`", node.name)]


async def live_checks(p: Profile, remote: Any, before_submit: bool = False) -> list[CheckResult]:
    """Every live check, concurrently as far as their needs allow; results sorted."""
    run = _Run(p, remote, before_submit)
    checks = [c for c in LIVE_CHECKS if c.fn is not check_container or p.container.access == "docker-exec"]
    checks = [c for c in checks if c.applies is None or c.applies(p)]
    # the providers' events are keyed by the id of the check that provides them
    run.ready = {PROVIDERS[n]: asyncio.Event() for c in checks for n in c.provides}

    async def all_of(c: LiveCheck) -> list[CheckResult]:
        targets = p.nodes if c.scope == "node" else [p.head]
        try:
            parts = await asyncio.gather(*(_run_one(run, c, n) for n in targets))
        finally:
            for need in c.provides:
                run.ready[PROVIDERS[need]].set()
        return [r for part in parts for r in part]

    groups = await asyncio.gather(*(all_of(c) for c in checks))
    for t in run._missing.values():
        t.cancel()
    return sort_results(p, [r for g in groups for r in g])


async def run_checks(p: Profile, remote: Any = None, static: bool = False,
                     before_submit: bool = False) -> list[CheckResult]:
    """The preflight: the static checks, then (unless `static` or without a remote) the
    live ones; sorted by check, then node."""
    res = static_checks(p)
    if not static and remote is not None:
        res += await live_checks(p, remote, before_submit=before_submit)
    return sort_results(p, res)


# --------------------------------------------------------------------------- faces
# What the CLI, `submit` and the console's preflight screen share: counts, one event per
# result, and the grouped text. No printing here: the faces print.


def counts(results: Iterable[CheckResult]) -> dict[CheckStatus, int]:
    c = {s: 0 for s in CheckStatus}
    for r in results:
        c[r.status] += 1
    return c


def summary(results: list[CheckResult]) -> str:
    c = counts(results)
    text = f"{c[FAIL]} failed, {c[WARN]} warnings, {c[PASS]} passed"
    return text + (f", {c[SKIP]} skipped" if c[SKIP] else "")


def results_json(p: Profile, results: list[CheckResult], static: bool) -> dict[str, Any]:
    """`check --json`: the contract's `profile`, `static`, `results` (id, status, message,
    fix, node; plus `cause` on a skip) and `failed`; `warnings`, `passed`, `skipped` added."""
    c = counts(results)
    return {"profile": p.name, "static": static, "results": mask_data([r.to_json() for r in results]),
            "failed": c[FAIL], "warnings": c[WARN], "passed": c[PASS],
            "skipped": c[SKIP]}


def check_event(r: CheckResult, action: str = "check") -> ActionEvent:
    """A result as the actions' event: kind "output" (a failure is the action's verdict,
    not this line's), `status` the result's, `data["check"]` its id and `data["result"]`
    the whole result, which `result_of` reads back."""
    where = f" [{r.node}]" if r.node else ""
    return ActionEvent(action, "output", f"{r.status.value.upper()} {r.id}{where}: {r.message}",
                       status=r.status.value, data={"check": r.id, "result": mask_data(r.to_json())})


def result_of(ev: ActionEvent) -> CheckResult | None:
    """The result an event carries (see `check_event`); None for any other event."""
    d = ev.data.get("result") if isinstance(ev.data, dict) else None
    if not isinstance(d, dict):
        return None
    try:
        return CheckResult.from_json(d)
    except (KeyError, ValueError):
        return None


async def check_action(p: Profile, remote: Any) -> AsyncIterator[ActionEvent]:
    """The "check" action: start, one event per result in order, then the verdict."""
    yield ActionEvent("check", "start", "preflight checks")
    results = await run_checks(p, remote=remote)
    for r in results:
        yield check_event(r)
    yield ActionEvent("check", "fail" if counts(results)[FAIL] else "done", summary(results))


SYMBOL = {PASS: "ok  ", WARN: "WARN", FAIL: "FAIL", SKIP: "skip"}
_COLOUR = {FAIL: "\x1b[1;31m", WARN: "\x1b[33m", SKIP: "\x1b[2m"}


def format_results(results: list[CheckResult], colour: bool = False) -> list[str]:
    """The CLI's lines: grouped as sorted, a run of same-check rows that say the same thing
    on several nodes folded into one line naming the nodes; the fix under a non-pass row
    (once per fold); a skip names the check whose failure it waits on; the summary last."""
    lines: list[str] = []
    i = 0
    while i < len(results):
        r = results[i]
        j = i + 1
        while (j < len(results) and results[j].node and r.node and
               (results[j].id, results[j].status, results[j].message, results[j].fix, results[j].cause)
               == (r.id, r.status, r.message, r.fix, r.cause)):
            j += 1
        nodes = [x.node for x in results[i:j] if x.node]
        where = f" [{', '.join(nodes)}]" if nodes else ""
        sym = SYMBOL[r.status]
        if colour and r.status in _COLOUR:
            sym = f"{_COLOUR[r.status]}{sym}\x1b[0m"
        because = f" (see {r.cause})" if r.cause else ""
        # masked like every other face: a check quotes what a node printed or the profile says
        lines.append(f"{sym} {r.id}{where}: {mask_secrets(r.message)}{because}")
        if r.fix and r.status in (FAIL, WARN):
            lines.append(f"     fix: {mask_secrets(r.fix)}")
        i = j
    lines.append(summary(results))
    return lines
