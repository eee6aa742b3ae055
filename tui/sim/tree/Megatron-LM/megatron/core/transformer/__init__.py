"""SIMULATION stand-in for megatron.core.transformer."""

from .transformer_config import TransformerConfig

__all__ = ["TransformerConfig"]
