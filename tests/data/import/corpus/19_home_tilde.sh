#!/bin/bash
# Style: $HOME, ${HOME}, ~ in words and in assignments.
export HF_HOME=~/.cache/huggingface
CKPT=~/checkpoints/run1
python3 -m verl.trainer.main_ppo \
    --config-path=$HOME/verl/verl/trainer/config --config-name=ppo_trainer \
    actor_rollout_ref.model.path=${HOME}/models/Qwen2.5-3B \
    data.train_files="$HOME"/data/train.parquet \
    trainer.default_local_dir=$CKPT \
    trainer.nnodes=1 trainer.n_gpus_per_node=8
