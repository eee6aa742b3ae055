"""The run's TensorBoard scalars and its checkpoint marker, in one round trip a refresh:
on the head (or the sim) the event files are read in place; elsewhere a local mirror is
kept by byte offset over SSH (`RemoteTbMirror`), and the incremental reader
(tui/core/job/tbreader.py) reads the local copy."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tui.core.job.remote_files import READ_LIMIT, ascii_uint, read_remote_bytes
from tui.core.profile import Profile

log = logging.getLogger("rlconsole.jobwatch")

# One round trip per refresh: the event files' sizes (when they are mirrored) and the
# last checkpoint step. `stat -c` works with GNU and busybox alike.
SCAN_SCRIPT = ('if [ -n "$1" ] && cd "$1" 2>/dev/null; then '
               'find . -name "*tfevents*" -type f -exec stat -c "%s %n" {} +; fi; '
               'echo "@@ckpt=$(cat "$2" 2>/dev/null)"')


MAX_SCAN_FILES = 10_000
"""Event files mirrored at most: a run writes a handful; a folder flooded with names
must not grow the console's memory or its refresh without bound."""


def parse_scan(stdout: str) -> tuple[dict[str, int], int | None]:
    """SCAN_SCRIPT's output -> ({relative event file: size}, last checkpoint step).

    The names come from the head's shared folder, writable by anyone who can start a
    job: they go through the one rule for remote names (`safepath.check_name`), after
    `find`'s own `./` prefix, which every real record has. A name holding a newline
    splits its record in two; the second half is rejected (no `./`) or, if it forges
    one, is still only a confined relative name."""
    from tui.core.safepath import UnsafeName, check_name

    sizes: dict[str, int] = {}
    ckpt: int | None = None
    for line in stdout.splitlines():
        if line.startswith("@@ckpt="):
            v = line[7:].strip()
            ckpt = int(v) if ascii_uint(v, 18) else None
            continue
        size, _, name = line.partition(" ")
        if not (ascii_uint(size, 18) and name.startswith("./")):
            continue
        try:
            rel = check_name(name[2:], max_parts=32)
        except UnsafeName as e:
            log.warning("TensorBoard mirror: skipped a remote name: %s", e)
            continue
        if len(sizes) < MAX_SCAN_FILES:
            sizes[rel] = int(size)
    return sizes, ckpt


@dataclass
class RemoteTbMirror:
    """Keeps a local, append-only copy of the run's event files, fetching only the bytes
    appended since the last sync, so the incremental reader reads local files."""

    sess: Any
    remote_dir: str
    local_dir: Path
    container: bool

    async def fetch(self, sizes: dict[str, int]) -> int:
        """Fetch what each file gained beyond the local copy; files that did not grow
        cost nothing (between steps of a real run, that is most refreshes)."""
        from tui.core.safepath import UnsafeName, confined, open_confined

        got = 0
        self.local_dir.mkdir(parents=True, exist_ok=True)
        for rel, size in sizes.items():
            try:
                # the rule again here (fetch is public), and on disk: no symlink out
                local = confined(self.local_dir, rel, max_parts=32)
                have = local.lstat().st_size if local.exists() else 0
                if size <= have:
                    continue
                local.parent.mkdir(parents=True, exist_ok=True)
                confined(self.local_dir, rel, max_parts=32)  # mkdir followed nothing out
                # no more than the scan said the file gained (nor than one read's limit):
                # the copy never runs ahead of what the head's file holds
                data = await read_remote_bytes(self.sess, f"{self.remote_dir}/{rel}", have, self.container,
                                               limit=min(READ_LIMIT, size - have))
                if data:
                    fd = open_confined(self.local_dir, rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                       0o600, max_parts=32)
                    try:
                        view = memoryview(data)
                        while view:
                            view = view[os.write(fd, view):]
                    finally:
                        os.close(fd)
                    got += len(data)
            except (UnsafeName, OSError) as e:
                log.warning("TensorBoard mirror: %r not mirrored: %s", rel, e)
        return got

    async def sync(self) -> int:
        r = await self.sess.run(["sh", "-c", SCAN_SCRIPT, "sh", self.remote_dir, ""],
                                container=self.container, timeout=30)
        return await self.fetch(parse_scan(r.stdout)[0])


def is_local(profile: Profile) -> bool:
    """The console runs where the head's files are: a loopback head (the sim, or a
    console on the head node itself reached as localhost)."""
    return profile.head.ssh.host.startswith("127.") or profile.head.ssh.host == "localhost"


class ScalarSource:
    """The scalars and the last checkpoint of one run. `may_write` says whether this
    process owns the job's spool: the mirror, like the spool, has one writer (two
    appending would double it); another process reads the owner's mirror."""

    def __init__(self, profile: Profile, pool: Any, tb_remote: str, tb_local: Path, ckpt_dir: str,
                 container: bool, may_write: Callable[[], bool],
                 earlier_run: tuple[float, int] | None = None) -> None:
        self.profile = profile
        self.earlier_run = earlier_run  # ScalarReader's: an earlier run's files under the same name
        self.pool = pool
        self.tb_remote = tb_remote
        self.tb_local = tb_local
        self.ckpt_dir = ckpt_dir
        self.container = container
        self.may_write = may_write
        self.reader: Any = None
        self.reader_local = False
        self.mirror: RemoteTbMirror | None = None
        self.last_checkpoint: int | None = None

    def tb_reader(self) -> Any:
        from tui.core.job.tbreader import ScalarReader

        if self.reader is None:
            # The console on the head (or the sim) reads the event files in place;
            # elsewhere it reads a local mirror kept by byte offset over SSH.
            self.reader_local = os.path.isdir(self.tb_remote) and is_local(self.profile)
            if not self.reader_local:
                self.mirror = RemoteTbMirror(self.pool.head, self.tb_remote, self.tb_local, self.container)
            self.reader = ScalarReader(self.tb_remote if self.reader_local else self.tb_local,
                                       earlier_run=self.earlier_run)
        return self.reader

    async def poll_once(self, read_scalars: bool = True) -> None:
        """The checkpoint marker and (unless `read_scalars` is False) the event files'
        new scalars, in one round trip."""
        reader = self.tb_reader() if read_scalars else None
        scan_dir = "" if (reader is None or self.reader_local) else self.tb_remote
        r = await self.pool.head.run(
            ["sh", "-c", SCAN_SCRIPT, "sh", scan_dir, f"{self.ckpt_dir}/latest_checkpointed_iteration.txt"],
            container=self.container, timeout=30)
        sizes, ckpt = parse_scan(r.stdout)
        if ckpt is not None:
            self.last_checkpoint = ckpt
        if reader is None:
            return
        if self.mirror is not None and self.may_write():
            await self.mirror.fetch(sizes)
        await asyncio.to_thread(reader.update)
