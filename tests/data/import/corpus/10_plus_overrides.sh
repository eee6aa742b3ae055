#!/bin/bash
# Style: +key= (add) and ++key= (add or override) overrides.
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config --config-name=ppo_megatron_trainer \
    actor_rollout_ref.model.path=/models/Qwen3-4B \
    data.train_files=/data/train.parquet \
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform \
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full \
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=1 \
    ++actor_rollout_ref.rollout.engine_kwargs.vllm.enable_prefix_caching=True \
    ++trainer.balance_batch=False \
    +data.seed=42 \
    trainer.nnodes=1 trainer.n_gpus_per_node=8
