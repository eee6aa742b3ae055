"""Watching a running job: its driver log, its scalars, its checkpoints, its failures.

Choice of log source, and why: the driver's log *file* on the head
(`<ray temp dir>/session_latest/logs/job-driver-<id>.log`), followed with
`tail -c +OFFSET -F` over the node's SSH connection, rather than Ray's job log API.
The API replays the whole log from the start on every connection, so after a dropped
link or a console restart the console would re-read (and re-transfer) hours of log to
find its place; the file is append-only, so a byte offset resumes exactly: the local
spool is a byte-for-byte copy of the remote file, and its size *is* the offset. No line
is lost or repeated, even when the stream is cut in the middle of a line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..alerts import Alert
from .history import last_run, runs
from ..profile import Profile
from ..raypaths import driver_log_path
from ..state import JobState, RayJobState
from ..state import ACTIVE_JOB_STATUSES, JobStatus

log = logging.getLogger("rlconsole.jobwatch")

"""A job's status when the current Ray does not know it (see JobState.on_cluster)."""

LineCallback = Callable[[list[str]], None]
AlertCallback = Callable[[Alert], None]


def job_on_cluster(ray: Any, job_id: str) -> bool | None:
    """Whether the current Ray knows `job_id`: its job list says (dashboard API); no
    Ray on a reachable head means no; the CLI fallback lists no jobs: not known."""
    if not ray.available:
        return False
    if ray.source == "api":
        return any(j.id == job_id for j in ray.jobs)
    return None


def spool_dir() -> Path:
    from ..locations import spool_root

    return spool_root()


async def read_remote_bytes(sess: Any, path: str, offset: int, container: bool, limit: int = 64 << 20) -> bytes:
    """Bytes of a remote file from `offset` (at most `limit`)."""
    cmd = f"tail -c +{int(offset) + 1} -- {shlex.quote(path)} 2>/dev/null | head -c {int(limit)}"
    buf = bytearray()
    async with contextlib.aclosing(sess.stream_bytes(cmd, container)) as it:
        async for chunk in it:
            buf += chunk
    return bytes(buf)


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


def _ascii_uint(text: str, max_digits: int) -> bool:
    """Whether remote `text` is a plain number: 1 to `max_digits` ASCII digits.
    `str.isdigit` is true of "²" (which int() refuses: the scan then raised and stopped
    for good) and of "٣" (which int() reads as 3)."""
    return 0 < len(text) <= max_digits and text.isascii() and text.isdigit()


def parse_identity(stdout: str) -> tuple[int, int, bytes] | None:
    """IDENTITY_SCRIPT's output -> (inode, size, first bytes), None if absent/odd."""
    first, _, rest = stdout.partition("\n")
    f = first.split()
    if len(f) != 2 or not all(_ascii_uint(x, 20) for x in f):
        return None
    try:
        head = bytes.fromhex("".join(rest.split())[: 2 * FINGERPRINT])
    except ValueError:
        head = b""
    return int(f[0]), int(f[1]), head


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
    from ..safepath import UnsafeName, check_name

    sizes: dict[str, int] = {}
    ckpt: int | None = None
    for line in stdout.splitlines():
        if line.startswith("@@ckpt="):
            v = line[7:].strip()
            ckpt = int(v) if _ascii_uint(v, 18) else None
            continue
        size, _, name = line.partition(" ")
        if not (_ascii_uint(size, 18) and name.startswith("./")):
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
        from ..safepath import UnsafeName, confined, open_confined

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
                data = await read_remote_bytes(self.sess, f"{self.remote_dir}/{rel}", have, self.container)
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


