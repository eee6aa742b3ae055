"""Lay out the simulated cluster's shared storage: VeRL, Megatron-LM, data, `modelscope`.

The real cluster keeps its code and data on an NFS share (`/data/datapool`): VeRL's checkout
(with `scripts/converter_hf_to_mcore.py`, the Hydra configs and `musa_examples/data/*.parquet`),
Megatron-LM, and the models. The simulated cluster gets the same layout under one directory,
filled with the SIMULATION stand-ins of `tui/sim/tree/`, so the console runs the very
same commands (download, convert, `python3 -m verl.trainer.main_ppo ...`) on both.

Not laid out here, on purpose: the HF model directory (what the `model` action downloads) and
the MCore directory (what `convert` writes) -- their absence is the state those actions start
from.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui.sim.verl_release import VerlRelease

__all__ = ["install_sim_tree", "read_config_source", "set_debug_save", "TREE", "CONFIG_SOURCE_FILE"]

CONFIG_SOURCE_FILE = ".rlconsole-config-source.json"
"""Written beside the installed config: which VeRL's config the sim runs (`sim status`, the badge)."""

#: The stand-ins shipped with rlconsole.
TREE = Path(__file__).resolve().parent / "tree"

# The reference run's appendix: the vendor's debug saves, as shipped (BUGGY) and as fixed
# (FIXED, which is how the stand-in files come). Indentation is added where they are found.
_ACTOR_FIXED = [
    "# DEBUG: Commented out for production training",
    "# if torch.distributed.get_rank() in [0,1,2]:",
    '#     p = "/data/datapool/verl/tmp/rank0_pgloss_actor_rank{}.pt".format('
    "torch.distributed.get_rank())",
    "#     torch.save([log_prob,old_log_prob,advantages,advantages,response_mask],p)",
]
_ACTOR_BUGGY = [
    "if torch.distributed.get_rank() in [0,1,2]:",
    "    p = '/mnt/seed-program-nas/001688/kechun.wu/0226/tmp_pts/rank0_pgloss_actor_rank{}.pt'"
    ".format(torch.distributed.get_rank())",
    "    torch.save([log_prob,old_log_prob,advantages,advantages,response_mask],p)",
]
_TRAINER_FIXED = [
    "# DEBUG: Commented out for production training",
    "# p = '/mnt/seed-program-nas/001688/kechun.wu/0226/30b_gen_32k_no_graph_amthink_128*8.pt'",
    "# #p = '/mnt/seed-program-nas/001688/kechun.wu/0226/gen_data/30b_gen_32k_graph+test.pt'",
    "# p = '/mnt/seed-program-nas/001688/kechun.wu/0226/30b_gen_32k_graph_amthink_128*8.pt'",
    "# torch.save(batch,p)",
]
_TRAINER_BUGGY = [
    "p = '/mnt/seed-program-nas/001688/kechun.wu/0226/30b_gen_32k_no_graph_amthink_128*8.pt'",
    "#p = '/mnt/seed-program-nas/001688/kechun.wu/0226/gen_data/30b_gen_32k_graph+test.pt'",
    "p = '/mnt/seed-program-nas/001688/kechun.wu/0226/30b_gen_32k_graph_amthink_128*8.pt'",
    "torch.save(batch,p)",
]

ACTOR_FILE = Path("verl/workers/actor/megatron_actor.py")
TRAINER_FILE = Path("verl/trainer/ppo/ray_trainer.py")

DATA_FILES = ("amt_math17k_d_qweninstruct", "aime_2024", "aime_2025")


def _swap_block(path: Path, old: list[str], new: list[str]) -> bool:
    """Replace the lines `old` (at any one indentation) by `new` at that indentation."""
    lines = path.read_text().splitlines(keepends=True)
    stripped = [ln.strip() for ln in lines]
    for i in range(len(lines) - len(old) + 1):
        if stripped[i:i + len(old)] == [o.strip() for o in old]:
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            lines[i:i + len(old)] = [indent + n + "\n" for n in new]
            path.write_text("".join(lines))
            return True
    return False


