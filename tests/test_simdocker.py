"""The sim's own container runtime (tui/sim/simdocker.py): a node's `docker` where the sim
runs no dockerd. Driven as the product drives it, through the node's `docker` script in a
shell, with the product's own parsers reading the answers: the inspect JSON says created /
running / exited with the exit code, `docker ps --format '{{json .}}'` rows read as Docker's,
errors are Docker's words (read as absent / not running), `exec` runs on the node with the
container's env, and a container's end takes what was started in it along. Real processes
only; each test removes its containers (which stops their processes by PID).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui.core.parsers.docker import container_from_ps, parse_docker_inspect, parse_docker_ps_json
from tui.sim.simdocker import MARKER_ENV, RUNTIME, RUNTIME_LABEL, processes_with_env, runtime_script

REPO = Path(__file__).resolve().parent.parent
IMAGE = "rlconsole-sim/training-suite:sim"


class Node:
    """One simulated node's dir with its `docker` first on PATH."""

    def __init__(self, d: Path) -> None:
        self.dir = d
        (d / "bin").mkdir(parents=True)
        script = d / "bin" / "docker"
        script.write_text(runtime_script("node1", str(d), sys.executable, str(REPO)))
        script.chmod(0o755)
        self.env = dict(os.environ, PATH=f"{d / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
                        RLCONSOLE_SIM_NODE_DIR=str(d))

    def sh(self, cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", cmd], env=self.env, capture_output=True, text=True, timeout=timeout)

    def inspect(self, name: str = "train-rl"):  # type: ignore[no-untyped-def]
        r = self.sh(f"docker inspect --type container {name}")
        return parse_docker_inspect(r.stdout + r.stderr, name, r.returncode), r

    def cleanup(self) -> None:
        ids = self.sh("docker ps -aq --no-trunc").stdout.split()
        if ids:
            self.sh("docker rm -f " + " ".join(ids))


@pytest.fixture
def node(tmp_path: Path):
    n = Node(tmp_path / "node1")
    try:
        yield n
    finally:
        n.cleanup()


def _create(n: Node, name: str = "train-rl", extra: str = "") -> subprocess.CompletedProcess[str]:
    """The product's `docker create` (tui/core/actions/containers.py create_argv)."""
    return n.sh(f"docker create --privileged --env MTHREADS_VISIBLE_DEVICES=all --net host "
                f"-v {n.dir}/data:{n.dir}/data {extra} --name {name} {IMAGE} sleep infinity")


def _wait_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_lifecycle_as_the_product_reads_it(node: Node) -> None:
    st, r = node.inspect()
    assert st.status == "absent" and r.returncode == 1 and r.stdout.strip() == "[]"
    assert "No such container: train-rl" in r.stderr

    c = _create(node)
    assert c.returncode == 0 and len(c.stdout.strip()) == 64, c.stderr
    again = _create(node)
    assert again.returncode == 125 and 'The container name "/train-rl" is already in use' in again.stderr
    st, r = node.inspect()
    assert st.status == "created" and st.image == IMAGE and st.started_at is None
    doc = json.loads(r.stdout)[0]
    assert doc["Name"] == "/train-rl" and doc["HostConfig"]["Privileged"] is True
    assert doc["HostConfig"]["NetworkMode"] == "host" and "MTHREADS_VISIBLE_DEVICES=all" in doc["Config"]["Env"]
    assert doc["Config"]["Labels"][RUNTIME_LABEL] == RUNTIME  # says what it is
    assert (node.dir / "data").is_dir()  # a missing bind source is created, as Docker does
    assert list(doc)[:5] == ["Id", "Created", "Path", "Args", "State"]

    ex = node.sh("docker exec train-rl true")
    assert ex.returncode == 1 and f"Container {doc['Id']} is not running" in ex.stderr

    s = node.sh("docker start train-rl")
    assert s.returncode == 0 and s.stdout == "train-rl\n", s.stderr
    st, r = node.inspect()
    assert st.status == "running" and st.started_at and st.exit_code == 0
    pid = json.loads(r.stdout)[0]["State"]["Pid"]
    assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"infinity"]
    # the sh fast path (a running container: a file read) answers as the Python path does
    slow = node.sh(f"docker inspect {doc['Id'][:12]}")
    assert json.loads(slow.stdout)[0]["State"] == json.loads(r.stdout)[0]["State"]
    assert node.sh("docker start train-rl").returncode == 0  # already running: nothing to do

    ex = node.sh("docker exec -e B=2 train-rl sh -c 'echo $MTHREADS_VISIBLE_DEVICES $B $RLCONSOLE_SIM_NODE_DIR'")
    assert ex.returncode == 0 and ex.stdout.split() == ["all", "2", str(node.dir)]
    nx = node.sh("docker exec train-rl no-such-program")
    assert nx.returncode == 126 and 'exec: "no-such-program": executable file not found' in nx.stderr

    rows = parse_docker_ps_json(node.sh("docker ps --format '{{json .}}'").stdout)
    ps = container_from_ps(rows, "train-rl")
    assert ps.status == "running" and ps.image == IMAGE and rows[0]["Status"].startswith("Up ")
    assert node.sh("docker ps --format '{{.Names}}'").stdout == "train-rl\n"
    assert node.sh("docker ps -q").stdout.strip() == doc["Id"][:12]

    stop = node.sh("docker stop -t 5 train-rl")
    assert stop.returncode == 0 and stop.stdout == "train-rl\n"
    assert _wait_gone(pid)
    st, _ = node.inspect()
    assert st.status == "exited" and st.exit_code == 143  # SIGTERM, as Docker reports it
    rows = parse_docker_ps_json(node.sh("docker ps -a --format json").stdout)
    assert container_from_ps(rows, "train-rl").exit_code == 143
    assert node.sh("docker ps --format '{{.Names}}'").stdout == ""  # without -a: running ones only
    assert node.sh("docker exec train-rl true").returncode == 1

    assert node.sh("docker start train-rl").returncode == 0  # starts again
    st, _ = node.inspect()
    assert st.status == "running"
    rm = node.sh("docker rm train-rl")
    assert rm.returncode == 1 and "You cannot remove a running container" in rm.stderr
    assert node.sh("docker rm -f train-rl").returncode == 0
    st, _ = node.inspect()
    assert st.status == "absent"


