"""SIMULATION stand-in for verl/utils/config.py: `validate_config`, run by the TaskRunner
before it loads anything, with the real checks and texts on the sizes a Megatron GRPO run
sets (volcengine/verl, verl/utils/config.py `validate_config` and
verl/workers/config/actor.py `ActorConfig.validate`).

Like the real one it checks the batch arithmetic only without dynamic batch sizes
(`actor.use_dynamic_bsz=False`): with them VeRL packs by tokens and the mini-batch need not
divide.
"""

from __future__ import annotations

from typing import Any

__all__ = ["validate_config"]


def validate_config(config: dict[str, Any]) -> None:
    """Raise AssertionError / ValueError exactly where VeRL does."""
    t = config["trainer"]
    n_gpus = int(t["n_gpus_per_node"]) * int(t["nnodes"])
    arr = config["actor_rollout_ref"]
    actor = arr["actor"]
    if not actor.get("use_dynamic_bsz", False):
        mg = actor.get("megatron", {}) or {}
        model_parallel_size = (int(mg.get("tensor_model_parallel_size", 1) or 1)
                               * int(mg.get("pipeline_model_parallel_size", 1) or 1))
        cp = int(mg.get("context_parallel_size", 1) or 1)
        assert n_gpus % (model_parallel_size * cp) == 0, (
            f"n_gpus ({n_gpus}) must be divisible by model_parallel_size ({model_parallel_size}) "
            f"times context_parallel_size ({cp})")
        megatron_dp = n_gpus // (model_parallel_size * cp)
        minimal_bsz = megatron_dp * int(actor.get("ppo_micro_batch_size_per_gpu") or 1)
        real_train_batch_size = int(config["data"]["train_batch_size"]) * int(arr["rollout"].get("n", 1))
        assert real_train_batch_size % minimal_bsz == 0, (
            f"real_train_batch_size ({real_train_batch_size}) must be divisible by minimal possible "
            f"batch size ({minimal_bsz})")
        train_batch_size = int(config["data"]["train_batch_size"])
        mini = int(actor.get("ppo_mini_batch_size") or 0)
        if train_batch_size < mini:
            raise ValueError(
                f"train_batch_size ({train_batch_size}) must be >= "
                f"actor.ppo_mini_batch_size ({mini})")
