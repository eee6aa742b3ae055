"""The simulated cluster's stand-in code: modelscope, the converter, and VeRL's trainer.

These run the stand-ins exactly as the console runs the real programs (same command lines),
against a real local Ray head started here (`--num-gpus=8`), and check what the console
relies on: the output layouts, the messages, Hydra's real errors, the VeRL log format, real
TensorBoard event files, checkpoints, and the gpu-load files that make cards look busy.

The Ray head runs in its own session (setsid) and is stopped by signalling exactly the
processes of that session: `ray stop` would kill every Ray process on the machine, including
those of other tests running at the same time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import tempfile
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.sim.tree_install import install_sim_tree, set_debug_save

VENV_BIN = Path(sys.executable).parent
RAY_CLI = shutil.which("ray", path=str(VENV_BIN)) or shutil.which("ray")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
STEP_RE = re.compile(r"^\((?:TaskRunner|main_task) pid=(\d+)\) step:(\d+) - (.*)$")
VALUE_RE = re.compile(r"^np\.float(?:64|32)\((.*)\)$")
PREFIX_RE = re.compile(r"^\((?:TaskRunner|main_task) pid=\d+\) ")
BUSY_KEYS = {"pid", "util", "mem_mib", "name"}

# The reference run's overrides (seed section 7), paths replaced per test; `+` as the seed.
SEED_OVERRIDES = """
algorithm.adv_estimator=grpo
data.train_batch_size=64
data.max_prompt_length=1024
data.max_response_length=16384
data.filter_overlong_prompts=True
data.prompt_key=prompt
data.truncation=error
actor_rollout_ref.model.enable_activation_offload=True
actor_rollout_ref.model.enable_gradient_checkpointing=True
actor_rollout_ref.actor.optim.lr=1e-6
actor_rollout_ref.actor.ppo_mini_batch_size=64
actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1
actor_rollout_ref.actor.profiler.enable=False
actor_rollout_ref.actor.megatron.use_mbridge=False
actor_rollout_ref.actor.megatron.vanilla_mbridge=False
actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=8
actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1
actor_rollout_ref.actor.megatron.use_dist_checkpointing=True
actor_rollout_ref.actor.megatron.param_offload=True
+actor_rollout_ref.actor.megatron.override_transformer_config.apply_rope_fusion=True
+actor_rollout_ref.actor.megatron.override_transformer_config.masked_softmax_fusion=True
+actor_rollout_ref.actor.megatron.override_transformer_config.batch_p2p_comm=True
+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full
+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=block
+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=48
actor_rollout_ref.actor.use_dynamic_bsz=True
actor_rollout_ref.model.use_remove_padding=True
actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True
actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True
actor_rollout_ref.actor.ppo_max_token_len_per_gpu=17408
actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=17408
actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=17408
actor_rollout_ref.rollout.calculate_log_probs=True
+actor_rollout_ref.rollout.engine_kwargs.sglang.disable_radix_cache=True
+actor_rollout_ref.rollout.engine_kwargs.sglang.disable_cuda_graph=False
actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1
actor_rollout_ref.rollout.tensor_model_parallel_size=2
actor_rollout_ref.rollout.data_parallel_size=16
actor_rollout_ref.rollout.name=sglang
actor_rollout_ref.rollout.gpu_memory_utilization=0.6
actor_rollout_ref.rollout.n=8
actor_rollout_ref.rollout.temperature=0.8
actor_rollout_ref.rollout.top_k=100
actor_rollout_ref.rollout.top_p=0.95
actor_rollout_ref.rollout.val_kwargs.temperature=0.8
actor_rollout_ref.rollout.val_kwargs.top_k=50
actor_rollout_ref.rollout.val_kwargs.top_p=0.9
actor_rollout_ref.rollout.free_cache_engine=True
actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1
actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=1
actor_rollout_ref.ref.megatron.tensor_model_parallel_size=1
actor_rollout_ref.ref.megatron.expert_model_parallel_size=8
actor_rollout_ref.ref.megatron.use_dist_checkpointing=True
actor_rollout_ref.ref.megatron.sequence_parallel=False
algorithm.use_kl_in_reward=False
trainer.critic_warmup=0
trainer.logger=["console","tensorboard"]
trainer.project_name=verl_grpo_qwen3_8b
trainer.experiment_name=Qwen3-8B_megatron_sglang
trainer.n_gpus_per_node=8
trainer.val_before_train=False
trainer.nnodes=1
trainer.save_freq=7
trainer.test_freq=5
trainer.total_epochs=2
""".split()


# --------------------------------------------------------------------------- helpers
def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _session_pids(sid: int) -> list[int]:
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.getsid(int(p)) == sid:
                with open(f"/proc/{p}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        pids.append(int(p))
        except OSError:
            continue
    return pids


def _kill_session(sid: int, grace_s: float = 2.0) -> None:
    """Stop every process of one session (ours), TERM first, then KILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _session_pids(sid):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.time() + grace_s
        while time.time() < deadline and _session_pids(sid):
            time.sleep(0.1)
        if not _session_pids(sid):
            return


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _busy_cards(node_dir: Path) -> dict[int, dict]:
    out = {}
    for f in (node_dir / "gpu-load").glob("*.json"):
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if _pid_alive(int(rec.get("pid", -1))):
            out[int(f.stem)] = rec
    return out


