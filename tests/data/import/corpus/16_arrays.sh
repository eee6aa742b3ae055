#!/bin/bash
# Style: simple arrays, "${a[@]}" splicing, ${a[1]} and ${#a[@]}.
NODES=(10.0.0.1 10.0.0.2)
GPU_IDS=(0 1 2 3)
COMMON_ARGS=(
    "data.train_files=/data/train.parquet"
    "trainer.experiment_name=array run"
    data.train_batch_size=64
)
MODEL_ARGS=(actor_rollout_ref.model.path=/models/Qwen2.5-3B)
MODEL_ARGS+=(actor_rollout_ref.model.use_remove_padding=True)
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config --config-name=ppo_trainer \
    "${COMMON_ARGS[@]}" \
    ${MODEL_ARGS[@]} \
    trainer.nnodes=${#NODES[@]} \
    trainer.n_gpus_per_node=${#GPU_IDS[@]} \
    +trainer.head_ip=${NODES[0]} \
    +trainer.second_ip="${NODES[1]}"