def test_a_container_takes_its_processes_along(node: Node) -> None:
    """What `docker exec` started (Ray, on a node) carries the container's marker and dies
    with the container; a container whose main process dies is exited, the rest with it."""
    assert _create(node).returncode == 0 and node.sh("docker start train-rl").returncode == 0
    cid = json.loads(node.sh("docker inspect train-rl").stdout)[0]["Id"]
    assert node.sh("docker exec -d train-rl sleep 4321").returncode == 0
    deadline = time.monotonic() + 10
    inside: set[int] = set()
    while time.monotonic() < deadline and not any(
            Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep\x004321") for p in inside):
        inside = processes_with_env(f"{MARKER_ENV}={cid}".encode())
        time.sleep(0.05)
    exec_pid = next(p for p in inside if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep\x004321"))
    main_pid = json.loads(node.sh("docker inspect train-rl").stdout)[0]["State"]["Pid"]
    # the main process dies on its own (as a container's init crashing)
    os.kill(main_pid, signal.SIGKILL)
    assert _wait_gone(main_pid)
    deadline = time.monotonic() + 10
    st, _ = node.inspect()
    while st.status == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
        st, _ = node.inspect()
    assert st.status == "exited" and st.exit_code == 137
    assert _wait_gone(exec_pid)  # the kernel would have killed the container's other processes too

    # docker stop ends what exec started, too
    assert node.sh("docker start train-rl").returncode == 0
    assert node.sh("docker exec -d train-rl sleep 4322").returncode == 0
    deadline = time.monotonic() + 10
    pids: list[int] = []
    while time.monotonic() < deadline and not pids:
        pids = [p for p in processes_with_env(f"{MARKER_ENV}={cid}".encode())
                if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep\x004322")]
        time.sleep(0.05)
    assert pids and node.sh("docker stop train-rl").returncode == 0
    assert all(_wait_gone(p) for p in pids)


def test_pause_kill_logs_and_errors(node: Node) -> None:
    c = node.sh(f"docker run -d --name echoer {IMAGE} sh -c 'echo hello from the container; sleep 1000'")
    assert c.returncode == 0, c.stderr
    deadline = time.monotonic() + 10
    while "hello" not in node.sh("docker logs echoer").stdout and time.monotonic() < deadline:
        time.sleep(0.05)
    assert node.sh("docker logs --tail 1 echoer").stdout == "hello from the container\n"
    assert node.sh("docker pause echoer").returncode == 0
    st, _ = node.inspect("echoer")
    assert st.status == "paused"
    assert "is paused" in node.sh("docker exec echoer true").stderr
    assert node.sh("docker unpause echoer").returncode == 0
    st, _ = node.inspect("echoer")
    assert st.status == "running"
    k = node.sh("docker kill echoer")
    assert k.returncode == 0 and k.stdout == "echoer\n"
    st, _ = node.inspect("echoer")
    assert st.status == "exited" and st.exit_code == 137
    assert "is not running" in node.sh("docker kill echoer").stderr
    # a foreground run: the output, then the command's exit status
    fg = node.sh(f"docker run --rm --name once {IMAGE} sh -c 'echo out; exit 3'")
    assert fg.returncode == 3 and fg.stdout == "out\n"
    assert node.inspect("once")[0].status == "absent"  # --rm
    missing = node.sh(f"docker create --name nocmd {IMAGE} no-such-program && docker start nocmd")
    assert missing.returncode == 1 and "executable file not found" in missing.stderr
    assert "Error: failed to start containers: nocmd" in missing.stderr
    assert node.sh("docker version").stdout.count(RUNTIME) == 1
    assert node.sh("docker inspect -f '{{.State.Status}} {{json .Config.Cmd}}' echoer").stdout == \
        'exited ["sh","-c","echo hello from the container; sleep 1000"]\n'
    assert node.sh("docker frobnicate").returncode == 1
    assert node.sh("docker create --name 'bad name' x").returncode == 125


def test_the_sh_fast_path_answers_absent_and_running_without_python(node: Node, tmp_path: Path) -> None:
    """The sampler's `docker inspect --type container NAME` every refresh: for an absent or
    a running container the node's script answers itself (a Python that is not there
    proves it), anything else goes to the runtime."""
    script = (node.dir / "bin" / "docker").read_text()
    assert _create(node).returncode == 0 and node.sh("docker start train-rl").returncode == 0
    broken = tmp_path / "broken"
    (broken / "bin").mkdir(parents=True)
    (broken / "bin" / "docker").write_text(script.replace(sys.executable, "/nonexistent/python"))
    (broken / "bin" / "docker").chmod(0o755)
    env = dict(node.env, PATH=f"{broken / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    run = lambda c: subprocess.run(["sh", "-c", c], env=env, capture_output=True, text=True, timeout=30)
    r = run("docker inspect --type container train-rl")
    assert r.returncode == 0 and parse_docker_inspect(r.stdout, "train-rl", 0).status == "running"
    r = run("docker inspect --type container other")
    assert r.returncode == 1 and parse_docker_inspect(r.stdout + r.stderr, "other", 1).status == "absent"
    assert run("docker ps").returncode != 0  # everything else is the runtime's (Python)


def test_the_console_header_says_so() -> None:
    """The profile `sim up` writes for simulated containers puts them in the header beside
    SIMULATED."""
    from tui.app import RlconsoleApp
    from tui.backend.static import StaticBackend, demo_profile, demo_state

    profile = demo_profile()
    profile.simulated = True
    profile.sim_verl = "VeRL 0.7.0 config"
    profile.sim_containers = RUNTIME
    app = RlconsoleApp(StaticBackend(profile=profile, state=demo_state(profile)))
    assert app.sub_title.endswith("SIMULATED (VeRL 0.7.0 config, containers: simulated (no dockerd))")
