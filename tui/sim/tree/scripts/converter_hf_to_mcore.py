#!/usr/bin/env python3
"""SIMULATION stand-in for VeRL's scripts/converter_hf_to_mcore.py (HF -> Megatron MCore).

Same command line as the real converter (`--hf_model_path`, `--output_path`, and the optional
`--pp_size`, `--ep_size`, `--use_cpu_initialization`, `--test`, `--trust_remote_code`), same
behaviour where the console depends on it:

- the output directory is created first, and a NON-EMPTY output directory is skipped with
  ``Output path ... is not empty, skipping conversion`` (exit 0) -- so a half-written output
  stays half-written, which is exactly what the console's `convert` must detect;
- a missing HF directory, a missing config.json or a missing weight shard fails (exit 1)
  with transformers' messages; `--use_cpu_initialization` on a dense model fails with the
  real converter's assertion;
- on success the real dist-checkpoint layout is written, with small files: `.metadata`,
  `common.pt`, `__0_0.distcp`, `__0_1.distcp` and `metadata.json`.

Failure injection for tests: RLCONSOLE_SIM_CONVERT_FAIL=1 exits 1 before writing anything;
RLCONSOLE_SIM_CONVERT_PARTIAL=1 writes some files, then exits 1 (a crash mid-save).
RLCONSOLE_SIM_CONVERT_S sets the duration (default 1.5 s). Only the standard library is used,
so it runs under whatever `python` the node has.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import traceback

MOE_ARCHS = ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM")


def _init_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hf_model_path", type=str, required=True,
                        help="The path for the huggingface model")
    parser.add_argument("--output_path", type=str, required=True,
                        help="The path for the output mcore model")
    parser.add_argument("--pp_size", type=int, default=1, help="pipeline model parallel size")
    parser.add_argument("--ep_size", type=int, default=1, help="expert model parallel size")
    parser.add_argument("--use_cpu_initialization", action="store_true",
                        help="Whether to use cpu initialization")
    parser.add_argument("--test", action="store_true", help="Whether to test the conversion")
    parser.add_argument("--trust_remote_code", action="store_true",
                        help="Whether to trust remote code")
    return parser.parse_args()


def _load_hf_config(path: str) -> dict:
    """transformers.AutoConfig.from_pretrained, with its error messages."""
    if not os.path.isdir(path):
        raise OSError(f"Incorrect path_or_model_id: '{path}'. Please provide either the path "
                      "to a local folder or the repo_id of a model on the Hub.")
    cfg = os.path.join(path, "config.json")
    if not os.path.isfile(cfg):
        raise OSError(f"{path} does not appear to have a file named config.json. Checkout "
                      f"'https://huggingface.co/{path}/tree/None' for available files.")
    with open(cfg) as f:
        return json.load(f)


def _check_weights(path: str) -> list[str]:
    """AutoModelForCausalLM.from_pretrained: every shard of the index must be there."""
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index) as f:
            shards = sorted(set(json.load(f).get("weight_map", {}).values()))
        for s in shards:
            if not os.path.isfile(os.path.join(path, s)):
                raise FileNotFoundError(
                    f"[Errno 2] No such file or directory: '{os.path.join(path, s)}'")
        return shards
    single = os.path.join(path, "model.safetensors")
    if os.path.isfile(single):
        return ["model.safetensors"]
    raise OSError(f"Error no file named pytorch_model.bin, model.safetensors, tf_model.h5, "
                  f"model.ckpt.index or flax_model.msgpack found in directory {path}.")


def _print_config(cfg: dict) -> None:
    name = {"qwen3": "Qwen3Config", "qwen2": "Qwen2Config"}.get(cfg.get("model_type", ""),
                                                               "PretrainedConfig")
    print(f"{name} " + json.dumps(cfg, indent=2, sort_keys=True), flush=True)


def _write_shard(path: str, tag: bytes, size: int = 4096) -> None:
    with open(path, "wb") as f:
        f.write(b"SIMDISTCP" + tag + os.urandom(size))


def convert_hf_to_mcore(hf_model_path: str, output_path: str, pp_size: int = 1,
                        ep_size: int = 1, use_cpu_initialization: bool = False,
                        test: bool = False, trust_remote_code: bool = False) -> None:
    os.makedirs(output_path, exist_ok=True)
    if len(os.listdir(output_path)) > 0 and not test:
        print(f"Output path {output_path} is not empty, skipping conversion")
        return
    duration = float(os.environ.get("RLCONSOLE_SIM_CONVERT_S", "1.5"))

    print("> initializing torch distributed with world size 1 (simulated) ...", flush=True)
    print(f"> initializing model parallel with tensor model parallel size 1, pipeline model "
          f"parallel size {pp_size}, expert model parallel size {ep_size}", flush=True)
    if os.environ.get("RLCONSOLE_SIM_CONVERT_FAIL") == "1":
        raise RuntimeError("simulated converter failure (RLCONSOLE_SIM_CONVERT_FAIL=1)")

    cfg = _load_hf_config(hf_model_path)
    _print_config(cfg)
    archs = cfg.get("architectures") or []
    shards = _check_weights(hf_model_path)
    layers = int(cfg.get("num_hidden_layers", 0))
    if not any(a in MOE_ARCHS for a in archs):
        assert not use_cpu_initialization, "use_cpu_initialization is only supported for MoE model"

    tick = duration / max(1, len(shards) + layers + 2)
    for s in shards:
        print(f"Loading checkpoint shard {s}", flush=True)
        time.sleep(tick)
    for i in range(layers):
        if i % 6 == 0 or i == layers - 1:
            print(f"converting layer {i + 1}/{layers}", flush=True)
        time.sleep(tick)

    print(f"saving dist checkpoint to {output_path}", flush=True)
    with open(os.path.join(output_path, "common.pt"), "wb") as f:
        pickle.dump({"sim": True, "architectures": archs, "num_layers": layers,
                     "hidden_size": cfg.get("hidden_size")}, f)
    _write_shard(os.path.join(output_path, "__0_0.distcp"), b"00")
    if os.environ.get("RLCONSOLE_SIM_CONVERT_PARTIAL") == "1":
        raise OSError(28, "No space left on device (simulated: RLCONSOLE_SIM_CONVERT_PARTIAL=1)")
    _write_shard(os.path.join(output_path, "__0_1.distcp"), b"01")
    with open(os.path.join(output_path, ".metadata"), "wb") as f:
        pickle.dump({"sim": True, "shards": ["__0_0.distcp", "__0_1.distcp"],
                     "hf_model_path": hf_model_path}, f)
    with open(os.path.join(output_path, "metadata.json"), "w") as f:
        json.dump({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                   "common_backend": "torch", "common_backend_version": 1}, f)
    time.sleep(tick)
    if test:
        print("Conversion test passed!", flush=True)
    print(f"Conversion finished: {output_path}", flush=True)


def main() -> int:
    args = _init_args()
    try:
        convert_hf_to_mcore(args.hf_model_path, args.output_path, args.pp_size, args.ep_size,
                            args.use_cpu_initialization, args.test, args.trust_remote_code)
    except Exception:  # noqa: BLE001 - print the traceback like an uncaught error, exit 1
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
