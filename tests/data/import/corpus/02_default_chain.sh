#!/usr/bin/env bash
# Style: ${VAR:-default} chains where one default names another variable.
BASE_DIR=${BASE_DIR:-/mnt/shared}
MODEL_ROOT=${MODEL_ROOT:-${BASE_DIR}/models}
MODEL_PATH=${MODEL_PATH:-${MODEL_ROOT:-/nowhere}/Qwen2.5-7B-Instruct}
DATA_DIR=${DATA_DIR:-$BASE_DIR/data}
NNODES=${NNODES:-${WORLD_SIZE:-2}}
GPUS=${GPUS_PER_NODE:=8}
PROJECT=${PROJECT-verl_demo}
EXP=${EXP:+should-not-appear}
python3 -m verl.trainer.main_ppo \
    --config-path="${BASE_DIR}/verl/verl/trainer/config" \
    --config-name="ppo_trainer" \
    data.train_files="$DATA_DIR/math/train.parquet" \
    data.val_files="$DATA_DIR/math/test.parquet" \
    actor_rollout_ref.model.path="$MODEL_PATH" \
    critic.model.path="${MODEL_PATH}" \
    trainer.project_name=$PROJECT \
    trainer.experiment_name="x${EXP}y" \
    trainer.n_gpus_per_node=$GPUS \
    trainer.nnodes=$NNODES
