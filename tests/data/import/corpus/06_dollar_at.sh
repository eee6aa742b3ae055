#!/bin/bash
# Style: "$@" at the end, so callers can add overrides (the profile cannot know them).
# expect-args: yes
set -e
MODEL=/models/Qwen2.5-0.5B-Instruct
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config \
    --config-name=ppo_trainer \
    actor_rollout_ref.model.path=$MODEL \
    data.train_files=/data/gsm8k/train.parquet \
    trainer.nnodes=1 \
    trainer.n_gpus_per_node=1 \
    "$@"