def _parse_value(v: str) -> float:
    m = VALUE_RE.match(v)
    return float(m.group(1) if m else v)


def _parse_steps(text: str) -> list[tuple[int, dict[str, float]]]:
    """The step lines' metrics. A step line Ray's log streaming cut after a ` -` (seen in
    CI under load: `... - timing_s/adv:15.11 -`, the rest on the next line behind its own
    `(TaskRunner pid=N)` prefix) is joined with that next line first."""
    steps = []
    lines = [ANSI.sub("", raw).strip("\r") for raw in text.splitlines()]
    for i, line in enumerate(lines):
        m = STEP_RE.match(line)
        while m and line.endswith(" -") and i + 1 < len(lines):
            i += 1
            line = f"{line} {PREFIX_RE.sub('', lines[i]).strip()}"
            m = STEP_RE.match(line)
        if m:
            metrics = {}
            for part in m.group(3).split(" - "):
                k, _, v = part.partition(":")
                metrics[k] = _parse_value(v)
            steps.append((int(m.group(2)), metrics))
    return steps


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("datapool")
    paths = install_sim_tree(root, train_rows=640, val_rows=30)
    models = root / "models"
    models.mkdir()
    paths["hf_model"] = models / "Qwen3-8B"
    paths["mcore"] = models / "Qwen3-8B-MCore"
    return paths


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RLCONSOLE_SIM_", "RAY_", "TENSORBOARD_DIR"))}
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def model_ready(shared: dict[str, Path]) -> dict[str, Path]:
    """The HF model downloaded and converted with the stand-ins (what model/convert do)."""
    env = _env(RLCONSOLE_SIM_DOWNLOAD_S="0.1", RLCONSOLE_SIM_CONVERT_S="0.1")
    subprocess.run([str(shared["modelscope"]), "download", "--model", "Qwen/Qwen3-8B",
                    "--local_dir", str(shared["hf_model"])], env=env, check=True,
                   capture_output=True, timeout=60)
    subprocess.run([sys.executable, str(shared["converter"]), "--hf_model_path",
                    str(shared["hf_model"]), "--output_path", str(shared["mcore"])],
                   env=env, check=True, capture_output=True, timeout=60)
    return shared


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """A real one-node Ray 'cluster' with 8 declared GPUs, like one simulated node."""
    if RAY_CLI is None:
        pytest.skip("the ray CLI is not installed")
    # Ray's socket paths must fit in 107 bytes: pytest's (and xdist's) temp paths are
    # too deep, so the Ray temp dir lives in a short directory of its own.
    base = Path(tempfile.mkdtemp(prefix="rlc-ray-", dir="/tmp"))
    node_dir = base / "node"
    node_dir.mkdir()
    temp_dir = base / "ray"
    port, agent, client = _free_ports(3)
    env = _env(RLCONSOLE_SIM_NODE_DIR=str(node_dir), RLCONSOLE_SIM_NODE="node0")
    cmd = [RAY_CLI, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
           "--num-gpus=8", "--num-cpus=2", f"--temp-dir={temp_dir}",
           # No dashboard: nothing here uses the job API, and it is the heaviest process.
           "--include-dashboard=false",
           f"--dashboard-agent-listen-port={agent}", f"--ray-client-server-port={client}",
           "--object-store-memory=100000000", "--disable-usage-stats"]
    # Own session: every Ray process started from here keeps this session id.
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    sid = proc.pid
    try:
        out, _ = proc.communicate(timeout=90)
        if proc.returncode != 0:
            pytest.fail(f"ray start failed ({proc.returncode}):\n{out[-3000:]}")
        yield {"address": f"127.0.0.1:{port}", "node_dir": node_dir, "sid": sid}
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_session(sid)
        shutil.rmtree(base, ignore_errors=True)


