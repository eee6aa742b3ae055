"""SIMULATION: the stand-in trainer's performance model, in one place.

The trainer (verl/trainer/ppo/ray_trainer.py) and its actor (verl/workers/actor/
megatron_actor.py) draw their figures from these parameters, and `rlconsole sim up`
derives the sim profile's `monitoring:` ranges from the very same numbers
(tui/sim/sim_ranges.py reads this file): a healthy simulated run is in range by
construction, and a planted `sim fault` (slow-steps, low-throughput) is what leaves it.

Two clocks, as in the module docstring of ray_trainer.py:

- the *wall* pace, `RLCONSOLE_SIM_STEP_S` seconds a step (what the console measures between
  step lines): the phases sleep WALL_* fractions of it;
- the *modelled* hardware timings written as `timing_s/*`: each phase is a fraction of the
  "core" time ``tokens / (nnodes x tokens/s per node)``, so `perf/throughput` per node is
  ``tokens/s per node / sum(fractions)``.

Plain constants and no imports: it must load on its own, outside the tree.
"""

STEP_S_DEFAULT = 1.0
"""Wall seconds a step when `RLCONSOLE_SIM_STEP_S` is not set."""

# -- wall pace: fractions of RLCONSOLE_SIM_STEP_S slept in each phase of a step
WALL_GEN = 0.55
WALL_LOGPROB = 0.10
WALL_UPDATE = (0.05, 0.28)  # before and after the actor update round trip
WALL_VAL = 0.30  # extra, on a test_freq step
WALL_SAVE = 0.20  # extra, on a save_freq step

# -- the data: a prompt is at least this many tokens (chat template), a response at least
PROMPT_TEMPLATE_TOKENS = 24
MIN_RESPONSE_TOKENS = 8

# -- modelled hardware
TOKENS_PER_S_PER_NODE = 760.0  # mean tokens/s per node of the modelled cards
TOKENS_PER_S_SD = 45.0
TOKENS_PER_S_CLIP_SD = 4.0  # draws are clipped to mean +- this many SDs
JITTER = 0.03  # gen and update_actor vary by +-3%
# phase -> fraction of the core time (gen and update_actor also jitter)
PHASES = {"gen": 0.56, "reward": 0.012, "old_log_prob": 0.055, "ref": 0.05, "adv": 0.003,
          "update_actor": 0.30, "update_weights": 0.02}
ADV_RANGE = (0.002, 0.005)  # "adv" is drawn in this range (CPU work, tiny)
TESTING = 0.12  # extra fraction on a test_freq step
SAVE_CHECKPOINT = 0.05  # extra fraction on a save_freq step

MFU_MEAN, MFU_SD, MFU_CLIP = 0.30, 0.015, (0.22, 0.38)  # perf/mfu/actor, a fraction
MEM_ALLOC_GIB, MEM_ALLOC_SD, MEM_ALLOC_CLIP_SD = 52.0, 1.5, 4.0  # perf/max_memory_allocated_gb
MEM_RESERVED_EXTRA_GIB = (3.0, 7.5)  # reserved = allocated + a draw in this range

# -- planted faults (rlconsole sim fault)
SLOW_STEPS_FACTOR = 40.0
"""`slow-steps`: every step takes this many times as long, on the wall clock and on the
modelled hardware (throughput divided by it)."""
LOW_THROUGHPUT_FACTOR = 6.0
"""`low-throughput`: the modelled cards move this many times fewer tokens a second, so
every phase takes that much longer (wall clock and `timing_s/*`) and the MFU is that much
lower; small enough that a step stays inside the stall factor (a slow run, not a hung one)."""
