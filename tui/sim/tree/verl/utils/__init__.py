"""SIMULATION stand-in: helpers (logging, GPU-load signalling, a torch.save stand-in)."""
