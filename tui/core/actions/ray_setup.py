"""`setup-ray` (seed 8.1-8.2) and `stop --cluster`.

The seed starts the nodes one after another over `ssh -o StrictHostKeyChecking=no` and
binds the dashboard to 0.0.0.0. Here: stop everywhere at once, start the head, start
every worker at once, then wait until Ray itself reports every node and every GPU; a
node that did not join is named, with the tail of its `ray start` output. The dashboard
listens on loopback unless the profile explicitly says otherwise.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from dataclasses import replace
from typing import AsyncIterator

from tui.core.actions.base import CmdResult, EventQueue, Remote, gather_nodes
from tui.core.actions.events import ActionEvent
from tui.core.diagnosis import Finding
from tui.core.parsers.raystatus import parse_ray_status
from tui.core.profile import Node, Profile
from tui.core.rayapi import _d, _l, _text, dashboard_connect_host, dashboard_exposed
from tui.core.raypaths import node_temp_dir
from tui.core.state import RayState

NAME = "setup-ray"


def _gpus(profile: Profile, node: Node) -> int:
    return profile.ray.num_gpus or node.gpus


def expected_gpus(profile: Profile) -> int:
    return sum(_gpus(profile, n) for n in profile.nodes)


def gcs_address(profile: Profile) -> str:
    return f"{profile.head.address}:{profile.ray.head_port}"


def head_argv(profile: Profile) -> list[str]:
    r, h = profile.ray, profile.head
    return [r.binary, "start", "--head", f"--node-ip-address={h.address}", f"--port={r.head_port}",
            f"--num-gpus={_gpus(profile, h)}", f"--dashboard-host={r.dashboard_host}",
            f"--dashboard-port={r.dashboard_port}", *r.start_args, *r.head_args, *h.ray_args]


def worker_argv(profile: Profile, node: Node) -> list[str]:
    r = profile.ray
    return [r.binary, "start", f"--address={gcs_address(profile)}", f"--node-ip-address={node.address}",
            f"--num-gpus={_gpus(profile, node)}", *r.start_args, *r.worker_args, *node.ray_args]


def stop_argv(profile: Profile) -> list[str]:
    return [profile.ray.binary, "stop", "--force"]


STATUS_TIMEOUT_S = 60.0
"""How long `ray status` may take on the head before its answer counts as missing."""


async def ray_state(profile: Profile, remote: Remote) -> RayState:
    """Ray as the head sees it: `_look`'s state."""
    return (await _look(profile, remote))[0]


async def _look(profile: Profile, remote: Remote) -> tuple[RayState, set[str] | None]:
    """Ask the head's Ray: the GCS's node table through the dashboard (`api_look`), or
    when the dashboard does not answer, `ray status` (run where Ray runs: in the container).

    When nothing listens on the GCS port, `ray status` retries for most of a minute
    before it gives up: a direct TCP probe through the SSH connection answers first.
    Ray is taken for down only when that probe was refused by the head itself (nothing
    listens). When the port answers, or the probe could not tell (the head's sshd does
    not forward TCP: `AllowTcpForwarding no`; no answer in time), `ray status` is asked;
    if it fails or times out, Ray's state is unknown (`unconfirmed`): a Ray with a job on
    it may well be running, and setup-ray asks before it stops anything.

    With the state comes the GCS's alive set when `_confirmed` read it (else None), so
    that setup-ray, finding workers missing, does not read the node table a second time."""
    gcs = gcs_address(profile)
    probe = getattr(remote, "tcp_probe", None)
    listens: bool | None = None
    if probe is not None:
        listens = await probe(profile.head.name, profile.head.address, profile.ray.head_port)
        if listens is False:
            return RayState(available=False, error=f"nothing listens on {gcs}: Ray is not running"), None
    table = await api_look(profile, remote)
    if table is not None:
        return table
    r = await remote.run(profile.head.name, [profile.ray.binary, "status", f"--address={gcs}"],
                         container=True, timeout=STATUS_TIMEOUT_S)
    if not r.ok:
        why = " ".join((r.tail(1) or f"ray status exited {r.rc}").split())[:300]
        if probe is None:
            return RayState(available=False, error=why), None
        if listens:
            seen = f"something listens on {gcs} but `ray status` did not answer ({why})"
        else:
            seen = (f"{profile.head.name}'s sshd would not connect to {gcs} to see whether Ray listens "
                    f"(TCP forwarding off there? AllowTcpForwarding no), and `ray status` did not answer ({why})")
        return RayState(available=False, error=seen, unconfirmed=True), None
    st = parse_ray_status(r.stdout)
    if cluster_is_right(profile, st):
        return await _confirmed(profile, remote, st)
    return st, None


