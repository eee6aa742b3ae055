#!/bin/bash
# Style: quoted Hydra lists built from variables, and the usual logger lists.
DATA=/data/datasets
gsm8k_train=$DATA/gsm8k/train.parquet
math_train=$DATA/math/train.parquet
gsm8k_test=$DATA/gsm8k/test.parquet
math_test=$DATA/math/test.parquet
train_files="['$gsm8k_train', '$math_train']"
test_files="['$gsm8k_test','$math_test']"
python3 -m verl.trainer.main_ppo \
    --config-path=/workspace/verl/verl/trainer/config --config-name=ppo_trainer \
    data.train_files="$train_files" \
    data.val_files="$test_files" \
    trainer.logger=['console','wandb'] \
    +trainer.tags='["grpo", "7b"]' \
    trainer.project_name='verl_example' \
    actor_rollout_ref.model.path=/models/Qwen2.5-7B \
    trainer.nnodes=1 trainer.n_gpus_per_node=4
