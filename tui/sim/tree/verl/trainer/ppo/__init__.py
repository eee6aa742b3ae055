"""SIMULATION stand-in: the PPO/GRPO driver loop (RayPPOTrainer)."""
