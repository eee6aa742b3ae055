"""`sim up --sshd openssh`: each simulated node served by OpenSSH's own `sshd`.

Why: the built-in server (`server.py`) is a real SSH peer, but the console meets
OpenSSH on a real cluster, and OpenSSH differs in ways that matter (measured on
OpenSSH 9.2, logged in as root as the seed's nodes are):

* `MaxSessions 10`: the 10th concurrent channel on one connection is refused
  ("open failed"); the console caps channels per node (`ssh.max_channels`, <= 10).
* The command runs under the user's login shell (`bash -c CMD` for root), which on
  Debian sources `$HOME/.bashrc` for every SSH command (pyenv, conda: 120-160 ms each).
* Signal requests are refused for root sessions ("session signalling requires
  privilege separation") and for forced-command sessions; closing a channel does not
  end a command that has no terminal: it lives until it writes (SIGPIPE) or ends.
* The working directory is the account's home from the password database.

Design: one `sshd -D -e -f <node's sshd_config>` per node on its loopback address and
port, with the sim's host key for that node (the one the profile's known_hosts
trusts) and the sim's client key as the only authorized key. With per-node PID
namespaces the sshd itself runs inside the node's namespace (`nsenter`), so every
session and command is on that node, like a real host's sshd; no ForceCommand
(which would cost the signal requests real hosts honour for non-root users).
The node's environment is the one the built-in server gives: `SetEnv` puts it in
every session (HOME too, so bash reads the node's `.bashrc`, not the machine's), and
the node home's `.bashrc`/`.profile` set it again for login shells (Debian's
`/etc/profile` resets PATH) and change to the node's home, as the built-in server does.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["OpenSshNode", "find_sshd", "login_files", "sshd_config"]

SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin")
"""Where sshd is looked for besides PATH."""
PRIVSEP_DIR = Path("/run/sshd")  # Debian's compiled-in privilege separation directory


def find_sshd() -> str | None:
    """The absolute path of OpenSSH's sshd (it re-executes itself, so it must be
    absolute), or None. /usr/sbin is not on every user's PATH."""
    found = shutil.which("sshd")
    if found:
        return os.path.abspath(found)
    for d in SBIN_DIRS:
        p = os.path.join(d, "sshd")
        if os.access(p, os.X_OK):
            return p
    return None


_LOGIN_SETS = frozenset({"SHELL"})
"""Left as sshd sets it: the account's real login shell runs the commands."""


def _setenv_value(v: str) -> str:
    """sshd_config quoting: a value is one token; double quotes keep spaces."""
    if any(c in v for c in '"\n\r'):
        raise ValueError(f"cannot put {v!r} in an sshd_config SetEnv")
    return f'"{v}"' if any(c.isspace() for c in v) or not v else v


def sshd_config(*, address: str, port: int, host_key: Path, authorized_keys: Path, env: dict[str, str],
                user: str, allowed_from: set[str] | None = None, forward_to: list[str] | None = None) -> str:
    """The node's sshd_config: public-key login for `user` only, host key verified by the
    sim's known_hosts, no PAM (none in a container), local port forwarding to the nodes'
    addresses (the Ray dashboard), nothing else forwarded."""
    lines = [
        "# written by `rlconsole sim up --sshd openssh`; removed by `rlconsole sim down`",
        f"ListenAddress {address}:{port}",
        f"HostKey {host_key}",
        f"AuthorizedKeysFile {authorized_keys}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes no",  # the state dir may live under /tmp (pytest)
        "PidFile none",
        "PrintMotd no",
        "PrintLastLog no",
        "UseDNS no",
        "PermitUserEnvironment no",
        "X11Forwarding no",
        "AllowAgentForwarding no",
        "AllowStreamLocalForwarding no",
        "PermitTunnel no",
        "GatewayPorts no",
        "AllowTcpForwarding local",
        "PermitOpen " + " ".join(f"{h}:*" for h in ["localhost", "127.0.0.1", *(forward_to or [])]),
        # a console that vanished without closing its connection is noticed
        "ClientAliveInterval 15",
        "ClientAliveCountMax 3",
        "LogLevel INFO",
        "SetEnv " + " ".join(f"{k}={_setenv_value(v)}" for k, v in env.items() if k not in _LOGIN_SETS),
    ]
    if allowed_from:
        # behind a bastion: only the jump host's address may log in
        lines.append("AllowUsers " + " ".join(f"{user}@{a}" for a in sorted(allowed_from)))
    return "\n".join(lines) + "\n"


