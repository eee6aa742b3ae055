"""Shared fixtures. Append new fixtures; do not remove others' (several people edit this).

SSH fixtures: real in-process asyncssh servers (`SimNodeServer`) with their own host
keys, and a profile/Node pointing at them, so the SSH layer is tested against a real
SSH peer. Sim fixtures: one simulated cluster per test session (per xdist worker),
torn down at the end, with a private state dir so parallel workers never collide.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest

# --------------------------------------------------------------------------- user dirs

_USER_DIR_VARS = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")
_RLCONSOLE_VARS = ("RLCONSOLE_STATE_DIR", "RLCONSOLE_CONFIG_DIR", "RLCONSOLE_SIM_DIR",
                   "RLCONSOLE_PROFILE", "RLCONSOLE_STATIC_BACKEND")


def pytest_configure(config: pytest.Config) -> None:
    """Point every user directory at a temp dir for the whole run (each xdist worker
    gets its own), before any fixture or session-scoped sim starts: a run history,
    spool or profile in the real ~/.local/state or ~/.config must never change a result."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="rlconsole-test-home-"))
    for var in _USER_DIR_VARS:
        os.environ[var] = str(base / var.lower())
    for var in _RLCONSOLE_VARS:
        os.environ.pop(var, None)
    # Real VeRL wheels come from $RLCONSOLE_VERL_WHEELS (.ci/run downloads them before the
    # tests); no test asks the package index itself.
    os.environ["RLCONSOLE_VERL_OFFLINE"] = "1"


@pytest.fixture(autouse=True)
def _own_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """And a fresh set per test, so one test's run history is not the next one's."""
    base = tmp_path_factory.mktemp("home")
    for var in _USER_DIR_VARS:
        monkeypatch.setenv(var, str(base / var.lower()))
    return base


# --------------------------------------------------------------------------- long modules first

LONG_MODULES: dict[str, float] = {
    "test_demo_tmux": 158, "test_slurm": 200, "test_chain": 72,
    "test_sim_nonroot": 80, "test_bench_chaos": 137, "test_sim_openssh": 112, "test_probes": 43,
    "test_sim_tree": 100, "test_rayapi": 21, "test_tui_snapshots": 30, "test_layering": 24,
    "test_tui_pilot": 32, "test_import": 29, "test_sampler_delta": 21, "test_sim_faults": 236,
}
"""Seconds a module's tests took together on two shared cores with three workers
(each test's start and end per worker, 2026-12-08), for the modules that take more than ~20 s. `--dist loadfile`
gives a worker a whole module and a worker takes its next one while it still has two tests
to run; in the default order (xdist sorts modules by test count, so these few-test modules
came last) the demo in tmux could run alone at the end. Longest first, the tail is the
many short modules, which the workers share out. A module missing here only runs later;
nothing depends on the order (a module that changes the shared sim puts it back, one that
reads it resets it first: `shared_sim`, `sim_as_up`). Three workers on two cores: the
tests wait (on jobs' steps, timers, Ray's joins) about as much as they compute; measured
in a clean-clone `.ci/run`, 755 s against 883 s with two."""


RAY_SIM_MODULES: tuple[str, ...] = ("test_probes_ray", "test_alerts_live", "test_runs_sim", "test_destructive_guards",
                                    "test_tui_live_reopen", "test_chain_preflight", "test_backend_contract_live",
                                    "test_setup_ray_live", "test_stop_live")
"""Modules on `ray_sim` (the worker's sim with Ray kept up), in the order they run: one
xdist work unit (`pytest_xdist_make_scheduler`), so they follow each other on one worker
and each after the first finds Ray up (1-2 s) instead of bringing it up (20-30 s) and
taking it down (4 s). `test_sim_faults`, also on `ray_sim`, is a unit of its own (its
thirteen jobs made the group the suite's longest lane, ~670 s of a ~750 s run): it
brings Ray up on its worker's sim, or finds it kept when that worker ran the group."""

RAY_SIM_SECONDS = 330.0
"""The group's modules' time together on two shared cores, three workers (2026-12-08, 331 s):
where the group sorts among LONG_MODULES (first: it is the longest unit)."""


