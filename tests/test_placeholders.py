"""Placeholder values (`<path_to_dsv3_config>`, `/path/to/model`, `CHANGE_ME`, `YOUR_KEY`,
`xxx`): one rule (`tui.core.placeholders`), named by `rlconsole import` as it writes the
profile and failed by `check --static` (`profile.placeholders`) until they are replaced.
The bash-oracle side (a corpus script with each form) is in tests/test_import.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tui.cli import main
from tui.core.checks import static_checks
from tui.core.placeholders import placeholder_reason
from tui.core.profile import load_profile, load_profile_text

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml"
GOOD = (Path(__file__).parent / "data" / "good_profile.yaml").read_text()
FIX = "replace the placeholder with the real value"


@pytest.mark.parametrize("value", [
    "<path_to_dsv3_config>",  # VeRL's deepseek671b example
    "<path_to_dpsk-v3-671B-BF16-dist_ckpt>",
    "<your wandb key>", "<MODEL_PATH>", "/data/<user>/models",
    "/path/to/model", "path/to/data/train.parquet", "/PATH/TO/verl", "hdfs://path/to/ckpt",
    "/root/models/CHANGE_ME", "CHANGE-ME", "changeme", "/CHANGE-ME/hf-model", "CHANGE-ME/verl-image:tag",
    "REPLACE_ME",
    "TODO", "/data/TODO/train.parquet", "FIXME",
    "YOUR_WANDB_KEY", "your_api_key", "/home/your-name/data", "hf_YOUR_TOKEN",
    "xxx", "XXXX", "hf_xxx", "sk-xxxxxxxx", "/data/xxx/model",
    "run_<unresolved: line 7: `date +%Y%m%d`>",
    ["/data/train.parquet", "/path/to/val.parquet"],
])
def test_placeholders_are_recognised(value: object) -> None:
    assert placeholder_reason(value), value


@pytest.mark.parametrize("value", [
    "/data/datapool/models/Qwen3-8B", "auto", "${oc.env:HOME}", "${data.max_prompt_length}",
    "[console,tensorboard]", ["console", "tensorboard"], "~/data/gsm8k/train.parquet",
    "https://huggingface.co/Qwen/Qwen3-8B", "http://localhost:8080/run_code", "https://hf-mirror.com",
    "vllm", "fsdp2", "gsm8k", "verl_grpo_example_gsm8k", "qwen3_8b_function_rm",
    "<|im_end|>", "<think>", "</think>", "<tool_call>", "<s>", "<EOS>",
    "todo", "/data/todo-app/train.parquet", "train_your_own_model", "yourself",
    "xxhash", "Qwen-XXXL", "/data/mypath/to/x", "/data/paths/to/x", "exchange_me",
    "", 0, 8, 1e-6, True, None, [], {},
])
def test_real_values_are_not_flagged(value: object) -> None:
    assert placeholder_reason(value) is None, value


DEEPSEEK = """\
#!/bin/bash
# Paths - update these to your actual paths
MODEL_PATH="<path_to_dsv3_config>"  # Path to DeepSeek-V3 config
MCORE_MODEL_PATH="<path_to_dpsk-v3-671B-BF16-dist_ckpt>"  # Path to distributed checkpoint
export WANDB_API_KEY=YOUR_WANDB_KEY
export VERL_PATH=/path/to/verl
python3 -m verl.trainer.main_ppo \\
    --config-path=/opt/verl/verl/trainer/config --config-name=ppo_megatron_trainer \\
    actor_rollout_ref.model.path=$MODEL_PATH \\
    actor_rollout_ref.actor.megatron.dist_checkpointing_path=$MCORE_MODEL_PATH \\
    data.train_files=/data/datapool/gsm8k/train.parquet \\
    trainer.default_local_dir=$HOME/ckpts/CHANGE_ME \\
    trainer.project_name=xxx \\
    trainer.logger=[console,tensorboard] \\
    trainer.nnodes=1 trainer.n_gpus_per_node=8
