"""`check --static`: the profile's own arithmetic, with no connection at all."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tui.cli import main
from tui.core.checks import static_checks
from tui.core.profile import load_profile, load_profile_text

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml"
GOOD = (Path(__file__).parent / "data" / "good_profile.yaml").read_text()


def _by_id(results):
    return {r.id: r for r in results}


def test_seed_is_told_about_pp_and_expert_parallel() -> None:
    r = _by_id(static_checks(load_profile(SEED)))
    assert r["actor.pipeline_layers"].status == "fail"
    assert "36 layers" in r["actor.pipeline_layers"].message and "PP=8" in r["actor.pipeline_layers"].message
    assert r["model.expert_parallel"].status == "warn"
    assert "expert_model_parallel_size=8" in r["model.expert_parallel"].message
    for ok in ("cards.total", "rollout.parallel", "actor.parallel", "batch.divisible", "length.context",
               "length.token_budget", "paths.consistent", "ray.dashboard"):
        assert r[ok].status == "pass", (ok, r[ok].message)


def test_static_opens_no_connection(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(*a, **k):
        raise AssertionError("check --static opened a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    rc = main(["check", "--static", "--json", "--profile", str(SEED)])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["failed"] == 1


def _with(overrides: str) -> list:
    text = GOOD.replace("    trainer:\n      nnodes: 2\n      logger: [console, tensorboard]\n", overrides)
    text = text.replace("name: tiny\n", "name: tiny\nmodel: {num_layers: 36, max_position_embeddings: 4096}\n")
    return static_checks(load_profile_text(text, "x.yaml"))


@pytest.mark.parametrize("overrides,check,status", [
    ("    trainer: {nnodes: 2, n_gpus_per_node: 8}\n", "cards.total", "pass"),
    ("    trainer: {nnodes: 4, n_gpus_per_node: 8}\n", "cards.total", "fail"),
    ("    trainer: {nnodes: 2}\n    actor_rollout_ref.rollout: {tensor_model_parallel_size: 2, data_parallel_size: 4}\n", "rollout.parallel", "fail"),
    ("    trainer: {nnodes: 2}\n    actor_rollout_ref.actor.megatron: {tensor_model_parallel_size: 3}\n", "actor.parallel", "fail"),
    ("    trainer: {nnodes: 2}\n    actor_rollout_ref.actor.megatron: {pipeline_model_parallel_size: 8}\n", "actor.pipeline_layers", "fail"),
    ("    trainer: {nnodes: 2}\n    actor_rollout_ref.actor.megatron: {pipeline_model_parallel_size: 4}\n", "actor.pipeline_layers", "pass"),
    ("    trainer: {nnodes: 2}\n    actor_rollout_ref.actor.megatron: {pipeline_model_parallel_size: 8, +override_transformer_config: {num_layers_in_first_pipeline_stage: 4}}\n", "actor.pipeline_layers", "pass"),
    ("    trainer: {nnodes: 2}\n    actor_rollout_ref.actor: {ppo_mini_batch_size: 5}\n", "batch.divisible", "fail"),
    ("    trainer: {nnodes: 2}\n    data.max_prompt_length: 1024\n    data.max_response_length: 4096\n", "length.context", "fail"),
    ("    trainer: {nnodes: 2}\n    data.max_prompt_length: 1024\n    data.max_response_length: 2048\n    actor_rollout_ref.actor.ppo_max_token_len_per_gpu: 2048\n", "length.token_budget", "fail"),
    ("    trainer: {nnodes: 2}\n    actor_rollout_ref.actor.megatron.expert_model_parallel_size: 2\n", "model.expert_parallel", "warn"),
    ("    trainer: {nnodes: 2}\n    actor_rollout_ref.model.path: /elsewhere\n", "paths.consistent", "fail"),
])
def test_planted_static_faults(overrides: str, check: str, status: str) -> None:
    r = _by_id(_with(overrides))
    assert r[check].status == status, r[check].message


def test_check_output_is_masked_in_text_and_json() -> None:
    """A check quotes what a node printed or what the profile says: the CLI's text and
    `--json` go through the one masking rule, like render, the log and the screen."""
    from tui.core.checks import CheckResult, format_results, results_json

    secret = "hunter2-abcdef123456"
    r = CheckResult("code.python", "fail", f"job env has WANDB_API_KEY={secret} and HF_TOKEN={secret}",
                    f"unset OPENAI_API_KEY={secret}")
    text = "\n".join(format_results([r]))
    assert secret not in text and "WANDB_API_KEY=" in text and "fix:" in text
    p = load_profile(SEED)
    doc = results_json(p, [r], static=True)
    assert secret not in json.dumps(doc) and doc["results"][0]["id"] == "code.python"
