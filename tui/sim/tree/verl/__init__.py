"""SIMULATION stand-in for VeRL (https://github.com/volcengine/verl) -- NOT the real VeRL.

rlconsole's simulated cluster installs this package at the path where the real cluster keeps
VeRL, so that the console runs *the exact same commands* against the simulation as against
real hardware (`python3 -u -m verl.trainer.main_ppo --config-path=... --config-name=...
<hydra overrides>`). It composes the overrides with the real hydra-core, places workers on
the real Ray cluster (one per declared GPU, or one per node holding all of its GPUs), marks
the cards it holds as busy for the simulated `mthreads-gmi`, prints VeRL-format logs, writes
real TensorBoard event files and checkpoints -- but trains nothing: metrics are modelled.
"""

__version__ = "0.0.0+rlconsole.sim"

#: Checked by tools that must never mistake this package for the real VeRL.
SIMULATION = True
