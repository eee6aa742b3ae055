"""The sim's private Docker daemon and its tiny image.

One `dockerd` per sim, isolated from any system Docker (LAB.md flags): its own
data-root, exec-root, socket and pidfile; no iptables, no bridge (containers use
`--network host`, as in the seed), the `vfs` storage driver (works everywhere, and the
image is tiny), and an empty config file so `/etc/docker/daemon.json` cannot interfere.
No registry is reachable, so the image is built locally with `docker import` from a
rootfs holding `/bin/sh`, `sleep` and their libraries: enough for the seed's
`sleep infinity` container command.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
from pathlib import Path

IMAGE = "rlconsole-sim/training-suite:sim"


def find_dockerd() -> str | None:
    return shutil.which("dockerd")


def find_docker_cli(exclude: list[Path] | None = None) -> str | None:
    ex = {str(p) for p in exclude or []}
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p not in ex)
    return shutil.which("docker", path=path) or shutil.which("docker", path="/usr/local/bin:/usr/bin:/bin")


def ping(sock: str, timeout: float = 1.0) -> bool:
    """GET /_ping on the daemon's unix socket."""
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(sock)
        s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        data = s.recv(4096)
        s.close()
        return b" 200 " in data.split(b"\r\n", 1)[0]
    except OSError:
        return False


def start_dockerd(dockerd: str, data_root: Path, exec_root: Path, sock: Path, log: Path,
                  timeout: float = 30.0) -> subprocess.Popen:
    """Start the private daemon and wait until it answers."""
    data_root.mkdir(parents=True, exist_ok=True)
    exec_root.mkdir(parents=True, exist_ok=True)
    cfg = data_root.parent / "daemon.json"
    cfg.write_text("{}\n")
    argv = [
        dockerd,
        f"--data-root={data_root}",
        f"--exec-root={exec_root}",
        f"--host=unix://{sock}",
        f"--pidfile={exec_root / 'dockerd.pid'}",
        f"--config-file={cfg}",
        "--iptables=false", "--ip6tables=false", "--ip-masq=false", "--bridge=none",
        "--storage-driver=vfs",
        "--shutdown-timeout=2",
        "--log-level=warn",
    ]
    with log.open("ab") as lf:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(f"dockerd exited with {proc.returncode}: " + " | ".join(tail))
        if sock.exists() and ping(str(sock)):
            return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"dockerd did not answer on {sock} within {timeout:g}s (log: {log})")


def _libs(binary: str) -> list[str]:
    """The shared libraries a binary loads (`ldd`), absolute paths."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    libs = []
    for line in out.splitlines():
        parts = line.split()
        for p in parts:
            if p.startswith("/"):
                libs.append(p)
                break
    return libs


def rootfs_tar() -> bytes:
    """A minimal rootfs: sh, sleep, true, cat and their libraries."""
    bins = [b for b in (shutil.which(n) for n in ("sh", "sleep", "true", "cat", "echo")) if b]
    files: set[str] = set()
    for b in bins:
        files.add(os.path.realpath(b))
        files.update(_libs(b))
    buf = io.BytesIO()
    # dereference: /lib64/ld-linux*.so and merged-/usr paths are symlinks on the host
    with tarfile.open(fileobj=buf, mode="w", dereference=True) as tar:
        for d in ("bin", "tmp", "etc", "proc", "sys", "dev", "data"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        for f in sorted(files):
            tar.add(f, arcname=f.lstrip("/"))
            real = f
            for b in bins:  # also under /bin/<name> (the image's PATH)
                if os.path.realpath(b) == real:
                    tar.add(f, arcname=f"bin/{os.path.basename(b)}")
        for name, text in (("etc/hostname", "sim\n"), ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_image(docker_cli: str, sock: Path, config_dir: Path, tag: str = IMAGE) -> None:
    env = dict(os.environ, DOCKER_HOST=f"unix://{sock}", DOCKER_CONFIG=str(config_dir))
    p = subprocess.run([docker_cli, "import", "--change", 'CMD ["sleep", "infinity"]',
                        "--change", "ENV PATH=/bin:/usr/bin", "-", tag],
                       input=rootfs_tar(), env=env, capture_output=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"docker import failed: {p.stderr.decode(errors='replace').strip()}")


def privileged_works(docker_cli: str, sock: Path, config_dir: Path, tag: str = IMAGE) -> bool:
    """Whether `--privileged` containers start here. Inside a container or sandbox
    that lacks some capabilities (e.g. CAP_SYS_RESOURCE) runc refuses them with
    "unable to apply caps"; the sim then creates containers without it."""
    env = dict(os.environ, DOCKER_HOST=f"unix://{sock}", DOCKER_CONFIG=str(config_dir))
    p = subprocess.run([docker_cli, "run", "--rm", "--privileged", "--network", "host", tag, "true"],
                       env=env, capture_output=True, timeout=60)
    return p.returncode == 0


def stop_dockerd(pid: int, sock: Path | None, docker_cli: str | None, config_dir: Path | None,
                 timeout: float = 10.0) -> None:
    """Remove every container (fast SIGKILL, so dockerd needs not wait out their
    stop timeout), then stop the daemon by PID."""
    if sock is not None and docker_cli and sock.exists() and ping(str(sock), 0.5):
        env = dict(os.environ, DOCKER_HOST=f"unix://{sock}")
        if config_dir:
            env["DOCKER_CONFIG"] = str(config_dir)
        try:
            ids = subprocess.run([docker_cli, "ps", "-aq"], env=env, capture_output=True, text=True,
                                 timeout=10).stdout.split()
            if ids:
                subprocess.run([docker_cli, "rm", "-f", *ids], env=env, capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            pass
    _term_then_kill(pid, timeout)


def _term_then_kill(pid: int, timeout: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (a zombie child of ours is as good as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False
