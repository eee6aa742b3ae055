#!/bin/bash
# Style: an example left with its placeholders ("update these to your actual paths"). Bash
# passes them on without a word; the import names each (the line, the profile key, the value).
# expect-placeholder: 14 env.WANDB_PROJECT=YOUR_WANDB_PROJECT
# expect-placeholder: 15 env.WANDB_ENTITY=<your wandb entity>
# expect-placeholder: 23 data.train_files=/path/to/gsm8k/train.parquet
# expect-placeholder: 24 data.val_files=path/to/gsm8k/test.parquet
# expect-placeholder: 25 trainer.default_local_dir=$HOME/models/CHANGE_ME
# expect-placeholder: 26 trainer.project_name=xxx
# expect-placeholder: 27 trainer.experiment_name=TODO
# expect-placeholder: 28 +trainer.run_note=FIXME
# expect-placeholder: 29 +reward_model.sandbox_host=CHANGEME
# Real values (no line for them): the model path, vllm, auto, a URL, a list, an interpolation.
export WANDB_PROJECT=YOUR_WANDB_PROJECT
export WANDB_ENTITY="<your wandb entity>"
export HF_ENDPOINT=https://hf-mirror.com
MODEL=/data/datapool/models/Qwen3-8B
CKPT_DIR=$HOME/models/CHANGE_ME
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config --config-name=ppo_trainer \
    actor_rollout_ref.model.path=$MODEL \
    actor_rollout_ref.rollout.name=vllm \
    data.train_files=/path/to/gsm8k/train.parquet \
    data.val_files=path/to/gsm8k/test.parquet \
    trainer.default_local_dir=$CKPT_DIR \
    trainer.project_name=xxx \
    trainer.experiment_name=TODO \
    +trainer.run_note=FIXME \
    +reward_model.sandbox_host=CHANGEME \
    actor_rollout_ref.rollout.dtype=auto \
    trainer.logger=[console,tensorboard] \
    '+data.cache_dir=${oc.env:HOME}' \
    trainer.nnodes=1 trainer.n_gpus_per_node=8
