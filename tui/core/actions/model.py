"""`model` (seed 5.1) and `convert` (seed 5.2), on the head node inside the container.

Both decide from what is on disk, not from memory of earlier runs: the HF directory is
complete when it holds a config and all of its weight shards; the MCore checkpoint when
it holds `.metadata`, `common.pt` and at least one `*.distcp`. The converter itself
skips any non-empty output directory, so a half-written one (a converter killed
mid-way) would silently stay broken: it is detected and reported instead.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass, field
from typing import AsyncIterator

from tui.core.actions.base import Remote
from tui.core.actions.events import ActionEvent
from tui.core.profile import Profile

LIST_SCRIPT = 'cd "$1" 2>/dev/null || { echo "@@absent"; exit 0; }; ls -A1; echo "@@index"; cat model.safetensors.index.json 2>/dev/null || true'  # noqa: E501


@dataclass
class DirReport:
    exists: bool
    files: list[str] = field(default_factory=list)
    index: str = ""

    @property
    def empty(self) -> bool:
        return not self.files


async def list_dir(remote: Remote, node: str, path: str) -> DirReport:
    r = await remote.run(node, ["sh", "-c", LIST_SCRIPT, "sh", path], container=True, timeout=60)
    out = r.stdout
    if "@@absent" in out.splitlines()[:1] or (not r.ok and not out):
        return DirReport(False)
    head, _, index = out.partition("@@index")
    return DirReport(True, [ln.strip() for ln in head.splitlines() if ln.strip()], index.strip())


def hf_missing(d: DirReport) -> list[str]:
    """What an HF model dir lacks; [] when complete."""
    if not d.exists:
        return ["the directory"]
    missing = []
    if "config.json" not in d.files:
        missing.append("config.json")
    weights = [f for f in d.files if f.endswith((".safetensors", ".bin"))]
    if not weights:
        missing.append("weights (*.safetensors)")
    if d.index:
        try:
            shards = set(json.loads(d.index).get("weight_map", {}).values())
        except (ValueError, AttributeError):
            shards = set()
            missing.append("a readable model.safetensors.index.json")
        missing += sorted(s for s in shards if s not in d.files)
    return missing


def mcore_missing(d: DirReport) -> list[str]:
    if not d.exists:
        return ["the directory"]
    missing = [f for f in (".metadata", "common.pt") if f not in d.files]
    if not any(f.endswith(".distcp") for f in d.files):
        missing.append("*.distcp shards")
    return missing


async def _stream(remote: Remote, node: str, argv: list[str], action: str) -> AsyncIterator[ActionEvent | int]:
    h = remote.stream(node, argv, container=True, timeout=None)
    async for line in h:
        yield ActionEvent(action, "output", line, node=node)
    yield h.rc if h.rc is not None else -1


async def model(profile: Profile, remote: Remote) -> AsyncIterator[ActionEvent]:
    head = profile.head.name
    path = profile.paths.hf_model
    yield ActionEvent("model", "start", f"HF model at {path} on {head}")
    d = await list_dir(remote, head, path)
    missing = hf_missing(d)
    if not missing:
        yield ActionEvent("model", "skip", f"{path} is complete ({len(d.files)} files); nothing to download")
        return
    if not profile.model.download:
        yield ActionEvent("model", "fail", f"{path} lacks {', '.join(missing)} and the profile has no model.download command")
        return
    yield ActionEvent("model", "step", f"missing {', '.join(missing)}: $ {shlex.join(profile.model.download)}", node=head)
    rc = -1
    tail: list[str] = []
    async for item in _stream(remote, head, profile.model.download, "model"):
        if isinstance(item, int):
            rc = item
        else:
            tail = (tail + [item.message])[-3:]
            yield item
    if rc != 0:
        yield ActionEvent("model", "fail", f"download exited {rc}: {' '.join(tail)}", node=head)
        return
    missing = hf_missing(await list_dir(remote, head, path))
    if missing:
        yield ActionEvent("model", "fail", f"download finished but {path} still lacks {', '.join(missing)}", node=head)
        return
    yield ActionEvent("model", "done", f"{path} is complete", node=head)


PROTECTED_PATHS = ("hf_model", "train_files", "val_files", "data_dir", "verl", "megatron", "workdir",
                   "tensorboard_dir", "checkpoint_dir", "shared")
"""The profile paths a `convert --force` delete must never reach (by being them or a
parent of them): the model it converts from above all."""


def deletion_problem(profile: Profile) -> str | None:
    """Why `paths.mcore_checkpoint` must not be `rm -rf`'d, or None when it is safe.

    Refused: a relative or non-normalised path (`/./data`, `/data//x`, `/data/x/..`:
    what it names is not what it reads as), one less than two levels below `/`, and one
    that is, or is a parent of, another path the run needs (the HF model, the data)."""
    out = profile.paths.mcore_checkpoint
    if not out.startswith("/"):
        return f"{out} is not an absolute path"
    norm = posixpath.normpath(out)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    if (out.rstrip("/") or "/") != norm or "//" in out:
        return f"{out} is not a normalised path (it means {norm}): write it as {norm}"
    if norm.count("/") < 2:
        return f"{out} is too close to /"
    for key in PROTECTED_PATHS:
        val = getattr(profile.paths, key)
        for p in (val if isinstance(val, list) else [val]):
            if not p:
                continue
            pn = posixpath.normpath(p)
            if pn == norm or pn.startswith(norm + "/"):
                what = "is" if pn == norm else "contains"
                return f"{out} {what} paths.{key} ({p}): deleting it would delete that too"
    return None


def convert_argv(profile: Profile) -> list[str]:
    """The seed's convert script as one argv: PYTHONPATH prepended (kept as data and
    expanded by `sh` only for the existing $PYTHONPATH), then the converter."""
    assert profile.convert is not None
    py = ":".join(p for p in (profile.paths.megatron, profile.paths.verl) if p)
    return ["sh", "-c", 'PYTHONPATH="$1${PYTHONPATH:+:$PYTHONPATH}"; export PYTHONPATH; out="$2"; shift 2; '
            'mkdir -p "$out" && exec "$@"',
            "sh", py, profile.paths.mcore_checkpoint, profile.convert.python, "-u", profile.convert.script,
            "--hf_model_path", profile.paths.hf_model, "--output_path", profile.paths.mcore_checkpoint,
            *profile.convert.extra_args]


async def convert(profile: Profile, remote: Remote, force: bool = False) -> AsyncIterator[ActionEvent]:
    head = profile.head.name
    out = profile.paths.mcore_checkpoint
    yield ActionEvent("convert", "start", f"HF -> MCore: {profile.paths.hf_model} -> {out} on {head}")
    if profile.convert is None:
        yield ActionEvent("convert", "fail", "the profile has no convert section (script, python)")
        return
    unsafe = deletion_problem(profile)
    if unsafe and force:  # refused before anything is looked at or deleted
        yield ActionEvent("convert", "fail", f"refusing to delete paths.mcore_checkpoint: {unsafe}")
        return
    hf_gap = hf_missing(await list_dir(remote, head, profile.paths.hf_model))
    if hf_gap:
        yield ActionEvent("convert", "fail",
                          f"the HF model at {profile.paths.hf_model} lacks {', '.join(hf_gap)}: run `model` first")
        return
    d = await list_dir(remote, head, out)
    missing = mcore_missing(d)
    if d.exists and not d.empty:
        if not missing and not force:
            yield ActionEvent("convert", "skip", f"{out} already holds a complete checkpoint; use --force to redo it")
            return
        if missing and not force:
            yield ActionEvent("convert", "fail", f"{out} is half-written (lacks {', '.join(missing)}); the converter "
                                                 "would skip it. Redo with --force (deletes it)")
            return
        if unsafe:
            yield ActionEvent("convert", "fail", f"refusing to delete paths.mcore_checkpoint: {unsafe}")
            return
        yield ActionEvent("convert", "step", f"deleting {out} (--force)", node=head)
        r = await remote.run(head, ["rm", "-rf", "--", out], container=True, timeout=600)
        if not r.ok:
            yield ActionEvent("convert", "fail", f"could not delete {out}: {r.tail(2)}", node=head)
            return
    argv = convert_argv(profile)
    yield ActionEvent("convert", "step", "$ " + shlex.join(argv[argv.index(profile.convert.python):]), node=head)
    rc = -1
    tail: list[str] = []
    async for item in _stream(remote, head, argv, "convert"):
        if isinstance(item, int):
            rc = item
        else:
            tail = (tail + [item.message])[-3:]
            yield item
    missing = mcore_missing(await list_dir(remote, head, out))
    if rc != 0:
        extra = f"; {out} lacks {', '.join(missing)}" if missing else ""
        yield ActionEvent("convert", "fail", f"converter exited {rc}: {' '.join(tail)}{extra}", node=head)
        return
    if missing:
        yield ActionEvent("convert", "fail", f"converter finished but {out} lacks {', '.join(missing)}", node=head)
        return
    yield ActionEvent("convert", "done", f"{out} holds a complete checkpoint", node=head)
