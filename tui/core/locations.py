"""Where rlconsole keeps things: every path it decides on this machine, in one module
(posting's `locations.py` is the model), so that "where does X go" has one answer and
tests can point all of them elsewhere with the environment.

- config (`RLCONSOLE_CONFIG_DIR`, else the platform's user config dir, e.g.
  `$XDG_CONFIG_HOME/rlconsole`): the user's profiles and failure catalog;
- state (`RLCONSOLE_STATE_DIR`, else the platform's user state dir, e.g.
  `$XDG_STATE_HOME/rlconsole`), made 0700 because what it holds says what ran where:
  the debug log, the run history, the log spools, CSV exports;
- the simulated cluster's state (`RLCONSOLE_SIM_DIR`, else `<state>/sim`).

Remote paths (on the cluster) are never decided here: they belong to the profile.
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "rlconsole"


def config_dir() -> Path:
    env = os.environ.get("RLCONSOLE_CONFIG_DIR")
    if env:
        return Path(env)
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP))


def user_profiles_dir() -> Path:
    return config_dir() / "profiles"


def user_catalog_path() -> Path:
    """The user's extra failure signatures (`tui/core/diagnosis.py`)."""
    return config_dir() / "diagnosis.yaml"


def state_dir() -> Path:
    """Created on first use, 0700."""
    from platformdirs import user_state_dir

    d = Path(os.environ.get("RLCONSOLE_STATE_DIR") or user_state_dir(APP))
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def log_path() -> Path:
    return state_dir() / "rlconsole.log"


def history_path() -> Path:
    return state_dir() / "runs.jsonl"


def spool_root() -> Path:
    """One directory per job below it (`tui/core/jobwatch.py`); created 0700."""
    d = state_dir() / "spool"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def exports_dir() -> Path:
    return state_dir() / "exports"


def sim_dir() -> Path:
    """The simulated cluster's state dir (not created here: `sim up` makes it)."""
    env = os.environ.get("RLCONSOLE_SIM_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_state_dir

    return Path(user_state_dir(APP)) / "sim"
