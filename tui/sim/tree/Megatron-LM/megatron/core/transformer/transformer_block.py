"""SIMULATION stand-in for megatron/core/transformer/transformer_block.py: the layer split.

`get_num_layers_to_build` is where Megatron-Core refuses a pipeline-parallel size that does
not divide the model's layers (no uneven first/last stage given). The assertion texts are
the real ones (NVIDIA/Megatron-LM, megatron/core/transformer/transformer_block.py).
"""

from __future__ import annotations

from .transformer_config import TransformerConfig

__all__ = ["get_num_layers_to_build"]


def get_num_layers_to_build(config: TransformerConfig) -> int:
    """Layers on one pipeline stage (the same on every stage in the simulation)."""
    pp = config.pipeline_model_parallel_size
    if (config.num_layers_in_first_pipeline_stage is not None
            or config.num_layers_in_last_pipeline_stage is not None):
        layers_to_distribute = config.num_layers
        stages_left = pp
        if config.num_layers_in_first_pipeline_stage is not None:
            layers_to_distribute -= config.num_layers_in_first_pipeline_stage
            stages_left -= 1
        if config.num_layers_in_last_pipeline_stage is not None:
            layers_to_distribute -= config.num_layers_in_last_pipeline_stage
            stages_left -= 1
        if stages_left > 0:
            assert layers_to_distribute % stages_left == 0, (
                "With uneven pipelineing the left over layers must be divisible by left over stages")
            return layers_to_distribute // stages_left
        return 0
    num_layers = config.num_layers
    if config.account_for_embedding_in_pipeline_split:
        num_layers += 1
    if config.account_for_loss_in_pipeline_split:
        num_layers += 1
    assert num_layers % config.pipeline_model_parallel_size == 0, (
        f"{num_layers=} should be divisible by {config.pipeline_model_parallel_size=}")
    return num_layers // config.pipeline_model_parallel_size
