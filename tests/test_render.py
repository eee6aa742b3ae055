"""`render`: the overrides are the seed script's, key for key and value for value.

The seed's own script is the oracle: its `ray job submit` block is parsed here with
`shlex` (after the shell variables are substituted, and *including* the lines after the
stray comment that the real script drops), and Hydra's own override parser compares the
values, so `True` vs `true` or quoting differences cannot hide a real mismatch.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.samples import seed_text
from tui.cli import main
from tui.core.profile import Override, load_profile, load_profile_text
from tui.core.render import hydra_value, override_arg, render

REPO = Path(__file__).resolve().parent.parent
SEED_PROFILE = REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml"
DATA = Path(__file__).parent / "data"


def _seed_overrides() -> list[str]:
    text = seed_text()
    script = text[text.index("RAY_ADDRESS=") : text.index("trainer.total_epochs=10") + len("trainer.total_epochs=10")]
    subst = {
        "$train_files": "/data/datapool/verl/musa_examples/data/amt_math17k_d_qweninstruct.parquet",
        "$test_files": "['/data/datapool/verl/musa_examples/data/aime_2024.parquet','/data/datapool/verl/musa_examples/data/aime_2025.parquet']",
        "$max_prompt_length": "1024", "$max_response_length": "16384",
        "$HF_MODEL_PATH": "/data/datapool/models/Qwen3-8B",
        "$DIST_CKPT_PATH": "/data/datapool/models/Qwen3-8B-MCore",
        "${use_dynamic_bsz}": "True", "${actor_ppo_max_token_len}": "17408",
        "${infer_ppo_max_token_len}": "17408", "$CONFIG_PATH": "/data/datapool/verl/verl/trainer/config",
        "$runtime_env": "./runtime_env.yaml", "${HEAD_IP}": "10.10.142.125",
    }
    for k, v in sorted(subst.items(), key=lambda kv: -len(kv[0])):
        script = script.replace(k, v)
    # Join continuation lines and drop the comment line the real shell would stop at:
    # the point of the profile is to keep what the seed meant, not what its shell did.
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("#")]
    argv = shlex.split(" ".join(ln.rstrip().rstrip("\\") for ln in lines))
    start = argv.index("verl.trainer.main_ppo") + 1
    return [a for a in argv[start:] if not a.startswith("--config-")]


def _parse(ov: str):  # -> hydra Override
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_override(ov)


def test_seed_overrides_key_for_key_value_for_value() -> None:
    seed = _seed_overrides()
    assert len(seed) == 78  # 18 before the stray comment line, 60 after (bash runs only the 18)
    rendered = [a for a in render(load_profile(SEED_PROFILE)).entrypoint if "=" in a and not a.startswith("--")]
    seed_map = {}
    for a in seed:
        o = _parse(a)
        seed_map[o.key_or_group] = o
    ours = {}
    for a in rendered:
        o = _parse(a)
        ours[o.key_or_group] = o
    # every seed override is there, with the same prefix and the same value
    for key, so in seed_map.items():
        assert key in ours, f"missing override {key}"
        oo = ours[key]
        assert oo.type == so.type, f"{key}: prefix differs"
        assert oo.value() == so.value(), f"{key}: {oo.value()!r} != {so.value()!r}"
    # the only extra is default_local_dir, documented in the profile's header
    assert set(ours) - set(seed_map) == {"trainer.default_local_dir"}


def test_seed_dropped_overrides_are_present() -> None:
    argv = render(load_profile(SEED_PROFILE)).entrypoint
    assert "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=8" in argv
    assert "+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=48" in argv
    assert "trainer.total_epochs=10" in argv


def test_runtime_env_has_network_vars_and_absolute_tensorboard_dir() -> None:
    env = render(load_profile(SEED_PROFILE)).runtime_env
    assert set(env) == {"env_vars"}, "no working_dir: the console's directory is never uploaded"
    ev = env["env_vars"]
    for k, v in {"MCCL_SOCKET_IFNAME": "bond0", "GLOO_SOCKET_IFNAME": "bond0", "MCCL_IB_GID_INDEX": "3",
                 "MCCL_IB_TIMEOUT": "20", "MCCL_IB_RETRY_CNT": "20", "MCCL_CROSS_NIC": "1",
                 "GLOBAL_PROFILER_TOOL": "null"}.items():
        assert ev[k] == v
    assert ev["TENSORBOARD_DIR"].startswith("/")
    assert ev["PYTHONPATH"] == "/home/Megatron-LM:/data/datapool/verl"


def test_render_cli_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--profile", str(SEED_PROFILE)]) == 0
    text = capsys.readouterr().out
    words = shlex.split(text, comments=True)
    job = render(load_profile(SEED_PROFILE))
    for a in job.entrypoint:
        assert a in words, a
    assert "0.0.0.0" not in text
    assert main(["render", "--profile", str(SEED_PROFILE), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["entrypoint"][:4] == ["python3", "-u", "-m", "verl.trainer.main_ppo"]
    assert shlex.split(data["entrypoint_str"]) == data["entrypoint"]
    assert data["runtime_env"]["env_vars"]["MCCL_CROSS_NIC"] == "1"
    assert re.fullmatch(r"Qwen3-8B_megatron_sglang-\d{8}-\d{6}", data["submission_id"])


@pytest.mark.parametrize("value,expected", [
    (True, "True"), (False, "False"), (None, "null"), (8, "8"), (0.6, "0.6"),
    (1e-6, "1e-06"), ("1e-6", '"1e-6"'), ("8", '"8"'), ("error", "error"), (["console", "tensorboard"], '["console","tensorboard"]'),
    ("a b", '"a b"'), ("${data.max_prompt_length}", "${data.max_prompt_length}"),
    ("null", '"null"'), ({}, "{}"), ("~/x", '"~/x"'), ("a~b", '"a~b"'),
])
def test_hydra_values(value: object, expected: str) -> None:
    assert hydra_value(value) == expected


text_values = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)


@settings(max_examples=300, deadline=None)
@given(text_values)
def test_any_string_survives_shell_and_hydra(value: str) -> None:
    """Shell metacharacters, quotes, backslashes, `${`: split by the shell and parsed by
    Hydra, every override gives back exactly the string the profile holds."""
    o = Override(prefix="", key="a.b", value=value)
    arg = override_arg(o)
    line = shlex.join(["python3", "-m", "x", arg])
    assert shlex.split(line)[3] == arg
    assert _parse(arg).value() == value


@settings(max_examples=100, deadline=None)
@given(st.lists(text_values, max_size=4))
def test_any_string_list_survives(values: list[str]) -> None:
    arg = override_arg(Override(prefix="+", key="k", value=values))
    assert shlex.split(shlex.join([arg])) == [arg]
    assert _parse(arg).value() == values


# Keys `[a-z][a-z0-9_]{0,8}`, built from plain strategies: `st.from_regex` imports its module
# lazily inside the test, where pytest's assertion rewriting of it can hit CPython 3.11's
# "AST constructor recursion depth mismatch" under Hypothesis's raised recursion limit.
_KEYS = st.builds(lambda a, b: a + b, st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
                  st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", max_size=8))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_KEYS,
                       st.one_of(st.booleans(), st.integers(-10**6, 10**6), text_values), max_size=5))
def test_profile_overrides_roundtrip(values: dict) -> None:
    """Whole profiles: whatever leaves the YAML holds come back out of the argv."""
    import yaml

    text = (DATA / "good_profile.yaml").read_text()
    class Dumper(yaml.SafeDumper):
        """Writes YAML the profile loader reads back: it reads `1e-6` as a float (YAML 1.2,
        as users mean it), so a string such as `0E0` must be written quoted."""

    Dumper.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )
    extra = yaml.dump({"extra": values} if values else {"extra": {"k": 1}}, Dumper=Dumper,
                      default_flow_style=False)
    text = text.replace("    trainer:\n", "".join("    " + ln + "\n" for ln in extra.splitlines()) + "    trainer:\n")
    prof = load_profile_text(text, "x.yaml")
    argv = shlex.split(render(prof).entrypoint_str)
    for k, v in (values or {"k": 1}).items():
        arg = next(a for a in argv if a.startswith(f"extra.{k}="))
        assert _parse(arg).value() == v