async def _confirmed(profile: Profile, remote: Remote, st: RayState) -> tuple[RayState, set[str] | None]:
    """`ray status` is the autoscaler's summary, and it lags: for some seconds after a
    node died it still lists that node and counts its GPUs, though the GCS has marked it
    dead (measured on the sim: the dashboard showed node4 lost, `ray status` still said 4
    nodes and 32 GPUs, and setup-ray answered "Ray already up; nothing changed"). So a
    cluster `ray status` calls whole is checked against the GCS's node table (`ray list
    nodes`): a profile node it does not list alive is missing, with its GPUs. When the
    table cannot be read, `ray status` is taken as it is. Returns the table's alive set
    with the state (None when it could not be read)."""
    alive = await _alive_from_cli(profile, remote)  # the dashboard did not answer `_look` just now
    if alive is None:
        return st, None
    gone = [n for n in profile.nodes if n.address not in alive]
    if not gone:
        return st, alive
    return replace(st, nodes_alive=len(profile.nodes) - len(gone),
                   gpus_total=float(sum(_gpus(profile, n) for n in profile.nodes if n not in gone))), alive


API_LOOK_S = 5.0
"""How long one read of the GCS's node table through the dashboard may take before
`ray status` is asked instead: an idle dashboard answers in milliseconds, a loaded one in
a few seconds (the console's Ray poll allows as much)."""

API_SILENT_SKIP_S = 60.0
"""After the dashboard let a read time out, how long the looks through the same `Remote`
go straight to `ray status`: a hung dashboard (its port held by a process that never
answers HTTP) would otherwise add API_LOOK_S to every poll of a join."""

_api_silent_until: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()


async def api_look(profile: Profile, remote: Remote) -> tuple[RayState, set[str]] | None:
    """Ray's state from the GCS's own node table, read through the head's dashboard
    (`/api/v0/nodes`, what `ray list nodes` reads) over the SSH forward, with the alive
    set; None when the dashboard does not answer (not up yet, turned off, the head's sshd
    will not forward, or its answer is not a node table), and `ray status` is asked.

    Why first: `ray status` and `ray list nodes` are each a Python start that imports Ray
    on the head (about a CPU-second, one to three seconds on a loaded head), run once a
    second while setup-ray waits for the workers to join and again by every preflight;
    the dashboard's answer costs the head nearly nothing and is the GCS's table itself,
    not the autoscaler's summary that lags a dead node (`_confirmed`)."""
    if _dashboard_disabled(profile):
        return None
    if _api_silent_until.get(remote, 0.0) > time.monotonic():
        return None
    from tui.core.probes import ray_state_from_api
    from tui.core.rayapi import client_for_url, http_get_json, state_api_rows

    try:
        url = await asyncio.wait_for(remote.dashboard_url(), API_LOOK_S)
        where = client_for_url(url)
        doc = await http_get_json(where.port, "/api/v0/nodes?detail=1", API_LOOK_S, where.host)
    except asyncio.TimeoutError:
        _api_silent_until[remote] = time.monotonic() + API_SILENT_SKIP_S
        return None
    except Exception:  # noqa: BLE001 - any other way of not answering (refused, not HTTP, an
        return None    # error status) is quick: the next look asks again
    if state_api_rows(doc) is None:  # e.g. the dashboard up while its GCS is not
        return None
    # the node table only: its jobs were not read, so it must not pass for the dashboard's
    # whole answer (source "api", whose empty job list means "no job")
    st = replace(ray_state_from_api(doc, {}, []), source="api nodes")
    return st, {n.address for n in st.nodes if n.alive and n.address}


def state_unknown(st: RayState) -> bool:
    """Something listens on Ray's port, but Ray did not say how it is: a job may run."""
    return not st.available and st.unconfirmed


