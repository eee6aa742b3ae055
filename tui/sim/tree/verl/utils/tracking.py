"""Experiment tracking as VeRL does it: console lines, TensorBoard event files, JSON lines.

The console format is VeRL's `concat_dict_to_str`: ``step:K - key:value - ...`` with each
value rendered by `pprint.pformat`, which is why numpy scalars appear as
``np.float64(0.41...)`` under numpy 2 while Python floats and ints appear bare. TensorBoard
gets one event per scalar at the global step (VeRL calls `SummaryWriter.add_scalar` per key)
in ``$TENSORBOARD_DIR``; unlike torch's writer (flushed every 120 s) the files are flushed
after every step, so a console reading them sees a step as soon as it is printed.
"""

from __future__ import annotations

import json
import numbers
import os
import pprint
import sys
import time
from typing import Any

__all__ = ["Tracking", "concat_dict_to_str"]


def concat_dict_to_str(data: dict[str, Any], step: int) -> str:
    """VeRL's console line for one step (verl/utils/logger/aggregate_logger.py)."""
    out = [f"step:{step}"]
    for k, v in data.items():
        if isinstance(v, numbers.Number):
            out.append(f"{k}:{pprint.pformat(v)}")
    return " - ".join(out)


def _scalar_writer(logdir: str) -> Any:
    """rlconsole's `ScalarWriter` when importable, else tensorboard's own writer.

    Both write real event files; the fallback keeps the stand-in usable on a node where the
    console's package is not installed. A file written by another helper may appear late,
    so the import is retried briefly before falling back.
    """
    for _ in range(3):
        try:
            from tui.sim.tbwrite import ScalarWriter

            return ScalarWriter(logdir, per_scalar=True, flush_secs=5)
        except ImportError:
            time.sleep(0.2)
    return _FallbackWriter(logdir)


class _FallbackWriter:
    """Minimal `add_scalars`/`flush`/`close` on tensorboard's EventFileWriter."""

    def __init__(self, logdir: str) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._ev, self._sm = event_pb2, summary_pb2
        self._w = EventFileWriter(logdir, flush_secs=5)

    def add_scalars(self, step: int, values: dict[str, float]) -> None:
        wt = time.time()
        for tag, v in values.items():
            val = self._sm.Summary.Value(tag=tag, simple_value=float(v))
            self._w.add_event(self._ev.Event(wall_time=wt, step=int(step),
                                             summary=self._sm.Summary(value=[val])))

    def flush(self) -> None:
        self._w.flush()

    def close(self) -> None:
        self._w.close()


class Tracking:
    """Send each step's metrics to the configured backends (`trainer.logger`)."""

    SUPPORTED = ("console", "tensorboard", "file")

    def __init__(self, project_name: str, experiment_name: str,
                 default_backend: str | list[str]) -> None:
        backends = [default_backend] if isinstance(default_backend, str) else list(default_backend)
        self.backends = backends
        self._tb: Any = None
        self._file: Any = None
        for b in backends:
            if b not in self.SUPPORTED:
                # The real run would try to log in to e.g. wandb; the simulation says so and
                # goes on, since no such service is reachable here.
                print(f"[sim] logger {b!r} is not simulated; ignored", file=sys.stderr, flush=True)
        if "tensorboard" in backends:
            tb_dir = os.environ.get("TENSORBOARD_DIR",
                                    f"tensorboard_log/{project_name}/{experiment_name}")
            os.makedirs(tb_dir, exist_ok=True)
            print(f"Saving tensorboard log to {tb_dir}.", flush=True)
            self._tb = _scalar_writer(tb_dir)
        if "file" in backends:
            path = os.environ.get("VERL_FILE_LOGGER_PATH")
            if path is None:
                root = os.path.expanduser(os.environ.get("VERL_FILE_LOGGER_ROOT", "."))
                os.makedirs(os.path.join(root, project_name), exist_ok=True)
                path = os.path.join(root, project_name, f"{experiment_name}.jsonl")
            print(f"Creating file logger at {os.path.abspath(path)}", flush=True)
            self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in finish()

    def log(self, data: dict[str, Any], step: int) -> None:
        numeric = {k: v for k, v in data.items() if isinstance(v, numbers.Number)}
        for b in self.backends:
            if b == "console":
                # One write per line: Ray's log monitor forwards whatever it has read when it
                # reaches the end of the file, so a line written in pieces can be split.
                sys.stdout.write(concat_dict_to_str(data, step) + "\n")
                sys.stdout.flush()
            elif b == "tensorboard" and self._tb is not None:
                self._tb.add_scalars(step, {k: float(v) for k, v in numeric.items()})
                self._tb.flush()
            elif b == "file" and self._file is not None:
                rec = {"step": step, "data": {k: float(v) if isinstance(v, float) or
                                              type(v).__module__ == "numpy" else v
                                              for k, v in numeric.items()}}
                self._file.write(json.dumps(rec).encode() + b"\n")

    def finish(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._file is not None:
            self._file.close()
            self._file = None
