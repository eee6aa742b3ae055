#!/bin/bash
# Style: values that need a command to run: never guessed, reported with their lines.
# expect-unresolved: 6
# expect-unresolved: 7
# expect-unresolved: 8
NGPUS=$(nvidia-smi -L | wc -l)
STAMP=`date +%Y%m%d`
HEAD_IP=$(hostname -I | awk '{print $1}')
python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config --config-name=ppo_trainer \
    actor_rollout_ref.model.path=/models/Qwen2.5-3B \
    data.train_files=/data/train.parquet \
    trainer.experiment_name=run_$STAMP \
    trainer.nnodes=1 \
    trainer.n_gpus_per_node=$NGPUS \
    +trainer.head=$HEAD_IP