def set_debug_save(verl_root: Path, *, planted: bool = True, actor: bool = True,
                   trainer: bool = True) -> None:
    """Restore (or, with planted=False, comment out again) the vendor's debug saves.

    `verl_root` is the VeRL checkout (`<shared>/verl`). Raises ValueError if a block is
    in neither form, so a test never silently runs without the bug it asked for.
    """
    jobs = []
    if actor:
        jobs.append((verl_root / ACTOR_FILE, _ACTOR_FIXED, _ACTOR_BUGGY))
    if trainer:
        jobs.append((verl_root / TRAINER_FILE, _TRAINER_FIXED, _TRAINER_BUGGY))
    for path, fixed, buggy in jobs:
        old, new = (fixed, buggy) if planted else (buggy, fixed)
        if not _swap_block(path, old, new) and not _swap_block(path, new, new):
            raise ValueError(f"{path}: the debug torch.save block was not found")


def _prompt(i: int, rng_words: list[str], kind: str) -> tuple[list[dict], str]:
    """A short math prompt in the chat format VeRL's RLHFDataset expects, and its answer."""
    a, b = 3 + (i * 7) % 97, 5 + (i * 13) % 89
    word = rng_words[i % len(rng_words)]
    if kind == "train":
        q = (f"A {word} has {a} rows of {b} seats. If {i % 11} seats are broken, how many seats "
             "can be used? Let's think step by step and output the final answer within \\boxed{}.")
        ans = str(a * b - i % 11)
    else:
        q = (f"Find the remainder when {a}^{b} + {i + 2} is divided by 1000. "
             "Let's think step by step and output the final answer within \\boxed{}.")
        ans = str((pow(a, b, 1000) + i + 2) % 1000)
    return [{"role": "user", "content": q}], ans


def _write_parquet(path: Path, rows: int, data_source: str, kind: str) -> None:
    """A small parquet file with the columns of VeRL's math datasets."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    words = ["theatre", "stadium", "bus", "classroom", "cinema", "ferry", "hall", "train"]
    prompts, rms, extras = [], [], []
    for i in range(rows):
        msgs, ans = _prompt(i, words, kind)
        prompts.append(msgs)
        rms.append({"style": "rule", "ground_truth": ans})
        extras.append({"split": "train" if kind == "train" else "test", "index": i})
    table = pa.table({
        "data_source": [data_source] * rows,
        "prompt": prompts,
        "ability": ["math"] * rows,
        "reward_model": rms,
        "extra_info": extras,
    })
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy `src` into `dst`, replacing stand-in files but keeping foreign files in dst."""
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            if f.endswith((".pyc", ".pyo")):
                continue
            shutil.copy2(Path(root) / f, dst / rel / f)


def _install_config(config_dir: Path, release: VerlRelease | None, why_standin: str | None) -> dict[str, str]:
    """The trainer's Hydra config: the real release's files, else the stand-in's (labelled).

    On the real release, the seed's vendor `ppo_megatron_trainer_demo.yaml` (defaults
    `[ppo_megatron_trainer, _self_]` and its three keys; in no upstream release) is written
    on top, as the seed's tree has it. Either way the directory holds one config only, never
    a mix left by an earlier install of the other."""
    from tui.sim.verl_release import STANDIN_CLAIMS

    standin = TREE / "verl" / "trainer" / "config"
    shutil.rmtree(config_dir, ignore_errors=True)
    if release is not None:
        shutil.copytree(release.config_dir, config_dir)
        shutil.copy2(standin / "ppo_megatron_trainer_demo.yaml", config_dir / "ppo_megatron_trainer_demo.yaml")
        source = {"source": "release", "version": release.version, "label": release.label}
    else:
        shutil.copytree(standin, config_dir, ignore=shutil.ignore_patterns("__pycache__"))
        source = {"source": "stand-in", "version": STANDIN_CLAIMS,
                  "label": f"stand-in config (a subset of VeRL {STANDIN_CLAIMS}'s keys)"
                           + (f": {why_standin}" if why_standin else "")}
    # VeRL's own version file, read by the preflight and by the stand-in's Megatron worker
    # (what a release does with unknown override_transformer_config keys depends on it).
    version_file = config_dir.parent.parent / "version" / "version"
    version_file.parent.mkdir(parents=True, exist_ok=True)
    version_file.write_text(source["version"] + "\n")
    (config_dir / CONFIG_SOURCE_FILE).write_text(json.dumps(source))
    return source


