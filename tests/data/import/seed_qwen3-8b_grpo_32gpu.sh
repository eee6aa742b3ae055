# Source: /work/shared/seed/000_c3d4f0c48559e113.txt, section 7 (qwen3-8b_grpo_32gpu.sh), copied verbatim below this line.
#!/bin/bash
set -x

# =============================================================================
# Qwen3-8B GRPO 训练脚本 - 四机32卡版本
# =============================================================================

# MCCL 网络配置（四机必需）
export MCCL_SOCKET_IFNAME=bond0
export GLOO_SOCKET_IFNAME=bond0
export MCCL_IB_GID_INDEX=3
export MCCL_IB_TIMEOUT=20
export MCCL_IB_RETRY_CNT=20
export MCCL_CROSS_NIC=1

# -----------------------------------------------------------------------------
# 1. 模型和数据路径配置
# -----------------------------------------------------------------------------
HF_MODEL_PATH=/data/datapool/models/Qwen3-8B
DIST_CKPT_PATH=/data/datapool/models/Qwen3-8B-MCore

DATASET_PATH="/data/datapool/verl/musa_examples/data"
train_files=$DATASET_PATH/amt_math17k_d_qweninstruct.parquet
test_files="['$DATASET_PATH/aime_2024.parquet','$DATASET_PATH/aime_2025.parquet']"

# -----------------------------------------------------------------------------
# 2. Verl路径配置
# -----------------------------------------------------------------------------
export VERL_PATH=/data/datapool/verl
CONFIG_PATH=$VERL_PATH/verl/trainer/config

# -----------------------------------------------------------------------------
# 3. 训练参数配置
# -----------------------------------------------------------------------------
use_dynamic_bsz=True
max_prompt_length=1024
max_response_length=16384  # 16K长度
actor_ppo_max_token_len=$(((max_prompt_length + max_response_length) * 1))
infer_ppo_max_token_len=$(((max_prompt_length + max_response_length) * 1))

# -----------------------------------------------------------------------------
# 4. Runtime环境和Hostfile配置
# -----------------------------------------------------------------------------
runtime_env=./runtime_env.yaml
HOSTFILE="hostfile"
HEAD_IP=$(head -n 1 "$HOSTFILE" | awk '{print $1}')

# 禁用profiler（避免研发环境硬编码路径报错）
export GLOBAL_PROFILER_TOOL=null

# -----------------------------------------------------------------------------
# 5. 启动Ray并提交训练任务
# -----------------------------------------------------------------------------
RAY_ADDRESS="http://${HEAD_IP}:8265" ray job submit \
    --runtime-env=$runtime_env \
    --no-wait \
    -- python3 -u -m verl.trainer.main_ppo \
    --config-path="$CONFIG_PATH" \
    --config-name='ppo_megatron_trainer_demo.yaml'\
    algorithm.adv_estimator=grpo \
    data.train_files=$train_files \
    data.val_files="$test_files" \
    data.train_batch_size=64 \
    data.max_prompt_length=$max_prompt_length \
    data.max_response_length=$max_response_length \
    data.filter_overlong_prompts=True \
    data.prompt_key=prompt \
    data.truncation='error' \
    actor_rollout_ref.model.path=$HF_MODEL_PATH \
    actor_rollout_ref.model.enable_activation_offload=True \
    actor_rollout_ref.model.enable_gradient_checkpointing=True \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
    actor_rollout_ref.actor.profiler.enable=False \
    actor_rollout_ref.actor.megatron.use_mbridge=False \
    actor_rollout_ref.actor.megatron.vanilla_mbridge=False \
    # Actor并行策略: PP=8, TP=1
    actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=8 \
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1 \
    actor_rollout_ref.actor.megatron.use_dist_checkpointing=True \
    actor_rollout_ref.actor.megatron.dist_checkpointing_path=$DIST_CKPT_PATH \
    actor_rollout_ref.actor.megatron.param_offload=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.apply_rope_fusion=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.masked_softmax_fusion=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.batch_p2p_comm=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.no_gradient_accumulation_fusion=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.attention_softmax_in_fp32=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.accumulate_allreduce_grads_in_fp32=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.no_masked_softmax_fusion=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.no_bias_swiglu_fusion=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.swiglu=True \
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full \
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=block \
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=48 \
    actor_rollout_ref.actor.use_dynamic_bsz=${use_dynamic_bsz} \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.ref.log_prob_use_dynamic_bsz=${use_dynamic_bsz} \
    actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=${use_dynamic_bsz} \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=${actor_ppo_max_token_len} \
    actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=${infer_ppo_max_token_len} \
    actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=${infer_ppo_max_token_len} \
    actor_rollout_ref.rollout.calculate_log_probs=True \
    +actor_rollout_ref.rollout.engine_kwargs.sglang.disable_radix_cache=True \
    +actor_rollout_ref.rollout.engine_kwargs.sglang.disable_overlap_schedule=True \
    +actor_rollout_ref.rollout.engine_kwargs.sglang.disable_custom_all_reduce=True \
    +actor_rollout_ref.rollout.engine_kwargs.sglang.disable_cuda_graph=False \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
    actor_rollout_ref.rollout.data_parallel_size=16 \
    actor_rollout_ref.rollout.name=sglang \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
    actor_rollout_ref.rollout.n=8 \
    actor_rollout_ref.rollout.temperature=0.8 \
    actor_rollout_ref.rollout.top_k=100 \
    actor_rollout_ref.rollout.top_p=0.95 \
    actor_rollout_ref.rollout.val_kwargs.temperature=0.8 \
    actor_rollout_ref.rollout.val_kwargs.top_k=50 \
    actor_rollout_ref.rollout.val_kwargs.top_p=0.9 \
    actor_rollout_ref.rollout.free_cache_engine=True \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 \
    actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=1 \
    actor_rollout_ref.ref.megatron.tensor_model_parallel_size=1 \
    actor_rollout_ref.ref.megatron.expert_model_parallel_size=8 \
    actor_rollout_ref.ref.megatron.use_dist_checkpointing=True \
    actor_rollout_ref.ref.megatron.dist_checkpointing_path=$DIST_CKPT_PATH \
    actor_rollout_ref.ref.megatron.sequence_parallel=False \
    algorithm.use_kl_in_reward=False \
    trainer.critic_warmup=0 \
    trainer.logger='["console","tensorboard"]' \
    trainer.project_name='verl_grpo_qwen3_8b' \
    trainer.experiment_name='Qwen3-8B_megatron_sglang' \
    trainer.n_gpus_per_node=8 \
    trainer.val_before_train=False \
    trainer.nnodes=4 \
    trainer.save_freq=100 \
    trainer.test_freq=5 \
    trainer.total_epochs=10
