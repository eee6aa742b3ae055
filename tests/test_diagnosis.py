"""Diagnosis catalog on real message texts.

Every line in REAL below was printed by the software named in its comment (the source is
cited next to it, and in diagnosis.yaml); none is paraphrased. Each catalog entry must be
matched by at least one of them, so a signature cannot silently rot.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.samples import seed_text
from tui.core.alerts import Alert
from tui.core.diagnosis import (
    PACKAGED_CATALOG,
    CatalogError,
    Diagnoser,
    load_catalog,
    user_catalog_path,
)


# (expected signature id, real line)
REAL: list[tuple[str, str]] = [
    # seed appendix, 问题1 and 问题2, verbatim
    ("debug-torch-save",
     "RuntimeError: Parent directory /mnt/seed-program-nas/001688/kechun.wu/0226/tmp_pts does not exist."),
    ("debug-torch-save",
     "RuntimeError: Parent directory /mnt/seed-program-nas/001688/kechun.wu/0226 does not exist."),
    # torch_musa OOM, as reported (an index excerpt of a deployment failure summary)
    ("musa-oom", "torch.OutOfMemoryError: MUSA out of memory. Tried to allocate 896.00 MiB."),
    # torch_musa pinned-memory failure next to a MUSA OOM (S5000 test log in the index)
    ("musa-oom", "RuntimeError: musaHostAlloc failed: 2"),
    # PyTorch >= 2.5 CUDA caching allocator message
    ("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                 "capacity of 79.15 GiB of which 1.23 GiB is free."),
    # listed among sglang crash signatures
    ("cuda-oom", "RuntimeError: CUDA error: out of memory"),
    # sglang model_runner.init_memory_pool
    ("sglang-mem-fraction", "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
    # ray-project/ray PR #30312
    ("ray-oom-killer", "E                       ray.exceptions.OutOfMemoryError: Task was killed due to the node "
                       "running low on memory."),
    # WM-PO/WMPO issue #3 (raylet line)
    ("ray-oom-killer", "(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 2 Workers "
                       "(tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons "
                       "at node (ID: 8289f87b78d161ae21bf723c7c57838345a56248dd48a2c3f0d5ac73, IP: 172.24.0.226) over "
                       "the last time period."),
    # hiyouga/LlamaFactory issue #7396
    ("collective-timeout", "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
                           "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, "
                           "NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."),
    # torch_musa ProcessGroupMCCL.cpp handleException, verbatim string
    ("collective-timeout", "Some MCCL operations have failed or timed out. Due to the asynchronous nature of MUSA "
                           "kernels, subsequent GPU operations might run on corrupted/incomplete data."),
    # vllm-project/vllm issue #10523 (title)
    ("collective-error", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                         "ProcessGroupNCCL.cpp:1333, unhandled system error (run with NCCL_DEBUG=INFO for details), "
                         "NCCL version 2.18.1"),
    # sglang http_server.py health endpoint (as logged)
    ("sglang-unhealthy", "ERROR: Health check failed. Server couldn't get a response from detokenizer for last 20 "
                         "seconds."),
    # verl http_server_engine.launch_server_process
    ("sglang-unhealthy", "TimeoutError: Server failed to become healthy within timeout period"),
    ("sglang-unhealthy", "RuntimeError: Server process terminated unexpectedly during startup"),
    # verl-project/verl issue #1080 (title, both sentences on one line)
    ("hydra-override-missing-key",
     "hydra.errors.ConfigCompositionException: Could not override 'actor_rollout_ref.actor.fsdp_config.grad_offload'. "
     "To append to your config use +actor_rollout_ref.actor.fsdp_config.grad_offload=False"),
    # hydra-ecosystem/hydra issue #1457 (first line of the two-line message)
    ("hydra-override-missing-key", "Could not override 'new_key'."),
    # an index run log quoting Hydra
    ("hydra-append-existing-key",
     "Could not append to config. An item is already at 'rollout_manager.loss_mask_mode'."),
    # verl-project/verl issue #1919
    ("ray-actor-died", "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."),
    # RUC-NLPIR/Tool-Star issue #10
    ("ray-actor-died", "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task."),
    # verl-project/verl issue #4921
    ("ray-worker-died", "(raylet) A worker died or was killed while executing a task by an unexpected system error. "
                        "To troubleshoot the problem, check the logs for the dead worker."),
    # a checkpoint fault-injection log in the index
    ("no-space-left", "checkpoint write retry: [Errno 28] No space left on device"),
    # torch c10d socket.cpp, as reported
    ("address-in-use", "RuntimeError: The server socket has failed to listen on any local network address. The server "
                       "socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."),
    ("address-in-use", "ERROR 11-28 11:22:27 [multiproc_executor.py:743] torch.distributed.DistNetworkError: The server "
                       "socket has failed to listen on any local network address. port: 56065, useIpv6: false, code: -98, "
                       "name: EADDRINUSE, message: address already in use"),
    # listed among sglang crash signatures
    ("device-error", "CUDA error: an illegal memory access was encountered"),
    # CPython faulthandler
    ("segfault", "Fatal Python error: Segmentation fault"),
    # an index debugging note quoting VeRL's ResourcePoolManager
    ("gpus-unavailable", "ValueError: Total available GPUs 8.0 is less than total desired GPUs 16"),
    # VeRL rl_dataset.py, truncation='error' (message format from the source)
    ("prompt-too-long", "RuntimeError: Prompt length 1500 is longer than 1024."),
    # transformers from_pretrained on a missing / partial directory (message formats from the source)
    ("hf-model-missing", "OSError: Incorrect path_or_model_id: '/data/datapool/models/Qwen3-8B'. Please provide either "
                         "the path to a local folder or the repo_id of a model on the Hub."),
    ("hf-model-missing", "OSError: /data/datapool/models/Qwen3-8B does not appear to have a file named config.json. "
                         "Checkout 'https://huggingface.co//data/datapool/models/Qwen3-8B/tree/None' for available files."),
    # HF datasets load_dataset on a missing data file
    ("dataset-missing", "FileNotFoundError: Unable to find '/data/datapool/verl/musa_examples/data/aime_2024.parquet'"),
    # CPython's TypeError for an unknown dataclass field
    ("transformer-config-unknown-key",
     "TypeError: TransformerConfig.__init__() got an unexpected keyword argument 'moe_router_fusion'"),
    # VeRL >= 0.5 verl/models/mcore/config_converter.py check_and_construct_configs, through
    # warnings.warn (the message format from the source; the keys are the seed's)
    ("transformer-config-keys-dropped",
     "/data/datapool/verl/verl/models/mcore/config_converter.py:152: UserWarning: The following keys are not "
     "supported in the current Megatron version and will be removed: ['no_gradient_accumulation_fusion', 'swiglu']"),
    # Megatron-Core transformer_block.py / parallel_state.py / transformer_config.py and VeRL
    # megatron_workers.py / utils/config.py (message formats from the sources)
    ("megatron-pp-layers", "AssertionError: num_layers=36 should be divisible by config.pipeline_model_parallel_size=5"),
    ("megatron-world-size", "RuntimeError: world_size (32) is not divisible by 40"),
    ("megatron-world-size", "AssertionError: n_gpus (32) must be divisible by model_parallel_size (10) times "
                            "context_parallel_size (1)"),
    ("rollout-world-size", "AssertionError: rollout world_size: 32 is not divisible by infer_world_size: 64"),
    ("mcore-checkpoint-missing", "megatron.core.dist_checkpointing.core.CheckpointingException: /data/datapool/models/"
                                 "mcore is not a distributed checkpoint"),
    ("mcore-checkpoint-missing", "CheckpointingException: Common file /data/mcore/common.pt does not exist"),
    ("batch-size-divisible", "AssertionError: real_train_batch_size (24) must be divisible by minimal possible batch "
                             "size (32)"),
    ("batch-size-divisible", "ValueError: train_batch_size (8) must be >= actor.ppo_mini_batch_size (16)"),
    ("expert-parallel-dense", "ValueError: num_moe_experts must be non None to use expert-parallel."),
    # Ray's job supervisor (job_supervisor.py), a FAILED job's message after a SIGKILL
    ("driver-killed", "Job entrypoint command failed with exit code 137, last available logs (truncated to 20,000 "
                      "chars):"),
    # Ray's process watcher (process_watcher.py) after a raylet was SIGKILLed (a sim run's log)
    ("raylet-died", "(raylet) Raylet is terminated. Termination is unexpected. Possible reasons include: (1) SIGKILL "
                    "by the user or system OOM killer, (2) Invalid memory access from Raylet causing SIGSEGV or "
                    "SIGBUS, (3) Other termination signals. Last 20 lines of the Raylet logs:"),
    # OmegaConf omegaconf/nodes.py (a typed field given None), message from the source
    ("config-value-invalid", "omegaconf.errors.ValidationError: Non optional field cannot be assigned None"),
    # Hydra config_loader_impl.py (message format from the source, a VeRL config name)
    ("config-file-missing", "hydra.errors.MissingConfigException: Cannot find primary config 'ppo_megatron_trainer_demo'. "
                            "Check that it's in your config search path."),
    # vllm-project/vllm issue #16622 (title); numpy's message for a module built for numpy 1
    ("version-mismatch", "AttributeError: module 'ray' has no attribute 'is_initialized'"),
    ("version-mismatch", "A module that was compiled using NumPy 1.x cannot be run in NumPy 2.0.0 as it may crash."),
    # msr-fiddle/pipedream issue #76 (torchrun's wrapper after a bus error)
    ("launcher-child-failed", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"),
    # a VeRL run log in the index
    ("ray-task-error",
     "ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.actor_rollout_compute_log_prob() (pid=255612, "
     "ip=192.168.13.160, actor_id=f71fbc38cb982939986c20ce01000000, repr=<verl.single_controller.ray.base.WorkerDict "
     "object at 0x7f4ea5e9f490>)"),
]

# verl-project/verl issue #4303, verbatim head of a step line; issue #2566 tqdm line form
ORDINARY = [
    "(TaskRunner pid=2016251) step:19 - actor/entropy:0.09676892310380936 - actor/kl_loss:0.003263807069743052 - "
    "actor/kl_coef:0.001 - actor/pg_clipfrac:0.0009080496456590481 - actor/ppo_kl:-0.00018109444295077992 - "
    "actor/pg_clipfrac_lower:0.0 - actor/pg_loss:0.01952332048676908 - actor/grad_norm:0.050373204039674276 - "
    "perf/mfu/actor:0.042605288606521394 - perf/max_memory_allocated_gb:39.73102807998657 - "
    "perf/max_memory_reserved_gb:41.048828125 - perf/cpu_memory_used_gb:159.24848175048828 - actor/lr:3e-06 - "
    "training/global_step:19 - training/epoch:0 - critic/score/mean:0.880859375",
    "(TaskRunner pid=22358) Training Progress:   0%|          | 1/624 [01:53<19:36:45, 113.32s/it]",
    "(TaskRunner pid=2016251) Total training steps: 2710",
    "(WorkerDict pid=3120, ip=10.10.142.71) INFO 07-11 10:01:02 checkpoint saved to /data/datapool/ckpt/global_step_100",
]


@pytest.fixture
def diag() -> Diagnoser:
    return Diagnoser(user_catalog=False)


@pytest.mark.parametrize(("sig_id", "line"), REAL, ids=[f"{i}-{s}" for i, (s, _) in enumerate(REAL)])
def test_real_message_matches_its_signature(diag: Diagnoser, sig_id: str, line: str) -> None:
    f = diag.find(line, 7)
    assert f is not None, f"no signature matched {line!r}"
    assert f.signature.id == sig_id
    a = diag.match(line, 7)
    assert isinstance(a, Alert)
    assert a.source == "log" and a.line == 7 and a.level == f.signature.level
    assert a.message.startswith(f.title) and f.fix in a.message
    assert "{" not in a.message  # every placeholder substituted


def test_ray_prefix_and_ansi_colour_do_not_hide_a_match(diag: Diagnoser) -> None:
    line = ("\x1b[36m(WorkerDict pid=3120, ip=10.10.142.71)\x1b[0m RuntimeError: Parent directory "
            "/mnt/seed-program-nas/001688/kechun.wu/0226/tmp_pts does not exist. [repeated 7x across cluster]")
    f = diag.find(line, 0)
    assert f is not None and f.signature.id == "debug-torch-save"
    assert f.groups["dir"] == "/mnt/seed-program-nas/001688/kechun.wu/0226/tmp_pts"


def test_every_catalog_entry_has_a_real_text() -> None:
    """Each entry is named by a line below or by an excerpt of the tune set
    (tests/data/failures/): by the id it expects, or by the verdict on an excerpt that
    expects the entry's class."""
    from tests.diagnosis_score import TUNE, score

    ids = {s.id for s in load_catalog(PACKAGED_CATALOG)}
    named = {c.expected for c in score(TUNE).cases if isinstance(c.expected, str)}
    named |= {c.got_id for c in score(TUNE).cases if isinstance(c.expected, dict) and c.right}
    assert ids - {sid for sid, _ in REAL} - named == set()


