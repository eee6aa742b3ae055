"""Reading the head's files over SSH, for the log follower and the TensorBoard mirror:
a file's bytes from an offset, and the one rule for a number in remote text."""

from __future__ import annotations

import contextlib
import shlex
from typing import Any

READ_LIMIT = 64 << 20
"""Bytes of one remote file fetched in one read, at most."""


async def read_remote_bytes(sess: Any, path: str, offset: int, container: bool, limit: int = READ_LIMIT) -> bytes:
    """Bytes of a remote file from `offset`, at most `limit`. The remote `head -c` says so,
    and so does this end: what a node sends past `limit` (whatever runs there in place of
    `head`) is not kept, and the stream is closed at once."""
    limit = max(0, int(limit))
    cmd = f"tail -c +{int(offset) + 1} -- {shlex.quote(path)} 2>/dev/null | head -c {limit}"
    buf = bytearray()
    if not limit:
        return b""
    async with contextlib.aclosing(sess.stream_bytes(cmd, container)) as it:
        async for chunk in it:
            buf += chunk[:limit - len(buf)]
            if len(buf) >= limit:
                break
    return bytes(buf)


def ascii_uint(text: str, max_digits: int) -> bool:
    """Whether remote `text` is a plain number: 1 to `max_digits` ASCII digits.
    `str.isdigit` is true of "²" (which int() refuses: the scan then raised and stopped
    for good) and of "٣" (which int() reads as 3)."""
    return 0 < len(text) <= max_digits and text.isascii() and text.isdigit()