def _trainer_cmd(paths: dict[str, Path], *extra: str, config_name: str =
                 "ppo_megatron_trainer_demo.yaml") -> list[str]:
    data = paths["data_dir"]
    return [
        sys.executable, "-u", "-m", "verl.trainer.main_ppo",
        f"--config-path={paths['config_path']}", f"--config-name={config_name}",
        *SEED_OVERRIDES,
        f"data.train_files={data / 'amt_math17k_d_qweninstruct.parquet'}",
        f"data.val_files=['{data / 'aime_2024.parquet'}','{data / 'aime_2025.parquet'}']",
        f"actor_rollout_ref.model.path={paths['hf_model']}",
        f"actor_rollout_ref.actor.megatron.dist_checkpointing_path={paths['mcore']}",
        f"actor_rollout_ref.ref.megatron.dist_checkpointing_path={paths['mcore']}",
        # The seed's PP=8 does not divide Qwen3-8B's 36 layers and its rollout TP 2 x DP 16 is
        # for 32 cards: Megatron and VeRL refuse both (see test_trainer_refuses); a layout
        # that fits 2 or 8 cards.
        *LAYOUT_2_OR_8_CARDS,
        *extra,
    ]


LAYOUT_2_OR_8_CARDS = ("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
                       "actor_rollout_ref.rollout.data_parallel_size=1")


def _trainer_env(paths: dict[str, Path], ray_head: dict[str, object], tb: Path,
                 **extra: str) -> dict[str, str]:
    return _env(RAY_ADDRESS=str(ray_head["address"]), TENSORBOARD_DIR=str(tb),
                PYTHONPATH=f"{paths['megatron']}:{paths['verl']}",
                PYTHONUNBUFFERED="1", **extra)


# --------------------------------------------------------------------------- install
def test_install_layout(shared: dict[str, Path]) -> None:
    import pyarrow.parquet as pq

    assert (shared["verl_package"] / "__init__.py").read_text().count("SIMULATION")
    assert shared["config_path"] == shared["root"] / "verl" / "verl" / "trainer" / "config"
    for name in ("ppo_megatron_trainer.yaml", "ppo_megatron_trainer_demo.yaml"):
        assert (shared["config_path"] / name).is_file()
    assert os.access(shared["modelscope"], os.X_OK)
    assert shared["converter"].is_file()
    assert pq.ParquetFile(shared["train_file"]).metadata.num_rows == 640
    for key in ("val_file_2024", "val_file_2025"):
        t = pq.read_table(shared[key])
        assert t.num_rows == 30
        assert {"prompt", "data_source", "reward_model"} <= set(t.column_names)
        assert t.column("prompt").to_pylist()[0][0]["role"] == "user"
    # Not laid out: what the `model` and `convert` actions produce.
    assert not shared["hf_model"].exists() and not shared["mcore"].exists()
    # The Megatron stand-in: real field names, and the seed's CLI-only keys absent.
    src = shared["transformer_config"].read_text()
    for field in ("apply_rope_fusion", "masked_softmax_fusion", "recompute_granularity",
                  "recompute_method", "recompute_num_layers", "attention_softmax_in_fp32",
                  "batch_p2p_comm", "gradient_accumulation_fusion"):
        assert re.search(rf"^    {field}:", src + (shared["megatron"] / "megatron" / "core"
                                                     / "model_parallel_config.py").read_text(),
                         re.M), field
    assert not re.search(r"^    no_gradient_accumulation_fusion:", src, re.M)


