#!/bin/bash
# Style: a variable that is never set (bash expands it to empty, silently).
# expect-unset: EXPERIMENT_NAME
# expect-unset: CKPT_ROOT
PROJECT=verl_grpo
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config --config-name=ppo_trainer \
    trainer.project_name=$PROJECT \
    trainer.experiment_name=$EXPERIMENT_NAME \
    trainer.default_local_dir="$CKPT_ROOT/ckpt" \
    actor_rollout_ref.model.path=/models/Qwen3-0.6B \
    data.train_files=/data/train.parquet \
    trainer.nnodes=1 trainer.n_gpus_per_node=2