"""


def _import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path, str]:
    script = tmp_path / "run_deepseek671b.sh"
    script.write_text(DEEPSEEK)
    out = tmp_path / "ds.yaml"
    rc = main(["import", str(script), "--home", "/home/me", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err  # a warning, as for the import's other findings: the profile is written
    return script, out, err


def test_import_names_each_placeholder_with_its_script_line(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    script, out, err = _import(tmp_path, capsys)
    said = [ln for ln in err.splitlines() if ": placeholder in " in ln]
    tail = ": set it in the profile before running"
    assert said == [
        f"{script}:5: placeholder in env.WANDB_API_KEY=YOUR_WANDB_KEY{tail}",
        f"{script}:6: placeholder in paths.verl=/path/to/verl{tail}",
        f"{script}:6: placeholder in env.VERL_PATH=/path/to/verl{tail}",
        f"{script}:9: placeholder in actor_rollout_ref.model.path=<path_to_dsv3_config>{tail}",
        f"{script}:10: placeholder in actor_rollout_ref.actor.megatron.dist_checkpointing_path="
        f"<path_to_dpsk-v3-671B-BF16-dist_ckpt>{tail}",
        f"{script}:12: placeholder in trainer.default_local_dir=/home/me/ckpts/CHANGE_ME{tail}",
        f"{script}:13: placeholder in trainer.project_name=xxx{tail}",
    ]
    # the profile is still written, loads, and holds the values as the script gave them
    prof = load_profile(out)
    assert prof.override_value("actor_rollout_ref.model.path") == "<path_to_dsv3_config>"
    assert prof.env["WANDB_API_KEY"] == "YOUR_WANDB_KEY"
    # its header lists them too, each with its script line
    header = out.read_text().split("version: 1")[0]
    assert "line 9: placeholder in actor_rollout_ref.model.path=<path_to_dsv3_config>" in header
    # a real value next to them is not named
    assert "data.train_files" not in " ".join(said) and "trainer.logger" not in " ".join(said)


def test_check_static_fails_on_the_imported_placeholders(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _import(tmp_path, capsys)
    rc = main(["check", "--static", "--json", "--profile", str(out)])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    res = {r["id"]: r for r in data["results"]}
    ph = res["profile.placeholders"]
    assert ph["status"] == "fail" and ph["fix"] == FIX
    # each override named with its line in the profile (the loader keeps overrides' lines)
    lines = out.read_text().splitlines()
    for key, value in (("actor_rollout_ref.model.path", "<path_to_dsv3_config>"),
                       ("trainer.project_name", "xxx")):
        leaf = key.rsplit(".", 1)[1]
        n = next(i + 1 for i, ln in enumerate(lines) if re.match(rf"\s+{leaf}: .*{re.escape(value)}", ln))
        assert f"training.overrides.{key}={value} ({out}:{n})" in ph["message"], ph["message"]
    for key in ("paths.verl=/path/to/verl", "env.VERL_PATH=/path/to/verl", "env.WANDB_API_KEY",
                "training.overrides.trainer.default_local_dir=/home/me/ckpts/CHANGE_ME",
                "container.image=CHANGE-ME/verl-image:tag", "paths.tensorboard_dir=/CHANGE-ME/tensorboard"):
        assert key in ph["message"], (key, ph["message"])
    assert "data.train_files" not in ph["message"] and "trainer.logger" not in ph["message"]
    # the text output says the same
    assert main(["check", "--static", "--profile", str(out)]) == 1
    text = capsys.readouterr().out
    assert "FAIL profile.placeholders:" in text and f"fix: {FIX}" in text


def test_shipped_and_good_profiles_have_no_placeholders() -> None:
    for prof in (load_profile(SEED), load_profile_text(GOOD, "good.yaml")):
        r = {x.id: x for x in static_checks(prof)}["profile.placeholders"]
        assert r.status == "pass", r.message


@pytest.mark.parametrize("section,needle", [
    ("    data.train_files: /path/to/train.parquet\n", "training.overrides.data.train_files=/path/to/train.parquet (x.yaml:"),
    ("    +trainer.note: TODO\n", "training.overrides.+trainer.note=TODO (x.yaml:"),
    ("    trainer.project_name: YOUR_PROJECT\n", "training.overrides.trainer.project_name=YOUR_PROJECT"),
])
def test_planted_placeholder_override_fails(section: str, needle: str) -> None:
    text = GOOD.replace("  overrides:\n", "  overrides:\n" + section, 1)
    r = {x.id: x for x in static_checks(load_profile_text(text, "x.yaml"))}["profile.placeholders"]
    assert r.status == "fail" and needle in r.message and r.fix == FIX, r.message


def test_real_override_values_pass() -> None:
    section = ("    trainer.default_local_dir: ~/ckpts/run1\n    +data.cache_dir: ${oc.env:HOME}\n"
               "    +reward_model.sandbox_url: http://localhost:8080/run_code\n"
               "    actor_rollout_ref.rollout.dtype: auto\n")
    text = GOOD.replace("  overrides:\n", "  overrides:\n" + section, 1)
    r = {x.id: x for x in static_checks(load_profile_text(text, "x.yaml"))}["profile.placeholders"]
    assert r.status == "pass", r.message


def test_import_does_not_name_its_own_placeholders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A relative --config-path under the importer's `/CHANGE-ME/verl` (VeRL's own examples
    pass `--config-path=config`) is the importer's placeholder, reported as "the script does
    not say": not a placeholder of the script's line. `check` still fails on it."""
    script = tmp_path / "rel.sh"
    script.write_text("python3 -m verl.trainer.main_ppo --config-path=config --config-name=ppo_trainer \\\n"
                      "    actor_rollout_ref.model.path=/data/models/Qwen3-8B trainer.nnodes=1 trainer.n_gpus_per_node=8\n")
    out = tmp_path / "rel.yaml"
    assert main(["import", str(script), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert ": placeholder in" not in err and "paths.verl: the script does not say" in err
    r = {x.id: x for x in static_checks(load_profile(out))}["profile.placeholders"]
    assert r.status == "fail" and "training.config_path=/CHANGE-ME/verl/verl/trainer/config" in r.message
