"""One simulated node's SSH server: a real SSH peer (asyncssh) running commands in a
real `/bin/sh`.

Why it is built this way (LAB.md):

* An in-process asyncssh server is a genuine SSH endpoint: host key, public-key auth,
  exec channels, signals, direct-tcpip forwarding. The console's SSH layer is tested
  against it exactly as against OpenSSH.
* Output is moved by explicit read/write pumps and the channel is finished with
  `process.exit(rc)`; `process.redirect()` hung OpenSSH ControlMaster clients.
* When the client goes away (closed channel, timeout, Ctrl-C) before the command
  ends, the command's whole process group is killed, or commands would leak. A
  command that ended on its own may leave daemons behind on purpose (`ray start`),
  like on a real host.
* A client that asks for a terminal (`ssh -t node rlconsole`) gets one: the command
  runs on a real pseudo-terminal (its controlling tty, window size and resizes from
  the client), so a full-screen program such as the console itself runs on the node.
* With `ns_pid`, each command enters that node's PID and mount namespace
  (`nsenter --target PID --pid --mount`), so `ps`, `ray stop --force` and crashes stay
  on that node.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import getpass
import logging
import os
import signal
import struct
import termios
from pathlib import Path
from typing import Any

import asyncssh

from tui.core.procs import end_process
from tui.core.waits import kicked_or_timeout

log = logging.getLogger("rlconsole.sim")

STOP_WAIT_S = 5.0
"""How long stop() waits for the handlers of the commands it ended to reap them."""

__all__ = ["SimNodeServer"]


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _forward_signal(pgid: int, exc: asyncssh.SignalReceived) -> None:
    """A client's signal request (`SIGINT`, or its name as SSH sends it) to the command's group."""
    sig = getattr(signal, f"SIG{exc.signal}", None) if isinstance(exc.signal, str) else exc.signal
    if sig:
        _killpg(pgid, int(sig))


async def _end_group(proc: asyncio.subprocess.Process, pgid: int, sig: int, grace_s: float) -> None:
    """End a command and everything it started: `sig` to its whole group, then SIGKILL
    after `grace_s` (the client went away first: else they would leak; the handler
    cancelled: SIGKILL at once); reaped before returning even if cancelled meanwhile
    (tui/core/procs.py), so no child is left for the GC after the loop closes."""
    await end_process(proc, grace_s, sig, send=lambda s: _killpg(pgid, s))


class _Server(asyncssh.SSHServer):
    def __init__(self, owner: SimNodeServer) -> None:
        self._owner = owner
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._owner._conns.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._owner._conns.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        # After the key exchange, so the client gets the reason (a disconnect before
        # it reads as a bare "connection reset").
        allowed = self._owner.allowed_peers
        peer = (self._conn.get_extra_info("peername") or ("?",))[0] if self._conn is not None else "?"
        if allowed is not None and peer not in allowed and self._conn is not None:
            # behind a bastion: like a firewall that only lets the jump host in
            log.info("%s: refused a connection from %s (only %s)", self._owner.name, peer, ", ".join(sorted(allowed)))
            self._conn.disconnect(asyncssh.DISC_HOST_NOT_ALLOWED_TO_CONNECT,
                            f"{self._owner.name} accepts SSH only from the bastion ({', '.join(sorted(allowed))}), "
                            f"not from {peer}: connect through the jump host (ssh.jump / ProxyJump)")
        return True

    def password_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return username == self._owner.user and key.public_data in self._owner._authorized

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> Any:
        if not self._owner.tcp_forwarding:
            # what OpenSSH's sshd answers under `AllowTcpForwarding no`, before connecting
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, "open failed")
        # Local port forwarding (the Ray dashboard, a jump): loopback destinations only.
        if not (dest_host in ("localhost",) or dest_host.startswith("127.")):
            return False
        src = self._owner.forward_from
        if src is None:
            return True
        return _forward_from(src, dest_host, dest_port)

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        return False


def _forward_from(src: str, dest_host: str, dest_port: int) -> Any:
    """A direct-tcpip handler that connects out from `src` (the bastion's own loopback
    address, so the nodes see the bastion as the peer) and pumps both ways."""

    async def handler(reader: asyncssh.SSHReader, writer: asyncssh.SSHWriter) -> None:
        try:
            r2, w2 = await asyncio.wait_for(asyncio.open_connection(dest_host, dest_port, local_addr=(src, 0)), 10)
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return

        async def pump(a: Any, b: Any) -> None:
            with contextlib.suppress(Exception):
                while True:
                    data = await a.read(65536)
                    if not data:
                        break
                    b.write(data)
                    await b.drain()
            with contextlib.suppress(Exception):
                b.write_eof()

        await asyncio.gather(pump(reader, w2), pump(r2, writer))
        with contextlib.suppress(Exception):
            w2.close()
        writer.close()

    return handler


class SimNodeServer:
    """An SSH server for one simulated node.

    `authorized_keys`: OpenSSH public key lines (or paths to .pub files) accepted for
    `user`. `env` is the whole environment commands get. `port=0` picks a free port
    (read `port` after `start()`); a restart reuses the port it got.
    """

    def __init__(
        self,
        name: str,
        address: str,
        host_key: str | Path | asyncssh.SSHKey,
        authorized_keys: list[str | Path],
        env: dict[str, str] | None = None,
        port: int = 0,
        user: str | None = None,
        cwd: str | None = None,
        ns_pid: int | None = None,
        allowed_peers: set[str] | None = None,
        forward_from: str | None = None,
        tcp_forwarding: bool = True,
    ) -> None:
        self.name = name
        self.tcp_forwarding = tcp_forwarding
        """False: every direct-tcpip channel is refused as "administratively prohibited",
        as by an OpenSSH sshd with `AllowTcpForwarding no` (settable while running)."""
        self.allowed_peers = allowed_peers  # None: anyone; else only these peer addresses (behind a bastion)
        self.forward_from = forward_from  # a bastion: forwarded connections leave from this address
        self.address = address
        self.port = port
        self.user = user or getpass.getuser()
        self.env = dict(env if env is not None else os.environ)
        self.cwd = cwd or self.env.get("HOME") or "/"
        self.ns_pid = ns_pid
        self._host_key = host_key if isinstance(host_key, asyncssh.SSHKey) else asyncssh.read_private_key(str(host_key))
        self._authorized: set[bytes] = set()
        for k in authorized_keys:
            text = Path(k).read_text() if isinstance(k, Path) or (isinstance(k, str) and os.path.isfile(k)) else str(k)
            for line in text.splitlines():
                if line.strip() and not line.startswith("#"):
                    self._authorized.add(asyncssh.import_public_key(line).public_data)
        self._acceptor: Any = None
        self._conns: set[asyncssh.SSHServerConnection] = set()
        self._pgids: set[int] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self.active = 0
        self.max_active = 0
        self.commands = 0

    # ---------------------------------------------------------------- lifecycle

    @property
    def running(self) -> bool:
        return self._acceptor is not None

    async def start(self) -> int:
        """Listen; returns the port."""
        if self._acceptor is not None:
            return self.port
        self._acceptor = await asyncssh.listen(
            host=self.address,
            port=self.port,
            server_host_keys=[self._host_key],
            server_factory=lambda: _Server(self),
            process_factory=self._handle,
            encoding=None,
            line_editor=False,
            allow_pty=True,
            x11_forwarding=False,
            agent_forwarding=False,
            reuse_address=True,
            keepalive_interval=0,
        )
        self.port = self._acceptor.get_port()
        log.info("%s: sshd on %s:%s", self.name, self.address, self.port)
        return self.port

    async def stop(self, kill_commands: bool = True) -> None:
        """Stop listening and drop every connection: what a client sees when the node's
        sshd dies. Commands still running are killed (their channels are gone)."""
        acceptor, self._acceptor = self._acceptor, None
        if acceptor is not None:
            acceptor.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(acceptor.wait_closed(), 2)
        for conn in list(self._conns):
            conn.abort()
        self._conns.clear()
        if kill_commands:
            for pgid in list(self._pgids):
                _killpg(pgid, signal.SIGKILL)
        # Each command's handler reaps it once its channel is gone: waited for (bounded),
        # so a test's loop does not close on children whose exit it never saw.
        pending = [t for t in self._handlers if t is not asyncio.current_task()]
        if pending:
            await asyncio.wait(pending, timeout=STOP_WAIT_S)

    # ---------------------------------------------------------------- commands

    def argv(self, command: str | None) -> list[str]:
        sh = ["/bin/sh", "-c", command] if command is not None else ["/bin/sh"]
        if self.ns_pid:
            return ["nsenter", f"--target={self.ns_pid}", "--pid", "--mount", f"--wd={self.cwd}", "--", *sh]
        return sh

    async def _handle(self, process: asyncssh.SSHServerProcess) -> None:
        self.commands += 1
        task = asyncio.current_task()
        if task is not None:  # stop() waits for them: each reaps its command
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        if process.term_type:
            await self._handle_pty(process)
            return
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv(process.command),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            process.stderr.write(f"sh: cannot start: {exc}\n".encode())
            process.exit(127)
            return
        pgid = proc.pid
        self._pgids.add(pgid)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        assert proc.stdin and proc.stdout and proc.stderr

        async def pump_out(src: asyncio.StreamReader, dst: Any) -> None:
            with contextlib.suppress(Exception):
                while True:
                    chunk = await src.read(65536)
                    if not chunk:
                        break
                    dst.write(chunk)

        async def pump_in() -> None:
            stdin = proc.stdin
            assert stdin is not None
            while True:
                try:
                    data = await process.stdin.read(65536)
                except asyncssh.SignalReceived as exc:
                    _forward_signal(pgid, exc)
                    continue
                except (asyncssh.BreakReceived, asyncssh.TerminalSizeChanged):
                    continue
                except Exception:  # noqa: BLE001 - channel gone
                    break
                if not data:
                    break
                try:
                    stdin.write(data)
                    await stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    break
            with contextlib.suppress(Exception):
                stdin.close()

        out_t = asyncio.ensure_future(pump_out(proc.stdout, process.stdout))
        err_t = asyncio.ensure_future(pump_out(proc.stderr, process.stderr))
        in_t = asyncio.ensure_future(pump_in())
        wait_t = asyncio.ensure_future(proc.wait())
        closed_t = asyncio.ensure_future(process.channel.wait_closed())
        try:
            await asyncio.wait({wait_t, closed_t}, return_when=asyncio.FIRST_COMPLETED)
            if not wait_t.done():
                # The client went away first: end the command and everything it started.
                await _end_group(proc, pgid, signal.SIGTERM, 1.0)
                return
            # Finished: collect what is left in the pipes. Daemons it started (ray)
            # may hold them open forever, so stop after a short grace.
            await asyncio.wait({out_t, err_t}, timeout=2.0)
            rc = proc.returncode if proc.returncode is not None else 255
            if rc < 0:
                rc = 128 - rc
            with contextlib.suppress(Exception):
                process.exit(rc)
        except asyncio.CancelledError:
            await _end_group(proc, pgid, signal.SIGKILL, 0.0)  # the server stopping, or the loop ending
            raise
        finally:
            for t in (out_t, err_t, in_t, closed_t):
                if not t.done():
                    t.cancel()
            self._pgids.discard(pgid)
            self.active -= 1

    # ---------------------------------------------------------------- terminals

    async def _handle_pty(self, process: asyncssh.SSHServerProcess) -> None:
        """The command on a pseudo-terminal: `setsid --ctty` makes the tty its controlling
        terminal (so Ctrl-C and resizes reach its process group through the kernel), and
        the channel carries the master side both ways."""
        master, slave = os.openpty()
        _set_winsize(master, process.term_size)
        env = dict(self.env, TERM=process.term_type or "xterm")
        try:
            proc = await asyncio.create_subprocess_exec(
                "setsid", "--ctty", *self.argv(process.command),
                stdin=slave, stdout=slave, stderr=slave, env=env, cwd=self.cwd)
        except OSError as exc:
            os.close(master)
            os.close(slave)
            process.stderr.write(f"sh: cannot start: {exc}\r\n".encode())
            process.exit(127)
            return
        os.close(slave)
        pgid = proc.pid  # setsid without a fork: the session (and group) leader
        self._pgids.add(pgid)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        loop = asyncio.get_running_loop()
        out_done = asyncio.Event()

        def readable() -> None:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the slave side has closed it
                data = b""
            if not data:
                loop.remove_reader(master)
                out_done.set()
                return
            with contextlib.suppress(Exception):
                process.stdout.write(data)

        loop.add_reader(master, readable)

        async def pump_in() -> None:
            while True:
                try:
                    data = await process.stdin.read(65536)
                except asyncssh.TerminalSizeChanged as exc:
                    _set_winsize(master, (exc.width, exc.height, exc.pixwidth, exc.pixheight))
                    continue
                except asyncssh.SignalReceived as exc:
                    _forward_signal(pgid, exc)
                    continue
                except asyncssh.BreakReceived:
                    continue
                except Exception:  # noqa: BLE001 - channel gone
                    break
                if not data:
                    break
                with contextlib.suppress(OSError):
                    os.write(master, data)

        in_t = asyncio.ensure_future(pump_in())
        wait_t = asyncio.ensure_future(proc.wait())
        closed_t = asyncio.ensure_future(process.channel.wait_closed())
        try:
            await asyncio.wait({wait_t, closed_t}, return_when=asyncio.FIRST_COMPLETED)
            if not wait_t.done():
                await _end_group(proc, pgid, signal.SIGHUP, 2.0)  # the terminal hung up, as sshd does
                return
            await kicked_or_timeout(out_done, 2.0)
            rc = proc.returncode if proc.returncode is not None else 255
            with contextlib.suppress(Exception):
                process.exit(128 - rc if rc < 0 else rc)
        except asyncio.CancelledError:
            await _end_group(proc, pgid, signal.SIGKILL, 0.0)  # the server stopping, or the loop ending
            raise
        finally:
            loop.remove_reader(master)
            os.close(master)
            for t in (in_t, closed_t):
                if not t.done():
                    t.cancel()
            self._pgids.discard(pgid)
            self.active -= 1


def _set_winsize(fd: int, size: tuple[int, int, int, int] | None) -> None:
    """asyncssh gives (columns, rows, pixel width, pixel height); TIOCSWINSZ wants rows first."""
    if not size or not size[0] or not size[1]:
        return
    cols, rows, pw, ph = size
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, pw, ph))
