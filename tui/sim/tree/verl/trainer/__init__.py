"""SIMULATION stand-in: the trainer entry point and its Hydra configs."""
