"""SIMULATION stand-in: the Ray workers that hold the GPUs."""
