"""SIMULATION stand-in for Megatron-LM (NVIDIA): the configuration dataclasses and the checks
that refuse a parallel layout (parallel_state, transformer_block).

rlconsole's simulated cluster puts this directory where the real cluster keeps Megatron-LM
(the PYTHONPATH of the converter and of the training job), so that a preflight check can
compare the run's `override_transformer_config` keys with the fields Megatron really has.
"""
