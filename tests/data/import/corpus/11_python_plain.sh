#!/bin/bash
# Style: `python` (not python3), options before -m, a quoted experiment name with blanks.
cd /workspace/verl
python -u -X faulthandler -m verl.trainer.main_ppo \
    --config-path /workspace/verl/verl/trainer/config \
    --config-name ppo_trainer \
    actor_rollout_ref.model.path=/models/Qwen2.5-1.5B \
    data.train_files=/data/train.parquet \
    trainer.experiment_name="qwen 1.5b run" \
    trainer.nnodes=1 trainer.n_gpus_per_node=2
