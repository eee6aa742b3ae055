"""SIMULATION stand-in: the Megatron actor (policy update)."""