def test_seed_appendix_texts_are_verbatim() -> None:
    seed = seed_text()
    for sid, line in REAL:
        if sid == "debug-torch-save":
            assert line in seed


def test_named_groups_substituted_in_fix(diag: Diagnoser) -> None:
    a = diag.match("hydra.errors.ConfigCompositionException: Could not override "
                   "'actor_rollout_ref.actor.fsdp_config.grad_offload'.", 3)
    assert a is not None and a.level == "error"
    assert "`+actor_rollout_ref.actor.fsdp_config.grad_offload=...`" in a.message
    a = diag.match("Could not append to config. An item is already at 'rollout_manager.loss_mask_mode'.", 4)
    assert a is not None
    assert "remove the `+` prefix" in a.message
    assert "`rollout_manager.loss_mask_mode=...`" in a.message
    f = diag.find("RuntimeError: Parent directory /mnt/seed-program-nas/001688/kechun.wu/0226 does not exist.", 9)
    assert f is not None
    assert "/mnt/seed-program-nas/001688/kechun.wu/0226" in f.fix
    assert "megatron_actor.py" in f.explanation and "ray_trainer.py" in f.explanation
    f = diag.find("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                  "NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), "
                  "NCCL version 2.21.5", 1)
    assert f is not None and f.title == "NCCL error: unhandled system error"
    assert "NCCL_DEBUG=INFO" in f.fix


