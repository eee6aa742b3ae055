"""Where the real captured samples and the seed document are, for every test.

Both live in the repository (`tests/data/samples/`, `tests/data/seed/`), copied from the
project's `shared/` folder with each file's first line naming its source, so a clone of
the project alone runs the whole suite. `$RLCONSOLE_SAMPLES` points the parser tests at
another samples tree (e.g. a user's "my cards don't parse" capture).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DATA = Path(__file__).resolve().parent / "data"
SEED_DOC = DATA / "seed" / "seed_run_document.txt"


def samples_dir() -> Path:
    env = os.environ.get("RLCONSOLE_SAMPLES")
    path = Path(env) if env else DATA / "samples"
    if not path.is_dir():
        pytest.fail(f"samples directory {path} is missing")
    return path


def seed_text() -> str:
    """The seed run document, without the source line the copy starts with."""
    text = SEED_DOC.read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    assert first.startswith("# source:"), "the seed copy names its source"
    return rest


def read_sample(rel: str, *, strip_source: bool = True) -> str:
    """A sample's text, without its first line when that line names the source."""
    text = (samples_dir() / rel).read_text(encoding="utf-8")
    if strip_source:
        first, _, rest = text.partition("\n")
        if re.match(r"^\s*(#|//)", first):
            return rest
    return text
