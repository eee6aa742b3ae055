"""The two pieces of `torch` the debug code of the reference run touches, without torch.

The simulated cluster has no torch, yet the vendor's debug lines (`torch.save(batch, p)` and
`torch.distributed.get_rank()`) must behave as they do on the real cluster, because the
console diagnoses the failure they cause. `save` therefore fails exactly like torch's
zip-file writer when the parent directory is missing::

    RuntimeError: Parent directory /mnt/seed-program-nas/001688/kechun.wu/0226 does not exist.

and otherwise really writes the file (a pickle), as torch would write one.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

__all__ = ["save", "distributed", "set_rank"]

_rank = 0
_world_size = 1


def set_rank(rank: int, world_size: int) -> None:
    """Record this process's rank, as `torch.distributed.init_process_group` would."""
    global _rank, _world_size
    _rank = int(rank)
    _world_size = int(world_size)


class _Distributed:
    """`torch.distributed`, reduced to what the debug code calls."""

    @staticmethod
    def get_rank() -> int:
        return _rank

    @staticmethod
    def get_world_size() -> int:
        return _world_size

    @staticmethod
    def is_initialized() -> bool:
        return True


distributed = _Distributed()


def save(obj: Any, f: str | os.PathLike[str]) -> None:
    """Write `obj` to `f`; raise torch's own error when the directory is missing."""
    path = os.fspath(f)
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        # torch/serialization.py -> PyTorchFileWriter: the message the reference run showed.
        raise RuntimeError(f"Parent directory {parent} does not exist.")
    with open(path, "wb") as fh:
        pickle.dump(obj, fh)