def login_files(home: Path, env: dict[str, str]) -> None:
    """The node home's shell start-up files: the node's environment again (a login
    shell's /etc/profile resets PATH) and its home as the working directory (sshd
    starts in the account's home from /etc/passwd, the built-in server in $HOME)."""
    body = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items() if k not in _LOGIN_SETS)
    text = ("# the simulated node's login environment (rlconsole sim, --sshd openssh)\n"
            + body + 'cd "$HOME" 2>/dev/null || true\n')
    (home / ".rlconsole-sim-env").write_text(text)
    for f in (".bashrc", ".profile"):
        (home / f).write_text('. "$HOME/.rlconsole-sim-env"\n')


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                kids += [int(x) for x in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return kids


def descendants(pid: int) -> list[int]:
    """`pid`'s process tree below it (sshd's sessions and their commands)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        for k in _children(todo.pop()):
            if k not in out:
                out.append(k)
                todo.append(k)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and everything below it: what clients see when a node's sshd dies
    (connections reset, commands gone). Daemons a command started and detached (ray)
    were reparented away and live on, as on a real host."""
    tree = [pid, *descendants(pid)]
    for p in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)


class OpenSshNode:
    """One node's OpenSSH sshd, with the interface the sim daemon uses for the built-in
    server (`name`, `address`, `port`, `running`, `start()`, `stop()`)."""

    def __init__(self, name: str, address: str, host_key: Path, authorized_keys: Path, env: dict[str, str],
                 conf_dir: Path, sshd: str, ns_pid: int | None = None, port: int = 0,
                 allowed_peers: set[str] | None = None, forward_to: list[str] | None = None) -> None:
        self.name = name
        self.address = address
        self.port = port
        self.host_key = host_key
        self.authorized_keys = authorized_keys
        self.env = dict(env)
        self.conf_dir = conf_dir
        self.sshd = sshd
        self.ns_pid = ns_pid
        self.allowed_peers = allowed_peers
        self.forward_to = forward_to
        self.user = getpass.getuser()
        self.pid: int | None = None  # the listening sshd, as seen from the sim daemon
        self._proc: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self.pid is not None

    def _free_port(self) -> int:
        with socket.socket() as s:
            s.bind((self.address, 0))
            return int(s.getsockname()[1])

    def _spawn(self) -> list[str]:
        """Write the node's config and start files, start its sshd; returns the argv."""
        if not self.port:
            self.port = self._free_port()
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        login_files(Path(self.env["HOME"]), self.env)
        cfg = self.conf_dir / "sshd_config"
        cfg.write_text(sshd_config(address=self.address, port=self.port, host_key=self.host_key,
                                   authorized_keys=self.authorized_keys, env=self.env, user=self.user,
                                   allowed_from=self.allowed_peers, forward_to=self.forward_to))
        if os.geteuid() == 0 and not PRIVSEP_DIR.exists():
            # sshd refuses to start without it; the package's service unit makes it, a
            # container that never ran the service has none
            PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        argv = [self.sshd, "-D", "-e", "-f", str(cfg)]
        if self.ns_pid:
            argv = ["nsenter", f"--target={self.ns_pid}", "--pid", "--mount", "--", *argv]
        with (self.conf_dir / "sshd.log").open("ab") as lf:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                          start_new_session=True, cwd="/")
        return argv

    def _log_tail(self) -> str:
        logp = self.conf_dir / "sshd.log"
        return " | ".join(logp.read_text(errors="replace").strip().splitlines()[-3:]) if logp.exists() else ""

    async def start(self, timeout: float = 60.0) -> int:
        """Start the node's sshd and wait until it accepts connections; returns the port."""
        if self.running:
            return self.port
        argv = await asyncio.to_thread(self._spawn)
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            if self.ns_pid:
                kids = _children(self._proc.pid)  # nsenter forks into the namespace
                self.pid = kids[0] if kids else None
            else:
                self.pid = self._proc.pid
            if self.pid and await asyncio.to_thread(self._listening):
                return self.port
            await asyncio.sleep(0.1)
        tail = await asyncio.to_thread(self._log_tail)
        await self.stop()
        raise RuntimeError(f"{self.name}: OpenSSH sshd did not start on {self.address}:{self.port}"
                           f" ({' '.join(argv)}): {tail or 'no output'}")

    def _listening(self) -> bool:
        try:
            with socket.create_connection((self.address, self.port), 1.0) as s:
                s.settimeout(2.0)
                return s.recv(4).startswith(b"SSH-")
        except OSError:
            return False

    async def stop(self, kill_commands: bool = True) -> None:
        """Kill the sshd and its sessions (every connection drops at once, like a crashed
        sshd); the port stays this node's for `start()`."""
        proc, self._proc = self._proc, None
        pid, self.pid = self.pid, None
        if pid:
            kill_tree(pid)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(proc.wait, 10)
        # "at once" is what callers rely on (a fault, `sim stop-node`): a CI run on a loaded
        # machine connected to the port just after stop() returned. Return when nothing
        # accepts there any more (bounded: a kill that did not take is left to the caller).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and await asyncio.to_thread(self._accepts):  # noqa: ASYNC110 - a port
            await asyncio.sleep(0.05)

    def _accepts(self) -> bool:
        """Does anything still accept connections on this node's port?"""
        try:
            socket.create_connection((self.address, self.port), 0.5).close()
            return True
        except OSError:
            return False
