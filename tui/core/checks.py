"""Preflight: catch a broken run in seconds instead of 15 minutes into the first step.

Each check returns pass / warn / fail with one line of what and where, and how to fix it.
Static checks read only the profile (for use away from the cluster: they open no
connection); live checks ask the nodes, all concurrently.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from dataclasses import asdict, dataclass
from typing import Any, Awaitable

from .profile import Profile

Status = str  # "pass" | "warn" | "fail"


@dataclass
class CheckResult:
    id: str
    status: Status
    message: str
    fix: str | None = None
    node: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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


def static_checks(p: Profile) -> list[CheckResult]:
    out: list[CheckResult] = []
    add = lambda *a, **k: out.append(CheckResult(*a, **k))  # noqa: E731

    nnodes = _int(_ov(p, "trainer.nnodes"), len(p.nodes))
    per_node = _int(_ov(p, "trainer.n_gpus_per_node"), p.nodes[0].gpus)
    cards = nnodes * per_node
    if cards != p.total_gpus or nnodes != len(p.nodes):
        add("cards.total", "fail", f"trainer.nnodes x n_gpus_per_node = {nnodes} x {per_node} = {cards}, "
            f"the profile has {len(p.nodes)} nodes with {p.total_gpus} cards",
            "make trainer.nnodes and trainer.n_gpus_per_node match the nodes list")
    else:
        add("cards.total", "pass", f"{nnodes} nodes x {per_node} cards = {cards}")
    odd = [n.name for n in p.nodes if n.gpus != per_node]
    if odd:
        add("cards.per_node", "warn", f"nodes {', '.join(odd)} have a card count other than n_gpus_per_node={per_node}")

    r_tp = _int(_ov(p, "actor_rollout_ref.rollout.tensor_model_parallel_size"), 1)
    r_dp = _ov(p, "actor_rollout_ref.rollout.data_parallel_size")
    if r_dp is not None:
        if r_tp * _int(r_dp, 1) != cards:
            add("rollout.parallel", "fail", f"rollout TP x DP = {r_tp} x {r_dp} = {r_tp * _int(r_dp, 1)}, cards in use = {cards}",
                "set actor_rollout_ref.rollout.data_parallel_size to cards / TP")
        else:
            add("rollout.parallel", "pass", f"rollout TP x DP = {r_tp} x {r_dp} = {cards}")
    elif cards % r_tp:
        add("rollout.parallel", "fail", f"rollout TP={r_tp} does not divide {cards} cards")

    pre = "actor_rollout_ref.actor.megatron."
    tp = _int(_ov(p, pre + "tensor_model_parallel_size"), 1)
    pp = _int(_ov(p, pre + "pipeline_model_parallel_size"), 1)
    cp = _int(_ov(p, pre + "context_parallel_size"), 1)
    mp = tp * pp * cp
    if cards % mp:
        add("actor.parallel", "fail", f"actor TP x PP x CP = {tp} x {pp} x {cp} = {mp} does not divide {cards} cards",
            "choose TP, PP, CP whose product divides the card count")
        dp = 0
    else:
        dp = cards // mp
        add("actor.parallel", "pass", f"actor TP x PP x CP = {mp}, data parallel = {dp}")

    layers = p.model.num_layers
    tc = pre + "override_transformer_config."
    uneven = any(_ov(p, tc + k) is not None for k in
                 ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"))
    if layers is None:
        add("actor.pipeline_layers", "warn", "model.num_layers is not in the profile: cannot check PP against it",
            "add model.num_layers (num_hidden_layers in the HF config.json)")
    elif layers % pp and not uneven:
        add("actor.pipeline_layers", "fail", f"the model has {layers} layers, which PP={pp} does not divide "
            f"(key {pre}pipeline_model_parallel_size)",
            f"use a PP that divides {layers} (e.g. {', '.join(str(d) for d in range(2, 13) if layers % d == 0 and cards % (d * tp * cp) == 0)}) "
            "or set num_layers_in_first/last_pipeline_stage")
    else:
        add("actor.pipeline_layers", "pass", f"{layers} layers over PP={pp}" + (" (uneven stages given)" if uneven else ""))

    bs = _int(_ov(p, "data.train_batch_size"), 0)
    n = _int(_ov(p, "actor_rollout_ref.rollout.n"), 1)
    mini = _int(_ov(p, "actor_rollout_ref.actor.ppo_mini_batch_size"), bs)
    if bs:
        problems = []
        if dp and (bs * n) % dp:
            problems.append(f"train_batch_size x n = {bs * n} is not divisible by the actor's data parallel size {dp}")
        if mini and bs % mini:
            problems.append(f"train_batch_size {bs} is not divisible by ppo_mini_batch_size {mini}")
        if problems:
            add("batch.divisible", "fail", "; ".join(problems), "adjust data.train_batch_size or the mini-batch")
        else:
            add("batch.divisible", "pass", f"batch {bs} x n {n} = {bs * n} splits over DP {dp or '?'} and mini-batch {mini}")

    pl = _int(_ov(p, "data.max_prompt_length"), 0)
    rl = _int(_ov(p, "data.max_response_length"), 0)
    if pl and rl:
        total = pl + rl
        ctx = p.model.max_position_embeddings
        if ctx and total > ctx:
            add("length.context", "fail", f"prompt + response = {total} tokens exceeds the model's context {ctx}",
                "lower data.max_response_length")
        else:
            add("length.context", "pass", f"prompt + response = {total} tokens" + (f" <= context {ctx}" if ctx else ""))
        budgets = ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
                   "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
                   "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"]
        low = [f"{k}={_ov(p, k)}" for k in budgets if _ov(p, k) is not None and _int(_ov(p, k), 0) < total]
        if low:
            add("length.token_budget", "fail", f"token budgets below prompt + response ({total}): {', '.join(low)}",
                "raise them to at least max_prompt_length + max_response_length")
        else:
            add("length.token_budget", "pass", f"token budgets >= {total}")

    ep = {k: _int(_ov(p, k), 1) for k in (pre + "expert_model_parallel_size",
                                          "actor_rollout_ref.ref.megatron.expert_model_parallel_size",
                                          "critic.megatron.expert_model_parallel_size")}
    ep_set = {k: v for k, v in ep.items() if v > 1}
    if ep_set and not p.model.moe:
        add("model.expert_parallel", "warn", "expert parallelism set for a dense model: "
            + ", ".join(f"{k}={v}" for k, v in ep_set.items()),
            "remove expert_model_parallel_size (model.moe is false)")
    else:
        add("model.expert_parallel", "pass", "no expert parallelism on a dense model" if not p.model.moe else "MoE model")

    mismatches = []
    if _ov(p, "actor_rollout_ref.model.path") not in (None, p.paths.hf_model):
        mismatches.append(f"actor_rollout_ref.model.path={_ov(p, 'actor_rollout_ref.model.path')} vs paths.hf_model={p.paths.hf_model}")
    for k in (pre + "dist_checkpointing_path", "actor_rollout_ref.ref.megatron.dist_checkpointing_path"):
        if _ov(p, k) not in (None, p.paths.mcore_checkpoint):
            mismatches.append(f"{k}={_ov(p, k)} vs paths.mcore_checkpoint={p.paths.mcore_checkpoint}")
    if mismatches:
        add("paths.consistent", "fail", "; ".join(mismatches), "point the overrides at the profile's paths")
    else:
        add("paths.consistent", "pass", "overrides use the profile's model and checkpoint paths")

    logger = _ov(p, "trainer.logger") or []
    if "tensorboard" not in (logger if isinstance(logger, list) else [logger]):
        add("monitor.tensorboard", "warn", "trainer.logger lacks tensorboard: the console gets no scalars, only the log")
    if not _loopback(p.ray.dashboard_host):
        add("ray.dashboard", "warn", f"dashboard bound to {p.ray.dashboard_host}: an unauthenticated job API "
            "(run any command on the cluster) reachable from the network",
            "bind it to 127.0.0.1; rlconsole reaches it through SSH")
    else:
        add("ray.dashboard", "pass", f"dashboard on {p.ray.dashboard_host}")
    from .actions.model import deletion_problem

    unsafe = deletion_problem(p)
    if unsafe:
        add("paths.mcore_checkpoint", "fail", f"`convert --force` deletes this directory, and would refuse: {unsafe}",
            "give paths.mcore_checkpoint its own directory, e.g. next to the model as <model>-mcore")
    return out


def _loopback(host: str) -> bool:
    """Whether a bind address is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to, probably not loopback


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
"""

COMPOSE_SCRIPT = r"""
import sys
from hydra import compose, initialize_config_dir
cfg_dir, name, *ov = sys.argv[1:]
name = name[:-5] if name.endswith(".yaml") else name
try:
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        compose(config_name=name, overrides=ov)
except Exception as e:
    print("ERROR:", " ".join(x.strip() for x in str(e).splitlines() if x.strip()) or repr(e))
    sys.exit(3)