def test_specific_before_generic(diag: Diagnoser) -> None:
    f = diag.find("torch.OutOfMemoryError: MUSA out of memory. Tried to allocate 896.00 MiB.", 0)
    assert f is not None and f.signature.id == "musa-oom"  # not cuda-oom
    f = diag.find("RuntimeError: CUDA error: out of memory", 0)
    assert f is not None and f.signature.id == "cuda-oom"  # not device-error


def test_dedup_one_alert_for_32_ranks(diag: Diagnoser) -> None:
    tb = "RuntimeError: Parent directory /mnt/seed-program-nas/001688/kechun.wu/0226/tmp_pts does not exist."
    alerts = []
    n = 0
    for rank in range(32):  # each rank prints a ~40-line traceback ending in the same error
        for k in range(40):
            n += 1
            line = f"(WorkerDict pid={1000 + rank}, ip=10.10.142.{71 + rank % 4}) " + (
                tb if k == 39 else f'  File "/data/datapool/verl/verl/x.py", line {k}, in f')
            a = diag.match(line, n)
            if a is not None:
                alerts.append(a)
    assert len(alerts) == 1
    # a different directory is a different incident (the second debug save)
    assert diag.match("RuntimeError: Parent directory /mnt/seed-program-nas/001688/kechun.wu/0226 does not exist.",
                      n + 1) is not None
    # after the window, the same incident is reported again
    assert diag.match(tb, n + 1 + diag.dedup_lines) is not None


