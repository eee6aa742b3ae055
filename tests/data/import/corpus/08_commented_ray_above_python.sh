#!/bin/bash
# Style: a commented-out `ray job submit ... --` line above a direct python3 -m launch.
export HYDRA_FULL_ERROR=1
# RAY_ADDRESS=http://10.0.0.1:8265 ray job submit --no-wait --runtime-env=./runtime_env.yaml -- \
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config \
    --config-name=ppo_trainer \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.model.path=/models/Qwen2.5-3B \
    data.train_files=/data/train.parquet \
    trainer.nnodes=1 \
    trainer.n_gpus_per_node=8
