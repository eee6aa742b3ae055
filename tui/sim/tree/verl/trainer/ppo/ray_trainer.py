"""SIMULATION stand-in for verl/trainer/ppo/ray_trainer.py: the GRPO driver loop.

`RayPPOTrainer` follows the real trainer's shape closely enough that the console sees what
it sees on real hardware, in the same order:

- data: the parquet files named by `data.train_files`/`data.val_files` are read with
  pyarrow (missing file -> the `datasets` error), overlong prompts are filtered, and
  ``steps = rows // train_batch_size * total_epochs`` (drop_last, as VeRL's dataloader),
  printed as ``Total training steps: N``;
- workers: `trainer.nnodes` x `trainer.n_gpus_per_node` GPUs are taken from the Ray cluster
  in one STRICT_PACK placement group per node ("Total available GPUs X is less than total
  desired GPUs Y" when the cluster is short), and each worker marks its cards busy;
- steps: a tqdm ``Training Progress`` line, one VeRL console line per step, the same scalars
  into TensorBoard, validation every `test_freq` steps (`val-core/<source>/reward/mean@k`),
  checkpoints every `save_freq` steps (`global_step_K/` + `latest_checkpointed_iteration.txt`)
  and resume from the latest one (`trainer.resume_mode=auto`).

The pace is real time (`RLCONSOLE_SIM_STEP_S` seconds a step, default 1.0); the metrics are
modelled on a real Qwen3-8B GRPO run's cards (MFU ~ 0.3, ~760 tokens/s per node), with
*modelled* step timings (`timing_s/*`) proportional to the step's tokens. Every parameter of
that model is in verl/utils/sim_perf.py, from which `rlconsole sim up` also derives the sim
profile's expected ranges; `sim fault slow-steps` / `low-throughput` push the figures out.

The vendor's debug `torch.save(batch, p)` after the rollout (the reference run's appendix,
problem 2) is here, commented out as the appendix's fix does; `install_sim_tree(
plant_debug_save=True)` restores it, and the first step then fails with
``RuntimeError: Parent directory /mnt/seed-program-nas/001688/kechun.wu/0226 does not exist.``
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
import threading
import time
from pprint import pprint
from typing import Any

import numpy as np

# The simulated cluster has no torch: the debug lines below call this stand-in, which fails
# exactly as torch.save does when the directory is missing.
from verl.utils import torch_standin as torch  # noqa: F401 - used by the debug block
from verl.utils import sim_perf as perf
from verl.utils import sim_fault
from verl.utils.tracking import Tracking

__all__ = ["RayPPOTrainer", "StopTraining"]


class StopTraining(Exception):
    """Raised inside the loop when the job is being stopped (SIGTERM / `ray job stop`)."""


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    return [str(v)]


def _fmt_interval(t: float) -> str:
    """tqdm's `format_interval`."""
    m, s = divmod(int(t), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class _Progress:
    """A tqdm-style ``Training Progress`` line on stderr.

    tqdm redraws with ``\\r`` and no newline; Ray's log monitor forwards only whole lines,
    so each redraw here ends with a newline and keeps tqdm's leading ``\\r`` -- which is
    what a real run's job log looks like once Ray has passed it on.
    """

    def __init__(self, total: int, initial: int, desc: str) -> None:
        self.total, self.n, self.initial, self.desc = total, initial, initial, desc
        self.start = time.time()
        self._draw()

    def _draw(self) -> None:
        frac = self.n / self.total if self.total else 0.0
        full = int(frac * 10)
        partial = " ▏▎▍▌▋▊▉"[int((frac * 10 - full) * 8)] if full < 10 else ""
        bar = ("█" * full + partial).ljust(10)
        elapsed = time.time() - self.start
        done = self.n - self.initial
        if done > 0 and elapsed > 0:
            rate = done / elapsed
            remaining = _fmt_interval((self.total - self.n) / rate)
            rate_s = f"{1 / rate:.2f}s/it" if rate < 1 else f"{rate:.2f}it/s"
        else:
            remaining, rate_s = "?", "?it/s"
        sys.stderr.write(f"\r{self.desc}: {frac * 100:3.0f}%|{bar}| {self.n}/{self.total} "
                         f"[{_fmt_interval(elapsed)}<{remaining}, {rate_s}]\n")
        sys.stderr.flush()

    def update(self, n: int = 1) -> None:
        self.n += n
        self._draw()

    def close(self) -> None:
        sys.stderr.flush()


def _read_parquet(path: str, prompt_key: str) -> tuple[np.ndarray, list[str]]:
    """Approximate prompt token lengths and the data_source of each row of a parquet file."""
    import pyarrow.parquet as pq

    p = os.path.expanduser(path)
    if not os.path.isfile(p):
        # What `datasets.load_dataset("parquet", data_files=...)` raises in the real run.
        raise FileNotFoundError(f"Unable to find '{path}'")
    table = pq.read_table(p)
    n = table.num_rows
    lengths = np.full(n, 150, dtype=np.int64)
    if prompt_key in table.column_names:
        for i, v in enumerate(table.column(prompt_key).to_pylist()):
            if isinstance(v, list):
                text = " ".join(str(m.get("content", "")) if isinstance(m, dict) else str(m)
                                for m in v)
            else:
                text = str(v)
            # ~3.6 characters per Qwen token for English math text, plus the chat template.
            lengths[i] = perf.PROMPT_TEMPLATE_TOKENS + len(text) * 10 // 36
    if "data_source" in table.column_names:
        sources = [str(s) for s in table.column("data_source").to_pylist()]
    else:
        sources = [os.path.splitext(os.path.basename(p))[0]] * n
    return lengths, sources


class RayPPOTrainer:
    """The GRPO loop; runs in the `TaskRunner` actor (or the driver, see main_ppo)."""

    def __init__(self, config: dict[str, Any], stop_event: threading.Event | None = None) -> None:
        self.config = config
        self.stop_event = stop_event or threading.Event()
        self.step_s = float(os.environ.get("RLCONSOLE_SIM_STEP_S", str(perf.STEP_S_DEFAULT)))
        self._slow = 1.0  # a slowing fault's factor: the wall pace and the modelled timings x this, MFU / this
        self.workers: list[Any] = []
        self.placement_groups: list[Any] = []
        self.logger: Tracking | None = None
        self.global_steps = 0
        t = config["trainer"]
        self.nnodes = int(t["nnodes"])
        self.n_gpus_per_node = int(t["n_gpus_per_node"])
        self.n_gpus = self.nnodes * self.n_gpus_per_node
        self.seed = int(config["data"].get("seed") or 1)
        self._create_dataloader()

    # ---------------------------------------------------------------- data
    def _create_dataloader(self) -> None:
        data = self.config["data"]
        max_prompt = int(data["max_prompt_length"])
        prompt_key = str(data.get("prompt_key", "prompt"))

        def load(files: list[str]) -> tuple[np.ndarray, list[str]]:
            lens: list[np.ndarray] = []
            srcs: list[str] = []
            for f in files:
                ln, src = _read_parquet(f, prompt_key)
                lens.append(ln)
                srcs.extend(src)
            arr = np.concatenate(lens) if lens else np.zeros(0, dtype=np.int64)
            print(f"dataset len: {len(arr)}", flush=True)
            if data.get("filter_overlong_prompts"):
                keep = arr <= max_prompt
                arr = arr[keep]
                srcs = [s for s, k in zip(srcs, keep) if k]
                print(f"filter dataset len: {len(arr)}", flush=True)
            elif len(arr) and int(arr.max()) > max_prompt and data.get("truncation") == "error":
                raise NotImplementedError(
                    f"prompt length {int(arr.max())} is longer than {max_prompt}.")
            return arr, srcs

        self.train_prompt_lens, _ = load(_as_list(data["train_files"]))
        self.val_prompt_lens, self.val_sources = load(_as_list(data["val_files"]))
        bs = int(data["train_batch_size"])
        self.steps_per_epoch = len(self.train_prompt_lens) // bs  # drop_last=True
        assert self.steps_per_epoch >= 1, "Train dataloader is empty!"
        print(f"Size of train dataloader: {self.steps_per_epoch}, Size of val dataloader: 1",
              flush=True)
        total = self.steps_per_epoch * int(self.config["trainer"]["total_epochs"])
        if self.config["trainer"].get("total_training_steps") is not None:
            total = int(self.config["trainer"]["total_training_steps"])
        self.total_training_steps = total
        print(f"Total training steps: {self.total_training_steps}", flush=True)

    # ------------------------------------------------------------- workers
    def _check_resource_available(self) -> None:
        import ray

        avail = ray.available_resources().get("GPU", 0)
        if avail < self.n_gpus:
            raise ValueError(
                f"Total available GPUs {int(avail)} is less than total desired GPUs {self.n_gpus}")

    def init_workers(self) -> None:
        """Take the GPUs: one placement group per node, WorkerDict actors inside."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from verl.utils.model import check_hf_model_dir
        from verl.workers.megatron_workers import WorkerDict

        # The tokenizer is loaded here in the real TaskRunner: a missing model fails now.
        hf = check_hf_model_dir(str(self.config["actor_rollout_ref"]["model"]["path"]))
        print(f"Model config: {hf.get('architectures', ['?'])[0]}, "
              f"{hf.get('num_hidden_layers')} layers, hidden {hf.get('hidden_size')}", flush=True)
        self._check_resource_available()
        per_gpu = os.environ.get("RLCONSOLE_SIM_WORKERS", "node") == "gpu"
        ngpn = self.n_gpus_per_node
        for i in range(self.nnodes):
            bundles = [{"GPU": 1}] * ngpn if per_gpu else [{"GPU": ngpn}]
            self.placement_groups.append(
                placement_group(bundles, strategy="STRICT_PACK", name=f"verl_sim_{os.getpid()}_{i}"))
        deadline = time.time() + float(os.environ.get("RLCONSOLE_SIM_PG_TIMEOUT_S", "60"))
        pending = [pg.ready() for pg in self.placement_groups]
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
            if self.stop_event.is_set():
                raise StopTraining()
            if pending and time.time() > deadline:
                raise TimeoutError(
                    f"{len(pending)} of {self.nnodes} placement groups of {ngpn} GPUs each "
                    "could not be placed (a node with that many free GPUs is missing)")
        cls = ray.remote(WorkerDict)
        plain = {k: v for k, v in self.config.items()}
        for i, pg in enumerate(self.placement_groups):
            if per_gpu:
                for b in range(ngpn):
                    self.workers.append(cls.options(
                        num_cpus=0, num_gpus=1, max_concurrency=2,
                        scheduling_strategy=PlacementGroupSchedulingStrategy(
                            pg, placement_group_bundle_index=b),
                    ).remote(i * ngpn + b, self.n_gpus, plain))
            else:
                self.workers.append(cls.options(
                    num_cpus=0, num_gpus=ngpn, max_concurrency=2,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        pg, placement_group_bundle_index=0),
                ).remote(i * ngpn, self.n_gpus, plain))
        infos = ray.get([w.init_model.remote() for w in self.workers])
        ips = sorted({inf["node_ip"] for inf in infos})
        print(f"[sim] {len(self.workers)} WorkerDict actors hold {self.n_gpus} GPUs on "
              f"{len(ips)} node(s): {', '.join(ips)}", flush=True)

    def _planted_fault(self) -> None:
        """Faults of the driver's own process planted by `rlconsole sim fault`: a stall (alive,
        no steps, until the fault is cleared) or the driver killed (SIGKILL, as the kernel's
        OOM killer or a `kill -9` would)."""

        f = sim_fault.active(self.global_steps, ("stall", "driver-killed"))
        if f is None:
            return
        if f["kind"] == "driver-killed":
            import signal

            os.kill(int(self.config.get("_sim_driver_pid") or os.getpid()), signal.SIGKILL)
            time.sleep(5)  # the driver (this process, or the one waiting on this actor) is gone
        self._phase("idle")
        while sim_fault.active(self.global_steps, ("stall",)) is not None:
            if self.stop_event.wait(0.2):
                raise StopTraining()

    def _phase(self, phase: str) -> None:
        for w in self.workers:
            w.set_phase.remote(phase)  # fire and forget: only the gpu-load files change

    def _sleep(self, fraction: float) -> None:
        if self.stop_event.wait(max(0.0, self.step_s * fraction * self._slow)):
            raise StopTraining()

    # ---------------------------------------------------------------- loop
    def _progress(self) -> float:
        return (self.global_steps - 1) / max(1, self.total_training_steps - 1)

    def _reward_level(self, progress: float, rng: np.random.Generator) -> float:
        """Mean reward of a GRPO math run: ~0.3 at the start, rising and flattening."""
        return float(np.clip(0.30 + 0.42 * (1 - np.exp(-3.0 * progress)) + rng.normal(0, 0.02),
                             0.02, 0.98))

    def _validate(self) -> dict[str, Any]:
        rng = np.random.default_rng(self.seed * 7919 + self.global_steps)
        k = int(self.config["actor_rollout_ref"]["rollout"].get("val_kwargs", {}).get("n", 1) or 1)
        p = max(0.0, self._progress())
        out: dict[str, Any] = {}
        for i, src in enumerate(dict.fromkeys(self.val_sources)):
            rows = sum(1 for s in self.val_sources if s == src)
            q = float(np.clip(0.16 - 0.03 * i + 0.2 * (1 - np.exp(-2.5 * p)), 0.01, 0.95))
            acc = (rng.random((rows, k)) < q).astype(np.float64)
            out[f"val-core/{src}/reward/mean@{k}"] = np.mean(acc)
            if k > 1:
                out[f"val-aux/{src}/reward/std@{k}"] = np.mean(np.std(acc, axis=1))
                out[f"val-core/{src}/reward/best@{k}/mean"] = np.mean(np.max(acc, axis=1))
        return out

    def fit(self) -> None:
        import ray

        t = self.config["trainer"]
        self.logger = Tracking(str(t["project_name"]), str(t["experiment_name"]), t["logger"])
        self._load_checkpoint()
        if t.get("val_before_train", True):
            val = self._validate()
            pprint(f"Initial validation metrics: {val}")
            sys.stdout.flush()
            self.logger.log(data=val, step=self.global_steps)
            if t.get("val_only", False):
                return
        if self.global_steps >= self.total_training_steps:
            print(f"Training already finished at step {self.global_steps}", flush=True)
            return
        bar = _Progress(self.total_training_steps, self.global_steps, "Training Progress")
        current_epoch = self.global_steps // self.steps_per_epoch
        start_batch = self.global_steps % self.steps_per_epoch
        self.global_steps += 1
        last_val: dict[str, Any] | None = None

        data = self.config["data"]
        rollout = self.config["actor_rollout_ref"]["rollout"]
        bs, n = int(data["train_batch_size"]), int(rollout.get("n", 1))
        max_prompt, max_resp = int(data["max_prompt_length"]), int(data["max_response_length"])
        lr = float(self.config["actor_rollout_ref"]["actor"]["optim"]["lr"])
        test_freq, save_freq = int(t.get("test_freq", -1)), int(t.get("save_freq", -1))

        for epoch in range(current_epoch, int(t["total_epochs"])):
            order = np.random.default_rng(self.seed + epoch).permutation(len(self.train_prompt_lens))
            for batch_idx in range(start_batch if epoch == current_epoch else 0,
                                   self.steps_per_epoch):
                if self.stop_event.is_set():
                    raise StopTraining()
                self._planted_fault()
                # A fault makes the modelled cards slower by its factor: every phase takes
                # that much longer on the wall clock and in `timing_s/*`, and the tokens a
                # second and the MFU fall by it (figures that follow from one another).
                slow = sim_fault.active(self.global_steps, ("slow-steps",))
                low = sim_fault.active(self.global_steps, ("low-throughput",))
                self._slow = (perf.SLOW_STEPS_FACTOR if slow else perf.LOW_THROUGHPUT_FACTOR if low else 1.0)
                metrics: dict[str, Any] = {}
                timing_raw: dict[str, float] = {}
                is_last_step = self.global_steps >= self.total_training_steps
                rng = np.random.default_rng(self.seed * 104729 + self.global_steps)
                progress = self._progress()

                # ---- generate a batch (rollout)
                self._phase("gen")
                self._sleep(perf.WALL_GEN)
                prompt_len = self.train_prompt_lens[order[batch_idx * bs:(batch_idx + 1) * bs]]
                prompt_len = np.minimum(np.repeat(prompt_len, n), max_prompt)
                mean_resp = max_resp * (0.20 + 0.15 * progress)
                resp_len = np.clip(np.round(rng.gamma(2.0, mean_resp / 2.0, bs * n)),
                                   perf.MIN_RESPONSE_TOKENS, max_resp)
                level = self._reward_level(progress, rng)
                difficulty = np.clip(rng.normal(level, 0.28, bs), 0.0, 1.0)
                scores = (rng.random((bs, n)) < difficulty[:, None]).astype(np.float64).ravel()
                batch = {"prompt_length": prompt_len, "response_length": resp_len,
                         "token_level_scores": scores, "global_steps": self.global_steps}

                # DEBUG: Commented out for production training
                # p = '/mnt/seed-program-nas/001688/kechun.wu/0226/30b_gen_32k_no_graph_amthink_128*8.pt'
                # #p = '/mnt/seed-program-nas/001688/kechun.wu/0226/gen_data/30b_gen_32k_graph+test.pt'
                # p = '/mnt/seed-program-nas/001688/kechun.wu/0226/30b_gen_32k_graph_amthink_128*8.pt'
                # torch.save(batch,p)

                # ---- reward, old log prob, ref, advantages (GRPO: normalise within a group)
                self._phase("logprob")
                self._sleep(perf.WALL_LOGPROB)
                grouped = scores.reshape(bs, n)
                adv = grouped - grouped.mean(axis=1, keepdims=True)
                if self.config["algorithm"].get("norm_adv_by_std_in_grpo", True) and n > 1:
                    adv = adv / (grouped.std(axis=1, ddof=1, keepdims=True) + 1e-6)
                adv = adv.ravel()

                # ---- update actor
                self._sleep(perf.WALL_UPDATE[0])
                outs = ray.get([w.update_actor.remote({
                    "global_step": self.global_steps, "progress": progress, "lr": lr,
                    "advantages": adv[:64].tolist(), "num_micro_batches": 8, "speed": 1.0 / self._slow,
                }) for w in self.workers])
                self._sleep(perf.WALL_UPDATE[1])
                metrics.update(outs[0])

                # ---- modelled timings of the real hardware
                tokens = int(prompt_len.sum() + resp_len.sum())
                clip = perf.TOKENS_PER_S_CLIP_SD * perf.TOKENS_PER_S_SD
                tps_node = float(np.clip(rng.normal(perf.TOKENS_PER_S_PER_NODE, perf.TOKENS_PER_S_SD),
                                         perf.TOKENS_PER_S_PER_NODE - clip, perf.TOKENS_PER_S_PER_NODE + clip))
                core = tokens / (self.nnodes * tps_node) * self._slow
                for name, frac in perf.PHASES.items():
                    if name in ("gen", "update_actor"):
                        frac *= float(rng.uniform(1 - perf.JITTER, 1 + perf.JITTER))
                    elif name == "adv":
                        frac = float(rng.uniform(*perf.ADV_RANGE))
                    timing_raw[name] = frac * core

                if test_freq > 0 and (is_last_step or self.global_steps % test_freq == 0):
                    self._phase("val")
                    self._sleep(perf.WALL_VAL)
                    val = self._validate()
                    timing_raw["testing"] = perf.TESTING * core
                    if is_last_step:
                        last_val = val
                    metrics.update(val)
                if save_freq > 0 and (is_last_step or self.global_steps % save_freq == 0):
                    self._save_checkpoint()
                    self._sleep(perf.WALL_SAVE)
                    timing_raw["save_checkpoint"] = perf.SAVE_CHECKPOINT * core
                timing_raw["step"] = sum(timing_raw.values())
                self._phase("gen")

                metrics.update({"training/global_step": self.global_steps, "training/epoch": epoch})
                metrics.update(self._data_metrics(scores, adv, resp_len, prompt_len,
                                                  max_resp, max_prompt))
                for name, v in timing_raw.items():
                    metrics[f"timing_s/{name}"] = v
                resp_tokens = int(resp_len.sum())
                for name in ("gen", "ref", "old_log_prob", "adv", "update_actor"):
                    denom = resp_tokens if name == "gen" else tokens
                    metrics[f"timing_per_token_ms/{name}"] = timing_raw[name] * 1000 / denom
                metrics["perf/total_num_tokens"] = tokens
                metrics["perf/time_per_step"] = timing_raw["step"]
                metrics["perf/throughput"] = tokens / (timing_raw["step"] * self.n_gpus)

                self.logger.log(data=metrics, step=self.global_steps)
                bar.update(1)
                self.global_steps += 1
                if is_last_step:
                    if last_val is not None:
                        pprint(f"Final validation metrics: {last_val}")
                        sys.stdout.flush()
                    bar.close()
                    return
            start_batch = 0

    @staticmethod
    def _data_metrics(scores: np.ndarray, adv: np.ndarray, resp: np.ndarray, prompt: np.ndarray,
                      max_resp: int, max_prompt: int) -> dict[str, Any]:
        """VeRL's compute_data_metrics: torch `.item()` values, i.e. plain Python floats."""
        w = resp / resp.sum()
        m: dict[str, Any] = {}
        for name, arr in (("score", scores), ("rewards", scores)):
            m[f"critic/{name}/mean"] = float(arr.mean())
            m[f"critic/{name}/max"] = float(arr.max())
            m[f"critic/{name}/min"] = float(arr.min())
        for name in ("advantages", "returns"):
            m[f"critic/{name}/mean"] = float((adv * w).sum())
            m[f"critic/{name}/max"] = float(adv.max())
            m[f"critic/{name}/min"] = float(adv.min())
        for pfx in ("response_length", "response_length_non_aborted"):
            m[f"{pfx}/mean"] = float(resp.mean())
            m[f"{pfx}/max"] = float(resp.max())
            m[f"{pfx}/min"] = float(resp.min())
            m[f"{pfx}/clip_ratio"] = float((resp >= max_resp).mean())
        m["response/aborted_ratio"] = 0.0
        m["prompt_length/mean"] = float(prompt.mean())
        m["prompt_length/max"] = float(prompt.max())
        m["prompt_length/min"] = float(prompt.min())
        m["prompt_length/clip_ratio"] = float((prompt >= max_prompt).mean())
        return m

    # --------------------------------------------------------- checkpoints
    def _ckpt_root(self) -> str:
        return os.path.abspath(os.path.expanduser(str(self.config["trainer"]["default_local_dir"])))

    def _save_checkpoint(self) -> None:
        import ray

        root = self._ckpt_root()
        folder = os.path.join(root, f"global_step_{self.global_steps}")
        print(f"local_global_step_folder: {folder}", flush=True)
        actor = os.path.join(folder, "actor")
        self._phase("ckpt")
        ray.get([w.save_checkpoint.remote(actor, self.global_steps) for w in self.workers])
        dist = os.path.join(actor, "dist_ckpt")
        os.makedirs(dist, exist_ok=True)
        with open(os.path.join(dist, ".metadata"), "wb") as f:
            pickle.dump({"sim": True, "global_step": self.global_steps,
                         "world_size": self.n_gpus}, f)
        with open(os.path.join(dist, "common.pt"), "wb") as f:
            pickle.dump({"iteration": self.global_steps}, f)
        with open(os.path.join(dist, "metadata.json"), "w") as f:
            json.dump({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                       "common_backend": "torch", "common_backend_version": 1}, f)
        hf_cfg = os.path.join(os.path.expanduser(
            str(self.config["actor_rollout_ref"]["model"]["path"])), "config.json")
        if os.path.isfile(hf_cfg):
            os.makedirs(os.path.join(actor, "huggingface"), exist_ok=True)
            shutil.copy(hf_cfg, os.path.join(actor, "huggingface", "config.json"))
        with open(os.path.join(folder, "data.pt"), "wb") as f:
            pickle.dump({"global_step": self.global_steps}, f)
        keep = self.config["trainer"].get("max_actor_ckpt_to_keep")
        if keep:
            steps = sorted(int(d.split("_")[-1]) for d in os.listdir(root)
                           if d.startswith("global_step_") and d.split("_")[-1].isdigit())
            for s in steps[:-int(keep)]:
                shutil.rmtree(os.path.join(root, f"global_step_{s}"), ignore_errors=True)
        with open(os.path.join(root, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(self.global_steps))

    def _load_checkpoint(self) -> int:
        t = self.config["trainer"]
        mode = t.get("resume_mode", "auto")
        if mode == "disable":
            return 0
        root = self._ckpt_root()
        if mode == "resume_path" and t.get("resume_from_path"):
            folder = os.path.abspath(str(t["resume_from_path"]))
        else:
            tracker = os.path.join(root, "latest_checkpointed_iteration.txt")
            if not os.path.isfile(tracker):
                print(f"Checkpoint tracker file does not exist: {tracker}", flush=True)
                print("Training from scratch", flush=True)
                return 0
            with open(tracker) as f:
                folder = os.path.join(root, f"global_step_{int(f.read().strip())}")
            if not os.path.isdir(folder):
                print(f"Checkpoint does not exist: {folder}", flush=True)
                print("Training from scratch", flush=True)
                return 0
        print(f"Load from checkpoint folder: {folder}", flush=True)
        self.global_steps = int(folder.rstrip("/").split("global_step_")[-1])
        print(f"Setting global step to {self.global_steps}", flush=True)
        print(f"Resuming from {folder}", flush=True)
        return self.global_steps

    # ------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Free the cards (gpu-load files), the actors and the placement groups."""
        import ray
        from ray.util.placement_group import remove_placement_group

        if self.workers:
            try:
                ray.get([w.shutdown.remote() for w in self.workers], timeout=3)
            except Exception as e:  # noqa: BLE001 - best effort on the way out
                print(f"[sim] worker shutdown: {e}", file=sys.stderr, flush=True)
            for w in self.workers:
                try:
                    ray.kill(w)
                except Exception:  # noqa: BLE001
                    pass
            self.workers = []
        for pg in self.placement_groups:
            try:
                remove_placement_group(pg)
            except Exception:  # noqa: BLE001
                pass
        self.placement_groups = []
        if self.logger is not None:
            self.logger.finish()
            self.logger = None
