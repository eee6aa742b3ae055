#!/bin/bash
# Style: python3 .../main_ppo.py without --config-path/--config-name.
VERL_HOME=/opt/verl
python3 "$VERL_HOME"/verl/trainer/main_ppo.py \
    actor_rollout_ref.model.path=/models/Qwen2.5-0.5B \
    data.train_files=/data/gsm8k/train.parquet \
    data.val_files=/data/gsm8k/test.parquet \
    trainer.nnodes=1 \
    trainer.n_gpus_per_node=1
