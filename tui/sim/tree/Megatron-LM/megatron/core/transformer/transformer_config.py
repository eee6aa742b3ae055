"""SIMULATION stand-in for megatron/core/transformer/transformer_config.py.

The field NAMES are Megatron-Core's (`TransformerConfig` extends `ModelParallelConfig`),
reduced to the architecture, fusion, precision and recompute fields a dense GPT model such
as Qwen3 uses. VeRL builds `TransformerConfig(**base, **override_transformer_config)`, so a
key of `override_transformer_config` that is not a field below is a TypeError in a real run.
Several keys of the reference run are Megatron *command-line* flags, not fields:
`no_gradient_accumulation_fusion` (field: gradient_accumulation_fusion),
`no_masked_softmax_fusion` (masked_softmax_fusion), `no_bias_swiglu_fusion`
(bias_activation_fusion), `swiglu` (gated_linear_unit + activation_func) and
`accumulate_allreduce_grads_in_fp32` (a DDP/optimizer setting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple, Union

from ..model_parallel_config import ModelParallelConfig


@dataclass
class TransformerConfig(ModelParallelConfig):
    """Configuration object for megatron-core transformers."""

    # model architecture
    num_layers: int = 0
    mtp_num_layers: Optional[int] = None
    mtp_loss_scaling_factor: Optional[float] = None
    num_layers_in_first_pipeline_stage: Optional[int] = None
    num_layers_in_last_pipeline_stage: Optional[int] = None
    pipeline_model_parallel_layout: Optional[Union[str, list]] = None
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False
    hidden_size: int = 0
    num_attention_heads: int = 0
    attention_backend: Any = "auto"
    softmax_scale: Optional[float] = None
    num_query_groups: Optional[int] = None
    ffn_hidden_size: Optional[int] = None
    kv_channels: Optional[int] = None
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    fp32_residual_connection: bool = False
    apply_residual_connection_post_layernorm: bool = False
    layernorm_epsilon: float = 1e-5
    layernorm_zero_centered_gamma: bool = False
    add_bias_linear: bool = True
    add_qkv_bias: bool = False
    gated_linear_unit: bool = False
    activation_func: Optional[Callable] = None
    activation_func_fp8_input_store: bool = False
    num_moe_experts: Optional[int] = None
    rotary_interleaved: bool = False
    window_size: Optional[Tuple[int, int]] = None
    normalization: str = "LayerNorm"
    qk_layernorm: bool = False
    test_mode: bool = False
    calculate_per_token_loss: bool = False
    multi_latent_attention: bool = False
    no_rope_freq: Optional[Union[int, List[int]]] = None

    # initialization
    init_method: Optional[Callable] = None
    output_layer_init_method: Optional[Callable] = None
    init_method_std: float = 0.02
    init_model_with_meta_device: bool = False

    # mixed-precision
    apply_query_key_layer_scaling: bool = False
    attention_softmax_in_fp32: bool = True
    disable_bf16_reduced_precision_matmul: bool = False

    # fusion
    bias_activation_fusion: bool = False
    masked_softmax_fusion: bool = False
    persist_layer_norm: bool = False
    memory_efficient_layer_norm: bool = False
    bias_dropout_fusion: bool = False
    apply_rope_fusion: bool = False

    # activation recomputation
    recompute_granularity: Optional[str] = None
    recompute_method: Optional[str] = None
    recompute_num_layers: Optional[int] = None
    distribute_saved_activations: Optional[bool] = None
    recompute_modules: Optional[List[str]] = None

    # fp8
    fp8: Optional[str] = None
    fp8_recipe: Optional[str] = "delayed"
    fp8_param: bool = False
    fp8_margin: int = 0
    fp8_interval: int = 1
    fp8_amax_history_len: int = 1
    fp8_amax_compute_algo: str = "most_recent"
    fp8_wgrad: bool = True
    fp8_dot_product_attention: bool = False
    fp8_multi_head_attention: bool = False
    tp_only_amax_red: bool = False

    # MoE (unused by dense models)
    moe_shared_expert_intermediate_size: Optional[int] = None
    moe_ffn_hidden_size: Optional[int] = None
    moe_router_topk: int = 2
    moe_router_load_balancing_type: str = "aux_loss"
    moe_aux_loss_coeff: float = 0.0
    moe_grouped_gemm: bool = False
    moe_token_dispatcher_type: str = "allgather"
    moe_layer_recompute: bool = False

    # context parallel
    cp_comm_type: Optional[Union[str, List[str]]] = None

    # cuda graphs
    enable_cuda_graph: bool = False
    cuda_graph_retain_backward_graph: bool = False
    external_cuda_graph: bool = False

    # miscellaneous
    clone_scatter_output_in_embedding: bool = True
    disable_parameter_transpose_cache: bool = False
    config_logger_dir: str = ""
    flash_decode: bool = False
    use_te_activation_func: bool = False
    inference_rng_tracker: bool = False
    use_kitchen: bool = False

    def __post_init__(self) -> None:
        """The one refusal of Megatron-Core's `TransformerConfig.__post_init__` the simulation
        keeps: expert parallelism on a model without experts (text from NVIDIA/Megatron-LM,
        megatron/core/transformer/transformer_config.py)."""
        if self.expert_model_parallel_size > 1 and self.num_moe_experts is None:
            raise ValueError("num_moe_experts must be non None to use expert-parallel.")