async def alive_addresses(profile: Profile, remote: Remote) -> set[str] | None:
    """Node IPs the GCS reports alive: through the dashboard (`api_look`), else from the
    state API's CLI; None when neither can say."""
    seen = await api_look(profile, remote)
    if seen is not None:
        return seen[1]
    return await _alive_from_cli(profile, remote)


async def _alive_from_cli(profile: Profile, remote: Remote) -> set[str] | None:
    """`ray list nodes` on the head: the GCS's alive node IPs; None when it cannot say."""
    dash = dashboard_connect_host(profile.ray.dashboard_host, profile.head.address)
    r = await remote.run(profile.head.name, [profile.ray.binary, "list", "nodes", "--format=json",
                                             f"--address=http://{dash}:{profile.ray.dashboard_port}"],
                         container=True, timeout=60)
    if not r.ok:
        return None
    try:
        start = r.stdout.index("[")
        doc = json.loads(r.stdout[start:])
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, list):
        return None
    # Rows are remote data: read with the dashboard's any-shape readers (a row that is
    # not an object, or an address that is not text, is left out, never a crash).
    rows = [_d(n) for n in _l(doc)]
    return {ip for ip in (_text(n.get("node_ip"), 100) for n in rows if n.get("state") == "ALIVE") if ip}


DASHBOARD_WAIT_S = 30.0
"""How long a bring-up waits, once Ray reports every node and GPU, for the head's job API
to answer before it calls the bring-up failed."""


DASHBOARD_ANSWER_S = 10.0
"""How long one look at the job list may take: a dashboard that is up answers within a
second, a loaded one within a few."""


def _dashboard_disabled(profile: Profile) -> bool:
    args = [*profile.ray.start_args, *profile.ray.head_args, *profile.head.ray_args]
    return any(a.replace(" ", "") in ("--include-dashboard=false", "--include-dashboard=False") for a in args)


async def dashboard_problem(profile: Profile, remote: Remote) -> str | None:
    """Why the head's job API does not answer (one line), or None when it lists jobs.

    `ray start --head` returns 0 when its dashboard could not start: with the dashboard's
    port held by another process (tried on the sim) the head starts, every node joins,
    `ray status` is whole, and only the job API is missing, which submit, the job list and
    the dashboard's node table all go through (a CI run: "cannot reach Ray's job API on
    node1: no HTTP answer" right after setup-ray said "Ray up"). So Ray counts as set up
    only when the job list answers, through the SSH forward as submit reads it.

    None too when nothing can be told from here: the profile turns the dashboard off, or
    the head's sshd will not forward (`AllowTcpForwarding no`: its direct-tcpip probe is
    refused before it connects): Ray may be perfectly well, and saying otherwise would
    send the user to restart a Ray with a job on it. Nothing listening on the port is a
    problem without asking HTTP."""
    from tui.core.rayapi import client_for_url

    if _dashboard_disabled(profile):
        return None
    probe = getattr(remote, "tcp_probe", None)
    if probe is not None:
        host = dashboard_connect_host(profile.ray.dashboard_host, profile.head.address)
        listens = await probe(profile.head.name, host, profile.ray.dashboard_port)
        if listens is None:
            return None
        if listens is False:
            return "nothing listens on its port"
    try:
        url = await asyncio.wait_for(remote.dashboard_url(), 30)
        await client_for_url(url, timeout=DASHBOARD_ANSWER_S).list_jobs()
    except asyncio.TimeoutError:
        return f"no answer in {DASHBOARD_ANSWER_S:g} s"
    except Exception as e:  # noqa: BLE001 - any failure to reach the job API is the same story
        return next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)[:300]
    return None


def _dashboard_says(profile: Profile, why: str) -> str:
    where = f"{dashboard_connect_host(profile.ray.dashboard_host, profile.head.address)}:{profile.ray.dashboard_port}"
    return (f"the job API on its dashboard ({where}) does not answer ({why}): no job can be submitted. A dashboard "
            f"that could not start (its port held by another process?) leaves `ray start --head` successful; see "
            f"{node_temp_dir(profile, profile.head)}/session_latest/logs/dashboard.log on {profile.head.name}")


