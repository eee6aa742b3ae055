#!/bin/bash
# Style: a blank line inside the continuation (same trap, no comment to see).
# expect-dropped: trainer.total_epochs,trainer.save_freq
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config \
    --config-name=ppo_trainer \
    actor_rollout_ref.model.path=/models/Qwen2.5-3B \
    data.train_files=/data/train.parquet \
    trainer.nnodes=1 \
    trainer.n_gpus_per_node=8 \

    trainer.total_epochs=3 \
    trainer.save_freq=10
