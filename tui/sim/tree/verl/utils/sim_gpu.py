"""Mark the simulated cards a worker holds as busy, for the simulated `mthreads-gmi`.

The simulated node's `mthreads-gmi` shows card <i> busy while
``$RLCONSOLE_SIM_NODE_DIR/gpu-load/<i>.json`` exists, holds ``{"pid", "util", "mem_mib",
"name"}`` and that pid is alive. A worker therefore writes one file per card Ray gave it
(`ray.get_gpu_ids()`), refreshes it about once a second with varying utilisation and
memory (a real card's numbers move; a console that shows a frozen number is suspicious),
and removes it when it stops. A worker that is SIGKILLed leaves its file behind, but its pid
is dead, so the card shows free -- the same as a real card after its process died.

Which node directory: `RLCONSOLE_SIM_NODE_DIR` of the worker's environment, which Ray
workers inherit from the `ray start` shell of their node (verified with Ray 2.60). As a
fallback, `RLCONSOLE_SIM_NODE_MAP` may name a JSON file mapping a node name
(`RLCONSOLE_SIM_NODE`), a node IP or a Ray node id to a node directory.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import threading
import time
from pathlib import Path

__all__ = ["GpuLoad", "node_dir"]

# Typical busy figures for one phase of a GRPO step: (util low, util high).
_PHASE_UTIL: dict[str, tuple[int, int]] = {
    "init": (3, 18),
    "idle": (0, 3),
    "gen": (86, 99),
    "logprob": (68, 90),
    "update": (92, 100),
    "ckpt": (8, 30),
    "val": (78, 95),
}


def node_dir() -> Path | None:
    """The simulated node's state directory for this process, or None if unknown."""
    d = os.environ.get("RLCONSOLE_SIM_NODE_DIR")
    if d:
        return Path(d)
    map_file = os.environ.get("RLCONSOLE_SIM_NODE_MAP")
    if not map_file:
        return None
    try:
        mapping = json.loads(Path(map_file).read_text())
    except (OSError, ValueError):
        return None
    keys: list[str] = []
    if os.environ.get("RLCONSOLE_SIM_NODE"):
        keys.append(os.environ["RLCONSOLE_SIM_NODE"])
    try:
        import ray

        keys.append(ray.util.get_node_ip_address())
        keys.append(ray.get_runtime_context().get_node_id())
    except Exception:  # noqa: BLE001 - not in a Ray worker, or an old Ray
        pass
    for k in keys:
        if k in mapping:
            return Path(mapping[k])
    return None


class GpuLoad:
    """Own the gpu-load files of some cards for as long as this process holds them."""

    def __init__(self, ndir: Path, gpu_ids: list[int], *, name: str = "ray::WorkerDict",
                 mem_total_mib: int = 81920, period_s: float = 1.0) -> None:
        self.dir = Path(ndir) / "gpu-load"
        self.gpu_ids = list(gpu_ids)
        self.name = name
        self.pid = os.getpid()
        self.period_s = max(0.1, period_s)
        self.mem_total_mib = mem_total_mib
        self.phase = "init"
        self._rng = random.Random(self.pid)
        # Each card has its own slowly drifting memory level, as the caching allocator gives.
        self._mem = {g: int(mem_total_mib * self._rng.uniform(0.60, 0.72)) for g in self.gpu_ids}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Write the files now (so the cards are busy at once) and keep them fresh."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self._write_all()
        self._thread = threading.Thread(target=self._loop, name="sim-gpu-load", daemon=True)
        self._thread.start()

    def set_phase(self, phase: str) -> None:
        """Change what the cards look busy with; written at once so a probe sees it."""
        self.phase = phase if phase in _PHASE_UTIL else "gen"
        if self._thread is not None and not self._stop.is_set():
            self._write_all()

    def _util(self, g: int) -> int:
        lo, hi = _PHASE_UTIL.get(self.phase, (80, 99))
        wobble = 0.5 + 0.5 * math.sin(time.time() / 3.0 + g)
        return int(round(lo + (hi - lo) * (0.6 * wobble + 0.4 * self._rng.random())))

    def _next_mem(self, g: int) -> int:
        cur = self._mem[g] + int(self._rng.gauss(0, 350))
        lo, hi = int(self.mem_total_mib * 0.55), int(self.mem_total_mib * 0.86)
        self._mem[g] = min(hi, max(lo, cur))
        return self._mem[g]

    def _write_all(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            for g in self.gpu_ids:
                rec = {"pid": self.pid, "util": self._util(g), "mem_mib": self._next_mem(g),
                       "name": self.name}
                final = self.dir / f"{g}.json"
                tmp = self.dir / f".{g}.json.tmp.{self.pid}"
                try:
                    tmp.write_text(json.dumps(rec))
                    os.replace(tmp, final)  # a reader never sees half a file
                except OSError as e:
                    print(f"[sim] cannot write {final}: {e}", file=sys.stderr, flush=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._write_all()

    def stop(self) -> int:
        """Stop refreshing and remove the files that are still ours; idempotent."""
        with self._lock:
            self._stop.set()
            removed = 0
            for g in self.gpu_ids:
                f = self.dir / f"{g}.json"
                try:
                    if json.loads(f.read_text()).get("pid") == self.pid:
                        f.unlink()
                        removed += 1
                except (OSError, ValueError):
                    pass
                try:
                    (self.dir / f".{g}.json.tmp.{self.pid}").unlink()
                except OSError:
                    pass
            return removed