async def _running_jobs(remote: Remote) -> list[str]:
    """Ids of PENDING/RUNNING jobs, best effort (empty when the job API does not answer):
    they are named in the question before a stop kills them."""
    from tui.core.actions.jobs import job_client, list_jobs
    from tui.core.state import ACTIVE_JOB_STATUSES

    try:
        client = await asyncio.wait_for(job_client(remote), 30)
        return [j.id for j in await asyncio.wait_for(list_jobs(client), 30) if j.status in ACTIVE_JOB_STATUSES]
    except Exception:  # noqa: BLE001 - no answer: the question still says any job dies
        return []


def cluster_is_right(profile: Profile, st: RayState) -> bool:
    return st.available and st.nodes_alive == len(profile.nodes) and int(st.gpus_total) == expected_gpus(profile)


async def stop_everywhere(profile: Profile, remote: Remote, action: str) -> AsyncIterator[ActionEvent]:
    q = EventQueue()
    failed: list[str] = []

    async def one(n: Node) -> None:
        ok, why = remote.reachable(n.name)
        if not ok:
            failed.append(n.name)
            q.put(ActionEvent(action, "fail", f"unreachable: {why}", node=n.name, status="failed"))
            return
        q.put(ActionEvent(action, "node", "ray stop --force", node=n.name, status="running"))
        r = await remote.run(n.name, stop_argv(profile), container=True, timeout=120)
        if r.ok:
            q.put(ActionEvent(action, "node", "Ray stopped", node=n.name, status="ok"))
        else:
            failed.append(n.name)
            q.put(ActionEvent(action, "fail", f"ray stop exited {r.rc}: {' '.join(r.tail(1).split())}",
                              node=n.name, status="failed"))

    async for ev in q.drain_while(gather_nodes(profile.nodes, one)):
        yield ev
    if failed:
        yield ActionEvent(action, "warn", f"ray stop failed on {', '.join(sorted(failed))}")


async def setup_ray(profile: Profile, remote: Remote, stop_first: bool | None = None,
                    poll_s: float = 1.0, stop_confirmed: bool = False) -> AsyncIterator[ActionEvent]:
    """Bring Ray to what the profile wants. Stopping a Ray that is up (which kills any
    job on it) needs `stop_confirmed`: without it the action ends with a "fail" whose
    `data["confirm"]` is the question to ask (the console asks and runs it again; the
    headless CLI passes it after its y/N prompt or --yes).

    The steps, each its own function below: look at Ray as it is; then either start only
    the workers missing from a running cluster (`_missing_workers`), or stop everywhere
    and start the head (`_fresh_head`); start the workers at once (`_start_workers`);
    wait until Ray reports every node and GPU (`_wait_for_join`)."""
    want_nodes, want_gpus = len(profile.nodes), expected_gpus(profile)
    yield ActionEvent(NAME, "start", f"Ray on {want_nodes} nodes, {want_gpus} GPUs, head {profile.head.name}")
    if dashboard_exposed(profile.ray.dashboard_host):
        yield ActionEvent(NAME, "warn", f"the dashboard will listen on {profile.ray.dashboard_host}: anyone who "
                                        f"reaches port {profile.ray.dashboard_port} can submit jobs (no authentication)")
    st, alive = await _look(profile, remote)
    if cluster_is_right(profile, st):
        why = await dashboard_problem(profile, remote)
        if why is not None:
            yield ActionEvent(NAME, "fail", f"Ray is up on every node ({st.nodes_alive} nodes, {st.gpus_total:g} GPUs), "
                                            f"but {_dashboard_says(profile, why)}. Stop Ray (stop --cluster) and set it "
                                            "up again")
            return
        yield ActionEvent(NAME, "skip", f"Ray already up: {st.nodes_alive} nodes, {st.gpus_total:g} GPUs; nothing changed")
        return
    to_start = await _missing_workers(profile, remote, st, alive)
    outputs: dict[str, CmdResult] = {}
    if to_start:
        yield ActionEvent(NAME, "step", f"Ray is up on {st.nodes_alive}/{want_nodes} nodes; starting only "
                                        f"{', '.join(n.name for n in to_start)}")
        for n in profile.nodes:
            if n not in to_start:
                yield ActionEvent(NAME, "node", "already in the cluster", node=n.name, status="skipped")
        for n in to_start:  # a half-started raylet would refuse a second `ray start`
            await remote.run(n.name, stop_argv(profile), container=True, timeout=120)
    else:
        to_start = list(profile.workers)
        head_up: list[bool] = []
        async for ev in _fresh_head(profile, remote, st, stop_first, stop_confirmed, head_up, outputs):
            yield ev
        if not head_up:
            return
    async for ev in _start_workers(profile, remote, to_start, outputs):
        yield ev
    async for ev in _wait_for_join(profile, remote, to_start, outputs, poll_s):
        yield ev


