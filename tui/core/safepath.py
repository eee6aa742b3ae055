"""The one rule for names that come from a node and become local paths.

Why a module of its own: a node's answer is untrusted (anyone who can write to the
run's shared TensorBoard folder, or submit a Ray job, chooses these names), and
several places turn such names into files on the console's host: the TensorBoard
mirror (relative paths from the head's `find`), the log spool (a Ray job id is a
directory name), `metrics --job`, the run history. A name that is absolute, climbs
with `..`, carries a newline (which splits one `find` line into two) or a control
character, or leads through a symlink out of the directory would let a node write
anywhere the console's user can. Every such place goes through `confined()`, so the
rule is written once and tested once.

The rule: a non-empty relative path of at most `max_parts` components, each one not
empty, not `.` or `..`, without NUL, control characters (C0, DEL, C1), backslashes or
a leading `-` (an option to a tool), at most 255 bytes in UTF-8; and the joined path,
resolved (symlinks followed), still lies under the resolved base directory.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["UnsafeName", "check_name", "confined", "open_confined", "safe_job_id"]

MAX_COMPONENT_BYTES = 255
"""The usual filesystem limit on one name (ext4, xfs, tmpfs)."""

MAX_PATH_BYTES = 1024
"""A whole relative name; real event-file paths are well under it."""


class UnsafeName(ValueError):
    """A remote-derived name that must not become a local path."""


def _bad_char(c: str) -> bool:
    o = ord(c)
    return o < 0x20 or 0x7F <= o < 0xA0 or c in "\\\u2028\u2029"


def check_name(name: object, *, max_parts: int = 1) -> str:
    """`name` if it is a safe relative name of at most `max_parts` components, else
    UnsafeName saying why. Lexical only: `confined()` adds the check on disk."""
    if not isinstance(name, str):
        raise UnsafeName(f"not a name: {type(name).__name__}")
    if not name:
        raise UnsafeName("empty name")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise UnsafeName(f"not valid text: {name!r}") from None
    if size > MAX_PATH_BYTES:
        raise UnsafeName(f"name too long ({size} bytes)")
    if name.startswith("/"):
        raise UnsafeName(f"absolute path: {name!r}")
    bad = next((c for c in name if _bad_char(c)), None)
    if bad is not None:
        raise UnsafeName(f"control character or backslash {bad!r} in {name!r}")
    parts = name.split("/")
    if len(parts) > max_parts:
        raise UnsafeName(f"more than {max_parts} path component(s): {name!r}")
    for p in parts:
        if p in ("", ".", ".."):
            raise UnsafeName(f"empty, '.' or '..' component in {name!r}")
        if p.startswith("-"):
            raise UnsafeName(f"component starts with '-': {name!r}")
        if len(p.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise UnsafeName(f"component longer than {MAX_COMPONENT_BYTES} bytes in {name!r}")
    return name


def confined(base: Path | str, name: object, *, max_parts: int = 1) -> Path:
    """`base / name`, after `check_name`, provided that the path, resolved with every
    symlink that already exists followed, stays under `base` resolved. The returned
    path is the unresolved join (what the caller named), known to be inside today; a
    caller that then opens it should use `open_confined` (no symlink at the last step)."""
    name = check_name(name, max_parts=max_parts)
    path = Path(base) / name
    try:
        root = Path(base).resolve()
        real = path.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop (RuntimeError before 3.13)
        raise UnsafeName(f"{name!r} cannot be resolved under {base}: {e}") from None
    if real != root and root not in real.parents:
        raise UnsafeName(f"{name!r} leads outside {base} (to {real})")
    if real == root:
        raise UnsafeName(f"{name!r} is the directory itself")
    return path


def open_confined(base: Path | str, name: object, flags: int, mode: int = 0o600, *,
                  max_parts: int = 1) -> int:
    """os.open of `confined(base, name)` with O_NOFOLLOW: a symlink planted at the last
    step between the check and the open fails the open instead of being followed."""
    path = confined(base, name, max_parts=max_parts)
    return os.open(path, flags | os.O_NOFOLLOW, mode)


def safe_job_id(job_id: object) -> str:
    """A Ray job id that can name a directory under the spool (one component), else
    UnsafeName. Ray's own ids (`raysubmit_…`, hex driver ids) always pass."""
    return check_name(job_id, max_parts=1)
