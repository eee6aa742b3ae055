"""SIMULATION stand-in for megatron/core/parallel_state.py: only the size checks.

`initialize_model_parallel` in Megatron-Core refuses a layout whose model-parallel size does
not divide the world size, before it builds any process group. The messages below are the
real ones (NVIDIA/Megatron-LM, megatron/core/parallel_state.py, initialize_model_parallel);
the simulation builds no groups, it only returns the data-parallel size.
"""

from __future__ import annotations

__all__ = ["initialize_model_parallel"]


def initialize_model_parallel(world_size: int, tensor_model_parallel_size: int = 1,
                              pipeline_model_parallel_size: int = 1,
                              context_parallel_size: int = 1,
                              expert_model_parallel_size: int = 1,
                              expert_tensor_parallel_size: int | None = None) -> int:
    """Check the layout as Megatron does; return the data-parallel size."""
    model_size = tensor_model_parallel_size * pipeline_model_parallel_size * context_parallel_size
    if world_size % model_size != 0:
        raise RuntimeError(f"world_size ({world_size}) is not divisible by {model_size}")
    etp = expert_tensor_parallel_size or tensor_model_parallel_size
    expert_size = etp * expert_model_parallel_size * pipeline_model_parallel_size
    if world_size % expert_size != 0:
        raise RuntimeError(
            f"world_size ({world_size}) is not divisible by expert_tensor_model_pipeline_parallel "
            f"size ({expert_size})")
    return world_size // model_size
