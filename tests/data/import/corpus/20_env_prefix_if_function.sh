#!/bin/bash
# Style: prefix assignments on the launch, `unset`, an `if` default, a function.
# expect-unresolved: 10
get_head() {
    hostname -i
}
if [ -z "$LR" ]; then
    LR=3e-6
fi
HEAD=$(get_head)
export SHOULD_GO=1
export KEEP=yes
unset SHOULD_GO
HYDRA_FULL_ERROR=1 VLLM_LOGGING_LEVEL=WARN python3 -m verl.trainer.main_ppo \
    --config-path=/opt/verl/verl/trainer/config --config-name=ppo_trainer \
    actor_rollout_ref.model.path=/models/Qwen2.5-3B \
    actor_rollout_ref.actor.optim.lr=$LR \
    data.train_files=/data/train.parquet \
    trainer.nnodes=1 trainer.n_gpus_per_node=8
