#!/bin/bash
# Style: `set -x`, `export X=1 # comment`, a direct python3 -m launch.
set -x
export NCCL_DEBUG=WARN  # quiet unless something breaks
export VLLM_ATTENTION_BACKEND=XFORMERS # needed on this driver
export TOKENIZERS_PARALLELISM=true
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config \
    --config-name=ppo_trainer \
    algorithm.adv_estimator=grpo \
    data.train_files=/data/gsm8k/train.parquet \
    data.val_files=/data/gsm8k/test.parquet \
    data.train_batch_size=256 \
    actor_rollout_ref.model.path=/models/Qwen2.5-3B-Instruct \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.5 \
    trainer.logger=['console'] \
    trainer.n_gpus_per_node=8 \
    trainer.nnodes=1 \
    trainer.total_epochs=15
