"""The SSH layer: one persistent asyncssh connection per node.

Why this shape (LAB.md has the measurements):

* A fresh `ssh` process per command costs ~200 ms; one asyncssh connection runs a
  command in ~3 ms. Everything the console does to a node (probes, actions, log
  streams, the Ray dashboard port forward) therefore goes through one long-lived
  `NodeSession`, which reconnects by itself with capped exponential backoff.
* A dead link can hang a read forever: connections get a connect timeout and
  keepalives, and a dropped connection turns the node "down" (with the reason) at once
  while the other nodes keep working. When the node answers again it is picked up
  without user action.
* OpenSSH refuses more than `MaxSessions` (10) channels per connection, so a
  semaphore caps concurrent channels at `profile.ssh.max_channels`.
* A command the console stops waiting for (timeout, cancellation, a closed stream) is
  ended on the node: the channel gets a TERM signal and is closed. Nothing is left
  running because the console lost interest in it.
* Host keys are always verified, against `profile.ssh.known_hosts` or
  `~/.ssh/known_hosts`. An unknown or changed key makes the node "down" with a message
  saying what to do; there is no switch that turns verification off.

Every remote command is logged on the "rlconsole.ssh" logger (an audit trail), with
the values of variables named like secrets (TOKEN, SECRET, PASSWORD, KEY) masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Iterable, Literal, Sequence

import asyncssh

from tui.core.debuglog import is_secret_name, mask_secrets
from tui.core.errors import RlconsoleError
from tui.core.linecap import LineCapper
from tui.core.profile import Container, Node, Profile, SshEndpoint, SshSettings
from tui.core.safetext import shown
from tui.core.waits import kicked_or_timeout

log = logging.getLogger("rlconsole.ssh")

__all__ = [
    "CommandFailed",
    "CommandTimeout",
    "NodeDown",
    "NodeSession",
    "Result",
    "SessionPool",
    "SshError",
    "StreamStatus",
    "wrap_command",
]

# --------------------------------------------------------------------------- results


@dataclass
class Result:
    """What a remote command did. `rc` is -1 when the command ended without an exit
    status (killed by a signal, `signal` then names it)."""

    rc: int
    stdout: str
    stderr: str
    signal: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def output(self) -> str:
        """stdout then stderr: what a person would have seen in a terminal."""
        if self.stdout and self.stderr and not self.stdout.endswith("\n"):
            return self.stdout + "\n" + self.stderr
        return self.stdout + self.stderr


@dataclass
class StreamStatus:
    """How a streamed command ended: filled in when its stream has been read to the end."""

    rc: int | None = None
    signal: str | None = None


class SshError(RlconsoleError):
    """An SSH-level failure on one node (not a command's non-zero exit)."""

    def __init__(self, node: str, message: str) -> None:
        self.node = node
        # it may quote the peer (a channel refused with its reason): the one rule for outside text
        self.message = shown(message, lines=True)
        super().__init__(f"{node}: {self.message}")


class NodeDown(SshError):
    """The node's connection is down; `message` says why (and what to do)."""


class CommandTimeout(SshError, TimeoutError):
    """A command ran longer than its timeout; it was ended on the node. `result`
    holds whatever it printed before that."""

    def __init__(self, node: str, command: str, timeout: float, result: Result) -> None:
        self.command = command
        self.timeout = timeout
        self.result = result
        super().__init__(node, f"command timed out after {timeout:g}s and was stopped: {_short(command)}")


class CommandFailed(SshError):
    """`check=True` and the command exited non-zero."""

    def __init__(self, node: str, command: str, result: Result) -> None:
        self.command = command
        self.result = result
        tail = " ".join(result.output.strip().splitlines()[-3:])
        super().__init__(node, f"exit code {result.rc}: {_short(command)}" + (f" -- {tail}" if tail else ""))


def _short(cmd: str, limit: int = 120) -> str:
    cmd = mask_secrets(" ".join(cmd.split()))
    return cmd if len(cmd) <= limit else cmd[: limit - 3] + "..."


# --------------------------------------------------------------------------- helpers

def wrap_command(
    cmd: str | Sequence[str],
    container: Container | None = None,
    in_container: bool = False,
    env: dict[str, str] | None = None,
) -> str:
    """The command line the node's login shell gets.

    A list is an argv and is quoted with `shlex.join`; a string is shell text and is
    passed as it is. `in_container=True` sends it into the profile's container: with
    `access: docker-exec` as `<docker> exec [-e K=V] NAME sh -c CMD` on the host, with
    `access: direct` (the SSH endpoint already is the container) unchanged. `env` is
    given to the command (`docker exec -e` or `env K=V sh -c`)."""
    text = shlex.join(list(cmd)) if not isinstance(cmd, str) else cmd
    env = dict(env or {})
    if in_container and container is not None and container.access == "docker-exec":
        argv = [*container.docker, "exec"]
        for k, v in env.items():
            argv += ["-e", f"{k}={v}"]
        argv += [container.name, "sh", "-c", text]
        return shlex.join(argv)
    if env:
        return shlex.join(["env", *[f"{k}={v}" for k, v in env.items()], "sh", "-c", text])
    return text


ENDS_WITH_CHANNEL = (
    'exec 3<&0\n'  # a background list's stdin is /dev/null unless redirected explicitly
    '"${SHELL:-/bin/sh}" -c "$1" </dev/null 3<&- & p=$!\n'
    '( cat >/dev/null 2>&1; kill -TERM 0 ) <&3 >/dev/null 2>&1 & w=$!\n'
    'exec 3<&-\n'
    'wait "$p"; rc=$?\n'
    'kill "$w" 2>/dev/null\n'
    'exit "$rc"\n'
)
"""A long command's guard: it ends when its channel goes, on any SSH server.

OpenSSH does not end a command without a terminal when its channel closes, and for
root (or a forced command) it refuses the client's signal request ("session signalling
requires privilege separation"): a follower the console stopped ran on, and kept its
session, until sshd's MaxSessions (10) refused every new channel on the connection.
So the command runs in the background (under the login shell, as without the guard:
`$SHELL -c`) and a watcher waits for EOF on stdin, which
the console keeps open: sshd closes it when the channel closes, and the watcher
then ends the session's process group. A command that ends on its own stops the
watcher first, so what it started and left running (daemons) lives on."""


def ending_with_channel(command: str) -> str:
    """`command` under ENDS_WITH_CHANNEL (stdin must stay open until the end)."""
    return shlex.join(["sh", "-c", ENDS_WITH_CHANNEL, "sh", command])


def _parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` -> (user, host, port); port None when the hop names none, so
    ~/.ssh/config's `Port` for that host applies (22 where it says nothing)."""
    user = None
    if "@" in spec:
        user, spec = spec.rsplit("@", 1)
    port: int | None = None
    if spec.startswith("[") and "]" in spec:
        host, _, rest = spec[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
    elif spec.count(":") == 1:
        host, p = spec.split(":")
        port = int(p)
    else:
        host = spec
    return user, host, port


def default_known_hosts() -> list[str]:
    """The files OpenSSH would read. Passed explicitly to asyncssh: left to itself it
    disables verification when `~/.ssh/config` says `UserKnownHostsFile none`."""
    files = [os.path.expanduser("~/.ssh/known_hosts"), "/etc/ssh/ssh_known_hosts"]
    return [f for f in files if os.path.isfile(f)]


def host_key_message(host: str, port: int, known_hosts: Sequence[str], peer_addr: str | None = None) -> str:
    """Why a host key was refused, and what to do about it: an unknown key (add it
    after verifying it) reads differently from a changed key (possible attack)."""
    shown = ", ".join(known_hosts) if known_hosts else "~/.ssh/known_hosts (missing)"
    target = known_hosts[0] if known_hosts else os.path.expanduser("~/.ssh/known_hosts")
    pattern = f"[{host}]:{port}" if port != 22 else host
    known = False
    for f in known_hosts:
        try:
            kh = asyncssh.read_known_hosts(f)
            keys = kh.match(host, peer_addr or host, port if port != 22 else None)
        except (OSError, ValueError, asyncssh.KeyImportError):
            continue
        if keys[0] or keys[1]:
            known = True
            break
    keyscan = f"ssh-keyscan -p {port} {host}" if port != 22 else f"ssh-keyscan {host}"
    if known:
        return (f"host key for {host}:{port} does NOT match known_hosts {shown}: the node was "
                f"reinstalled, or someone is intercepting the connection. Verify the new key "
                f"with the node's administrator, then replace the old entry: "
                f"ssh-keygen -f {target} -R '{pattern}' && {keyscan} >> {target}")
    return (f"host key for {host}:{port} not in known_hosts {shown}: verify it (compare its "
            f"fingerprint with the node's `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`) "
            f"and add it with: {keyscan} >> {target}")


def _describe_connect_error(exc: BaseException, node: Node, settings: SshSettings) -> str:
    ep = node.ssh
    where = f"{ep.host}:{ep.port}"
    if isinstance(exc, _Refused):
        return str(exc)
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        files = [settings.known_hosts] if settings.known_hosts else default_known_hosts()
        return host_key_message(ep.host, ep.port, files)
    if isinstance(exc, asyncssh.PermissionDenied):
        keys = ", ".join(ep.identity) if ep.identity else "the agent and ~/.ssh/id_*"
        return f"authentication failed as {ep.user or 'the local user'} on {where} (keys tried: {keys})"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer from {where} within {settings.connect_timeout_s:g}s (connect timeout)"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused by {where} (no SSH server listening?)"
    if isinstance(exc, asyncssh.DisconnectError):
        # the server's own words, sent before its host key is checked (no login needed):
        # made visible, never obeyed by the terminal that shows them (tui/core/safetext.py)
        return f"{where} disconnected: {shown(exc.reason or exc)}"
    if isinstance(exc, OSError):
        return f"cannot connect to {where}: {exc.strerror or exc}"
    return f"cannot connect to {where}: {exc}"


def identity_mode_problem(path: str) -> str | None:
    """OpenSSH's rule for private keys: readable by group or others is refused
    ("UNPROTECTED PRIVATE KEY FILE!  ... This private key will be ignored.", from
    OpenSSH's authfile.c sshkey_perm_ok). A key anyone on the machine can read is
    compromised; say so instead of using it silently."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if mode & 0o077:
        return (f"identity file {path} has permissions {mode & 0o777:04o}: a private key must not be "
                f"readable by others (OpenSSH refuses it too); fix with: chmod 600 {path}")
    return None


class _Refused(Exception):
    """A connection we refuse to try; the message is the whole reason."""




class _Client(asyncssh.SSHClient):
    """Records why a connection ended, for the "down" reason."""

    def __init__(self, session: NodeSession) -> None:
        self._session = session

    def connection_lost(self, exc: Exception | None) -> None:
        self._session._lost_reason = f"connection lost: {shown(exc)}" if exc else "connection closed by the node"


# --------------------------------------------------------------------------- session

StateCallback = Callable[["NodeSession"], None]


class NodeSession:
    """One node's persistent SSH connection, kept up by a background task.

    `state` is "connecting" (first attempt under way), "connected", "down" (with
    `reason`) or "closed". Subscribers (`on_state_change`) are called on every change,
    from the event loop, so a monitor can mark the node down at once instead of
    waiting for a command to fail.
    """

    def __init__(
        self,
        node: Node,
        settings: SshSettings | None = None,
        container: Container | None = None,
        *,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 8.0,
        keepalive_count_max: int = 3,
        connect_gate: asyncio.Semaphore | None = None,
    ) -> None:
        self.node = node
        self.name = node.name
        self.settings = settings or SshSettings()
        self.container = container
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.keepalive_count_max = keepalive_count_max
        self.connect_gate = connect_gate  # shared by a pool: connection attempts under way at once
        self.state = "connecting"
        self.reason: str | None = None
        self.changed_at = time.time()
        self.connects = 0  # successful connections so far (a reconnect bumps it)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._tunnels: list[asyncssh.SSHClientConnection] = []  # the jump chain, first hop first
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._first_attempt = asyncio.Event()
        self._sem = asyncio.Semaphore(self.settings.max_channels)
        self._callbacks: list[StateCallback] = []
        self._lost_reason: str | None = None
        self._forwards: dict[tuple[str, int], tuple[int, Any]] = {}

    # ----------------------------------------------------------------- lifecycle

    @property
    def connected(self) -> bool:
        return self.state == "connected" and self._conn is not None

    def on_state_change(self, callback: StateCallback) -> None:
        self._callbacks.append(callback)

    def start(self) -> None:
        """Start the background task that connects and keeps reconnecting."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._maintain(), name=f"ssh-{self.name}")

    async def wait_connected(self, timeout: float | None = None) -> bool:
        """Wait for the first connection attempt and, if it failed, up to the rest of
        `timeout` for a reconnect. True when connected."""
        self.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        await kicked_or_timeout(self._first_attempt, timeout)
        while not self.connected and self.state != "closed":
            if deadline is not None and time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        return self.connected

    async def wait_first_attempt(self, timeout: float | None = None) -> bool:
        """Wait only for the outcome of the first connection attempt (a one-shot
        `status` must not wait out the reconnect backoff). True when connected."""
        self.start()
        if timeout is None:
            timeout = self.settings.connect_timeout_s + 1
        if self.node.ssh.hops:  # one connection per hop, in a row
            timeout *= 1 + len(self.node.ssh.hops)
        await kicked_or_timeout(self._first_attempt, timeout)
        return self.connected

    def reconnect_now(self) -> None:
        """Skip the rest of the backoff (e.g. the user pressed refresh)."""
        self._kick.set()

    def drop(self, reason: str = "connection dropped by the console") -> None:
        """Abort the current connection (a liveness check found it dead); the
        background task reconnects."""
        self._lost_reason = reason
        if self._conn is not None:
            self._conn.abort()

    async def close(self) -> None:
        """Close the connection and stop reconnecting."""
        self._set_state("closed", None)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self._close_conn()

    async def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        tunnels, self._tunnels = self._tunnels, []
        self._forwards.clear()
        for c in (conn, *reversed(tunnels)):
            if c is not None:
                c.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(c.wait_closed(), 2)

    def _set_state(self, state: str, reason: str | None) -> None:
        if reason is not None:  # every down reason is shown (grid, alerts, status): the one rule
            reason = shown(reason, lines=True)
        if state == self.state and reason == self.reason:
            return
        if self.state == "closed" and state != "closed":
            return
        self.state, self.reason, self.changed_at = state, reason, time.time()
        if state == "down":
            log.warning("%s: down: %s", self.name, reason)
        elif state == "connected":
            log.info("%s: connected to %s:%s", self.name, self.node.ssh.host, self.node.ssh.port)
        for cb in list(self._callbacks):
            try:
                cb(self)
            except Exception:  # a subscriber's bug must not kill SSH
                log.exception("%s: state callback failed", self.name)

    def _known_hosts(self) -> list[str] | bytes:
        if self.settings.known_hosts:
            return [self.settings.known_hosts]
        return default_known_hosts() or b""  # empty: every host key is refused

    def _options(self, host: str, port: int | None, user: str | None) -> dict[str, Any]:
        """asyncssh's connect options; what is None here (port, user) is left out, so the
        user's ~/.ssh/config (`Port`, `User`, `HostName`...) decides it, as with `ssh`."""
        opts: dict[str, Any] = dict(
            host=host,
            known_hosts=self._known_hosts(),
            connect_timeout=self.settings.connect_timeout_s,
            keepalive_interval=self.settings.keepalive_interval_s,
            keepalive_count_max=self.keepalive_count_max,
            encryption_algs=PREFERRED_CIPHERS,
            # Explicit, so `ForwardAgent yes` in ~/.ssh/config cannot hand the user's agent
            # to every node (root there could use it to log in anywhere the user can).
            # The console never needs it, nor X11.
            agent_forwarding=False,
            x11_forwarding=False,
        )
        if self.settings.config:
            opts["config"] = [self.settings.config]
        if port is not None:
            opts["port"] = port
        if user:
            opts["username"] = user
        if self.node.ssh.identity:
            opts["client_keys"] = list(self.node.ssh.identity)
        return opts

    async def _connect(self) -> asyncssh.SSHClientConnection:
        ep = self.node.ssh
        kh = self.settings.known_hosts
        if kh and not os.path.isfile(kh):  # noqa: ASYNC240 - one local stat per connect
            raise _Refused(f"known_hosts file {kh} does not exist: create it with the nodes' verified "
                           f"keys, e.g. ssh-keyscan -p {ep.port} {ep.host} >> {kh}")
        for ident in ep.identity:
            if not os.path.isfile(ident):  # noqa: ASYNC240 - one local stat per connect
                raise _Refused(f"identity file {ident} not found (nodes[].ssh.identity / ssh.identity)")
            unprotected = identity_mode_problem(ident)
            if unprotected:
                raise _Refused(unprotected)
        # The jump chain (profile `ssh.jump`: one host or a list): each hop is reached
        # through the one before, the node through the last; a failure names its hop.
        tunnels: list[asyncssh.SSHClientConnection] = []
        try:
            for hop in ep.hops:
                juser, jhost, given_port = _parse_jump(hop)
                jport = given_port or 22  # for messages; the connection leaves it to ssh_config
                opts = self._options(jhost, given_port, juser or ep.user)
                if tunnels:
                    opts["tunnel"] = tunnels[-1]
                try:
                    tunnels.append(await asyncssh.connect(**opts))
                except asyncssh.HostKeyNotVerifiable:
                    # the jump host's key, not the node's: name it, or the advice would be to
                    # delete the node's (correct) known_hosts entry
                    files = [kh] if kh else default_known_hosts()
                    raise _Refused(f"jump host {jhost}:{jport} (for {self.name}): "
                                   + host_key_message(jhost, jport, files)) from None
                except Exception as exc:  # noqa: BLE001 - any failure here is this hop's
                    raise _Refused(f"jump host {jhost}:{jport} (for {self.name}): "
                                   + _describe_connect_error(exc, Node(jhost, jhost, 1, "worker",
                                                                       SshEndpoint(jhost, jport, juser)),
                                                             self.settings)) from None
            opts = self._options(ep.host, ep.port if ep.port_given else None, ep.user)
            if tunnels:
                opts["tunnel"] = tunnels[-1]
            conn = await asyncssh.connect(client_factory=lambda: _Client(self), **opts)
        except BaseException:
            for t in reversed(tunnels):
                t.close()
            raise
        self._tunnels = tunnels
        return conn

    async def _connect_paced(self) -> asyncssh.SSHClientConnection:
        """`_connect` once a slot of the pool's `connect_gate` is free (see
        CONNECT_CONCURRENCY). The slot is given back when the attempt ends, or after
        CONNECT_SLOT_MAX_S if it is still under way: what lasts that long is a host that
        does not answer (its SYNs dropped, counted by no sshd), and it must not hold the
        healthy nodes back for its whole connect timeout."""
        gate = self.connect_gate
        if gate is None:
            return await self._connect()
        await gate.acquire()
        held = True

        def give_back() -> None:
            nonlocal held
            if held:
                held = False
                gate.release()

        late = asyncio.get_running_loop().call_later(CONNECT_SLOT_MAX_S, give_back)
        try:
            return await self._connect()
        finally:
            late.cancel()
            give_back()

    async def _maintain(self) -> None:
        attempt = 0
        while self.state != "closed":
            try:
                conn = await self._connect_paced()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - every failure is a "down" reason
                self._set_state("down", _describe_connect_error(exc, self.node, self.settings))
            else:
                attempt = 0
                self._conn = conn
                self._lost_reason = None
                self.connects += 1
                self._set_state("connected", None)
                self._first_attempt.set()
                await conn.wait_closed()
                self._conn = None
                self._forwards.clear()
                for t in reversed(self._tunnels):
                    t.close()
                self._tunnels = []
                if self.state == "closed":
                    return
                self._set_state("down", self._lost_reason or "connection closed")
            self._first_attempt.set()
            delay = min(self.backoff_initial_s * (2 ** attempt), self.backoff_max_s)
            attempt += 1
            self._kick.clear()
            await kicked_or_timeout(self._kick, delay)

    async def _require_conn(self) -> asyncssh.SSHClientConnection:
        if self.state == "connecting":
            await self.wait_first_attempt()
        conn = self._conn
        if conn is None or self.state != "connected":
            raise NodeDown(self.name, self.reason or self.state)
        return conn

    # ----------------------------------------------------------------- commands

    def wrap(self, cmd: str | Sequence[str], container: bool = False, env: dict[str, str] | None = None) -> str:
        return wrap_command(cmd, self.container, container, env)

    def _audit(self, command: str, env: dict[str, str] | None) -> None:
        if log.isEnabledFor(logging.INFO):
            shown = mask_secrets(command)
            if env:
                for k, v in env.items():
                    if is_secret_name(k) and v:
                        shown = shown.replace(v, "***")
            log.info("%s $ %s", self.name, shown)

    @staticmethod
    def _end(proc: Any) -> None:
        """End a remote command we stopped waiting for: TERM, then close the channel
        (the sim's built-in server kills the command when the channel goes; OpenSSH
        does not, and refuses the signal for root: streams run under ENDS_WITH_CHANNEL)."""
        with contextlib.suppress(Exception):
            proc.send_signal("TERM")
        with contextlib.suppress(Exception):
            proc.close()

    async def run(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        check: bool = False,
        container: bool = False,
        env: dict[str, str] | None = None,
        input: str | None = None,
    ) -> Result:
        """Run one command and return its Result.

        `timeout` defaults to `profile.ssh.command_timeout_s`; 0 means no timeout.
        Raises NodeDown (not connected, or the connection dropped mid-command),
        CommandTimeout (the command was ended on the node), CommandFailed (`check`
        and a non-zero exit)."""
        command = self.wrap(cmd, container, env)
        if timeout is None:
            timeout = self.settings.command_timeout_s
        conn = await self._require_conn()
        self._audit(command, env)
        async with self._sem:
            t0 = time.monotonic()
            # Without input, the command runs under the guard (ENDS_WITH_CHANNEL): one that
            # times out ends on OpenSSH too, instead of holding a session for ever.
            guarded = input is None
            try:
                proc = await conn.create_process(ending_with_channel(command) if guarded else command,
                                                 encoding="utf-8", errors="replace")
            except (asyncssh.ChannelOpenError, asyncssh.DisconnectError, OSError) as exc:
                raise NodeDown(self.name, self.reason or f"cannot open a channel: {exc}") from None
            out_buf, err_buf = _CappedText(RUN_OUTPUT_CAP), _CappedText(RUN_OUTPUT_CAP)

            async def collect() -> None:
                # Not proc.communicate(): it buffers all a node sends (a flooding node
                # grew the console by 1.6 GiB). Read both streams, keep the first
                # RUN_OUTPUT_CAP characters of each, count and drop the rest.
                await asyncio.gather(out_buf.pump(proc.stdout), err_buf.pump(proc.stderr))
                await proc.wait_closed()

            try:
                if not guarded:
                    proc.stdin.write(input or "")
                    proc.stdin.write_eof()
                if timeout and timeout > 0:
                    await asyncio.wait_for(collect(), timeout)
                else:
                    await collect()
                out, err = out_buf.text(), err_buf.text()
            except asyncio.TimeoutError:
                self._end(proc)
                out, err = out_buf.text(), err_buf.text()
                res = Result(-1, out or "", err or "", "TERM", time.monotonic() - t0)
                log.info("%s: timeout after %.1fs", self.name, res.duration_s)
                raise CommandTimeout(self.name, command, timeout or 0, res) from None
            except BaseException:
                self._end(proc)
                raise
            dur = time.monotonic() - t0
            if proc.exit_status is None and proc.exit_signal is None:
                # The channel went away without an exit status: the connection dropped.
                raise NodeDown(self.name, self._lost_reason or self.reason or "connection lost during a command")
            rc = proc.exit_status if proc.exit_status is not None else -1
            sig = proc.exit_signal[0] if proc.exit_signal else None
            res = Result(rc, out or "", err or "", sig, dur)
            log.debug("%s: rc=%s in %.3fs", self.name, rc, dur)
            if check and rc != 0:
                raise CommandFailed(self.name, command, res)
            return res

    async def stream(
        self,
        cmd: str | Sequence[str],
        container: bool = False,
        env: dict[str, str] | None = None,
        merge_stderr: bool = True,
        check: bool = False,
        status: StreamStatus | None = None,
    ) -> AsyncIterator[str]:
        """Yield a long command's output line by line (without the newline).

        Use it with `contextlib.aclosing` (or `async for` to the end): leaving the
        loop ends the command on the node. stderr is merged into the lines unless
        `merge_stderr=False` (then it is discarded). Raises NodeDown if the connection
        drops, CommandFailed at the end if `check` and the exit code is not 0. `status`,
        when given, holds the exit code once the loop has ended."""
        async for line in self._stream(cmd, container, env, merge_stderr, check, status, mode="lines"):
            yield line

    async def stream_text(self, cmd: str | Sequence[str], container: bool = False,
                          status: StreamStatus | None = None) -> AsyncIterator[str]:
        """Yield a long command's stdout (stderr merged) as decoded chunks, split wherever
        the channel split them: for a reader that frames the text itself (the sampler's
        markers), one await per chunk instead of one per line."""
        async for chunk in self._stream(cmd, container, None, True, False, status, mode="text"):
            yield chunk

    async def stream_bytes(
        self,
        cmd: str | Sequence[str],
        container: bool = False,
        status: StreamStatus | None = None,
    ) -> AsyncIterator[bytes]:
        """Yield a command's stdout as raw chunks: for byte-exact copies (a log followed
        by offset), where decoding and line splitting would make offsets drift."""
        async for chunk in self._stream(cmd, container, None, False, False, status, mode="bytes"):
            yield chunk

    async def _stream(self, cmd: str | Sequence[str], container: bool, env: dict[str, str] | None,
                      merge_stderr: bool, check: bool, status: StreamStatus | None,
                      mode: Literal["lines", "text", "bytes"]) -> AsyncIterator[Any]:
        binary = mode == "bytes"
        command = self.wrap(cmd, container, env)
        conn = await self._require_conn()
        self._audit(command, env)
        async with self._sem:
            try:
                proc = await conn.create_process(
                    ending_with_channel(command), encoding=None if binary else "utf-8", errors="replace",
                    stderr=asyncssh.STDOUT if merge_stderr else asyncssh.DEVNULL)
            except (asyncssh.ChannelOpenError, asyncssh.DisconnectError, OSError) as exc:
                raise NodeDown(self.name, self.reason or f"cannot open a channel: {exc}") from None
            finished = False
            try:
                # stdin stays open: its EOF is the guard's sign that the channel went
                # Whole chunks, split here: one await per chunk rather than per line (a
                # node's sample is ~150 lines every refresh, on every node).
                partial = ""
                # a line longer than LINE_CAP is cut, with a mark, and the rest of it
                # dropped: a node that never ends a line must not grow `partial`
                capper = LineCapper()
                while True:
                    chunk = await proc.stdout.read(65536)
                    if not chunk:
                        break
                    if mode != "lines":
                        yield chunk
                        continue
                    chunk = capper.feed(chunk)
                    if "\n" not in chunk:
                        partial += chunk
                        continue
                    lines = (partial + chunk).split("\n")
                    partial = lines.pop()
                    for line in lines:
                        yield line.rstrip("\r")
                partial += capper.flush()
                if partial:
                    yield partial.rstrip("\r")
                await proc.wait_closed()
                finished = True
            finally:
                if not finished:
                    self._end(proc)
            if proc.exit_status is None and proc.exit_signal is None:
                raise NodeDown(self.name, self._lost_reason or self.reason or "connection lost during a command")
            if status is not None:
                status.rc = proc.exit_status if proc.exit_status is not None else -1
                status.signal = proc.exit_signal[0] if proc.exit_signal else None
            if check and proc.exit_status != 0:
                raise CommandFailed(self.name, command, Result(proc.exit_status or -1, "", ""))

    async def tcp_probe(self, host: str, port: int, timeout: float = 3.0) -> bool | None:
        """Whether something listens on host:port as seen from the node (a direct-tcpip
        channel, no process on the node): is the Ray GCS up, without running `ray`.

        True: the node connected. False: the node tried and the connection failed
        ("Connection refused": nothing listens). None: no answer either way: the node's
        sshd would not open the channel (`AllowTcpForwarding no`, or a `PermitOpen` that
        leaves the address out: OpenSSH answers "administratively prohibited" before
        trying), or nothing came back within `timeout`."""
        conn = await self._require_conn()
        try:
            reader, writer = await asyncio.wait_for(conn.open_connection(host, port), timeout)
        except asyncssh.ChannelOpenError as e:
            return False if e.code == asyncssh.OPEN_CONNECT_FAILED else None
        except (asyncio.TimeoutError, OSError):
            return None
        writer.close()
        return True

    async def tcp_reachable(self, host: str, port: int, timeout: float = 3.0) -> bool:
        """`tcp_probe` as yes or no: "cannot tell" is no."""
        return await self.tcp_probe(host, port, timeout) is True

    async def forward_local_port(self, remote_host: str, remote_port: int, local_port: int = 0) -> int:
        """Forward a local loopback port to `remote_host:remote_port` as seen from the
        node (e.g. the Ray dashboard on the head's loopback) and return the local
        port. Reused while the connection lives; after a reconnect call it again."""
        conn = await self._require_conn()
        key = (remote_host, remote_port)
        if key in self._forwards and self._forwards[key][1] is conn:
            return self._forwards[key][0]
        listener = await conn.forward_local_port("127.0.0.1", local_port, remote_host, remote_port)
        port = listener.get_port()
        self._forwards[key] = (port, conn)
        log.info("%s: forward 127.0.0.1:%s -> %s:%s", self.name, port, remote_host, remote_port)
        return port


# --------------------------------------------------------------------------- pool


PREFERRED_CIPHERS: list[str] = [
    "aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
    "aes256-ctr", "aes192-ctr", "aes128-ctr",
]
"""asyncssh's own list, with AES-GCM first: its ChaCha20-Poly1305 builds a cipher context
per packet in Python, AES-GCM is one call into OpenSSL (AES-NI); profiled, this is a
third of a cold 64-node `status`. Every cipher here is one OpenSSH offers by default."""

RUN_OUTPUT_CAP = 32 << 20
"""Characters of one command's stdout (and of its stderr) that `run` keeps: what a
node sends is untrusted; beyond this the rest is read and dropped, and the kept text
ends with TRUNCATED_NOTE. Every command the console runs prints far less."""

TRUNCATED_NOTE = "\n[rlconsole: output truncated: {dropped} more characters not kept (limit {cap})]\n"


class _CappedText:
    """A command's output, kept up to `cap` characters; the rest is counted only."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def add(self, chunk: str) -> None:
        room = self.cap - self.kept
        if room > 0:
            piece = chunk[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        self.dropped += max(0, len(chunk) - max(room, 0))

    async def pump(self, reader: Any) -> None:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                return
            self.add(chunk)

    def text(self) -> str:
        out = "".join(self.parts)
        if self.dropped:
            out += TRUNCATED_NOTE.format(dropped=self.dropped, cap=self.cap)
        return out


CONNECT_CONCURRENCY = 8
"""Connection attempts (TCP connect, key exchange, authentication) a pool has under way at
once. OpenSSH's `MaxStartups` (default 10:30:100) drops new connections at random once 10
are unauthenticated on one sshd: 200 nodes behind one jump host (each node's connection
is also one to the jump host) or served by one sshd must not all knock at once. On two
cores the handshakes are CPU-bound on the console's side anyway, so the bound costs the
first connection of 200 nodes little."""

CONNECT_SLOT_MAX_S = 2.0
"""How long one attempt may hold its slot (see `NodeSession._connect_paced`)."""


class SessionPool:
    """One NodeSession per node of a profile, opened concurrently, at most
    `connect_concurrency` connection attempts at once (CONNECT_CONCURRENCY; 0: no bound)."""

    def __init__(self, profile: Profile, connect_concurrency: int = CONNECT_CONCURRENCY,
                 **session_kwargs: Any) -> None:
        self.profile = profile
        self.connect_gate = asyncio.Semaphore(connect_concurrency) if connect_concurrency > 0 else None
        session_kwargs.setdefault("connect_gate", self.connect_gate)
        self.sessions: dict[str, NodeSession] = {
            n.name: NodeSession(n, profile.ssh, profile.container, **session_kwargs) for n in profile.nodes
        }

    def __iter__(self) -> Iterable[NodeSession]:
        return iter(self.sessions.values())

    def session(self, node_name: str) -> NodeSession:
        try:
            return self.sessions[node_name]
        except KeyError:
            raise KeyError(f"no node named {node_name!r} in profile {self.profile.name}") from None

    @property
    def head(self) -> NodeSession:
        return self.sessions[self.profile.head.name]

    def start(self) -> None:
        for s in self.sessions.values():
            s.start()

    async def open(self, timeout: float | None = None) -> dict[str, bool]:
        """Start every session and wait (concurrently) for each one's first connection
        attempt, not for reconnects. Returns {node: connected}; nodes that failed keep
        retrying in the background."""
        self.start()
        names = list(self.sessions)
        results = await asyncio.gather(*(self.sessions[n].wait_first_attempt(timeout) for n in names))
        return dict(zip(names, results))

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.sessions.values()), return_exceptions=True)

    async def __aenter__(self) -> SessionPool:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
