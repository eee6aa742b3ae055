"""SIMULATION stand-in for VeRL's GPU workers (`WorkerDict` actors on the Ray cluster).

Each `WorkerDict` is a Ray actor that holds GPUs (`num_gpus` of the Ray resources), so
`ray status` shows them used, and marks those cards busy for the simulated `mthreads-gmi`
(see `verl.utils.sim_gpu`). One actor may stand for one card (as in real VeRL) or for all the
cards of a node (the default in the simulation: 4 processes instead of 32 on a small
machine); either way every card it holds gets its own gpu-load file with the actor's pid.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["WorkerDict"]



def _verl_release() -> tuple[int, ...]:
    """The VeRL release this tree stands in for (`verl/version/version`, as real VeRL ships it);
    unknown reads as the newest behaviour."""
    import verl

    try:
        text = (Path(verl.__file__).parent / "version" / "version").read_text().strip()
        return tuple(int(x) for x in text.split(".")[:3])
    except (OSError, ValueError):
        return (99,)

class WorkerDict:
    """The body of a GPU worker; `ray.remote` is applied by the trainer when placing it."""

    def __init__(self, rank0: int, world_size: int, config: dict[str, Any]) -> None:
        import ray

        from verl.utils import torch_standin
        from verl.utils.sim_gpu import GpuLoad, node_dir

        self.rank0 = rank0
        self.world_size = world_size
        self.config = config
        self.pid = os.getpid()
        self.gpu_ids = sorted(int(float(g)) for g in ray.get_gpu_ids())
        self.node_ip = ray.util.get_node_ip_address()
        self.node_dir = node_dir()
        torch_standin.set_rank(rank0, world_size)
        self.load: GpuLoad | None = None
        if self.node_dir is not None:
            # Refreshed at GpuLoad's default period (1 s), the one the sim's card tool is
            # rendered at (tui/sim/gmi.py RENDER_INTERVAL_S): written more often, no sample
            # sees it. A phase change is written at once (`set_phase`).
            self.load = GpuLoad(self.node_dir, self.gpu_ids)
            self.load.start()
            atexit.register(self.load.stop)
        elif rank0 == 0:
            print("[sim] RLCONSOLE_SIM_NODE_DIR is not set on this node: cards are not "
                  "marked busy", file=sys.stderr, flush=True)
        from verl.workers.actor.megatron_actor import MegatronPPOActor

        self.actor = MegatronPPOActor(config.get("actor_rollout_ref", {}).get("actor", {}),
                                      rank0, world_size)

    def info(self) -> dict[str, Any]:
        """Where this worker is and what it holds (for placement checks and tests)."""
        return {"pid": self.pid, "gpu_ids": self.gpu_ids, "node_ip": self.node_ip,
                "rank0": self.rank0,
                "node_dir": str(self.node_dir) if self.node_dir else None}

    def init_model(self) -> dict[str, Any]:
        """Build the actor as VeRL's Megatron worker does, refusing what it refuses, in its order.

        1. `mpu.initialize_model_parallel` (ActorRolloutRefWorker.__init__): TP x PP x CP must
           divide the world size;
        2. the TransformerConfig (`_build_model_optimizer`): expert parallelism needs experts;
           the layers must split evenly over the pipeline stages;
        3. the MCore dist checkpoint (use_dist_checkpointing);
        4. the rollout (`_build_rollout`): TP x DP x PP of the rollout must divide the world.
        Every rank fails the same way; Ray reports the first.
        """
        import json

        from verl.utils.model import check_dist_checkpoint

        arr = self.config.get("actor_rollout_ref", {})
        mg = arr.get("actor", {}).get("megatron", {}) or {}
        tp = int(mg.get("tensor_model_parallel_size", 1) or 1)
        pp = int(mg.get("pipeline_model_parallel_size", 1) or 1)
        cp = int(mg.get("context_parallel_size", 1) or 1)
        ep = int(mg.get("expert_model_parallel_size", 1) or 1)
        etp = mg.get("expert_tensor_parallel_size")
        from megatron.core import parallel_state as mpu

        mpu.initialize_model_parallel(self.world_size, tp, pp, cp, ep,
                                      int(etp) if etp is not None else None)

        self._check_transformer_config(mg)
        from megatron.core.transformer.transformer_block import get_num_layers_to_build
        from megatron.core.transformer.transformer_config import TransformerConfig

        hf_cfg = Path(os.path.expanduser(str(arr.get("model", {}).get("path", "")))) / "config.json"
        hf = json.loads(hf_cfg.read_text()) if hf_cfg.is_file() else {}
        # VeRL's hf_to_mcore_config: the model's architecture plus the worker's parallel sizes
        # (the expert-parallel size is the process group's, i.e. the actor's, for the ref too).
        tf = TransformerConfig(
            num_layers=int(hf.get("num_hidden_layers", 0) or 0),
            hidden_size=int(hf.get("hidden_size", 0) or 0),
            num_attention_heads=int(hf.get("num_attention_heads", 0) or 0),
            num_moe_experts=hf.get("num_experts") or hf.get("num_local_experts") or None,
            tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
            context_parallel_size=cp, expert_model_parallel_size=ep,
            num_layers_in_first_pipeline_stage=mg.get("num_layers_in_first_pipeline_stage"),
            num_layers_in_last_pipeline_stage=mg.get("num_layers_in_last_pipeline_stage"),
        )
        get_num_layers_to_build(tf)

        for role in ("actor", "ref"):
            rmg = arr.get(role, {}).get("megatron", {})
            if rmg.get("use_dist_checkpointing") and rmg.get("dist_checkpointing_path"):
                check_dist_checkpoint(str(rmg["dist_checkpointing_path"]))

        rollout = arr.get("rollout", {})
        infer_tp = (int(rollout.get("tensor_model_parallel_size", 1) or 1)
                    * int(rollout.get("data_parallel_size", 1) or 1))
        infer_pp = int(rollout.get("pipeline_model_parallel_size", 1) or 1)
        infer_world_size = infer_tp * infer_pp
        # volcengine/verl, verl/workers/megatron_workers.py `_build_rollout`
        assert self.world_size % infer_world_size == 0, (
            f"rollout world_size: {self.world_size} is not divisible by infer_world_size: "
            f"{infer_world_size}")
        return self.info()

    def _check_transformer_config(self, mg: dict[str, Any]) -> None:
        """Compare `override_transformer_config` keys with Megatron's TransformerConfig.

        What happens to a key TransformerConfig lacks depends on the VeRL release (its
        `verl/version/version`, which the sim writes beside this tree): VeRL 0.4.x passes the
        keys as keyword arguments to `TransformerConfig(...)`, a TypeError; VeRL >= 0.5
        (`verl/models/mcore/config_converter.py:check_and_construct_configs`) warns "The
        following keys are not supported in the current Megatron version and will be
        removed: [...]" and drops them, and the run goes on. RLCONSOLE_SIM_STRICT_TF_CONFIG=1
        fails as 0.4.x does whatever the version.
        """
        keys = list((mg.get("override_transformer_config") or {}).keys())
        if not keys or self.rank0 != 0:
            return
        import dataclasses
        import warnings

        from megatron.core.transformer.transformer_config import TransformerConfig
        fields = {f.name for f in dataclasses.fields(TransformerConfig)}
        unknown = [k for k in keys if k not in fields]
        if not unknown:
            return
        if os.environ.get("RLCONSOLE_SIM_STRICT_TF_CONFIG") == "1" or _verl_release() < (0, 5):
            raise TypeError(
                f"TransformerConfig.__init__() got an unexpected keyword argument '{unknown[0]}'")
        warnings.warn(
            f"The following keys are not supported in the current Megatron version and will be removed: {unknown}",
            stacklevel=2,
        )
        sys.stderr.flush()

    def set_phase(self, phase: str) -> None:
        if self.load is not None:
            self.load.set_phase(phase)

    def update_actor(self, data: dict[str, Any]) -> dict[str, Any]:
        self.set_phase("update")
        self._planted_fault(int(data.get("global_step", 0)))
        return self.actor.update_policy(data)

    def _planted_fault(self, step: int) -> None:
        """Act out a fault planted by `rlconsole sim fault` on this node (verl.utils.sim_fault)."""
        from verl.utils import sim_fault

        f = sim_fault.active(step, ("oom", "collective-timeout", "actor-death", "card-hot",
                                    "card-mem-lost", "node-lost"), sim_fault.my_node())
        if f is None:
            return
        kind = f["kind"]
        if kind == "oom":
            card = int(f["card"]) if f.get("card") is not None else (self.gpu_ids or [0])[0]
            raise sim_fault.oom_error(card)
        if kind == "collective-timeout":
            # The rank waits in the collective until the process group's timeout (modelled
            # as a few steps), then the watchdog fails it.
            import time

            time.sleep(float(os.environ.get("RLCONSOLE_SIM_COLLECTIVE_WAIT_S", "3")))
            raise sim_fault.watchdog_error(self.rank0, 1580 + step)
        if kind == "actor-death":
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        if kind in ("card-hot", "card-mem-lost"):
            sim_fault.act_on_node(f, self.node_dir, self.gpu_ids)
        if kind == "node-lost":
            sim_fault.kill_node(sim_fault.my_node())

    def save_checkpoint(self, local_path: str, global_step: int) -> list[str]:
        """Write this worker's shards of the actor's dist checkpoint (small files)."""
        self.set_phase("ckpt")
        d = Path(local_path) / "dist_ckpt"
        d.mkdir(parents=True, exist_ok=True)
        from verl.utils import sim_fault

        if sim_fault.active(global_step, ("disk-full",), sim_fault.my_node()) is not None:
            raise sim_fault.disk_full_error(str(d / f"__{self.rank0}_0.distcp"))
        written = []
        for i, _g in enumerate(self.gpu_ids or [0]):
            rank = self.rank0 + i
            f = d / f"__{rank}_0.distcp"
            f.write_bytes(b"SIMDISTCP" + global_step.to_bytes(4, "little") + os.urandom(2048))
            written.append(str(f))
        return written

    def shutdown(self) -> int:
        """Release the cards: remove the gpu-load files this process still owns."""
        return self.load.stop() if self.load is not None else 0