async def _missing_workers(profile: Profile, remote: Remote, st: RayState,
                           alive: set[str] | None = None) -> list[Node]:
    """When Ray is up on the head but some workers are missing (one failed to start, or
    dropped out): those workers, to start without touching the nodes that are fine.
    Empty when the cluster must be set up from the start. `alive` is the GCS's alive set
    when `_look` already read it; else (the dashboard did not answer `_look`) it is read
    here with `ray list nodes`."""
    if not (st.available and 0 < st.nodes_alive < len(profile.nodes)):
        return []
    if alive is None:
        alive = await _alive_from_cli(profile, remote)
    if alive is None or profile.head.address not in alive:
        return []
    return [n for n in profile.workers if n.address not in alive]


async def _stop_question(profile: Profile, remote: Remote, st: RayState) -> tuple[str, list[str]] | None:
    """What to ask before `ray stop --force` everywhere, with the running job ids it
    names; None when nothing may be running (nothing listens on Ray's port). A Ray whose
    state is unknown (its port answers or cannot be probed, `ray status` did not answer)
    counts as running."""
    want_nodes, want_gpus = len(profile.nodes), expected_gpus(profile)
    if not (st.available or state_unknown(st)):
        return None
    jobs = await _running_jobs(remote)
    what = f"job {', '.join(jobs)} is running and would be killed" if jobs else "any job on it dies"
    if st.available:
        seen = (f"Ray is up ({st.nodes_alive}/{want_nodes} nodes, {st.gpus_total:g}/{want_gpus} GPUs), not as "
                f"the profile wants.")
    else:
        seen = f"Ray's state is unknown: {st.error}; a job may be running."
    return (f"{seen} Setting it up again runs `ray stop --force` on all {want_nodes} nodes: {what}.", jobs)


async def stop_question(profile: Profile, remote: Remote, stop_first: bool | None = None) -> str | None:
    """The question setup-ray would stop short with, asked before it runs (the headless
    CLI's prompt or refusal names it): None when setup-ray would not stop a Ray that may
    be running (Ray is down, already right, only workers are missing, or --no-stop)."""
    stop_first = profile.ray.stop_before_start if stop_first is None else stop_first
    if not stop_first:
        return None
    st, alive = await _look(profile, remote)
    if cluster_is_right(profile, st) or await _missing_workers(profile, remote, st, alive):
        return None
    asked = await _stop_question(profile, remote, st)
    return asked[0] if asked else None


START_TIMEOUTS = ("Deadline Exceeded", "node registration may not be complete",
                  "The current node timed out during startup")
"""What `ray start` prints (head or worker) when one of Ray's own start-up deadlines
passed: a loaded machine, not a wrong profile, so one more start is worth it."""


def start_timed_out(output: str) -> bool:
    return any(s in output for s in START_TIMEOUTS)


RAYLET_LOG_LINES = 200
"""Lines of a node's raylet log read after its `ray start` timed out: a raylet that died
at start ends its log with the reason and a stack trace."""


async def raylet_cause(profile: Profile, remote: Remote, node: Node) -> Finding | None:
    """Why a node's raylet never registered, when its own log names a cause.

    `ray start` says only that Ray's start-up deadline passed ("The current node timed
    out during startup"), whatever the raylet died of. On a loaded machine the log names
    nothing and one more start is worth it; but a raylet that could not listen on its port
    (another process holds it: ray-project/ray #23152; two simulated clusters that drew
    the same port, in this project's CI) dies at once, on every retry, while the user
    waits 30 s a try and then reads "timed out". So the tail of the node's newest raylet
    log is read and diagnosed with the catalog; a known cause is returned (an error no
    entry knows, or Ray's own start-up timeout, is not: they say nothing `ray start` did
    not). Newest: a raylet started again in the same session (a worker rejoining a head
    that stayed up) writes `raylet.1.out`, and `raylet.out` is the last one's. The log is
    node output: read bounded (`tail`, the session's output cap), shown only through the
    finding's title and fix; the directory reaches the shell as an argument, not as code."""
    logs = f"{node_temp_dir(profile, node)}/session_latest/logs"
    newest = ('cd "$1" 2>/dev/null && f=$(ls -t raylet*.out 2>/dev/null | head -n 1) && [ -n "$f" ] && '
              f'tail -q -n {RAYLET_LOG_LINES} "$f" "${{f%.out}}.err" 2>/dev/null; exit 0')
    r = await remote.run(node.name, ["sh", "-c", newest, "sh", logs], container=True, timeout=30)
    return _known_cause(r.stdout)


