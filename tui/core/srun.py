"""The srun transport: commands reach a node of a Slurm allocation as a job step,
`srun --overlap --jobid J --nodes=1 --ntasks=1 -w NODE -- /bin/sh -c COMMAND`, run here,
on the machine the console runs on (the login node).

`SrunPool` and `SrunSession` have the shape of the SSH layer's `SessionPool` and
`NodeSession` (tui/core/ssh.py): the same `run`, `stream`, `stream_text`, `stream_bytes`,
`tcp_probe`, `forward_local_port`, states and callbacks, the same results and exceptions,
so the actions and probes written against that interface (tui/core/transport.py picks
one) never know which carries them. The command line a node's shell gets is built as for
SSH (`wrap_command`: an argv quoted, into the container with `docker exec`); srun gets it
as one argv element, never through a local shell.

A node is "connected" while the allocation runs and holds it; "down" (with why: no
allocation yet, pending and why, ended) otherwise. The pool reads the allocation with
`squeue` at start and every `POLL_S` (its `allocation` is the state the console shows).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import time
from typing import Any, AsyncIterator, Callable, Iterable, Literal, Sequence

from tui.core import slurm
from tui.core.debuglog import mask_secrets
from tui.core.linecap import LineCapper
from tui.core.procs import end_process
from tui.core.profile import Node, Profile
from tui.core.safetext import shown
from tui.core.ssh import (
    RUN_OUTPUT_CAP,
    CommandFailed,
    CommandTimeout,
    NodeDown,
    Result,
    StreamStatus,
    _CappedText,
    wrap_command,
)
from tui.core.waits import kicked_or_timeout

log = logging.getLogger("rlconsole.srun")

POLL_S = 5.0
"""How often the pool asks squeue about the allocation (one process per poll, cluster-wide)."""
END_GRACE_S = 3.0
"""A step we stop waiting for: srun gets SIGTERM (it signals the step's tasks), then SIGKILL."""

_SRUN_NOISE = re.compile(r"^srun: (error: \S+: tasks? [\d,-]+: (Exited with exit code \d+|Killed|Terminated)"
                         r"|Job step aborted.*|error: Timed out waiting for job step to complete"
                         r"|Force Terminated .*|forcing job termination|Terminating (StepId|job step).*"
                         r"|.*Cancelled pending job step.*)$")
_STEP_REFUSED = re.compile(r"srun: error: (Unable to (create step|confirm allocation)|Invalid job id|"
                           r"Invalid node name|.*Requested node configuration is not available|"
                           r".*Job/step already completing or completed|.*not part of (the )?job)")

StateCallback = Callable[["SrunSession"], None]


def _filter_stderr(text: str) -> str:
    return "".join(ln for ln in text.splitlines(keepends=True) if not _SRUN_NOISE.match(ln.rstrip("\n")))


class SrunSession:
    """One node of the allocation, reached by srun job steps."""

    def __init__(self, node: Node, pool: SrunPool) -> None:
        self.node = node
        self.name = node.name
        self.pool = pool
        self.container = pool.profile.container
        self.settings = pool.profile.ssh
        self.state = "connecting"
        self.reason: str | None = None
        self.changed_at = time.time()
        self.connects = 0
        self._callbacks: list[StateCallback] = []
        self._sem = asyncio.Semaphore(max(1, self.settings.max_channels * 2))

    # ----------------------------------------------------------------- lifecycle

    @property
    def connected(self) -> bool:
        return self.state == "connected"

    def on_state_change(self, callback: StateCallback) -> None:
        self._callbacks.append(callback)

    def start(self) -> None:
        self.pool.start()

    async def wait_first_attempt(self, timeout: float | None = None) -> bool:
        await self.pool.first_look(timeout)
        return self.connected

    async def wait_connected(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        await self.pool.first_look(timeout)
        while not self.connected and self.state != "closed":
            if deadline is not None and time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.1)
        return self.connected

    def reconnect_now(self) -> None:
        self.pool.kick()

    def drop(self, reason: str = "connection dropped by the console") -> None:
        self.pool.kick()

    async def close(self) -> None:
        self._set_state("closed", None)

    def _set_state(self, state: str, reason: str | None) -> None:
        if reason is not None:
            reason = shown(reason, lines=True)
        if (state, reason) == (self.state, self.reason) or (self.state == "closed" and state != "closed"):
            return
        if state == "connected":
            self.connects += 1
        self.state, self.reason, self.changed_at = state, reason, time.time()
        for cb in list(self._callbacks):
            try:
                cb(self)
            except Exception:  # a subscriber's bug must not stop the transport
                log.exception("%s: state callback failed", self.name)

    # ----------------------------------------------------------------- commands

    def wrap(self, cmd: str | Sequence[str], container: bool = False, env: dict[str, str] | None = None) -> str:
        return wrap_command(cmd, self.container, container, env)

    def _argv(self, command: str) -> list[str]:
        job = self.pool.job_id
        if not self.connected or job is None or not self.node.slurm_host:
            raise NodeDown(self.name, self.reason or "no Slurm allocation")
        return ["srun", "--overlap", f"--jobid={job}", "--nodes=1", "--ntasks=1", "-w", self.node.slurm_host,
                "--quiet", "--", "/bin/sh", "-c", command]

    def _audit(self, command: str) -> None:
        if log.isEnabledFor(logging.INFO):
            log.info("%s (srun -w %s) $ %s", self.name, self.node.slurm_host, mask_secrets(command))

    async def _spawn(self, argv: list[str], stdin: bool, merge: bool) -> asyncio.subprocess.Process:
        try:
            return await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT if merge else asyncio.subprocess.PIPE,
                env=slurm.slurm_env(self.pool.profile), start_new_session=True)
        except OSError as e:
            raise NodeDown(self.name, f"srun: {e.strerror or e} (is Slurm's client installed here?)") from None

    @staticmethod
    async def _end(proc: asyncio.subprocess.Process) -> None:
        """Stop a step we no longer wait for: SIGTERM to srun (it signals the tasks), then
        SIGKILL; reaped even when the wait is cancelled (tui/core/procs.py)."""
        await end_process(proc, END_GRACE_S)

    def _refused(self, rc: int, err: str) -> str | None:
        """srun's own failure to start the step (not the command's exit code)."""
        m = _STEP_REFUSED.search(err)
        if rc != 0 and m:
            self.pool.kick()
            return m.group(0)
        return None

    async def run(self, cmd: str | Sequence[str], timeout: float | None = None, check: bool = False,
                  container: bool = False, env: dict[str, str] | None = None, input: str | None = None) -> Result:
        """As `NodeSession.run`: NodeDown (no allocation, the step refused), CommandTimeout
        (the step was stopped), CommandFailed (`check` and a non-zero exit)."""
        command = self.wrap(cmd, container, env)
        if timeout is None:
            timeout = self.settings.command_timeout_s
        if self.state == "connecting":
            await self.pool.first_look()
        argv = self._argv(command)
        self._audit(command)
        async with self._sem:
            t0 = time.monotonic()
            proc = await self._spawn(argv, input is not None, merge=False)
            out_buf, err_buf = _CappedText(RUN_OUTPUT_CAP), _CappedText(RUN_OUTPUT_CAP)

            async def collect() -> None:
                if input is not None and proc.stdin is not None:
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        proc.stdin.write(input.encode())
                        await proc.stdin.drain()
                    proc.stdin.close()
                await asyncio.gather(_pump(proc.stdout, out_buf), _pump(proc.stderr, err_buf))
                await proc.wait()

            try:
                if timeout and timeout > 0:
                    await asyncio.wait_for(collect(), timeout)
                else:
                    await collect()
            except asyncio.TimeoutError:
                await self._end(proc)
                res = Result(-1, out_buf.text(), _filter_stderr(err_buf.text()), "TERM", time.monotonic() - t0)
                raise CommandTimeout(self.name, command, timeout or 0, res) from None
            except BaseException:
                await self._end(proc)
                raise
            rc = proc.returncode if proc.returncode is not None else -1
            err = err_buf.text()
            why = self._refused(rc, err)
            if why:
                raise NodeDown(self.name, why)
            if rc < 0:
                res = Result(-1, out_buf.text(), _filter_stderr(err), signal.Signals(-rc).name.removeprefix("SIG"),
                             time.monotonic() - t0)
            else:
                res = Result(rc, out_buf.text(), _filter_stderr(err), None, time.monotonic() - t0)
            if check and res.rc != 0:
                raise CommandFailed(self.name, command, res)
            return res

    async def stream(self, cmd: str | Sequence[str], container: bool = False, env: dict[str, str] | None = None,
                     merge_stderr: bool = True, check: bool = False,
                     status: StreamStatus | None = None) -> AsyncIterator[str]:
        async for line in self._stream(cmd, container, env, merge_stderr, check, status, "lines"):
            yield line

    async def stream_text(self, cmd: str | Sequence[str], container: bool = False,
                          status: StreamStatus | None = None) -> AsyncIterator[str]:
        async for chunk in self._stream(cmd, container, None, True, False, status, "text"):
            yield chunk

    async def stream_bytes(self, cmd: str | Sequence[str], container: bool = False,
                           status: StreamStatus | None = None) -> AsyncIterator[bytes]:
        async for chunk in self._stream(cmd, container, None, False, False, status, "bytes"):
            yield chunk

    async def _stream(self, cmd: str | Sequence[str], container: bool, env: dict[str, str] | None,
                      merge_stderr: bool, check: bool, status: StreamStatus | None,
                      mode: Literal["lines", "text", "bytes"]) -> AsyncIterator[Any]:
        command = self.wrap(cmd, container, env)
        if self.state == "connecting":
            await self.pool.first_look()
        argv = self._argv(command)
        self._audit(command)
        async with self._sem:
            proc = await self._spawn(argv, False, merge=merge_stderr)
            assert proc.stdout is not None
            err_task = None if merge_stderr or proc.stderr is None else asyncio.ensure_future(
                _pump(proc.stderr, _CappedText(64 << 10)))
            finished = False
            try:
                partial = ""
                capper = LineCapper()
                decoder = None if mode == "bytes" else _Decoder()
                while True:
                    raw = await proc.stdout.read(65536)
                    if not raw:
                        break
                    if mode == "bytes":
                        yield raw
                        continue
                    assert decoder is not None
                    chunk = decoder.feed(raw)
                    if mode == "text":
                        if chunk:
                            yield chunk
                        continue
                    chunk = capper.feed(chunk)
                    if "\n" not in chunk:
                        partial += chunk
                        continue
                    lines = (partial + chunk).split("\n")
                    partial = lines.pop()
                    for line in lines:
                        if not _SRUN_NOISE.match(line.rstrip("\r")):
                            yield line.rstrip("\r")
                if mode == "lines":
                    partial += capper.flush()
                    if partial and not _SRUN_NOISE.match(partial.rstrip("\r")):
                        yield partial.rstrip("\r")
                await proc.wait()
                finished = True
            finally:
                if not finished:
                    await self._end(proc)
                if err_task is not None:
                    err_task.cancel()
            rc = proc.returncode if proc.returncode is not None else -1
            if status is not None:
                status.rc = rc if rc >= 0 else -1
                status.signal = signal.Signals(-rc).name.removeprefix("SIG") if rc < 0 else None
            if check and rc != 0:
                raise CommandFailed(self.name, command, Result(rc, "", ""))

    # ----------------------------------------------------------------- ports

    def _direct_host(self, host: str) -> str | None:
        """Where this machine reaches `host` as the node sees it: the node's own loopback
        is not reachable from here (None); any other address is used as it is."""
        # the node's own loopback names (the one rule's netaddr judges exposure, not this)
        return None if host in ("127.0.0.1", "::1", "localhost") else host

    async def tcp_probe(self, host: str, port: int, timeout: float = 3.0) -> bool | None:
        """Whether something listens on host:port, tried from here (the login node reaches
        the allocation's nodes); None when it cannot tell (the node's own loopback, no answer)."""
        target = self._direct_host(host)
        if target is None:
            return None
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(target, port), timeout)
        except ConnectionRefusedError:
            return False
        except (asyncio.TimeoutError, OSError):
            return None
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        return True

    async def tcp_reachable(self, host: str, port: int, timeout: float = 3.0) -> bool:
        return await self.tcp_probe(host, port, timeout) is True

    async def forward_local_port(self, remote_host: str, remote_port: int, local_port: int = 0) -> int:
        """A local loopback port relayed to `remote_host:remote_port` (the Ray dashboard on
        the head), connected from here."""
        target = self._direct_host(remote_host)
        if target is None:
            raise NodeDown(self.name, f"{remote_host}:{remote_port} is the node's own loopback, which srun "
                                      "cannot forward: set ray.dashboard_host to the head's address")
        return await self.pool.relay(target, remote_port, local_port)


