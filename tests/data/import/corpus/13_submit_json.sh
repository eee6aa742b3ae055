#!/bin/bash
# Style: ray job submit with --runtime-env-json over several lines.
export WANDB_MODE=offline
RAY_ADDRESS="http://127.0.0.1:8265"
ray job submit --address="$RAY_ADDRESS" \
    --runtime-env-json='{
        "env_vars": {
            "NCCL_DEBUG": "WARN",
            "VLLM_USE_V1": "1",
            "CUDA_DEVICE_MAX_CONNECTIONS": "1"
        },
        "working_dir": "./"
    }' \
    --no-wait \
    -- python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config \
    --config-name=ppo_trainer \
    actor_rollout_ref.model.path=/models/Qwen2.5-7B \
    data.train_files=/data/train.parquet \
    trainer.nnodes=2 \
    trainer.n_gpus_per_node=8
