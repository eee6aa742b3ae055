#!/bin/bash
# Style: the seed's trap, a comment line inside the continuation.
# expect-dropped: actor_rollout_ref.actor.megatron.pipeline_model_parallel_size,actor_rollout_ref.actor.megatron.tensor_model_parallel_size,+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers,trainer.nnodes,trainer.n_gpus_per_node
HEAD_IP=10.0.0.1
RAY_ADDRESS="http://${HEAD_IP}:8265" ray job submit --no-wait \
    -- python3 -u -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config \
    --config-name=ppo_megatron_trainer \
    actor_rollout_ref.model.path=/models/Qwen3-8B \
    data.train_files=/data/train.parquet \
    # parallelism: PP=2, TP=4
    actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2 \
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4 \
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=4 \
    trainer.nnodes=2 \
    trainer.n_gpus_per_node=8