def output_cause(res: CmdResult) -> Finding | None:
    """A known cause in a successful `ray start`'s own output: it exits 0 when only its
    dashboard failed ("Failed to bind to <addr> because it's already occupied", logged
    as an ERROR), and the head is up without the job API."""
    return _known_cause(res.stdout + "\n" + res.stderr)


def _known_cause(text: str) -> Finding | None:
    """The catalog's cause in `text` (the console's one verdict, `alerts.diagnose_tail_finding`),
    when it names one: an error no entry knows, a warning, or Ray's own start-up timeout
    say nothing the caller did not know."""
    from tui.core.alerts import diagnose_tail_finding

    found = diagnose_tail_finding(text.splitlines(), 0) if text.strip() else None
    if found is None or found.unrecognised or found.signature.level != "error" \
            or found.signature.klass == "ray-node-startup-timeout":
        return None
    return found


def _with_cause(res: CmdResult, cause: Finding, where: str = "its raylet's log") -> CmdResult:
    """`res` with the cause as its last line (`where: title`): the failure message quotes it."""
    return CmdResult(res.rc, res.stdout, f"{res.stderr}\n{where}: {cause.title}".strip())


def _cause_event(node: Node, what: str, cause: Finding) -> ActionEvent:
    return ActionEvent(NAME, "node", f"{what} timed out, and its raylet's log says why: {cause.title}; not "
                                     f"started again (it would fail alike). {cause.fix}",
                       node=node.name, status="failed", data={"diagnosis": cause.signature.id})


async def _fresh_head(profile: Profile, remote: Remote, st: RayState, stop_first: bool | None,
                      stop_confirmed: bool, head_up: list[bool],
                      outputs: dict[str, CmdResult] | None = None) -> AsyncIterator[ActionEvent]:
    """Stop Ray everywhere (only with confirmation when it is up or its state is
    unknown) and start the head; `head_up` gets True once the head started (else the
    action ends: its last event says why; a node's failed `ray stop` is only a warning)."""
    stop_first = profile.ray.stop_before_start if stop_first is None else stop_first
    if stop_first and not stop_confirmed:
        asked = await _stop_question(profile, remote, st)
        if asked is not None:
            question, jobs = asked
            what = "a Ray whose state is unknown" if state_unknown(st) else "a running Ray"
            yield ActionEvent(NAME, "fail", f"not stopping {what} without confirmation: {question}",
                              data={"confirm": question, "running_jobs": jobs, "state_unknown": state_unknown(st)})
            return
    if stop_first:
        yield ActionEvent(NAME, "step", "stopping Ray on every node")
        async for ev in stop_everywhere(profile, remote, NAME):
            yield ev
    head = profile.head
    yield ActionEvent(NAME, "node", "starting head", node=head.name, status="running")
    r = await remote.run(head.name, head_argv(profile), container=True, timeout=180)
    cause = await raylet_cause(profile, remote, head) if not r.ok and start_timed_out(r.stdout + r.stderr) else None
    if cause is not None:
        r = _with_cause(r, cause)
        yield _cause_event(head, "the head's start", cause)
    elif not r.ok and start_timed_out(r.stdout + r.stderr):
        # Ray's own start-up deadlines (the GCS, the raylet registering with it) are
        # missed on a loaded head; the seed's answer is to stop and start again: once.
        yield ActionEvent(NAME, "node", f"head start timed out ({r.tail(1)}); stopping and starting it once more",
                          node=head.name, status="running")
        await remote.run(head.name, stop_argv(profile), container=True, timeout=120)
        r = await remote.run(head.name, head_argv(profile), container=True, timeout=180)
    if not r.ok:
        yield ActionEvent(NAME, "node", "head failed", node=head.name, status="failed")
        yield ActionEvent(NAME, "fail", f"ray start --head exited {r.rc}: {r.tail(3)}", node=head.name)
        return
    head_up.append(True)
    yield ActionEvent(NAME, "node", "head started", node=head.name, status="ok")
    said = output_cause(r)
    if said is not None:  # e.g. its dashboard could not listen: `ray start` goes on without it
        if outputs is not None:  # the dashboard's failure, at the end, quotes it
            outputs[head.name] = _with_cause(r, said, "its ray start")
        yield ActionEvent(NAME, "warn", f"the head started, but its ray start said: {said.title}", node=head.name,
                          data={"diagnosis": said.signature.id})


