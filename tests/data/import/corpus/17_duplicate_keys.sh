#!/bin/bash
# Style: the same key given twice (Hydra applies them in order: the last wins).
# expect-duplicate: data.train_batch_size
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config --config-name=ppo_trainer \
    actor_rollout_ref.model.path=/models/Qwen2.5-3B \
    data.train_files=/data/train.parquet \
    data.train_batch_size=128 \
    trainer.nnodes=1 trainer.n_gpus_per_node=8 \
    data.train_batch_size=512