print("OK")
"""

TC_SCRIPT = r"""
import dataclasses, sys
from megatron.core.transformer.transformer_config import TransformerConfig
names = {f.name for f in dataclasses.fields(TransformerConfig)}
print("MISSING:" + ",".join(k for k in sys.argv[1:] if k not in names))
"""

PARQUET_SCRIPT = r"""
import sys
try:
    import pyarrow.parquet as pq
except ImportError:
    print("NOPYARROW"); sys.exit(0)
for f in sys.argv[1:]:
    try:
        print(f"{f}\t{pq.ParquetFile(f).metadata.num_rows}")
    except Exception as e:
        print(f"{f}\tERROR {str(e).splitlines()[0] if str(e) else repr(e)}")
"""


async def live_checks(p: Profile, remote: Any, before_submit: bool = False) -> list[CheckResult]:
    from .actions.model import hf_missing, list_dir, mcore_missing
    from .actions.ray_setup import cluster_is_right, expected_gpus, ray_state
    from .parsers.detect import GPU_PROBE_SCRIPT, parse_probe_output
    from .parsers.docker import parse_docker_inspect
    from .render import entrypoint

    out: list[CheckResult] = []
    head = p.head.name
    py = p.training.python
    up = [n for n in p.nodes if remote.reachable(n.name)[0]]
    for n in p.nodes:
        ok, why = remote.reachable(n.name)
        out.append(CheckResult("ssh.reachable", "pass" if ok else "fail",
                               "reachable, host key verified" if ok else f"unreachable: {why}", node=n.name,
                               fix=None if ok else "check the address/port, and that its host key is in known_hosts"))

    async def container(n: Any) -> None:
        r = await remote.run(n.name, [*p.container.docker, "inspect", "--type", "container", p.container.name])
        st = parse_docker_inspect(r.output, p.container.name, r.rc)
        if st.status != "running":
            out.append(CheckResult("container.running", "fail", f"container {p.container.name} is {st.status}",
                                   "run `rlconsole containers`", n.name))
        elif st.image and st.image != p.container.image:
            out.append(CheckResult("container.image", "fail", f"runs image {st.image}, the profile says {p.container.image}",
                                   node=n.name))
        else:
            out.append(CheckResult("container.running", "pass", f"{p.container.name} running", node=n.name))

    async def cards(n: Any) -> None:
        r = await remote.run(n.name, ["sh", "-c", GPU_PROBE_SCRIPT], container=True, timeout=60)
        rep = parse_probe_output(r.stdout)
        if not rep.parsed:
            out.append(CheckResult("cards.count", "fail", f"card tool output not understood: {rep.error}", node=n.name))
            return
        if len(rep.cards) != n.gpus:
            out.append(CheckResult("cards.count", "fail", f"sees {len(rep.cards)} cards, the profile says {n.gpus}", node=n.name))
        else:
            out.append(CheckResult("cards.count", "pass", f"{n.gpus} cards ({rep.tool})", node=n.name))
        busy = [f"card {c.index}: pid {', '.join(str(x.pid) for x in c.processes)}" for c in rep.cards if c.processes]
        if busy:
            out.append(CheckResult("cards.free", "warn" if not before_submit else "fail",
                                   "busy with processes: " + "; ".join(busy), "stop what runs there", n.name))

    async def iface(n: Any) -> None:
        names = sorted({v for k, v in p.env.items() if k in ("MCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")})
        for name in names:
            r = await remote.run(n.name, ["sh", "-c", 'test -e "/sys/class/net/$1"', "sh", name.lstrip("=^")], container=True)
            out.append(CheckResult("net.interface", "pass" if r.ok else "fail",
                                   f"interface {name} {'exists' if r.ok else 'does not exist'}",
                                   None if r.ok else "set MCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to an interface of this node",
                                   n.name))

    paths = [x for x in [p.paths.verl, p.paths.megatron, p.paths.hf_model, p.paths.mcore_checkpoint,
                         p.paths.workdir, p.paths.data_dir] if x]

    async def storage(n: Any) -> None:
        r = await remote.run(n.name, ["sh", "-c", 'for d; do [ -e "$d" ] || echo "$d"; done', "sh", *paths], container=True)
        missing = [ln for ln in r.stdout.splitlines() if ln.strip()]
        out.append(CheckResult("storage.paths", "fail" if missing else "pass",
                               f"missing: {', '.join(missing)}" if missing else f"{len(paths)} profile paths exist",
                               "mount the shared storage / fix paths" if missing else None, n.name))

    async def shared() -> None:
        import secrets

        for root in p.paths.shared:
            token = secrets.token_hex(8)
            marker = f"{root.rstrip('/')}/.rlconsole-shared-check-{token}"
            w = await remote.run(head, ["sh", "-c", 'printf %s "$2" > "$1"', "sh", marker, token], container=True)
            if not w.ok:
                out.append(CheckResult("storage.shared", "fail", f"cannot write {marker} on {head}: {w.tail(1)}", node=head))
                continue
            try:
                bad = []
                for n in up:
                    if n.name == head:
                        continue
                    r = await remote.run(n.name, ["cat", marker], container=True)
                    if r.stdout != token:
                        bad.append(n.name)
                out.append(CheckResult("storage.shared", "fail" if bad else "pass",
                                       f"{root} is not shared with {', '.join(bad)} (a marker written on {head} is not seen there)"
                                       if bad else f"{root} is shared by every node",
                                       "mount the same NFS share on every node" if bad else None))
            finally:
                await remote.run(head, ["rm", "-f", marker], container=True)

    async def data() -> None:
        files = [*p.paths.train_files, *p.paths.val_files]
        r = await remote.run(head, [py, "-c", PARQUET_SCRIPT, *files], container=True, timeout=120)
        if "NOPYARROW" in r.stdout or not r.ok:
            rr = await remote.run(head, ["sh", "-c", 'for f; do [ -r "$f" ] || echo "$f"; done', "sh", *files], container=True)
            missing = [x for x in rr.stdout.splitlines() if x]
            out.append(CheckResult("data.files", "fail" if missing else "pass",
                                   f"missing: {', '.join(missing)}" if missing else f"{len(files)} data files present"))
            return
        bad, rows = [], []
        for line in r.stdout.splitlines():
            f, _, v = line.partition("\t")
            (bad if v.startswith("ERROR") else rows).append(f"{f.rsplit('/', 1)[-1]} ({v})")
        out.append(CheckResult("data.files", "fail" if bad else "pass",
                               ("unreadable: " + ", ".join(bad)) if bad else "parquet rows: " + ", ".join(rows)))

    async def model() -> None:
        m = hf_missing(await list_dir(remote, head, p.paths.hf_model))
        out.append(CheckResult("model.hf", "fail" if m else "pass",
                               f"{p.paths.hf_model} lacks {', '.join(m)}" if m else "HF model has config and weights",
                               "run `rlconsole model`" if m else None, head))
        c = mcore_missing(await list_dir(remote, head, p.paths.mcore_checkpoint))
        out.append(CheckResult("model.mcore", "fail" if c else "pass",
                               f"{p.paths.mcore_checkpoint} lacks {', '.join(c)}" if c else "MCore checkpoint complete",
                               "run `rlconsole convert`" if c else None, head))
        r = await remote.run(head, ["cat", f"{p.paths.hf_model}/config.json"], container=True)
        try:
            cfg = json.loads(r.stdout)
        except ValueError:
            return
        diffs = []
        if p.model.num_layers and cfg.get("num_hidden_layers") not in (None, p.model.num_layers):
            diffs.append(f"num_layers {p.model.num_layers} vs config.json {cfg.get('num_hidden_layers')}")
        if p.model.max_position_embeddings and cfg.get("max_position_embeddings") not in (None, p.model.max_position_embeddings):
            diffs.append(f"max_position_embeddings {p.model.max_position_embeddings} vs {cfg.get('max_position_embeddings')}")
        moe = any(k in cfg for k in ("num_experts", "num_local_experts", "n_routed_experts"))
        if moe != p.model.moe:
            diffs.append(f"moe {p.model.moe} vs config.json {'has' if moe else 'has no'} experts")
        out.append(CheckResult("model.facts", "fail" if diffs else "pass",
                               "profile model facts differ from config.json: " + "; ".join(diffs) if diffs
                               else "profile model facts match config.json", node=head))

    async def code() -> None:
        r = await remote.run(head, [py, "-c", DEBUG_SAVE_SCRIPT, p.paths.verl], container=True, timeout=120)
        hits = [x for x in r.stdout.splitlines() if x.strip()]
        out.append(CheckResult("code.debug_save", "fail" if hits else "pass",
                               "; ".join(hits[:3]) + (f" (+{len(hits) - 3} more)" if len(hits) > 3 else "") if hits
                               else "no torch.save to missing absolute paths in the VeRL tree",
                               "comment out these debug saves (seed appendix)" if hits else None, head))
        ov = [a for a in entrypoint(p) if "=" in a and not a.startswith("--")]
        env = ["env", f"PYTHONPATH={':'.join(x for x in (p.paths.megatron, p.paths.verl) if x)}"]
        r = await remote.run(head, [*env, py, "-c", COMPOSE_SCRIPT, p.training.config_path, p.training.config_name, *ov],
                             container=True, timeout=120)
        if "No module named 'hydra'" in r.output:
            out.append(CheckResult("code.overrides", "warn", "hydra is not importable on the head: overrides not composed", node=head))
        elif r.ok and "OK" in r.stdout:
            out.append(CheckResult("code.overrides", "pass", f"{len(ov)} overrides compose against {p.training.config_name}", node=head))
        else:
            msg = next((x for x in r.output.splitlines() if x.startswith("ERROR:")), r.tail(1))[6:].strip() or r.tail(1)
            fix = None
            if "Could not override" in msg:
                fix = ("the key is not in the config: if it is meant to be new, prefix it with + in the "
                       "profile (write it +key under its section); otherwise check its spelling")
            elif "Could not append to config. An item is already at" in msg:
                fix = "remove the + prefix: the key exists in the config"
            out.append(CheckResult("code.overrides", "fail", msg, fix, head))
        keys = [o.key.rsplit(".", 1)[-1] for o in p.training.overrides if ".override_transformer_config." in o.key]
        if keys:
            r = await remote.run(head, [*env, py, "-c", TC_SCRIPT, *keys], container=True, timeout=120)
            line = next((x for x in r.stdout.splitlines() if x.startswith("MISSING:")), None)
            if line is None:
                out.append(CheckResult("code.transformer_config", "warn",
                                       f"cannot import Megatron's TransformerConfig on the head: {r.tail(1)}", node=head))
            else:
                missing = [k for k in line[8:].split(",") if k]
                out.append(CheckResult("code.transformer_config", "fail" if missing else "pass",
                                       f"override_transformer_config keys TransformerConfig lacks: {', '.join(missing)}"
                                       if missing else f"{len(keys)} override_transformer_config keys exist", node=head))

    async def ray() -> None:
        st = await ray_state(p, remote)
        if not cluster_is_right(p, st):
            out.append(CheckResult("ray.cluster", "fail" if before_submit else "warn",
                                   f"Ray reports {st.nodes_alive}/{len(p.nodes)} nodes, {st.gpus_total:g}/{expected_gpus(p)} GPUs"
                                   + (f" ({st.error})" if st.error else ""), "run `rlconsole setup-ray`"))
            return
        out.append(CheckResult("ray.cluster", "pass", f"{st.nodes_alive} nodes, {st.gpus_total:g} GPUs"))
        try:
            from .actions.jobs import job_client, list_jobs

            jobs = await list_jobs(await job_client(remote))
        except Exception as e:  # noqa: BLE001
            out.append(CheckResult("ray.jobs", "warn", f"cannot list jobs: {e}"))
            return
        running = [j["id"] for j in jobs if j["status"] in ("PENDING", "RUNNING")]
        out.append(CheckResult("ray.jobs", ("fail" if before_submit else "warn") if running else "pass",
                               f"a job is running: {', '.join(running)}" if running else "no job running",
                               "stop it first (x)" if running else None))

    tasks: list[Awaitable[None]] = []
    for n in up:
        if p.container.access == "docker-exec":
            tasks.append(container(n))
        tasks += [cards(n), iface(n), storage(n)]
    if remote.reachable(head)[0]:
        tasks += [shared(), data(), model(), code(), ray()]
    await asyncio.gather(*tasks)
    return out


async def run_checks(p: Profile, remote: Any = None, static: bool = False,
                     before_submit: bool = False) -> list[CheckResult]:
    res = static_checks(p)
    if not static and remote is not None:
        res += await live_checks(p, remote, before_submit=before_submit)
    return res


def _print_results(results: list[CheckResult]) -> None:
    sym = {"pass": "ok  ", "warn": "WARN", "fail": "FAIL"}
    for r in results:
        where = f" [{r.node}]" if r.node else ""
        print(f"{sym[r.status]} {r.id}{where}: {r.message}")
        if r.fix and r.status != "pass":
            print(f"     fix: {r.fix}")
    nf = sum(r.status == "fail" for r in results)
    nw = sum(r.status == "warn" for r in results)
    print(f"{nf} failed, {nw} warnings, {len(results) - nf - nw} passed")


def run_check_cli(p: Profile, as_json: bool = False, static: bool = False) -> int:
    if static:
        results = static_checks(p)
    else:
        async def go() -> list[CheckResult]:
            from .actions.remote import PoolRemote
            from .ssh import SessionPool

            pool = SessionPool(p)
            try:
                await pool.open()
                return await run_checks(p, PoolRemote(pool, p))
            finally:
                await pool.close()

        results = asyncio.run(go())
    if as_json:
        print(json.dumps({"profile": p.name, "static": static,
                          "results": [r.to_json() for r in results],
                          "failed": sum(r.status == "fail" for r in results)}, indent=2))
    else:
        _print_results(results)
    return 1 if any(r.status == "fail" for r in results) else 0
