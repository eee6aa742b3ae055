"""SIMULATION stand-in for megatron.core: configuration dataclasses only."""
