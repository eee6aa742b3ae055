#!/bin/bash
# Style: --config-name='x'\ with no space before the backslash (the seed does this).
CONFIG_PATH=/opt/verl/verl/trainer/config
python3 -m verl.trainer.main_ppo \
    --config-path="$CONFIG_PATH" \
    --config-name='ppo_megatron_trainer.yaml'\
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.model.path=/models/Qwen3-8B\
    data.train_files=/data/train.parquet \
    trainer.nnodes=2 \
    trainer.n_gpus_per_node=8