def _order(item: pytest.Item) -> tuple[float, int]:
    stem = item.path.stem
    if stem in RAY_SIM_MODULES:
        return -RAY_SIM_SECONDS, RAY_SIM_MODULES.index(stem)
    return -LONG_MODULES.get(stem, 0.0), 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_order)  # stable: a module's own order kept


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadfile` (a module is a work unit), except that the RAY_SIM_MODULES are one
    unit together. xdist's own scheduler, with its scope split made to say so."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class RaySimGrouped(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "ray_sim-modules" if Path(module).stem in RAY_SIM_MODULES else module

    return RaySimGrouped(config, log)


# --------------------------------------------------------------------------- CI: no skips


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    """Under CI=true a skipped test is a failed one: CI provides everything the suite
    needs (dockerd, tmux, ssh, root), so a skip there means a missing install step, and
    a green run must not hide it."""
    outcome = yield
    try:
        rep = outcome.get_result()
    except Exception as e:  # noqa: BLE001 - pytest could not describe the failure
        rep = _plain_report(item, call, e)
        outcome.force_result(rep)
    if rep.skipped and _under_ci() and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"skipped under CI=true, which must run every test: {reason}"


def _plain_report(item: pytest.Item, call: pytest.CallInfo, why: BaseException) -> pytest.TestReport:
    """A failure's report when pytest's own failed to be made. Its traceback formatting
    parses each frame's source (`ast.parse`), and on CPython 3.11.7 a finaliser running
    inside that parse can make it raise `SystemError: AST constructor recursion depth
    mismatch`: the exception escaped the test protocol and ended the xdist worker, so CI
    reported an INTERNALERROR instead of the test's failure. Here the failure is told
    plainly -- file:line of each frame, the exception's one line -- and why the usual
    report could not be made."""
    import linecache

    lines: list[str] = []
    exc = call.excinfo.value if call.excinfo is not None else None
    tb = call.excinfo.tb if call.excinfo is not None else None
    while tb is not None:
        code = tb.tb_frame.f_code
        lines.append(f"{code.co_filename}:{tb.tb_lineno}: in {code.co_name}")
        src = linecache.getline(code.co_filename, tb.tb_lineno).strip()
        if src:
            lines.append(f"    {src}")
        tb = tb.tb_next
    if exc is not None:
        try:
            lines.append(f"{type(exc).__name__}: {exc}")
        except Exception:  # noqa: BLE001 - an exception whose str() fails
            lines.append(type(exc).__name__)
    # failed even where the phase itself passed: a report pytest cannot make is not a pass
    lines.append(f"(pytest's report of this {call.when} could not be made: {type(why).__name__}: {why})")
    sections = [(f"Captured {key} {when}", content) for when, key, content in item._report_sections]
    return pytest.TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, "failed",
                             "\n".join(lines), call.when, sections, call.duration, call.start, call.stop,
                             item.user_properties)


# --------------------------------------------------------------------------- ssh


@dataclass
class SshKit:
    """Key material for one test: a host key, a client key, a known_hosts file."""

    dir: Path
    host_key: Path
    client_key: Path
    client_pub: Path
    known_hosts: Path

    def trust(self, address: str, port: int, key_path: Path | None = None) -> None:
        """Add `[address]:port <host key>` to known_hosts."""
        import asyncssh

        key = asyncssh.read_private_key(str(key_path or self.host_key))
        line = key.export_public_key("openssh").decode().strip()
        with self.known_hosts.open("a") as f:
            f.write(f"[{address}]:{port} {line}\n")


@pytest.fixture
def ssh_kit(tmp_path: Path) -> SshKit:
    import asyncssh

    d = tmp_path / "ssh"
    d.mkdir()
    host = asyncssh.generate_private_key("ssh-ed25519")
    client = asyncssh.generate_private_key("ssh-ed25519")
    (d / "host_key").write_bytes(host.export_private_key())
    (d / "id_ed25519").write_bytes(client.export_private_key())
    (d / "id_ed25519").chmod(0o600)
    (d / "id_ed25519.pub").write_bytes(client.export_public_key())
    (d / "known_hosts").write_text("")
    return SshKit(d, d / "host_key", d / "id_ed25519", d / "id_ed25519.pub", d / "known_hosts")


@pytest.fixture
async def node_server(ssh_kit: SshKit, tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable]]:
    """Factory: `await node_server(address="127.0.0.1", trusted=True, **kw)` starts a
    SimNodeServer (stopped at teardown) and, if `trusted`, adds its key to known_hosts."""
    from tui.sim.server import SimNodeServer

    servers = []

    async def make(address: str = "127.0.0.1", trusted: bool = True, **kw):
        home = tmp_path / f"home{len(servers)}"
        home.mkdir()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}
        env.update(kw.pop("env", {}))
        srv = SimNodeServer(f"n{len(servers)}", address, ssh_kit.host_key, [ssh_kit.client_pub], env=env, **kw)
        await srv.start()
        servers.append(srv)
        if trusted:
            ssh_kit.trust(address, srv.port)
        return srv

    yield make
    for s in servers:
        await s.stop()


def make_node(name: str, address: str, port: int, identity: Path, role: str = "head"):
    """A profile Node for a test server."""
    import getpass

    from tui.core.profile import Node, SshEndpoint

    return Node(name=name, address=address, gpus=8, role=role,
                ssh=SshEndpoint(host=address, port=port, user=getpass.getuser(), identity=[str(identity)]))


# --------------------------------------------------------------------------- sim


def require_command(name: str, package: str) -> str:
    """The path of a system command a test needs. Where it is missing the test skips,
    but FAILS under CI=true: CI must install `package` and run the test for real."""
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{name} not found, and CI=true: install {package} (apt-get install {package})")
    pytest.skip(f"{name} not installed (Debian package {package})")


def require_dockerd() -> None:
    """Docker-backed tests: dockerd from docker.io."""
    require_command("dockerd", "docker.io")


def require_sshd() -> str:
    """`sim up --sshd openssh` tests: OpenSSH's sshd (openssh-server; in /usr/sbin, which
    is not on every PATH). Skips where missing, FAILS under CI=true."""
    from tui.sim.opensshd import find_sshd

    path = find_sshd()
    if path:
        return path
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("sshd not found, and CI=true: install openssh-server (apt-get install openssh-server)")
    pytest.skip("sshd not installed (Debian package openssh-server)")


@pytest.fixture(scope="module")
def small_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 2 x 2 simulated cluster without containers, for one test module: real SSH
    servers, no dockerd. Yields its profile's path."""
    from tui.sim.cluster import sim_down, sim_up

    d = tmp_path_factory.mktemp("small-sim")
    path = sim_up(2, 2, state_dir=d, docker=False)
    try:
        yield Path(path)
    finally:
        sim_down(state_dir=d)


def _session_sim(tmp_path_factory: pytest.TempPathFactory, nodes: int, cards: int) -> Iterator[SimInfo]:
    from tui.core.profile import load_profile
    from tui.sim.cluster import sim_down, sim_up

    state = tmp_path_factory.mktemp("sim")
    profile_path = sim_up(nodes, cards, state_dir=state)
    try:
        yield SimInfo(state, profile_path, load_profile(profile_path), nodes, cards)
    finally:
        sim_down(state_dir=state)


@pytest.fixture(scope="session")
def sim_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimInfo]:
    """A 4 x 8 simulated cluster (the seed's shape) for the whole test session (this xdist
    worker). Yields a `SimInfo` (state dir, profile path, loaded profile, shape). `sim down`
    runs at the end even when tests fail."""
    yield from _session_sim(tmp_path_factory, 4, 8)


RAY_SIM_SHAPE: tuple[int, int] = (2, 4)
"""The `ray_sim` modules' cluster: nodes x cards. Smaller than the seed's 4 x 8 because
those modules submit some twenty jobs and bring Ray up twice: on 2 x 4 each job starts
two WorkerDicts instead of four, and Ray runs two raylets and two sets of agents (issue
37: the group was a fifth of the suite's CPU and its longest lane). What they prove
(jobs, faults, alerts, stop, preflight on a live Ray) does not depend on the shape; the
4 x 8 shape is proven whole by test_chain (the headless chain on the seed's shape) and
test_sim (`sim up`), and the demo and bench_chaos run their own clusters."""


@pytest.fixture(scope="session")
def ray_sim_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimInfo]:
    """The `ray_sim` modules' own simulated cluster (RAY_SIM_SHAPE), for the whole session
    of the worker that runs their unit."""
    yield from _session_sim(tmp_path_factory, *RAY_SIM_SHAPE)


@dataclass
class SimInfo:
    state_dir: Path
    profile_path: Path
    profile: object
    nodes: int
    cards: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.cards


def require_slurm() -> None:
    """`sim up --slurm` tests: root and Debian's slurmctld, slurmd, slurm-client, munge.
    Skips where missing, FAILS under CI=true (.ci/run installs them and runs as root)."""
    from tui.sim.slurm import requirement_problem

    problem = requirement_problem()
    if problem is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{problem}, and CI=true")
    pytest.skip(problem)


# --------------------------------------------------------------------------- the shared sim, put back


def reset_sim(info: SimInfo) -> None:
    """Put a sim back as `sim up` left it: no fault, every node's SSH server up, no
    container (and so no Ray and no job: the sim runs them in the containers), no model,
    checkpoint or TensorBoard files. What a module that changed the shared sim
    (`shared_sim`) undoes when it ends, so that no module depends on what another left,
    whatever order xdist runs them in. While Ray's GCS answers, `stop --cluster` first (the
    job stopped and waited for, `ray stop` on every node, through the containers: removed
    first, they took the way to Ray with them, and Ray and its job outlived them); then the
    containers go, each node checked; a Ray still answering then (one started on the nodes
    themselves) gets `ray stop --force` on every node, and must be gone."""
    import asyncio
    import socket
    import time

    from tui.core.profile import load_profile
    from tui.core.ssh import SessionPool
    from tui.sim.faults import clear_faults

    _RAY_KEPT.discard(str(info.state_dir))  # whatever happens below, no Ray is kept
    clear_faults(info.state_dir)  # first: it restarts a node's stopped SSH server
    prof = load_profile(info.profile_path)

    async def remove_containers() -> None:
        """`docker rm -f` on every node, then each node's `docker inspect` must find none: a
        removal that failed (its exit code was not read) left the next module a container
        of this one's, and a `docker create` there failed on a name conflict."""
        async with SessionPool(prof) as pool:
            async def remove(name: str) -> str | None:
                sess = pool.session(name)
                for _ in range(3):
                    await sess.run([*prof.container.docker, "rm", "-f", prof.container.name], timeout=120)
                    left = await sess.run([*prof.container.docker, "inspect", "--type", "container",
                                           prof.container.name], timeout=60)
                    if left.rc != 0:
                        return None
                    await asyncio.sleep(1)
                return f"{name}: {prof.container.name} still there after 3 docker rm -f"

            kept = [k for k in await asyncio.gather(*(remove(n.name) for n in prof.nodes)) if k]
            assert not kept, f"reset_sim: {kept}"

    def gcs_up() -> bool:
        with socket.socket() as s:
            s.settimeout(5)
            return s.connect_ex((prof.head.address, prof.ray.head_port)) == 0

    async def ray_stop_on_nodes() -> None:
        async with SessionPool(prof) as pool:
            await asyncio.gather(*(pool.session(n.name).run(["ray", "stop", "--force"], timeout=120)
                                   for n in prof.nodes))

    if gcs_up():  # stopped the product's way, through the containers
        _quiet_cli(["stop", "--profile", str(info.profile_path), "--yes", "--cluster"])
    asyncio.run(asyncio.wait_for(remove_containers(), 300))
    if gcs_up():
        asyncio.run(asyncio.wait_for(ray_stop_on_nodes(), 300))
        deadline = time.monotonic() + 30
        while gcs_up():
            assert time.monotonic() < deadline, "reset_sim: Ray's GCS still answers after ray stop --force on every node"
            time.sleep(1)
    clear_run_outputs(prof, info.state_dir, model=True)


def clear_run_outputs(prof: Any, sim_dir: Path, model: bool = False) -> None:
    """Remove a run's checkpoints and TensorBoard files (with `model`, also the model and
    its Megatron checkpoint), where they are the sim's own files: the next job starts a run
    of its own instead of resuming another test's (VeRL resumes from the newest checkpoint
    in its dir, and the console reads the run's TensorBoard dir: a test that waits for its
    job's third step would find the earlier run's)."""
    paths = [prof.paths.checkpoint_dir, prof.paths.tensorboard_dir]
    if model:
        paths += [prof.paths.hf_model, prof.paths.mcore_checkpoint]
    for p in paths:
        path = Path(p)
        if path.resolve().is_relative_to(Path(sim_dir).resolve()):  # the sim's own files only
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def sim_as_up(sim_cluster: SimInfo) -> SimInfo:
    """The session's simulated cluster for a module that reads it as `sim up` left it (no
    container, no Ray, no job) and changes at most what it puts back itself: put back first
    (`reset_sim`, a second or two when nothing is there), so that what another module left,
    whatever order the workers run them in, cannot change a result (`status` found a job
    another module had submitted)."""
    reset_sim(sim_cluster)
    return sim_cluster


@pytest.fixture(scope="module")
def shared_sim(sim_cluster: SimInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimInfo]:
    """The session's simulated cluster (`sim_cluster`: 4 x 8, one per xdist worker) for a
    module that changes it (containers, model, Ray, jobs, faults), instead of a sim of its
    own (issue 37: a `sim up` and `sim down` per module). The module gets its own console
    state dir (RLCONSOLE_STATE_DIR) and RLCONSOLE_SIM_DIR pointing at the sim; when it ends
    the sim is put back as `sim up` left it (`reset_sim`). A module writes its profile
    variants to its own temp dir, never over the sim's profile; what a job needs of the
    sim's environment (e.g. RLCONSOLE_SIM_STEP_S) goes in the variant's `env`."""
    mp = pytest.MonkeyPatch()
    state = tmp_path_factory.mktemp("shared-sim-console")
    mp.setenv("RLCONSOLE_STATE_DIR", str(state / "console"))
    mp.setenv("RLCONSOLE_SIM_DIR", str(sim_cluster.state_dir))
    try:
        yield sim_cluster
    finally:
        try:
            reset_sim(sim_cluster)
        finally:
            mp.undo()


# --------------------------------------------------------------------------- the shared sim, Ray kept up

_RAY_KEPT: set[str] = set()
"""State dirs of this worker's sims that a `ray_sim` module left with Ray up for the next
one (any `reset_sim` takes a sim out)."""


def ray_logs(sim_dir: Path, lines: int = 12) -> str:
    """The last lines of every simulated node's raylet.out, gcs_server.out and (the head's)
    dashboard.log, for the message of a failed Ray bring-up. `ray start` itself says only that a deadline passed
    ("The current node timed out during startup"); what a node that keeps missing it on a
    loaded machine was doing (seen in CI, not understood) is in its raylet's log. The sim
    keeps each node's Ray temp dir in its short dir (Unix socket paths): `<short>/ray/<node>`."""
    from tui.sim.cluster import short_dir

    base = short_dir(Path(sim_dir).resolve())
    found = []
    for log in sorted(base.glob("ray/*/session_latest/logs/*.*")):
        if log.name not in ("raylet.out", "gcs_server.out", "dashboard.log"):
            continue
        try:
            tail = log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        found.append(f"--- {log.relative_to(base)}\n" + "\n".join(tail))
    return "\n".join(found) or f"(no Ray log under {base}/ray)"


def _quiet_cli(args: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    from tui.cli import main as cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = cli(args)
    return rc, out.getvalue()


def _ray_whole(info: SimInfo) -> str | None:
    """None when the sim's Ray has every node and card and no job is active; else what is
    not so (`status --json`, the product's own reading)."""
    import json

    rc, out = _quiet_cli(["status", "--profile", str(info.profile_path), "--json"])
    if rc != 0:
        return f"status exited {rc}: {out[-300:]}"
    doc = json.loads(out)
    ray, job = doc.get("ray") or {}, doc.get("job") or {}
    if ray.get("nodes_alive") != info.nodes or ray.get("gpus_total") != info.gpus:
        return f"Ray has {ray.get('nodes_alive')} nodes, {ray.get('gpus_total')} GPUs"
    if job.get("status") in ("PENDING", "RUNNING"):
        return f"job {job.get('id')} is {job.get('status')}"
    return None


def _ray_tidied(info: SimInfo) -> str | None:
    """Put a kept Ray back for the next module, the product's way: the sim's faults
    cleared (a stopped sshd comes back), every active job stopped, the run's checkpoints
    and TensorBoard files gone (a new run must not resume from another module's), then
    `containers` and `setup-ray` (each a no-op on a whole cluster; after a lost node, the
    container and the missing worker only). None when Ray is whole after it; else why."""
    import asyncio

    from tui.core.actions.jobs import job_client, list_jobs
    from tui.core.profile import load_profile
    from tui.core.ssh import SessionPool
    from tui.core.state import ACTIVE_JOB_STATUSES
    from tui.sim.faults import clear_faults

    clear_faults(info.state_dir)
    prof = load_profile(info.profile_path)
    base = ["--profile", str(info.profile_path)]

    async def active() -> list[str]:
        from tui.core.actions.remote import PoolRemote

        async with SessionPool(prof) as pool:
            remote = PoolRemote(pool, prof)
            return [j.id for j in await list_jobs(await job_client(remote)) if j.status in ACTIVE_JOB_STATUSES]

    for args in (["containers", "--yes"], ["setup-ray", "--yes"]):
        rc, out = _quiet_cli([*args, *base])
        if rc != 0:
            return f"{args[0]} exited {rc}: {out[-300:]}"
    for job in asyncio.run(asyncio.wait_for(active(), 120)):
        rc, out = _quiet_cli(["stop", *base, "--yes", "--job", job])
        if rc != 0:
            return f"stop --job {job} exited {rc}: {out[-300:]}"
    clear_run_outputs(prof, info.state_dir)
    return _ray_whole(info)


@pytest.fixture(scope="module")
def ray_sim(ray_sim_cluster: SimInfo, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[SimInfo]:
    """The `ray_sim` modules' simulated cluster (`ray_sim_cluster`, RAY_SIM_SHAPE) with
    containers, model, Megatron checkpoint and Ray up, for a module that only submits jobs
    on it (issue 37: each such module spent 20-27 s bringing it up and 4 s taking it
    down). When the module before it on this worker was one too, its Ray is kept: tidied
    (`_ray_tidied`: faults cleared, jobs stopped, checkpoints gone, a lost node started
    again) instead of brought up again. Otherwise, or when the tidied Ray is not whole, the
    sim is put back (`reset_sim`) and brought up with the product's chain. Like
    `shared_sim`: the module's own console state dir and RLCONSOLE_SIM_DIR; its profile
    variants in its own temp dir (a variant that must live in the sim's dir, for the
    submit hook that clears the sim's faults, is removed by the module); what a job needs
    in the variant's `env`. A module may find Ray's job list holding earlier modules'
    (stopped) jobs.

    A module whose last test leaves a node that Ray may still list as alive though its
    raylet is dead (Ray marks it dead some 15-30 s later) sets `RAY_LEFT_WHOLE = False`:
    the tidy cannot tell that Ray from a whole one (measured: the next module's job
    failed "Ray sees 24 GPUs, the job wants 32"), so the sim is put back instead."""
    require_dockerd()
    mp = pytest.MonkeyPatch()
    state = tmp_path_factory.mktemp("ray-sim-console")
    mp.setenv("RLCONSOLE_STATE_DIR", str(state / "console"))
    mp.setenv("RLCONSOLE_SIM_DIR", str(ray_sim_cluster.state_dir))
    key = str(ray_sim_cluster.state_dir)
    try:
        why = _ray_tidied(ray_sim_cluster) if key in _RAY_KEPT else "no Ray kept"
        _RAY_KEPT.discard(key)
        print(f"ray_sim: {request.module.__name__}: " + ("Ray kept" if why is None else f"Ray brought up ({why})"),
              file=sys.stderr)
        if why is not None:
            reset_sim(ray_sim_cluster)
            for action in ("containers", "model", "convert", "setup-ray"):
                rc, out = _quiet_cli([action, "--profile", str(ray_sim_cluster.profile_path), "--yes"])
                assert rc == 0, f"{action} failed on the sim: {out[-2000:]}\n{ray_logs(ray_sim_cluster.state_dir)}"
        yield ray_sim_cluster
        passed_on = getattr(request.module, "RAY_LEFT_WHOLE", True)
        why = _ray_tidied(ray_sim_cluster) if passed_on else "RAY_LEFT_WHOLE"
        if why is None:
            _RAY_KEPT.add(key)
        else:
            print(f"ray_sim: {request.module.__name__} left a Ray not passed on ({why}); the sim is put back",
                  file=sys.stderr)
            reset_sim(ray_sim_cluster)
    finally:
        mp.undo()
