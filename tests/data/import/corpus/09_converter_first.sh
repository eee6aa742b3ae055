#!/bin/bash
# Style: a download and a converter before the launch (they must not be imported as it).
export VERL_PATH=/shared/verl
export MEGATRON_PATH=/shared/Megatron-LM
export PYTHONPATH=$MEGATRON_PATH:$VERL_PATH
HF=/shared/models/Qwen3-1.7B
MCORE=/shared/models/Qwen3-1.7B-mcore
mkdir -p "$MCORE"
modelscope download --model Qwen/Qwen3-1.7B --local_dir $HF
python $VERL_PATH/scripts/converter_hf_to_mcore.py --hf_model_path $HF --output_path $MCORE
python3 -m verl.trainer.main_ppo \
    --config-path=$VERL_PATH/verl/trainer/config \
    --config-name=ppo_megatron_trainer \
    actor_rollout_ref.model.path=$HF \
    actor_rollout_ref.actor.megatron.use_dist_checkpointing=True \
    actor_rollout_ref.actor.megatron.dist_checkpointing_path=$MCORE \
    actor_rollout_ref.ref.megatron.dist_checkpointing_path=$MCORE \
    data.train_files=/shared/data/train.parquet \
    trainer.nnodes=1 trainer.n_gpus_per_node=8