def test_debug_save_plant_and_fix(tmp_path: Path) -> None:
    paths = install_sim_tree(tmp_path / "dp", plant_debug_save=True, train_rows=64, val_rows=4)
    trainer = paths["ray_trainer"].read_text()
    actor = paths["megatron_actor"].read_text()
    assert re.search(r"^\s+torch\.save\(batch,p\)$", trainer, re.M)
    assert re.search(r"^\s+p = '/mnt/seed-program-nas/001688/kechun.wu/0226/30b_gen", trainer,
                     re.M)
    assert re.search(r"^\s+if torch\.distributed\.get_rank\(\) in \[0,1,2\]:", actor, re.M)
    assert "/mnt/seed-program-nas/001688/kechun.wu/0226/tmp_pts/" in actor
    set_debug_save(paths["verl"], planted=False)
    assert not re.search(r"^\s+torch\.save\(", paths["ray_trainer"].read_text(), re.M)
    assert not re.search(r"^\s+torch\.save\(", paths["megatron_actor"].read_text(), re.M)
    assert "# DEBUG: Commented out for production training" in paths["megatron_actor"].read_text()
    # Re-installing without the flag keeps/returns the fixed form (idempotent).
    install_sim_tree(tmp_path / "dp", train_rows=64, val_rows=4)
    assert not re.search(r"^\s+torch\.save\(", paths["ray_trainer"].read_text(), re.M)


# --------------------------------------------------------------------------- modelscope
def test_modelscope_download(shared: dict[str, Path], tmp_path: Path) -> None:
    dest = tmp_path / "Qwen3-8B"
    cmd = [str(shared["modelscope"]), "download", "--model", "Qwen/Qwen3-8B",
           "--local_dir", str(dest)]
    env = _env(RLCONSOLE_SIM_DOWNLOAD_S="0.2")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Downloading [config.json]" in r.stdout
    cfg = json.loads((dest / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 36 and cfg["hidden_size"] == 4096
    assert cfg["num_attention_heads"] == 32 and cfg["num_key_value_heads"] == 8
    assert cfg["intermediate_size"] == 12288 and cfg["max_position_embeddings"] == 40960
    assert cfg["vocab_size"] == 151936 and cfg["model_type"] == "qwen3"
    assert cfg["architectures"] == ["Qwen3ForCausalLM"] and cfg["torch_dtype"] == "bfloat16"
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        json.loads((dest / f).read_text())
    index = json.loads((dest / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert shards == [f"model-0000{i}-of-00005.safetensors" for i in range(1, 6)]
    assert len(index["weight_map"]) == 36 * 11 + 3
    for s in shards:  # valid safetensors: header length, JSON header naming the tensors
        raw = (dest / s).read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n])
        assert {k for k, v in index["weight_map"].items() if v == s} == set(header) - {
            "__metadata__"}
    # Idempotent: a second run downloads nothing.
    r2 = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r2.returncode == 0 and "Downloading [" not in r2.stdout
    # Failure injection.
    r3 = subprocess.run([*cmd[:-1], str(tmp_path / "broken")],
                        env=_env(RLCONSOLE_SIM_DOWNLOAD_FAIL="1", RLCONSOLE_SIM_DOWNLOAD_S="0"),
                        capture_output=True, text=True, timeout=60)
    assert r3.returncode == 1 and "simulated download failure" in r3.stderr


# --------------------------------------------------------------------------- converter
def _convert(shared: dict[str, Path], hf: Path, out: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-u", str(shared["converter"]), "--hf_model_path", str(hf),
         "--output_path", str(out)],
        env=_env(PYTHONPATH=f"{shared['megatron']}:{shared['verl']}",
                 RLCONSOLE_SIM_CONVERT_S="0.2", **env),
        capture_output=True, text=True, timeout=60)


def test_converter(model_ready: dict[str, Path], tmp_path: Path) -> None:
    hf = model_ready["hf_model"]
    out = tmp_path / "mcore"
    r = _convert(model_ready, hf, out)
    assert r.returncode == 0, r.stderr
    assert "Qwen3Config" in r.stdout and "converting layer 36/36" in r.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        ".metadata", "__0_0.distcp", "__0_1.distcp", "common.pt", "metadata.json"]
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}

    r = _convert(model_ready, hf, out)  # non-empty output: skipped, like the real one
    assert r.returncode == 0
    assert f"Output path {out} is not empty, skipping conversion" in r.stdout
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before

    r = _convert(model_ready, hf, tmp_path / "fail", RLCONSOLE_SIM_CONVERT_FAIL="1")
    assert r.returncode == 1 and "RLCONSOLE_SIM_CONVERT_FAIL" in r.stderr
    assert list((tmp_path / "fail").iterdir()) == []  # created, left empty

    r = _convert(model_ready, hf, tmp_path / "partial", RLCONSOLE_SIM_CONVERT_PARTIAL="1")
    assert r.returncode == 1 and "No space left on device" in r.stderr
    names = {p.name for p in (tmp_path / "partial").iterdir()}
    assert names and ".metadata" not in names and "__0_1.distcp" not in names
    r = _convert(model_ready, hf, tmp_path / "partial")  # half-written stays half-written
    assert "is not empty, skipping conversion" in r.stdout

    r = _convert(model_ready, tmp_path / "no-such-model", tmp_path / "x")
    assert r.returncode == 1 and "Incorrect path_or_model_id" in r.stderr
    incomplete = tmp_path / "incomplete"
    shutil.copytree(hf, incomplete)
    (incomplete / "model-00003-of-00005.safetensors").unlink()
    r = _convert(model_ready, incomplete, tmp_path / "y")
    assert r.returncode == 1 and "model-00003-of-00005.safetensors" in r.stderr


