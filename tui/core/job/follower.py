"""The job's driver log, followed into the local spool: the remote file's identity
checked before every stream, a byte offset to resume from, a visible new segment when
the remote file was replaced, truncated or rewritten (see tui/core/job/watcher.py's
module docstring for why the file and not Ray's log API)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Callable

from tui.core.job.remote_files import ascii_uint
from tui.core.job.spool import LogSpool
from tui.core.profile import Profile
from tui.core.raypaths import driver_log_path

log = logging.getLogger("rlconsole.jobwatch")

FINGERPRINT = 64
"""First bytes of the remote log compared with the spool's segment start: a log
rewritten in place (same inode, same or larger size) is still told apart."""

FOLLOW_POLL_S = 0.5
"""How often the remote follower looks for new bytes (and a changed file)."""

READER_POLL_S = 0.5
"""How often a console that does not own the spool looks at what the owner wrote."""

IDENTITY_SCRIPT = ('set -- "$1" "$2" $(stat -L -c "%i %s" -- "$1" 2>/dev/null) || exit 0; '
                   '[ -n "$3" ] || exit 0; echo "$3 $4"; head -c "$2" -- "$1" 2>/dev/null | od -An -v -tx1')
"""`inode size` then the first bytes in hex (od: GNU and busybox), or nothing."""

FOLLOW_SCRIPT = r"""
P=$1; OFF=$2; INO=$3; ONCE=$4; NAP=$5
while :; do
  set -- $(stat -L -c '%i %s' -- "$P" 2>/dev/null)
  [ "$1" = "$INO" ] || exit 75
  [ "$2" -ge "$OFF" ] || exit 75
  if [ "$2" -gt "$OFF" ]; then
    tail -c +$((OFF + 1)) -- "$P" 2>/dev/null | head -c $(($2 - OFF))
    OFF=$2
  fi
  [ "$ONCE" = 1 ] && exit 0
  sleep "$NAP"
done
"""
"""The remote follower: copies what the file gained since OFF, every NAP seconds,
exactly the bytes up to the size it saw; exits 75 when the file at the path is no
longer the one it started with (other inode, gone, or shorter than what was sent).
`tail -F` instead would re-send a replaced or truncated file from its start, appended
to the spool as if the old one went on."""


def parse_identity(stdout: str) -> tuple[int, int, bytes] | None:
    """IDENTITY_SCRIPT's output -> (inode, size, first bytes), None if absent/odd."""
    first, _, rest = stdout.partition("\n")
    f = first.split()
    if len(f) != 2 or not all(ascii_uint(x, 20) for x in f):
        return None
    try:
        head = bytes.fromhex("".join(rest.split())[: 2 * FINGERPRINT])
    except ValueError:
        head = b""
    return int(f[0]), int(f[1]), head


