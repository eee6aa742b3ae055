"""Where the real captured samples are, for every parser test.

`$RLCONSOLE_SAMPLES`, else `<repo>/../shared/samples` (CI clones the repo with shared/
beside it). Missing: the test fails under CI=true (CI is meant to run them), else skips.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def samples_dir() -> Path:
    env = os.environ.get("RLCONSOLE_SAMPLES")
    path = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "samples"
    if not path.is_dir():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"samples directory {path} is missing (set RLCONSOLE_SAMPLES)")
        pytest.skip(f"samples directory {path} is missing")
    return path


def read_sample(rel: str, *, strip_source: bool = True) -> str:
    """A sample's text, without its first line when that line names the source."""
    text = (samples_dir() / rel).read_text(encoding="utf-8")
    if strip_source:
        first, _, rest = text.partition("\n")
        if re.match(r"^\s*(#|//)", first):
            return rest
    return text