# --------------------------------------------------------------------------- hydra
@pytest.mark.parametrize(("override", "message"), [
    ("actor_rollout_ref.actor.megatron.override_transformer_config.swiglu=True",
     "Could not override 'actor_rollout_ref.actor.megatron.override_transformer_config.swiglu'."
     "\nTo append to your config use "
     "+actor_rollout_ref.actor.megatron.override_transformer_config.swiglu=True"),
    ("+trainer.nnodes=4", "Could not append to config. An item is already at 'trainer.nnodes'."),
])
def test_hydra_override_errors(shared: dict[str, Path], tmp_path: Path, override: str,
                               message: str) -> None:
    cmd = [sys.executable, "-u", "-m", "verl.trainer.main_ppo",
           f"--config-path={shared['config_path']}",
           "--config-name=ppo_megatron_trainer_demo.yaml", "trainer.total_epochs=1", override]
    from tui.core.alerts import diagnose_tail_finding

    r = subprocess.run(cmd, cwd=tmp_path, env=_env(PYTHONPATH=str(shared["verl"])),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert message in r.stderr + r.stdout
    f = diagnose_tail_finding((r.stdout + r.stderr).splitlines(), 0)
    want = "hydra-append-existing-key" if override.startswith("+") else "hydra-override-missing-key"
    assert f is not None and f.signature.id == want


# --------------------------------------------------------------------------- trainer
@pytest.mark.integration
def test_trainer_run(model_ready: dict[str, Path], ray_head: dict[str, object],
                     tmp_path: Path) -> None:
    node_dir = Path(str(ray_head["node_dir"]))
    tb, ckpt = tmp_path / "tb", tmp_path / "ckpt"
    cmd = _trainer_cmd(model_ready, f"trainer.default_local_dir={ckpt}")
    env = _trainer_env(model_ready, ray_head, tb, RLCONSOLE_SIM_STEP_S="0.05")
    log = tmp_path / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        busy: dict[int, dict] = {}
        try:
            deadline = time.time() + 90
            while proc.poll() is None and time.time() < deadline:
                cards = _busy_cards(node_dir)
                if len(cards) > len(busy):
                    busy = cards
                time.sleep(0.05)
            rc = proc.wait(timeout=max(1.0, deadline - time.time()))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert rc == 0, text[-4000:]

    # Cards were busy while it ran (8 of them, each file complete), and are free after.
    assert sorted(busy) == list(range(8)), busy
    assert all(set(r) == BUSY_KEYS and 0 <= r["util"] <= 100 and r["mem_mib"] > 0
               for r in busy.values())
    assert _busy_cards(node_dir) == {}
    assert list((node_dir / "gpu-load").glob("*.json")) == []

    # The log: total steps, 20 step lines in order, Ray's own TaskRunner prefix.
    plain = ANSI.sub("", text)
    assert re.search(r"^\(TaskRunner pid=\d+\) Total training steps: 20$", plain, re.M)
    assert "Training Progress:" in plain
    steps = _parse_steps(text)
    assert [s for s, _ in steps] == list(range(1, 21))
    first = steps[0][1]
    for key in ("actor/pg_loss", "actor/entropy", "actor/grad_norm", "actor/lr",
                "critic/score/mean", "critic/rewards/mean", "critic/advantages/mean",
                "response_length/mean", "response_length/max", "response_length/clip_ratio",
                "prompt_length/mean", "perf/mfu/actor", "perf/throughput",
                "perf/total_num_tokens", "perf/time_per_step", "perf/max_memory_allocated_gb",
                "perf/max_memory_reserved_gb", "timing_s/gen", "timing_s/update_actor",
                "timing_s/step", "training/global_step", "training/epoch"):
        assert key in first, key
    assert "actor/entropy:np.float64(" in plain
    assert 0.2 <= first["perf/mfu/actor"] <= 0.4
    assert 60 <= first["perf/throughput"] <= 130  # tokens/s per card: 500-1000 per node
    assert first["actor/lr"] == 1e-6
    rewards = [m["critic/score/mean"] for _, m in steps]
    assert sum(rewards[-5:]) / 5 > sum(rewards[:5]) / 5 + 0.1  # reward rises
    val_steps = [s for s, m in steps if "val-core/aime_2024/reward/mean@1" in m]
    assert val_steps == [5, 10, 15, 20]
    assert [m["training/epoch"] for _, m in steps] == [0] * 10 + [1] * 10

    # Checkpoints every 7 steps and at the end.
    assert sorted(p.name for p in ckpt.glob("global_step_*")) == [
        "global_step_14", "global_step_20", "global_step_7"]
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "20"
    assert (ckpt / "global_step_20" / "actor" / "dist_ckpt" / ".metadata").is_file()

    # Real TensorBoard event files with the same scalars at the same steps.
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    files = list(tb.glob("events.out.tfevents.*"))
    assert len(files) == 1
    seen: dict[str, list[int]] = {}
    for ev in EventFileLoader(str(files[0])).Load():
        for v in ev.summary.value:
            seen.setdefault(v.tag, []).append(ev.step)
    assert seen["critic/score/mean"] == list(range(1, 21))
    assert seen["val-core/aime_2025/reward/mean@1"] == [5, 10, 15, 20]
    assert set(first) <= set(seen)


@pytest.mark.integration
def test_low_throughput_slows_every_figure_alike(model_ready: dict[str, Path], ray_head: dict[str, object],
                                                 tmp_path: Path) -> None:
    """`sim fault low-throughput` (issue 36, major 7): the modelled cards are F times slower,
    so the figures follow from one another: each step takes F times as long on the wall
    clock (the sleeps are a floor load cannot lower) and in `timing_s/step`, the tokens a
    second fall by F and the MFU with them (out of its range), not the throughput alone."""
    from tui.sim.sim_ranges import perf_model

    P = perf_model()
    F, step_s, at = P.LOW_THROUGHPUT_FACTOR, 0.2, 14
    # The trainer loop runs in Ray's TaskRunner actor, whose environment is the raylet's:
    # its sim dir is the node dir's grandparent (RLCONSOLE_SIM_NODE_DIR), as on the sim.
    fault = Path(str(ray_head["node_dir"])).parent.parent / "fault.json"
    fault.write_text(json.dumps({"kind": "low-throughput", "node": None, "at_step": at}))
    cmd = _trainer_cmd(model_ready, f"trainer.default_local_dir={tmp_path / 'ckpt'}", "trainer.test_freq=-1",
                       "trainer.save_freq=-1")
    env = _trainer_env(model_ready, ray_head, tmp_path / "tb", RLCONSOLE_SIM_STEP_S=str(step_s))
    log = tmp_path / "run.log"
    seen: dict[int, float] = {}  # step -> when its line was first seen
    with open(log, "w") as out, contextlib.ExitStack() as undo:
        undo.callback(fault.unlink, missing_ok=True)  # the module's other runs are healthy
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.time() + 180
            while proc.poll() is None and time.time() < deadline:
                for s_, _ in _parse_steps(log.read_text()):
                    seen.setdefault(s_, time.monotonic())
                time.sleep(0.02)
            rc = proc.wait(timeout=max(1.0, deadline - time.time()))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 0, log.read_text()[-4000:]
    steps = dict(_parse_steps(log.read_text()))
    before = [steps[s_] for s_ in range(2, at)]
    after = [steps[s_] for s_ in range(at, 21)]

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    # tokens a second per card and the modelled step time per token: F times apart (the
    # per-step token counts and the tokens/s draw vary, hence the band)
    tput = med(before, "perf/throughput") / med(after, "perf/throughput")
    per_tok = statistics.median(r["timing_s/step"] / r["perf/total_num_tokens"] for r in after) / \
        statistics.median(r["timing_s/step"] / r["perf/total_num_tokens"] for r in before)
    assert F / 1.6 <= tput <= F * 1.6 and F / 1.6 <= per_tok <= F * 1.6, (tput, per_tok)
    # MFU: the actor's healthy draw, then that draw / F (below the sim profile's floor)
    assert all(P.MFU_CLIP[0] <= r["perf/mfu/actor"] <= P.MFU_CLIP[1] for r in before)
    assert all(r["perf/mfu/actor"] <= P.MFU_CLIP[1] / F + 1e-9 for r in after)
    # the wall clock: every slowed step at least F x the phases' sleeps
    wall = step_s * (P.WALL_GEN + P.WALL_LOGPROB + sum(P.WALL_UPDATE))
    gaps = [seen[s_ + 1] - seen[s_] for s_ in range(at, 20)]
    assert min(gaps) >= 0.9 * F * wall, gaps


@pytest.mark.integration
def test_trainer_sigterm_frees_cards(model_ready: dict[str, Path], ray_head: dict[str, object],
                                     tmp_path: Path) -> None:
    node_dir = Path(str(ray_head["node_dir"]))
    cmd = _trainer_cmd(model_ready, f"trainer.default_local_dir={tmp_path / 'ckpt'}",
                       "trainer.n_gpus_per_node=2")
    env = _trainer_env(model_ready, ray_head, tmp_path / "tb", RLCONSOLE_SIM_STEP_S="0.3",
                       RLCONSOLE_SIM_WORKERS="gpu")
    log = tmp_path / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.time() + 60
            while time.time() < deadline and not _parse_steps(log.read_text()):
                assert proc.poll() is None, log.read_text()[-3000:]
                time.sleep(0.1)
            cards = _busy_cards(node_dir)
            assert len(cards) == 2
            assert len({r["pid"] for r in cards.values()}) == 2  # one worker per card
            t0 = time.time()
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=10)
            took = time.time() - t0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 143, log.read_text()[-3000:]
    assert took < 3.0  # Ray SIGKILLs a stopped job's driver after 3 s
    assert list((node_dir / "gpu-load").glob("*.json")) == []
    assert "Traceback" not in log.read_text()