def read_config_source(config_dir: Path) -> dict[str, str] | None:
    """What `install_sim_tree` recorded of the config it installed (None: not a sim tree)."""
    try:
        data = json.loads((Path(config_dir) / CONFIG_SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def install_sim_tree(shared_root: Path, *, plant_debug_save: bool = False,
                     train_rows: int = 640, val_rows: int = 30, verl_release: VerlRelease | None = None,
                     why_standin: str | None = None) -> dict[str, Path]:
    """Lay out the stand-in code and data under `shared_root`; return the paths.

    Idempotent: running it again refreshes the stand-ins (and the planted/fixed state of the
    debug saves) and rewrites the data files only when their row counts differ. Returned
    keys: ``root``, ``verl``, ``verl_package``, ``config_path``, ``main_ppo``,
    ``converter``, ``megatron_actor``, ``ray_trainer``, ``data_dir``, ``train_file``,
    ``val_file_2024``, ``val_file_2025``, ``bin_dir``, ``modelscope``, ``megatron``,
    ``transformer_config``, ``verl_source`` (the file naming the config's origin).

    `verl_release`: the real VeRL release whose config the trainer composes; None lays out
    the stand-in config, labelled with `why_standin` (e.g. "offline").
    """
    root = Path(shared_root).resolve()
    verl = root / "verl"
    megatron = root / "Megatron-LM"
    bin_dir = root / "bin"
    data_dir = verl / "musa_examples" / "data"

    _copy_tree(TREE / "verl", verl / "verl")
    _copy_tree(TREE / "scripts", verl / "scripts")
    _copy_tree(TREE / "Megatron-LM", megatron)
    bin_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(TREE / "bin" / "modelscope", bin_dir / "modelscope")
    for exe in (bin_dir / "modelscope", verl / "scripts" / "converter_hf_to_mcore.py"):
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    set_debug_save(verl, planted=plant_debug_save)
    config_dir = verl / "verl" / "trainer" / "config"
    _install_config(config_dir, verl_release, why_standin)

    data_dir.mkdir(parents=True, exist_ok=True)
    wanted = {DATA_FILES[0]: (train_rows, "math", "train"),
              DATA_FILES[1]: (val_rows, "aime_2024", "val"),
              DATA_FILES[2]: (val_rows, "aime_2025", "val")}
    for name, (rows, source, kind) in wanted.items():
        path = data_dir / f"{name}.parquet"
        if path.is_file():
            import pyarrow.parquet as pq

            try:
                if pq.ParquetFile(path).metadata.num_rows == rows:
                    continue
            except Exception:  # noqa: BLE001 - a damaged file is rewritten
                pass
        _write_parquet(path, rows, source, kind)

    return {
        "root": root,
        "verl": verl,
        "verl_package": verl / "verl",
        "config_path": config_dir,
        "verl_source": config_dir / CONFIG_SOURCE_FILE,
        "main_ppo": verl / "verl" / "trainer" / "main_ppo.py",
        "converter": verl / "scripts" / "converter_hf_to_mcore.py",
        "megatron_actor": verl / ACTOR_FILE,
        "ray_trainer": verl / TRAINER_FILE,
        "data_dir": data_dir,
        "train_file": data_dir / f"{DATA_FILES[0]}.parquet",
        "val_file_2024": data_dir / f"{DATA_FILES[1]}.parquet",
        "val_file_2025": data_dir / f"{DATA_FILES[2]}.parquet",
        "bin_dir": bin_dir,
        "modelscope": bin_dir / "modelscope",
        "megatron": megatron,
        "transformer_config": megatron / "megatron" / "core" / "transformer"
        / "transformer_config.py",
    }