class JobWatcher:
    """Follows one job: log -> spool -> step metrics + diagnosis; scalars; checkpoint."""

    def __init__(self, profile: Profile, pool: Any, job_id: str, *,
                 on_lines: LineCallback | None = None, on_alert: AlertCallback | None = None,
                 refresh_s: float | None = None, root: Path | None = None,
                 wall_clock: bool = True) -> None:
        from ..diagnosis import Diagnoser
        from .spool import LogSpool
        from .verl_log import LogMetricsParser

        self.profile = profile
        self.pool = pool
        self.job_id = job_id
        self.status: JobStatus = JobStatus.UNKNOWN  # Ray's word for it, or one of the console's two
        self.on_cluster: bool | None = None  # see JobState.on_cluster
        self.on_lines = on_lines
        self.on_alert = on_alert
        self.refresh_s = refresh_s or profile.monitoring.refresh_s
        from ..safepath import confined, safe_job_id

        # The id comes from Ray (anyone can submit a job): one confined name, or
        # UnsafeName before anything is created.
        base = confined(root or spool_dir(), safe_job_id(job_id))
        base.mkdir(parents=True, exist_ok=True)
        self.spool = LogSpool(base / "driver.log")
        # wall_clock=False (a one-shot `status`): lines read in one go say nothing
        # about when steps happened; the ETA then comes from tqdm's own rate.
        self.wall_clock = wall_clock
        self.parser = LogMetricsParser(clock=time.time if wall_clock else None)
        self.diagnoser = Diagnoser()
        self.alerts: list[Alert] = []
        self.tb_local = base / "tb"
        self.last_checkpoint: int | None = None
        self._reader: Any = None
        self._reader_local = False
        self._mirror: RemoteTbMirror | None = None
        self._tasks: list[asyncio.Task[None]] = []
        rec = next((r for r in reversed(runs(profile.name)) if r.job_id == job_id), None)
        self.tb_remote = (rec.tensorboard_dir if rec and rec.tensorboard_dir else
                          profile.env.get("TENSORBOARD_DIR", profile.paths.tensorboard_dir))
        self.ckpt_dir = rec.checkpoint_dir if rec and rec.checkpoint_dir else profile.paths.checkpoint_dir
        self.reattached = False
        self._cached_lines = 0
        self._cache_bad = False  # the cache on disk was refused: rewrite it after the parse
        from .metrics import SeriesIndex

        self._merged: dict[int, dict[str, float]] = {}
        self._index = SeriesIndex(self._merged)
        self._m_np = self._m_ntb = self._m_tbcount = self._m_replaced = 0
        self._m_tbmax = 0

    @property
    def container(self) -> bool:
        return self.profile.container.access == "docker-exec"

    def _consume(self, lines: list[str], notify: bool = True) -> None:
        # A broken user diagnosis.yaml is told once, as a warning, before any log line is
        # read against the catalog without it (news now, even while old lines are re-read).
        for problem in self.diagnoser.take_problems():
            self.alerts.append(problem)
            if self.on_alert:
                self.on_alert(problem)
        if not lines:
            return
        first = self.spool.line_count - len(lines)
        self.parser.feed_many(lines)
        for i, line in enumerate(lines):
            a = self.diagnoser.match(line, first + i)
            if a is not None:
                self.alerts.append(a)
                if notify and self.on_alert:
                    self.on_alert(a)
        if notify and self.on_lines:
            self.on_lines(lines)

    # -- the spool's segments: the remote file's identity ------------------------------

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
        self._consume(self.spool.append(sep + marker))
        self._save_segment(self.spool.size, inode)
        log.warning("log of %s %s: new spool segment", self.job_id, why)
        return 0

    async def follow_log(self, once: bool = False) -> None:
        """Follow the driver log into the spool; reconnect after a drop.

        Only the spool's owner (see LogSpool: one writer per job across processes)
        fetches; another console, or a `status` while a console follows, reads and
        follows the owner's spool instead, and takes over if the owner goes away.
        Before each stream the remote file's identity is checked (`_resync`); the
        stream itself ends when the file is replaced or truncated (FOLLOW_SCRIPT exits
        75), so that no byte of another file is appended as if it continued this one."""
        from ..ssh import StreamStatus

        path = driver_log_path(self.profile, self.job_id)
        backoff = 0.5
        while True:
            if not self.spool.try_lock():
                lines = self.spool.refresh()
                self._consume(lines)
                if once and not lines:
                    return
                if not lines:
                    await asyncio.sleep(READER_POLL_S)
                continue
            while True:  # what an earlier owner wrote since we last looked
                lines = self.spool.refresh()
                if not lines and self.spool.size == os.fstat(self.spool._fd).st_size:
                    break
                self._consume(lines)
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
                        self._consume(self.spool.append(chunk))
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

    def _tb_reader(self) -> Any:
        from .tbreader import ScalarReader

        if self._reader is None:
            # The console on the head (or the sim) reads the event files in place;
            # elsewhere it reads a local mirror kept by byte offset over SSH.
            self._reader_local = os.path.isdir(self.tb_remote) and _is_local(self.profile)
            if not self._reader_local:
                self._mirror = RemoteTbMirror(self.pool.head, self.tb_remote, self.tb_local, self.container)
            self._reader = ScalarReader(self.tb_remote if self._reader_local else self.tb_local)
        return self._reader

    async def poll_scalars_once(self, read_scalars: bool = True) -> None:
        """The checkpoint marker and (unless `read_scalars` is False) the event files'
        new scalars, in one round trip."""
        reader = self._tb_reader() if read_scalars else None
        scan_dir = "" if (reader is None or self._reader_local) else self.tb_remote
        r = await self.pool.head.run(
            ["sh", "-c", SCAN_SCRIPT, "sh", scan_dir, f"{self.ckpt_dir}/latest_checkpointed_iteration.txt"],
            container=self.container, timeout=30)
        sizes, ckpt = parse_scan(r.stdout)
        if ckpt is not None:
            self.last_checkpoint = ckpt
        if reader is None:
            return
        # the mirror, like the spool, has one writer: the console that owns the job's
        # spool; another reads the owner's mirror (two appending would double it)
        if self._mirror is not None and self.spool.try_lock():
            await self._mirror.fetch(sizes)
        await asyncio.to_thread(reader.update)

    CACHE_EVERY_LINES = 200_000
    """The console saves the parse cache when this many lines were parsed since the
    last save (and when it stops watching): a later `status` re-parses at most that."""

    async def save_cache(self) -> None:
        snap = self.cache_snapshot()
        await asyncio.to_thread(self.write_cache, snap)

    async def poll_scalars(self) -> None:
        while True:
            try:
                if self.spool.line_count - self._cached_lines >= self.CACHE_EVERY_LINES:
                    await self.save_cache()
                await self.poll_scalars_once()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001
                log.info("scalar poll failed: %s", e)
            await asyncio.sleep(self.refresh_s)

    # -- the parse cache: what the spool's lines came to, up to a line ----------------

    CACHE_VERSION = 3  # 2: the parser keeps a wrapped line's last segment; 3: JSON, not pickle

    @property
    def cache_path(self) -> Path:
        return self.spool.path.with_name("parsed.json")

    def cache_snapshot(self) -> tuple[Any, ...]:
        """The parser's state as of now, cheap enough for the app's loop: shallow
        copies (a finished step's metrics are never changed again; the last one may
        be, by a wrapped continuation, so it is copied too). Serialise it in a thread
        with `write_cache`."""
        p = self.parser
        # plain values only (the cache is JSON): steps and progress are converted below
        state = {k: v for k, v in vars(p).items()
                 if k == "progress" or (k not in ("steps", "seen_at", "_clock")
                                        and isinstance(v, (str, int, float, bool, type(None))))}
        steps = dict(p.steps)
        if steps:
            last = next(reversed(steps))
            steps[last] = dict(steps[last])
        state["steps"] = steps
        return (self.CACHE_VERSION, self.spool.size, self.spool.line_count, state)

    def write_cache(self, snap: tuple[Any, ...]) -> None:
        """Save a snapshot and the spool's line index (blocking: run it in a thread).
        A later re-attach (a `status`, a console restart) then parses only the lines
        after it instead of the whole run's log. JSON, written private (0600) and
        renamed into place: a file that only ever holds data, never code."""
        import json
        import tempfile

        version, size, lines, state = snap
        state = dict(state)
        state["steps"] = [[step, m] for step, m in state["steps"].items()]  # ordered; int keys
        prog = state.get("progress")
        state["progress"] = prog.to_dict() if prog is not None else None
        text = json.dumps({"version": version, "size": size, "lines": lines, "state": state})
        # a fresh 0600 file of our own (mkstemp: O_EXCL), renamed over the old cache
        fd, tmp = tempfile.mkstemp(dir=self.cache_path.parent, prefix="parsed.", suffix=".tmp")
        try:
            with open(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.cache_path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.spool.save_index()
        self._cached_lines = lines

    def _read_cache(self) -> dict[str, Any] | None:
        """The cache's parser state, or None: none, not ours (another user's file, or
        one group/world could write: anyone could have planted what it says), not a
        regular file, or not exactly the JSON `write_cache` writes."""
        import json
        import stat

        try:
            fd = os.open(self.cache_path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with open(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
                log.warning("parse cache %s ignored (owner uid %d, mode %o): rebuilt from the spool",
                            self.cache_path, st.st_uid, stat.S_IMODE(st.st_mode))
                self._cache_bad = True
                return None
            if st.st_size > CACHE_MAX_BYTES:  # not one we wrote (a whole run's is ~16 MB)
                self._cache_bad = True
                return None
            raw = f.read()
        try:
            doc = json.loads(raw)
            fields = set(vars(self.parser)) - {"seen_at", "_clock"}
            state = _cache_state(doc, self.CACHE_VERSION, fields)
        except (ValueError, TypeError, KeyError, RecursionError):
            self._cache_bad = True
            return None
        if state is None:
            return None
        if doc["size"] > self.spool.size or doc["lines"] > self.spool.line_count:
            return None
        state["__lines"] = doc["lines"]
        return state

    def _load_cache(self) -> int:
        """Restore the parser from the cache if it matches this spool; the number of
        lines it covers (0: parse from the start)."""
        self._cache_bad = False
        state = self._read_cache()
        if state is None:
            return 0
        lines = int(state.pop("__lines"))
        for k, v in state.items():
            setattr(self.parser, k, v)
        self._cached_lines = lines
        return lines

    def reattach(self, diagnose_tail: int = 200_000, batch: int = 20_000) -> None:
        """Re-attach: parse what the spool already holds (nothing is re-fetched), in
        batches so memory stays bounded; diagnose only its tail (old failures were
        reported when they happened). Blocking: run it in a thread."""
        n = self.spool.line_count
        # when these lines arrived is not known: no wall times for them (ETA cadence)
        clock, self.parser._clock = self.parser._clock, None
        try:
            self._reparse(n, diagnose_tail, batch)
        finally:
            self.parser._clock = clock if self.wall_clock else None
        self.reattached = True

    def _reparse(self, n: int, diagnose_tail: int, batch: int) -> None:
        first = self._load_cache()  # lines the parse cache already covers
        self._reparse_from(first, n, diagnose_tail, batch)
        if self._cache_bad and self.parser.lines == n:  # an unsafe or foreign cache: ours instead, now
            with contextlib.suppress(OSError):
                self.write_cache(self.cache_snapshot())

    def _reparse_from(self, first: int, n: int, diagnose_tail: int, batch: int) -> None:
        dstart = max(0, n - diagnose_tail) if diagnose_tail > 0 else n
        for start in range(min(first, dstart), n, batch):
            lines = self.spool.lines(start, min(n, start + batch))
            if start + len(lines) > first:
                self.parser.feed_many(lines[max(0, first - start):])
            if start + len(lines) > dstart:
                for i in range(max(0, dstart - start), len(lines)):
                    a = self.diagnoser.match(lines[i], start + i)
                    if a is not None:
                        self.alerts.append(a)

    async def run(self, follow: bool = True) -> None:
        if not self.reattached:
            await asyncio.to_thread(self.reattach)
        await asyncio.gather(self.follow_log(once=not follow), self.poll_scalars())

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self.run())]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._tasks and self.spool.line_count > self._cached_lines:
            with contextlib.suppress(Exception):
                await self.save_cache()
        self._tasks = []
        self.spool.release()  # another console may take the job's spool over

    # -- what the user sees -----------------------------------------------------------

    def rows(self) -> dict[int, dict[str, float]]:
        """Steps from the log, completed by TensorBoard's scalars (which carry every tag
        even when the console line was cut short). Kept up to date incrementally: a
        refresh merges only the steps that are new or may have changed (the log's last
        step, TensorBoard's steps from its last one on), so its cost does not grow with
        the run; anything else (an older step rewritten: a resumed run) rebuilds it."""
        p = self.parser.steps
        tb = self._reader.by_step if self._reader is not None else {}
        replaced = len(self._reader.replaced) if self._reader is not None else 0
        if replaced != self._m_replaced or len(p) < self._m_np:
            self._rebuild_merged()
            self._m_replaced = replaced
            return self._merged
        keys = list(p)
        dirty = set(keys[self._m_np:])
        if keys:
            dirty.add(keys[-1])
        if len(tb) != self._m_ntb or self._reader is not None and len(self._reader) != self._m_tbcount:
            dirty.update(st for st in tb if st >= self._m_tbmax)
        self._m_np = len(keys)
        self._m_ntb = len(tb)
        self._m_tbcount = len(self._reader) if self._reader is not None else 0
        if tb:
            self._m_tbmax = max(self._m_tbmax, next(reversed(tb)))
        merged = self._merged
        last = next(reversed(merged)) if merged else None
        settled_max = self._index.settled_step
        for st in sorted(dirty):
            if (last is not None and st < last and st not in merged) or \
                    (settled_max is not None and st <= settled_max):
                self._rebuild_merged()  # out of order, or an old step changed
                return self._merged
            merged[st] = {**p.get(st, {}), **tb.get(st, {})}
            last = st if last is None or st > last else last
        self._settle()
        return merged

    def _settle(self) -> None:
        """Steps that can no longer change: a few behind the log's last step, and
        behind the last step TensorBoard has been read up to (it lags the log by up to
        a refresh: its new steps must not land in the cached part)."""
        if not self._merged:
            return
        final = next(reversed(self._merged)) - self._index.TAIL
        if self._reader is not None and self._reader.by_step:
            final = min(final, self._m_tbmax - 1)
        prev = self._index.settled_step
        self._index.settled_step = final if prev is None else max(prev, final)

    def _rebuild_merged(self) -> None:
        p = self.parser.steps
        tb = self._reader.by_step if self._reader is not None else {}
        self._merged.clear()
        for st in sorted(set(p) | set(tb)):
            self._merged[st] = {**p.get(st, {}), **tb.get(st, {})}
        self._index.reset()
        self._m_np, self._m_ntb = len(p), len(tb)
        self._m_tbcount = len(self._reader) if self._reader is not None else 0
        self._m_tbmax = next(reversed(tb)) if tb else 0
        self._settle()

    def run_metrics(self) -> Any:
        from .metrics import RunMetrics

        mon = self.profile.monitoring
        expected: dict[str, Any] = {}
        if mon.mfu_pct:
            expected["mfu_pct"] = mon.mfu_pct
        if mon.throughput_tokens_per_s_per_node:
            expected["throughput_tokens_per_s_per_node"] = mon.throughput_tokens_per_s_per_node
        if mon.step_time_min:
            expected["step_time_s"] = (mon.step_time_min[0] * 60, mon.step_time_min[1] * 60)
        if mon.mem_gib_per_card:
            expected["mem_gib_per_card"] = mon.mem_gib_per_card
        prog = self.parser.progress
        total = self.parser.total_steps or (prog.total if prog else None)
        return RunMetrics(self.rows(), index=self._index, total_steps=total or mon.total_steps,
                          last_checkpoint=self.last_checkpoint or self.parser.last_checkpoint,
                          expected=expected, gpus_per_node=self.profile.nodes[0].gpus,
                          wall_times=self.parser.seen_at, now=time.time(),
                          tqdm_s_per_step=prog.s_per_it if prog else None)

    def job_state(self, rm: Any = None) -> JobState:
        """The job as `status --json` shows it; `rm`: a RunMetrics already computed for
        this moment (merging every step's metrics is the costly part)."""
        rm = rm if rm is not None else self.run_metrics()
        step = rm.last_step
        if self.on_cluster is False:
            # The last run, not a live one: where it got to, nothing that looks current.
            return JobState(id=self.job_id, status=JobStatus.NOT_ON_CLUSTER, step=step, total_steps=rm.total_steps,
                            last_checkpoint=rm.last_checkpoint, on_cluster=False,
                            summary={"step": step, "total_steps": rm.total_steps,
                                     "last_checkpoint": rm.last_checkpoint})
        last = rm.by_step.get(step, {}) if step is not None else {}
        metrics = {k: v for k, v in last.items()
                   if isinstance(v, (int, float)) and v == v and v not in (float("inf"), float("-inf"))}
        summary = rm.summary()
        if self.status != JobStatus.RUNNING:
            summary["eta_s"] = summary["wall_step_time_s"] = None  # only a running job has an ETA
        return JobState(id=self.job_id, status=self.status, step=step, total_steps=rm.total_steps,
                        metrics=metrics, last_checkpoint=rm.last_checkpoint, summary=summary,
                        on_cluster=self.on_cluster)


CACHE_MAX_BYTES = 1 << 30
"""A parse cache larger than this is not read (2710 steps x 150 metrics: 16 MB)."""

_CACHE_SCALARS: dict[str, tuple[type, ...]] = {
    "total_steps": (int, type(None)), "last_checkpoint": (int, type(None)), "malformed": (int,),
    "lines": (int,), "_tail": (str,), "_pending": (str, type(None)), "_pending_step": (int,),
    "_pending_bad": (int,), "_pending_prefix_bad": (int,), "_pending_last_bad": (bool,)}
"""The parser fields the parse cache holds besides `steps` and `progress`, by type."""


def _cache_state(doc: Any, version: int, fields: set[str]) -> dict[str, Any] | None:
    """The parser state in a parse-cache document, type-checked field by field (None:
    another version). Raises ValueError/TypeError/KeyError on anything else: a cache
    is data written by `write_cache`, and nothing else is taken from it. `fields`: the
    parser's own attributes; a field added to the parser later (not in
    `_CACHE_SCALARS`) is taken only as a plain scalar."""
    from .verl_log import TqdmProgress

    if not isinstance(doc, dict) or doc.get("version") != version:
        return None
    if not all(isinstance(doc[k], int) and not isinstance(doc[k], bool) for k in ("size", "lines")):
        raise TypeError("size/lines")
    raw = doc["state"]
    if not isinstance(raw, dict) or not set(_CACHE_SCALARS) | {"steps", "progress"} <= set(raw) <= fields:
        raise KeyError("state fields")
    state: dict[str, Any] = {}
    for k, v in raw.items():
        if k in ("steps", "progress"):
            continue
        types = _CACHE_SCALARS.get(k, (str, int, float, bool, type(None)))
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            raise TypeError(k)
        state[k] = v
    steps: dict[int, dict[str, float]] = {}
    for item in raw["steps"]:
        step, metrics = item
        if not isinstance(step, int) or not isinstance(metrics, dict):
            raise TypeError("steps")
        if not all(isinstance(name, str) and isinstance(x, (int, float)) for name, x in metrics.items()):
            raise TypeError("step metrics")
        steps[step] = {name: float(x) for name, x in metrics.items()}
    state["steps"] = steps
    prog = raw["progress"]
    state["progress"] = None if prog is None else TqdmProgress(**prog)
    return state


def _is_local(profile: Profile) -> bool:
    """The console runs where the head's files are: a loopback head (the sim, or a
    console on the head node itself reached as localhost)."""
    return profile.head.ssh.host.startswith("127.") or profile.head.ssh.host == "localhost"


async def find_job(profile: Profile, remote: Any, known: list[RayJobState] | None = None) -> tuple[str, str] | None:
    """The job to watch: a running one this console submitted, else any running one,
    else the last one submitted from here. (id, status). `known`: Ray's job list when the
    caller already has it (the monitor polls it), which saves asking the job API again."""
    from ..actions.jobs import job_client, list_jobs

    from ..safepath import UnsafeName, safe_job_id

    jobs: list[dict[str, Any]] = []
    if known is None:
        with contextlib.suppress(Exception):
            known = await list_jobs(await job_client(remote))
    if known is not None:
        jobs = [{"id": j.id, "status": j.status} for j in sorted(known, key=lambda j: j.start_time or 0)]

    def usable(job_id: Any) -> bool:
        """A job whose id cannot name its spool directory is never watched."""
        try:
            safe_job_id(job_id)
            return True
        except UnsafeName as e:
            log.warning("job passed over: %s", e)
            return False

    jobs = [j for j in jobs if usable(j.get("id"))]
    mine = {r.job_id for r in runs(profile.name)}
    active = [j for j in jobs if j["status"] in ACTIVE_JOB_STATUSES]
    for pick in ([j for j in active if j["id"] in mine], active):
        if pick:
            return pick[-1]["id"], pick[-1]["status"]
    rec = last_run(profile.name)
    if rec and usable(rec.job_id):
        st = next((j["status"] for j in jobs if j["id"] == rec.job_id), JobStatus.UNKNOWN)
        return rec.job_id, st
    if jobs:
        return jobs[-1]["id"], jobs[-1]["status"]
    return None