def test_ordinary_lines_do_not_match(diag: Diagnoser) -> None:
    for i, line in enumerate(ORDINARY):
        assert diag.find(line, i) is None, line
        assert diag.match(line, i) is None


def test_prefilter_keeps_ordinary_lines_off_the_regexes(diag: Diagnoser) -> None:
    """Deterministic: no signature regex runs on an ordinary line."""
    import dataclasses

    class Boom:
        groupindex: dict[str, int] = {}

        def search(self, line: str) -> None:
            raise AssertionError(f"regex ran on {line!r}")

    diag.signatures = [dataclasses.replace(s, pattern=Boom()) for s in diag.signatures]  # type: ignore[arg-type]
    for i, line in enumerate(ORDINARY):
        assert diag.match(line, i) is None


def test_prefilter_is_cheap(diag: Diagnoser) -> None:
    """Coarse guard against a pathological regression (timings on shared CI boxes vary)."""
    lines = ORDINARY * 2500
    t0 = time.perf_counter()
    for i, line in enumerate(lines):
        diag.match(line, i)
    per_line = (time.perf_counter() - t0) / len(lines)
    assert per_line < 200e-6, per_line


def write(tmp: Path, text: str) -> Path:
    p = tmp / "diagnosis.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_user_catalog_extends_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLCONSOLE_CONFIG_DIR", str(tmp_path))
    assert user_catalog_path() == tmp_path / "diagnosis.yaml"
    write(tmp_path, """
version: 1
signatures:
  - id: mccl-ib
    level: warning
    keywords: [ib_timeout]
    pattern: 'IB_TIMEOUT=(?P<n>\\d+)'
    title: "IB timeout {n}"
    explanation: "x"
    fix: "raise MCCL_IB_TIMEOUT above {n}"
  - id: no-space-left
    level: warning
    pattern: 'No space left on device'
    title: "disk full (site rule)"
    explanation: "y"
    fix: "call the storage team"
""")
    d = Diagnoser()
    assert d.take_problems() == []
    a = d.match("(raylet) MCCL_IB_TIMEOUT=20 reached", 1)
    assert a is not None and a.level == "warning" and "raise MCCL_IB_TIMEOUT above 20" in a.message
    a = d.match("OSError: [Errno 28] No space left on device", 2)
    assert a is not None and a.message.startswith("disk full (site rule)")
    ids = [s.id for s in d.signatures]
    assert ids.index("no-space-left") < ids.index("ray-task-error")  # replaced in place
    assert ids[-1] == "mccl-ib"


