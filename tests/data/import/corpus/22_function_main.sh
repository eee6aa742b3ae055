#!/bin/bash
# Style: the launch inside a function the script calls, with arguments and "$@".
export NCCL_DEBUG=INFO
launch() {
    local model=$1
    shift
    python3 -m verl.trainer.main_ppo \
        --config-path=/opt/verl/verl/trainer/config --config-name=ppo_trainer \
        actor_rollout_ref.model.path="$model" \
        data.train_files=/data/train.parquet \
        trainer.nnodes=1 trainer.n_gpus_per_node=$# \
        "$@"
}
one_liner() { echo "not a launch"; }
one_liner
launch /models/Qwen2.5-3B "trainer.experiment_name=fn run" trainer.total_epochs=2