@pytest.mark.integration
def test_planted_debug_save_fails_like_the_seed(model_ready: dict[str, Path],
                                                ray_head: dict[str, object],
                                                tmp_path: Path) -> None:
    planted = install_sim_tree(tmp_path / "dp", plant_debug_save=True, train_rows=128,
                               val_rows=4)
    planted.update(hf_model=model_ready["hf_model"], mcore=model_ready["mcore"])
    node_dir = Path(str(ray_head["node_dir"]))
    cmd = _trainer_cmd(planted, f"trainer.default_local_dir={tmp_path / 'ckpt'}")
    # The driver-side loop (used when no Ray log monitor runs) must look the same.
    env = _trainer_env(planted, ray_head, tmp_path / "tb", RLCONSOLE_SIM_STEP_S="0.05",
                       RLCONSOLE_SIM_TASKRUNNER="driver")
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90,
                       start_new_session=True)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]
    assert ("RuntimeError: Parent directory /mnt/seed-program-nas/001688/kechun.wu/0226 "
            "does not exist.") in out
    assert re.search(r"^\(TaskRunner pid=\d+\) Total training steps: 4$", out, re.M)
    assert not _parse_steps(out)  # it fails in the first step, before any step line
    assert list((node_dir / "gpu-load").glob("*.json")) == []


