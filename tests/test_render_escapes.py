"""Values holding `\\${` reach the config as written (issue 15, Low).

Hydra passes a quoted value's escapes on to OmegaConf, which reads `\\${` as an escaped
interpolation and `\\\\${` as a backslash followed by a live one. A value `\\${x}` was
rendered `"\\\\${x}"` and arrived as `\\` + the value of `x`. The oracle here is the real
pair: Hydra's override parser, then OmegaConf resolving the value in a config."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from tui.core.profile import Override
from tui.core.render import _INTERP_RE, override_arg

PARSER = OverridesParser.create()


def _arrives_as(value: str) -> str:
    arg = override_arg(Override(prefix="", key="a", value=value))
    assert shlex.split(shlex.join([arg])) == [arg]
    v = PARSER.parse_override(arg).value()
    return OmegaConf.create({"a": v, "x": "X"}).a


@pytest.mark.parametrize("value", ["\\${x}", "\\\\${x}", "a\\${x}b", "\\${x} and ${x", "$\\{x}", "\\$${x}",
                                   "'\\${x}'", '"\\${x}"', "\\${x}\\"])
def test_backslash_dollar_brace_arrives_literally(value: str) -> None:
    assert _arrives_as(value) == value


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="\\${}x a'\"", max_size=16).filter(lambda s: not _INTERP_RE.match(s)))
def test_any_mix_of_backslashes_and_interpolation_marks_arrives_literally(value: str) -> None:
    assert _arrives_as(value) == value