WORKER_START_RETRIES = 2
"""More starts for a worker whose `ray start` missed Ray's own start-up deadline."""


async def _start_workers(profile: Profile, remote: Remote, to_start: list[Node],
                         outputs: dict[str, CmdResult]) -> AsyncIterator[ActionEvent]:
    """`ray start` on every worker at once; each one's result lands in `outputs`.

    A worker whose start missed Ray's own start-up deadline (its raylet did not register
    within the 30 s Ray gives it: a loaded node or a GCS busy with every other worker
    registering at once) is not in the cluster, so stopping Ray on it touches nothing
    else: it is stopped and started again, up to WORKER_START_RETRIES times, once the
    other workers' starts are over and one node at a time. Retried at once, inside the
    burst that made it miss the deadline, it missed it again (twice in a row in CI, two
    simulated clusters starting on two shared cores). A worker whose raylet's log names
    why it died (`raylet_cause`: a port another process holds) is not started again: it
    would die alike; the cause is its failure."""
    q = EventQueue()
    timed_out: list[Node] = []

    def told(n: Node, res: CmdResult) -> None:
        outputs[n.name] = res
        if res.ok:
            q.put(ActionEvent(NAME, "node", "worker started; joining", node=n.name, status="running"))
        else:
            q.put(ActionEvent(NAME, "node", f"ray start exited {res.rc}", node=n.name, status="failed"))

    async def start_worker(n: Node) -> None:
        ok, why = remote.reachable(n.name)
        if not ok:
            outputs[n.name] = CmdResult(255, "", f"unreachable: {why}")
            q.put(ActionEvent(NAME, "node", f"unreachable: {why}", node=n.name, status="failed"))
            return
        q.put(ActionEvent(NAME, "node", "starting worker", node=n.name, status="running"))
        res = await remote.run(n.name, worker_argv(profile, n), container=True, timeout=180)
        cause = await raylet_cause(profile, remote, n) if not res.ok and start_timed_out(res.stdout + res.stderr) \
            else None
        if cause is not None:
            outputs[n.name] = _with_cause(res, cause)
            q.put(_cause_event(n, "ray start", cause))
            return
        if not res.ok and start_timed_out(res.stdout + res.stderr):
            outputs[n.name] = res
            timed_out.append(n)
            q.put(ActionEvent(NAME, "node", f"worker start timed out ({res.tail(1)}); stopping and starting it "
                                            "once more when the other starts are over", node=n.name,
                              status="running"))
            return
        told(n, res)

    async def retry_timed_out() -> None:
        await gather_nodes(to_start, start_worker)
        for n in list(timed_out):
            res = outputs[n.name]
            for attempt in range(1, WORKER_START_RETRIES + 1):
                q.put(ActionEvent(NAME, "node", f"starting again ({attempt}/{WORKER_START_RETRIES})",
                                  node=n.name, status="running"))
                await remote.run(n.name, stop_argv(profile), container=True, timeout=120)
                res = await remote.run(n.name, worker_argv(profile, n), container=True, timeout=180)
                if res.ok or not start_timed_out(res.stdout + res.stderr):
                    break
            told(n, res)

    async for ev in q.drain_while(retry_timed_out()):
        yield ev


