"""SIMULATION stand-in for verl/workers/actor/megatron_actor.py (the policy update).

It keeps the one thing of the vendor's file that matters to the console: the debug
`torch.save` of the policy-gradient inputs to a developer's NAS path (the reference run's
appendix, problem 1). As shipped, that block is commented out, as the appendix's fix does;
`tui.sim.tree_install.install_sim_tree(plant_debug_save=True)` restores the original
lines, and the update then fails after the first rollout with::

    RuntimeError: Parent directory /mnt/seed-program-nas/001688/kechun.wu/0226/tmp_pts does not exist.

The update itself is modelled: the metrics it returns (entropy, pg_loss, grad_norm, MFU,
memory) follow the curves of a real GRPO run, reduced with numpy like VeRL's
`reduce_metrics`, hence `np.float64` values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# The simulated cluster has no torch (and no process group): the debug lines below call this
# stand-in, which fails exactly as torch.save does when the directory is missing.
from verl.utils import torch_standin as torch  # noqa: F401 - used by the debug block
from verl.utils import sim_perf as perf

__all__ = ["MegatronPPOActor"]


class MegatronPPOActor:
    """One data-parallel rank's actor: `update_policy` turns a batch into actor metrics."""

    def __init__(self, config: dict[str, Any], rank: int, world_size: int) -> None:
        self.config = config
        self.rank = rank
        self.world_size = world_size

    def update_policy(self, data: dict[str, Any]) -> dict[str, Any]:
        """Model one PPO update on `data` (progress, lengths, advantages) and return metrics."""
        step = int(data["global_step"])
        progress = float(data["progress"])
        rng = np.random.default_rng(1000 * step + self.rank)
        n = int(data.get("num_micro_batches", 8))
        response_mask = np.ones(n)
        advantages = np.asarray(data.get("advantages", rng.normal(0, 1, n)), dtype=np.float64)
        old_log_prob = rng.normal(-0.35, 0.05, n)
        log_prob = old_log_prob + rng.normal(0, 0.004, n)

        # DEBUG: Commented out for production training
        # if torch.distributed.get_rank() in [0,1,2]:
        #     p = "/data/datapool/verl/tmp/rank0_pgloss_actor_rank{}.pt".format(torch.distributed.get_rank())
        #     torch.save([log_prob,old_log_prob,advantages,advantages,response_mask],p)

        entropy = rng.normal(0.46 - 0.2 * progress, 0.012, n).clip(0.05, None)
        pg_loss = rng.normal(0.0, 0.02, n)
        ratio = np.exp(log_prob - old_log_prob)
        clip = float(self.config.get("clip_ratio", 0.2))
        pg_clipfrac = (np.abs(ratio - 1.0) > clip).astype(np.float64) + rng.uniform(0, 0.003, n)
        ppo_kl = rng.normal(-1e-4, 2e-4, n)
        grad_norm = rng.lognormal(np.log(0.18), 0.25, 1)
        # MFU follows the cards' speed: a planted fault that slows them lowers it as much
        mfu = rng.normal(perf.MFU_MEAN, perf.MFU_SD, 1).clip(*perf.MFU_CLIP) * float(data.get("speed", 1.0))
        clip = perf.MEM_ALLOC_CLIP_SD * perf.MEM_ALLOC_SD
        alloc = rng.normal(perf.MEM_ALLOC_GIB, perf.MEM_ALLOC_SD, 1).clip(perf.MEM_ALLOC_GIB - clip,
                                                                        perf.MEM_ALLOC_GIB + clip)
        metrics: dict[str, Any] = {
            "actor/entropy": np.mean(entropy),
            "actor/pg_clipfrac": np.mean(pg_clipfrac),
            "actor/ppo_kl": np.mean(ppo_kl),
            "actor/pg_clipfrac_lower": np.mean(np.zeros(n)),
            "actor/pg_loss": np.mean(pg_loss),
            "actor/grad_norm": np.mean(grad_norm),
            "perf/mfu/actor": np.mean(mfu),
            "perf/max_memory_allocated_gb": np.mean(alloc),
            "perf/max_memory_reserved_gb": np.mean(alloc + rng.uniform(*perf.MEM_RESERVED_EXTRA_GIB, 1)),
            "perf/cpu_memory_used_gb": np.mean(rng.normal(210.0, 6.0, 1)),
        }
        if self.config.get("use_kl_loss"):
            metrics["actor/kl_loss"] = np.mean(rng.normal(0.003, 0.0008, n).clip(0, None))
            metrics["actor/kl_coef"] = float(self.config.get("kl_loss_coef", 0.001))
        metrics["actor/lr"] = float(data.get("lr", 1e-6))
        return metrics