class _Decoder:
    def __init__(self) -> None:
        import codecs

        self._d = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, raw: bytes) -> str:
        return str(self._d.decode(raw))


async def _pump(reader: asyncio.StreamReader | None, buf: _CappedText) -> None:
    if reader is None:
        return
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return
        buf.add(chunk.decode("utf-8", errors="replace"))


class SrunPool:
    """One SrunSession per node of the profile; the allocation read by squeue."""

    def __init__(self, profile: Profile, poll_s: float = POLL_S, **_: Any) -> None:
        self.profile = profile
        self.poll_s = poll_s
        self.sessions: dict[str, SrunSession] = {n.name: SrunSession(n, self) for n in profile.nodes}
        self.allocation: slurm.Allocation | None = None
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._looked = asyncio.Event()
        self._look_lock = asyncio.Lock()
        self._relays: dict[tuple[str, int], tuple[int, asyncio.AbstractServer]] = {}
        self._alloc_cbs: list[Callable[[slurm.Allocation | None], None]] = []

    def __iter__(self) -> Iterable[SrunSession]:
        return iter(self.sessions.values())

    def session(self, node_name: str) -> SrunSession:
        try:
            return self.sessions[node_name]
        except KeyError:
            raise KeyError(f"no node named {node_name!r} in profile {self.profile.name}") from None

    @property
    def head(self) -> SrunSession:
        return self.sessions[self.profile.head.name]

    @property
    def job_id(self) -> str | None:
        return self.allocation.job_id if self.allocation is not None and self.allocation.running else None

    def on_allocation(self, cb: Callable[[slurm.Allocation | None], None]) -> None:
        self._alloc_cbs.append(cb)

    def kick(self) -> None:
        self._kick.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._poll(), name="srun-allocation")

    async def first_look(self, timeout: float | None = None) -> None:
        self.start()
        await kicked_or_timeout(self._looked, timeout if timeout is not None else slurm.SLURM_TIMEOUT_S + 5)

    async def open(self, timeout: float | None = None) -> dict[str, bool]:
        await self.first_look(timeout)
        return {n: s.connected for n, s in self.sessions.items()}

    async def look(self) -> None:
        """Ask squeue about the allocation now and set every node's state from it."""
        async with self._look_lock:
            try:
                a = await slurm.resolve(self.profile, rename=False)
            except Exception as e:  # noqa: BLE001 - a Slurm hiccup is a state, not a crash
                a = slurm.Allocation(slurm.known_job(self.profile) or "?", "UNKNOWN", reason=str(e))
            changed = (a is None) != (self.allocation is None) or (
                a is not None and self.allocation is not None
                and (a.job_id, a.state, a.nodes, a.reason) != (self.allocation.job_id, self.allocation.state,
                                                               self.allocation.nodes, self.allocation.reason))
            self.allocation = a
            for s in self.sessions.values():
                if s.state == "closed":
                    continue
                if a is None:
                    s._set_state("down", "no Slurm allocation: containers (u) asks Slurm for one")
                elif a.running and s.node.slurm_host and s.node.slurm_host in a.nodes:
                    s._set_state("connected", None)
                elif a.state == "PENDING":
                    s._set_state("down", f"Slurm job {a.job_id} is pending" + (f" ({a.reason})" if a.reason else ""))
                elif a.state == "UNKNOWN":
                    s._set_state("down", f"Slurm job {a.job_id}: state unknown ({a.reason or 'squeue did not say'})")
                else:
                    s._set_state("down", f"Slurm job {a.job_id} is {a.state}: not in an allocation")
            self._looked.set()
            if changed:
                for cb in list(self._alloc_cbs):
                    with contextlib.suppress(Exception):
                        cb(a)

    async def _poll(self) -> None:
        while True:
            await self.look()
            self._kick.clear()
            await kicked_or_timeout(self._kick, self.poll_s)

    async def relay(self, host: str, port: int, local_port: int = 0) -> int:
        key = (host, port)
        if key in self._relays:
            return self._relays[key][0]

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                r2, w2 = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
            except (OSError, asyncio.TimeoutError):
                writer.close()
                return

            async def pump(a: asyncio.StreamReader, b: asyncio.StreamWriter) -> None:
                with contextlib.suppress(Exception):
                    while True:
                        data = await a.read(65536)
                        if not data:
                            break
                        b.write(data)
                        await b.drain()
                with contextlib.suppress(Exception):
                    b.close()

            await asyncio.gather(pump(reader, w2), pump(r2, writer))

        server = await asyncio.start_server(handle, "127.0.0.1", local_port)
        lp = server.sockets[0].getsockname()[1]
        self._relays[key] = (lp, server)
        log.info("relay 127.0.0.1:%s -> %s:%s", lp, host, port)
        return int(lp)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        for _, server in self._relays.values():
            server.close()
        self._relays.clear()
        for s in self.sessions.values():
            await s.close()

    async def __aenter__(self) -> SrunPool:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