# --------------------------------------------------------------------------- refusals
# Each: the overrides (after the seed's and the layout above), a text the real stack prints
# (from its source, see the stand-in files), and the diagnosis catalog id that must name it.
# (tests/test_sim_faults.py runs one refusal per start-up stage end to end on the sim: Hydra,
# real_train_batch_size, a missing dataset, PP vs layers; the rest are here.)
REFUSALS = [
    ("world-size", ["actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3"],
     "RuntimeError: world_size (8) is not divisible by 6", "megatron-world-size"),
    ("world-size-static", ["actor_rollout_ref.actor.use_dynamic_bsz=False",
                           "actor_rollout_ref.actor.megatron.context_parallel_size=3"],
     "AssertionError: n_gpus (8) must be divisible by model_parallel_size (2) times context_parallel_size (3)",
     "megatron-world-size"),
    ("rollout-tp-dp", ["actor_rollout_ref.rollout.data_parallel_size=16"],
     "AssertionError: rollout world_size: 8 is not divisible by infer_world_size: 32", "rollout-world-size"),
    ("mcore-missing", ["actor_rollout_ref.actor.megatron.dist_checkpointing_path=/nonexistent/mcore"],
     "CheckpointingException: Checkpoint directory /nonexistent/mcore does not exist",
     "mcore-checkpoint-missing"),
    ("mcore-partial", ["actor_rollout_ref.actor.megatron.dist_checkpointing_path={partial}"],
     "CheckpointingException: Common file {partial}/common.pt does not exist", "mcore-checkpoint-missing"),
    ("hf-missing", ["actor_rollout_ref.model.path=/nonexistent/Qwen3-8B"],
     "OSError: Incorrect path_or_model_id: '/nonexistent/Qwen3-8B'", "hf-model-missing"),
    ("batch-mini", ["actor_rollout_ref.actor.use_dynamic_bsz=False", "data.train_batch_size=32"],
     "ValueError: train_batch_size (32) must be >= actor.ppo_mini_batch_size (64)", "batch-size-divisible"),
    ("ep-dense", ["actor_rollout_ref.actor.megatron.expert_model_parallel_size=2"],
     "ValueError: num_moe_experts must be non None to use expert-parallel.", "expert-parallel-dense"),
]


