"""The sim profile's `monitoring:` ranges, derived from the stand-in trainer's own model.

The seed's ranges (600-900 tokens/s per node, 15-20 min a step) describe 32 real cards on
Qwen3-8B; the simulated run is a small model at an accelerated pace, so those ranges would
mark a healthy simulated run red, and a console that cries wolf teaches nothing. Instead,
every bound here is computed from the parameters the trainer draws its figures from
(tree/verl/utils/sim_perf.py, loaded from its file: the console side never imports the
tree), with margins for a loaded machine; a planted `sim fault slow-steps` or
`low-throughput` is far outside them.
"""

from __future__ import annotations

import importlib.util
import math
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["perf_model", "sim_monitoring"]

PERF_FILE = Path(__file__).resolve().parent / "tree" / "verl" / "utils" / "sim_perf.py"

LOAD_FACTOR = 4.0
"""How much slower a wall-clock step may be on a loaded machine and still be healthy: on
the shared 2-core box, steps were seen to take twice as long under load; twice that again."""

MODEL_MARGIN = 1.25
"""Margin around the modelled throughput and step time bounds (products of several draws;
they do not depend on the machine)."""

DRAW_MARGIN = 1.1
"""Margin around MFU and memory, single draws clipped to hard bounds."""


@lru_cache(maxsize=1)
def perf_model() -> ModuleType:
    """tree/verl/utils/sim_perf.py, the trainer's parameters (plain constants)."""
    spec = importlib.util.spec_from_file_location("rlconsole_sim_perf", PERF_FILE)
    assert spec is not None and spec.loader is not None, PERF_FILE
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _down(x: float) -> float:
    """Round down to 2 significant digits (a range a person reads)."""
    if x <= 0:
        return 0.0
    q = 10 ** (math.floor(math.log10(x)) - 1)
    return math.floor(x / q) * q


def _up(x: float) -> float:
    if x <= 0:
        return 0.0
    q = 10 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / q) * q


def _r(x: float) -> float:
    """Float noise off a rounded bound (0.13 not 0.13000000000000003)."""
    return float(f"{x:.6g}")


def sim_monitoring(*, step_s: float, nnodes: int, batch: int, n: int, max_prompt: int, max_resp: int,
                   test_freq: int, save_freq: int, refresh_s: float) -> dict[str, Any]:
    """The `monitoring:` ranges (and stall factor) of a simulated run with these sizes.

    - throughput per node = modelled tokens/s per node / the sum of the phase fractions
      (each phase is a fraction of the same core time): bounded by the clipped tokens/s
      draw and the smallest / largest sum (jitter, a validation and a save step);
    - step time: the console shows the wall cadence (`step_s` x the slept fractions, up to
      LOAD_FACTOR slower, plus a refresh of the console), or before it has one, the
      modelled `timing_s/step` (core time x fractions, the core time from the fewest and
      the most tokens a step can have);
    - MFU and memory: the clip bounds of the actor's draws;
    - stall factor: the slowest healthy wall step over the nominal one, so that a healthy
      step on a loaded machine never reads as a stall while `slow-steps` does.
    """
    P = perf_model()
    ph = P.PHASES
    jit = (ph["gen"] + ph["update_actor"]) * P.JITTER
    fixed = sum(v for k, v in ph.items() if k != "adv")
    k_min = fixed - jit + P.ADV_RANGE[0]
    k_max = fixed + jit + P.ADV_RANGE[1] + (P.TESTING if test_freq > 0 else 0) \
        + (P.SAVE_CHECKPOINT if save_freq > 0 else 0)
    clip = P.TOKENS_PER_S_CLIP_SD * P.TOKENS_PER_S_SD
    tps_lo, tps_hi = P.TOKENS_PER_S_PER_NODE - clip, P.TOKENS_PER_S_PER_NODE + clip
    throughput = (_down(tps_lo / k_max / MODEL_MARGIN), _up(tps_hi / k_min * MODEL_MARGIN))

    wall = P.WALL_GEN + P.WALL_LOGPROB + sum(P.WALL_UPDATE)
    wall_max = wall + (P.WALL_VAL if test_freq > 0 else 0) + (P.WALL_SAVE if save_freq > 0 else 0)
    wall_lo = step_s * wall / LOAD_FACTOR
    wall_hi = step_s * wall_max * LOAD_FACTOR + 2 * refresh_s
    per_step = batch * max(1, n)
    fewest = per_step * (min(P.PROMPT_TEMPLATE_TOKENS, max_prompt) + P.MIN_RESPONSE_TOKENS)
    most = per_step * (max_prompt + max_resp)
    model_lo = fewest / (nnodes * tps_hi) * k_min / MODEL_MARGIN
    model_hi = most / (nnodes * tps_lo) * k_max * MODEL_MARGIN
    step_lo_s, step_hi_s = _down(min(wall_lo, model_lo)), _up(max(wall_hi, model_hi))

    mfu = (math.floor(P.MFU_CLIP[0] * 100 / DRAW_MARGIN), math.ceil(P.MFU_CLIP[1] * 100 * DRAW_MARGIN))
    mclip = P.MEM_ALLOC_CLIP_SD * P.MEM_ALLOC_SD
    mem = (math.floor((P.MEM_ALLOC_GIB - mclip + P.MEM_RESERVED_EXTRA_GIB[0]) / DRAW_MARGIN),
           math.ceil((P.MEM_ALLOC_GIB + mclip + P.MEM_RESERVED_EXTRA_GIB[1]) * DRAW_MARGIN))
    return {
        "mfu_pct": [mfu[0], mfu[1]],
        "throughput_tokens_per_s_per_node": [_r(throughput[0]), _r(throughput[1])],
        "step_time_min": [_r(step_lo_s / 60), _r(step_hi_s / 60)],
        "mem_gib_per_card": [mem[0], mem[1]],
        "stall_factor": float(math.ceil(wall_hi / (step_s * wall))),
    }
