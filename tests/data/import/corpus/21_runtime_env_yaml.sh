#!/bin/bash
# Style: ray job submit --runtime-env YAML (read next to the script), exported vars, "$*".
# expect-args: yes
export RAY_ADDRESS=http://127.0.0.1:8265
export NCCL_IB_DISABLE=1
ray job submit --runtime-env 21_runtime_env.yaml --no-wait -- \
    python3 -u -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config --config-name=ppo_trainer \
    actor_rollout_ref.model.path=/models/Qwen2.5-3B \
    data.train_files=/data/train.parquet \
    trainer.nnodes=2 trainer.n_gpus_per_node=8 $*