@pytest.mark.parametrize("text", [
    "signatures: [ {id: x, level: error, pattern: '(unclosed', title: t, explanation: e, fix: f} ]",
    "signatures: [ {id: x, level: fatal, pattern: 'a', title: t, explanation: e, fix: f} ]",
    "signatures: [ {id: x, level: error, pattern: 'a', title: t, explanation: e} ]",
    "signatures: [ {id: x, level: error, pattern: 'a', title: t, explanation: e, fix: 'use {key}'} ]",
    "signatures: [ {id: x, level: error, pattern: 'a', title: t, explanation: e, fix: f, colour: red} ]",
    "signatures:\n  - id: x\n\tlevel: error\n",
    "signatures: 3",
    "version: 2\nsignatures: []",
])
def test_broken_user_catalog_is_reported_once_and_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          text: str) -> None:
    monkeypatch.setenv("RLCONSOLE_CONFIG_DIR", str(tmp_path))
    path = write(tmp_path, text)
    d = Diagnoser()  # must not raise
    problems = d.take_problems()
    assert len(problems) == 1
    assert problems[0].level == "warning" and str(path) in problems[0].message
    assert d.take_problems() == []  # once
    # the packaged catalog still works
    assert d.match("RuntimeError: Parent directory /mnt/x does not exist.", 1) is not None
    with pytest.raises(CatalogError):
        load_catalog(path)


def test_catalog_error_names_entry_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "signatures:\n  - {id: ok, level: error, pattern: a, title: t, explanation: e, fix: f}\n"
                           "  - {id: bad, level: error, pattern: a, title: t, explanation: e, fix: 'add +{key}'}\n")
    with pytest.raises(CatalogError) as e:
        load_catalog(path)
    msg = str(e.value)
    assert str(path) in msg and "signatures[2]" in msg and "'bad'" in msg and "'fix'" in msg and "{key}" in msg


def test_missing_user_catalog_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLCONSOLE_CONFIG_DIR", str(tmp_path / "nowhere"))
    d = Diagnoser()
    assert d.take_problems() == []
    assert [s.id for s in d.signatures] == [s.id for s in load_catalog(PACKAGED_CATALOG)]


def test_reset_forgets_incidents(diag: Diagnoser) -> None:
    line = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    assert diag.match(line, 1) is not None
    assert diag.match(line, 2) is None
    diag.reset()
    assert diag.match(line, 3) is not None
