"""Checks that a model directory is loadable, failing with the libraries' own messages.

On the real cluster a missing or half-downloaded HF model, or a missing MCore checkpoint,
makes the run fail with a transformers or Megatron error a few seconds in; the console's
diagnosis matches those messages, so the simulation raises the same ones.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["CheckpointingException", "check_hf_model_dir", "check_dist_checkpoint"]


class CheckpointingException(Exception):
    """megatron.core.dist_checkpointing.core.CheckpointingException."""


def check_hf_model_dir(path: str) -> dict:
    """Return the model's config.json, or raise transformers' OSError."""
    p = Path(os.path.expanduser(path))
    if not p.is_dir():
        raise OSError(
            f"Incorrect path_or_model_id: '{path}'. Please provide either the path to a local "
            "folder or the repo_id of a model on the Hub."
        )
    cfg = p / "config.json"
    if not cfg.is_file():
        raise OSError(
            f"{path} does not appear to have a file named config.json. Checkout "
            f"'https://huggingface.co/{path}/tree/None' for available files."
        )
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not (p / name).is_file():
            raise OSError(
                f"Can't load tokenizer for '{path}'. If you were trying to load it from "
                "'https://huggingface.co/models', make sure you don't have a local directory "
                f"with the same name. Otherwise, make sure '{path}' is the correct path to a "
                "directory containing all relevant files for a Qwen2TokenizerFast tokenizer."
            )
    return json.loads(cfg.read_text())


def check_hf_weights(path: str) -> None:
    """Every shard named by model.safetensors.index.json must be present."""
    p = Path(os.path.expanduser(path))
    index = p / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
        for s in shards:
            if not (p / s).is_file():
                raise FileNotFoundError(f"[Errno 2] No such file or directory: '{p / s}'")
        return
    if not any(p.glob("*.safetensors")) and not (p / "pytorch_model.bin").is_file():
        raise OSError(
            f"Error no file named pytorch_model.bin, model.safetensors, tf_model.h5, "
            f"model.ckpt.index or flax_model.msgpack found in directory {path}."
        )


def check_dist_checkpoint(path: str) -> None:
    """A Megatron dist checkpoint: `metadata.json` (newer) or `.metadata`, `common.pt` and
    `*.distcp` shards. The messages are Megatron-Core's (NVIDIA/Megatron-LM,
    megatron/core/dist_checkpointing/validation.py `verify_checkpoint`,
    strategies/common.py `load_common`) and, for a missing DCP file, torch's FileNotFoundError.
    """
    p = Path(os.path.expanduser(path))
    if not p.is_dir():
        raise CheckpointingException(f"Checkpoint directory {path} does not exist")
    if not (p / "metadata.json").is_file() and not (p / ".metadata").is_file():
        raise CheckpointingException(f"{path} is not a distributed checkpoint")
    if not (p / ".metadata").is_file():
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{p / '.metadata'}'")
    if not (p / "common.pt").is_file():
        raise CheckpointingException(f"Common file {p / 'common.pt'} does not exist")
    if not any(p.glob("*.distcp")):
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{p / '__0_0.distcp'}'")
