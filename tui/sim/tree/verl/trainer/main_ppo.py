"""SIMULATION stand-in for `python3 -m verl.trainer.main_ppo` (VeRL's PPO/GRPO entry point).

Run exactly as the real one::

    python3 -u -m verl.trainer.main_ppo --config-path=DIR --config-name=NAME.yaml <overrides>

Hydra (the real hydra-core, `@hydra.main`) composes the overrides against the YAML files in
DIR, so a missing or superfluous `+` fails with Hydra's own messages. The driver then joins
the Ray cluster, starts a `TaskRunner` actor (so Ray itself prefixes its output with
``(TaskRunner pid=N)``, as in a real job log) and waits for it; the training loop is in
`verl.trainer.ppo.ray_trainer`.

If no Ray log monitor runs for this session on this machine (`ray start
--include-log-monitor=false`), an actor's prints would never reach the job log; the loop then
runs in the driver and writes the same ``(TaskRunner pid=N)`` prefix itself
(`RLCONSOLE_SIM_TASKRUNNER=actor|driver|auto`, default auto).

SIGTERM/SIGINT (`ray job stop`) stop the loop, remove the gpu-load files, release the GPUs and
exit with 143 within about two seconds (Ray SIGKILLs a job driver 3 s after SIGTERM).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

import hydra
import ray
from omegaconf import DictConfig, OmegaConf

# Environment forwarded to the actors when this driver runs outside a Ray job (a job's
# runtime env already reaches them). Never the per-node RLCONSOLE_SIM_NODE_DIR/_NODE: each
# worker must keep its own node's value, inherited from that node's `ray start`.
_FORWARD_ENV = ("PYTHONPATH", "TENSORBOARD_DIR", "VERL_FILE_LOGGER_PATH", "VERL_FILE_LOGGER_ROOT",
                "PYTHONUNBUFFERED", "RLCONSOLE_SIM_STEP_S", "RLCONSOLE_SIM_WORKERS",
                "RLCONSOLE_SIM_NODE_MAP", "RLCONSOLE_SIM_STRICT_TF_CONFIG",
                "RLCONSOLE_SIM_PG_TIMEOUT_S")

_STOP = threading.Event()


@ray.remote(num_cpus=0, max_concurrency=4)
class TaskRunner:
    """Runs the trainer inside the cluster, like VeRL's TaskRunner."""

    def __init__(self) -> None:
        self.stop_event = threading.Event()
        self.done = threading.Event()
        self.trainer: Any = None

    def run(self, config: dict[str, Any]) -> str:
        return _run_trainer(config, self)

    def stop(self, timeout_s: float = 2.0) -> bool:
        """Ask the loop to stop and wait until it has released the cards."""
        self.stop_event.set()
        if not self.done.wait(timeout_s) and self.trainer is not None:
            self.trainer.shutdown()
        return True


def _run_trainer(config: dict[str, Any], holder: Any) -> str:
    """Build the trainer, take the GPUs, train; always release them on the way out."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer, StopTraining
    from verl.utils.config import validate_config

    trainer = None
    try:
        validate_config(config)  # as the real TaskRunner.run, before anything is loaded
        trainer = RayPPOTrainer(config, holder.stop_event)
        holder.trainer = trainer
        trainer.init_workers()
        trainer.fit()
        return "finished"
    except StopTraining:
        step = trainer.global_steps if trainer is not None else 0
        print(f"Training stopped at step {step}", flush=True)
        return "stopped"
    finally:
        if trainer is not None:
            trainer.shutdown()
        holder.done.set()


class _Prefixed:
    """A text stream that starts every line with Ray's ``(TaskRunner pid=N) `` prefix."""

    def __init__(self, stream: Any, prefix: str) -> None:
        self._s, self._p, self._bol = stream, prefix, True

    def write(self, text: str) -> int:
        out = []
        for part in text.splitlines(keepends=True):
            if self._bol:
                out.append(self._p)
            out.append(part)
            self._bol = part.endswith("\n")
        self._s.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self._s.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s, name)


def _log_monitor_running() -> bool | None:
    """Whether Ray's log monitor for this session runs here (None: cannot tell)."""
    try:
        session = ray._private.worker._global_node.get_session_dir_path()  # noqa: SLF001
    except Exception:  # noqa: BLE001 - private API; assume the normal case
        return None
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    needle = session.encode()
    for p in pids:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"log_monitor" in cmd and needle in cmd:
            return True
    return False


def _on_signal(signum: int, _frame: Any) -> None:
    _STOP.set()


def run_ppo(config: DictConfig) -> int:
    """Join the cluster and run the TaskRunner until it finishes, fails or is stopped."""
    OmegaConf.resolve(config)
    plain: dict[str, Any] = OmegaConf.to_container(config, resolve=True)  # type: ignore[assignment]
    plain["_sim_driver_pid"] = os.getpid()  # for a planted "driver killed" fault (sim_fault)
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {}
        if "RAY_JOB_CONFIG_JSON_ENV_VAR" not in os.environ:
            env = {k: os.environ[k] for k in _FORWARD_ENV if k in os.environ}
            kwargs["runtime_env"] = {"env_vars": env}
        address = os.environ.get("RAY_ADDRESS") or "auto"
        if address.startswith("http"):
            address = "auto"  # a dashboard URL is for `ray job submit`, not for ray.init
        print(f"ray init kwargs: {{'address': '{address}', 'num_cpus': "
              f"{plain.get('ray_kwargs', {}).get('ray_init', {}).get('num_cpus')}}}", flush=True)
        ray.init(address=address, **kwargs)

    mode = os.environ.get("RLCONSOLE_SIM_TASKRUNNER", "auto")
    if mode == "auto":
        mode = "driver" if _log_monitor_running() is False else "actor"
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    if mode == "driver":
        print("[sim] no Ray log monitor for this session on this node: the TaskRunner loop "
              "runs in the driver", file=sys.stderr, flush=True)
        prefix = f"(TaskRunner pid={os.getpid()}) "
        saved = sys.stdout, sys.stderr
        sys.stdout = _Prefixed(sys.stdout, prefix)  # type: ignore[assignment]
        sys.stderr = _Prefixed(sys.stderr, prefix)  # type: ignore[assignment]

        class _Holder:
            stop_event = _STOP
            done = threading.Event()
            trainer: Any = None

        try:
            result = _run_trainer(plain, _Holder())
        finally:
            # The driver's own error report (Hydra's) carries no TaskRunner prefix.
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = saved
        return 143 if result == "stopped" else 0

    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    runner = TaskRunner.options(  # type: ignore[attr-defined]
        # Next to the driver, whose node is sure to run a log monitor for the job's output.
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=True),
    ).remote()
    ref = runner.run.remote(plain)
    while True:
        ready, _ = ray.wait([ref], timeout=0.25)
        if ready:
            result = ray.get(ref)  # re-raises the trainer's error (RayTaskError)
            return 143 if result == "stopped" else 0
        if _STOP.is_set():
            try:
                ray.get(runner.stop.remote(2.0), timeout=2.5)
            except Exception as e:  # noqa: BLE001 - we are going down anyway
                print(f"[sim] stop: {e}", file=sys.stderr, flush=True)
            print("Received a stop signal; training stopped", flush=True)
            return 143


@hydra.main(config_path="config", config_name="ppo_megatron_trainer", version_base=None)
def main(config: DictConfig) -> None:
    rc = run_ppo(config)
    if rc:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)  # noqa: SLF001 - skip Ray's atexit shutdown races on a signalled exit


if __name__ == "__main__":
    main()