@pytest.mark.integration
@pytest.mark.parametrize(("extra", "message", "sig_id"), [r[1:] for r in REFUSALS],
                         ids=[r[0] for r in REFUSALS])
def test_trainer_refuses(model_ready: dict[str, Path], ray_head: dict[str, object], tmp_path: Path,
                         extra: list[str], message: str, sig_id: str) -> None:
    """What Megatron / VeRL / transformers / datasets refuse at start, the stand-in refuses with
    the same text, before any step, leaving no card busy; the diagnosis names it."""
    from tui.core.alerts import diagnose_tail_finding

    node_dir = Path(str(ray_head["node_dir"]))
    partial = tmp_path / "partial-mcore"  # a conversion that stopped after the metadata
    partial.mkdir()
    for name in ("metadata.json", ".metadata"):
        shutil.copy(model_ready["mcore"] / name, partial / name)
    extra = [e.replace("{partial}", str(partial)) for e in extra]
    message = message.replace("{partial}", str(partial))
    cmd = _trainer_cmd(model_ready, f"trainer.default_local_dir={tmp_path / 'ckpt'}", *extra)
    env = _trainer_env(model_ready, ray_head, tmp_path / "tb", RLCONSOLE_SIM_STEP_S="0.05",
                       RLCONSOLE_SIM_TASKRUNNER="driver")
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                       start_new_session=True)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]
    assert message in out, out[-3000:]
    assert not _parse_steps(out)
    f = diagnose_tail_finding(out.splitlines(), 0)
    assert f is not None and f.signature.id == sig_id, (f and f.signature.id, out[-2000:])
    assert list((node_dir / "gpu-load").glob("*.json")) == []