async def _wait_for_join(profile: Profile, remote: Remote, to_start: list[Node], outputs: dict[str, CmdResult],
                         poll_s: float) -> AsyncIterator[ActionEvent]:
    """Poll Ray until it reports every node and GPU; on the join timeout (or once every
    worker whose start did not fail has joined) name the nodes that did not join."""
    want_nodes, want_gpus = len(profile.nodes), expected_gpus(profile)
    yield ActionEvent(NAME, "step", f"waiting for {want_nodes} nodes and {want_gpus} GPUs")
    started = time.monotonic()
    deadline = started + profile.ray.join_timeout_s
    last = (-1, -1.0)
    while True:
        st = await ray_state(profile, remote)
        if (st.nodes_alive, st.gpus_total) != last:
            last = (st.nodes_alive, st.gpus_total)
            yield ActionEvent(NAME, "step", f"Ray reports {st.nodes_alive}/{want_nodes} nodes, "
                                            f"{st.gpus_total:g}/{want_gpus} GPUs", data={"nodes": st.nodes_alive})
        if cluster_is_right(profile, st):
            break
        failed_start = [n for n, res in outputs.items() if not res.ok]
        # Workers whose `ray start` failed will not join: once all the others have, stop
        # waiting (after a short grace) instead of sitting out the whole timeout.
        gave_up = failed_start and st.nodes_alive >= want_nodes - len(failed_start) and time.monotonic() - started > 5
        if time.monotonic() > deadline or gave_up:
            async for ev in _not_joined(profile, remote, st, outputs):
                yield ev
            return
        await asyncio.sleep(poll_s)
    for n in to_start:
        yield ActionEvent(NAME, "node", "joined", node=n.name, status="ok")
    why = await dashboard_problem(profile, remote)
    if why is not None:
        yield ActionEvent(NAME, "step", f"every node joined; waiting for the job API on the dashboard ({why})")
        deadline = time.monotonic() + DASHBOARD_WAIT_S
        while why is not None and time.monotonic() < deadline:
            await asyncio.sleep(max(poll_s, 1.0))
            why = await dashboard_problem(profile, remote)
    if why is not None:
        head_said = outputs.get(profile.head.name)  # there only when its ray start named a cause
        cause = f"; the head's {head_said.tail(1)}" if head_said is not None else ""
        yield ActionEvent(NAME, "fail", f"Ray is up ({st.nodes_alive} nodes, {st.gpus_total:g} GPUs), but "
                                        f"{_dashboard_says(profile, why)}{cause}")
        return
    yield ActionEvent(NAME, "done", f"Ray up: {st.nodes_alive} nodes, {st.gpus_total:g} GPUs "
                                    f"(dashboard {profile.ray.dashboard_host}:{profile.ray.dashboard_port})")


async def _not_joined(profile: Profile, remote: Remote, st: RayState,
                      outputs: dict[str, CmdResult]) -> AsyncIterator[ActionEvent]:
    """The failure: which nodes did not join, with the tail of their `ray start`."""
    want_nodes, want_gpus = len(profile.nodes), expected_gpus(profile)
    alive = await alive_addresses(profile, remote)
    if alive is not None:
        missing = [n for n in profile.nodes if n.address not in alive]
    else:
        missing = [n for n in profile.workers if not outputs.get(n.name, CmdResult(0, "")).ok] or profile.workers
    for n in missing:
        res = outputs.get(n.name)
        yield ActionEvent(NAME, "node", "did not join", node=n.name, status="failed",
                          data={"tail": res.tail(5) if res else ""})
    names = ", ".join(n.name for n in missing) or "?"
    tails = "; ".join(f"{n.name}: {' '.join(outputs[n.name].tail(2).split())}" for n in missing
                      if n.name in outputs and outputs[n.name].output)
    yield ActionEvent(NAME, "fail", f"{st.nodes_alive}/{want_nodes} nodes, {st.gpus_total:g}/{want_gpus} GPUs "
                                    f"after waiting; did not join: {names}" + (f" -- {tails}" if tails else ""))


async def stop_cluster(profile: Profile, remote: Remote) -> AsyncIterator[ActionEvent]:
    yield ActionEvent("stop", "step", "ray stop --force on every node")
    st = await ray_state(profile, remote)
    async for ev in stop_everywhere(profile, remote, "stop"):
        yield ev
    after = await ray_state(profile, remote)
    if after.available and after.nodes_alive:
        yield ActionEvent("stop", "fail", f"Ray still reports {after.nodes_alive} nodes alive")
        return
    yield ActionEvent("stop", "done" if st.available else "skip",
                      "Ray stopped on every node" if st.available else "Ray was not running; nothing to stop")
