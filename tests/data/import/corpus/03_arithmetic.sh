#!/bin/bash
# Style: $((a + b)) arithmetic, including bare names and nested parentheses.
max_prompt_length=$((1024 * 2))
max_response_length=$((1024 * 8))
ppo_max=$(( (max_prompt_length + max_response_length) * 2 ))
NNODES=2
GPUS=8
TOTAL=$((NNODES*GPUS))
micro=$((TOTAL / 3))
rem=$(( TOTAL % 5 ))
export WORLD=$TOTAL
python3 -u -m verl.trainer.main_ppo \
    data.max_prompt_length=$max_prompt_length \
    data.max_response_length=${max_response_length} \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$ppo_max \
    actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=$((ppo_max / 2)) \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=$micro \
    actor_rollout_ref.rollout.n=$((rem + 1)) \
    data.train_batch_size=$(( $TOTAL * 16 )) \
    trainer.n_gpus_per_node=$GPUS \
    trainer.nnodes=$NNODES