class LogFollower:
    """Copies the remote driver log into `spool`, byte for byte, and hands every batch of
    new lines to `consume`. Only the spool's owner fetches; another process follows the
    owner's spool (see LogSpool)."""

    def __init__(self, profile: Profile, pool: Any, job_id: str, spool: LogSpool,
                 consume: Callable[[list[str]], None], container: bool) -> None:
        self.profile = profile
        self.pool = pool
        self.job_id = job_id
        self.spool = spool
        self.consume = consume
        self.container = container

    @property
    def _seg_path(self) -> Path:
        return self.spool.path.with_name(self.spool.path.name + ".seg")

    def _load_segment(self) -> tuple[int, int | None]:
        """(spool offset where the current remote file's bytes start, its inode)."""
        import json

        try:
            d = json.loads(self._seg_path.read_text())
            base, ino = d.get("base"), d.get("inode")
            if isinstance(base, int) and 0 <= base <= self.spool.size and (ino is None or isinstance(ino, int)):
                return base, ino
        except (OSError, ValueError, AttributeError):
            pass
        return 0, None

    def _save_segment(self, base: int, inode: int | None) -> None:
        import json

        tmp = self._seg_path.with_name(self._seg_path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({"base": base, "inode": inode}))
        os.replace(tmp, self._seg_path)

    async def _remote_identity(self, sess: Any, path: str) -> tuple[int, int, bytes] | None:
        """(inode, size, first FINGERPRINT bytes) of the remote log; None if absent."""
        r = await sess.run(["sh", "-c", IDENTITY_SCRIPT, "sh", path, str(FINGERPRINT)],
                           container=self.container, timeout=30)
        return parse_identity(r.stdout)

    def _resync(self, ident: tuple[int, int, bytes]) -> int:
        """Where to resume the remote file: its offset. Starts a new segment (with a
        visible marker line) when the remote log is not the one the spool holds the
        start of: another inode, shorter than what was copied, or other first bytes."""
        inode, size, head = ident
        base, known = self._load_segment()
        have = self.spool.size - base
        mine = os.pread(self.spool._fd, min(FINGERPRINT, have), base) if have else b""
        k = min(len(mine), len(head))
        why = None
        if known is not None and known != inode:
            why = f"replaced (inode {known} -> {inode})"
        elif size < have:
            why = f"truncated ({have} -> {size} bytes)"
        elif mine[:k] != head[:k]:
            why = "rewritten (its first bytes changed)"
        if why is None:
            if known != inode:
                self._save_segment(base, inode)
            return have
        sep = b"\n" if self.spool.pending() else b""
        marker = (f"[rlconsole] ---- the job's remote log was {why}; a new segment starts "
                  f"here, the lines above are from the earlier file ----\n").encode()
        self.consume(self.spool.append(sep + marker))
        self._save_segment(self.spool.size, inode)
        log.warning("log of %s %s: new spool segment", self.job_id, why)
        return 0

    async def follow(self, once: bool = False) -> None:
        """Follow the driver log into the spool; reconnect after a drop.

        Only the spool's owner (see LogSpool: one writer per job across processes)
        fetches; another console, or a `status` while a console follows, reads and
        follows the owner's spool instead, and takes over if the owner goes away.
        Before each stream the remote file's identity is checked (`_resync`); the
        stream itself ends when the file is replaced or truncated (FOLLOW_SCRIPT exits
        75), so that no byte of another file is appended as if it continued this one."""
        from tui.core.ssh import StreamStatus

        path = driver_log_path(self.profile, self.job_id)
        backoff = 0.5
        while True:
            if not self.spool.try_lock():
                lines = self.spool.refresh()
                self.consume(lines)
                if once and not lines:
                    return
                if not lines:
                    await asyncio.sleep(READER_POLL_S)
                continue
            while True:  # what an earlier owner wrote since we last looked
                lines = self.spool.refresh()
                if not lines and self.spool.size == os.fstat(self.spool._fd).st_size:
                    break
                self.consume(lines)
            sess = self.pool.head
            try:
                ident = await self._remote_identity(sess, path)
                if ident is None:  # not there (yet, or any more)
                    if once:
                        return
                    raise FileNotFoundError(path)
                offset = self._resync(ident)
                status = StreamStatus()
                cmd = ["sh", "-c", FOLLOW_SCRIPT, "sh", path, str(offset), str(ident[0]),
                       "1" if once else "0", str(FOLLOW_POLL_S)]
                # aclosing: whatever ends the loop (an error in a callback included)
                # ends the remote tail and gives its channel back at once. An
                # abandoned stream holds one of the node's few channel slots until
                # garbage collection; a few of those and every command on the head
                # waits for a slot that never frees.
                async with contextlib.aclosing(
                        sess.stream_bytes(cmd, self.container, status=status)) as it:
                    async for chunk in it:
                        self.consume(self.spool.append(chunk))
                        backoff = 0.5
                if status.rc == 75:
                    continue  # the file changed identity: resync at once
                if once:
                    return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - a dropped link is retried, never fatal
                log.info("log follow of %s interrupted: %s", self.job_id, e)
            if once:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 8.0)
