"""`StaticBackend`: the `Backend` protocol (tui/backend/base.py) over fixed data.

The demo's data, the snapshot and Pilot tests, the README screenshot and the benchmarks
read it: every value comes from a formula, never a clock or a random generator, so a
screen drawn from it is the same on every machine.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterable

from tui.backend.base import AlertCallback, LogCallback, MetricsCallback, Series, StateCallback
from tui.core.actions.events import ActionEvent
from tui.core.alerts import Alert
from tui.core.job.journal import Entry
from tui.core.job.metrics import MetricsSummary, monitoring_ranges
from tui.core.job.runs import RunSummary
from tui.core.profile import Node, Profile, SshEndpoint
from tui.core.state import (
    ClusterState,
    ContainerState,
    GpuCard,
    GpuProcess,
    GpuReport,
    JobState,
    JobStatus,
    NodeState,
    RayJobState,
    RayNodeState,
    RayState,
)

if TYPE_CHECKING:  # the preflight's modules load on first use, not with the app
    from tui.core.actions.plan import SubmitPlan
    from tui.core.checks import CheckResult

# --------------------------------------------------------------------------- demo data

T0 = 1_750_000_000.0
"""Fixed epoch for every timestamp in demo data: nothing rendered may read a clock."""

JOB_ID = "raysubmit_8Hk2xQ4vTnB1"


def demo_profile(nodes: int = 4, gpus: int = 8) -> Profile:
    """The packaged seed profile (4 x 8), reshaped to `nodes` x `gpus` for benchmarks.
    Using the real profile keeps names, ranges and paths honest in screenshots; the
    addresses are loopback ones, as the simulated cluster's are, so that demo data can
    never lead anything to the real cluster's addresses."""
    from tui.core.profile import load_profile, packaged_profiles_dir

    prof = load_profile(packaged_profiles_dir() / "qwen3-8b-grpo-32gpu.yaml")
    new: list[Node] = []
    for i in range(nodes):
        base = prof.nodes[i] if i < len(prof.nodes) else None
        name = base.name if base else f"node{200 + i}"
        addr = f"127.0.{(i + 2) // 250}.{(i + 2) % 250}"
        new.append(Node(name=name, address=addr, gpus=gpus, role="head" if i == 0 else "worker",
                        ssh=SshEndpoint(host=addr)))
    return replace(prof, nodes=new)


def _card(node_i: int, j: int, step: int, busy: bool = True) -> GpuCard:
    """A deterministic, plausible card: values from a formula, not a random generator."""
    k = node_i * 8 + j
    if not busy:
        return GpuCard(index=j, name="MTT S5000", util_pct=0.0, mem_used_mib=0.0,
                       mem_total_mib=81920.0, temp_c=38.0 + (k % 5), power_w=62.0 + (k % 7))
    phase = math.sin((step + k * 3) / 5.0)
    util = 72 + 20 * phase
    mem = 58_000 + (k * 997) % 9_000
    temp = 63 + (k * 7) % 12 + 4 * phase
    power = 380 + (k * 13) % 90
    # What a VeRL colocated worker looks like on a card: the Ray worker and its SGLang
    # scheduler share it (the drill-down screen lists them).
    procs = [GpuProcess(pid=50_000 + k * 10, name="ray::WorkerDict.actor_rollout_generate", mem_used_mib=float(mem - 9_000)),
             GpuProcess(pid=50_001 + k * 10, name="sglang::scheduler", mem_used_mib=9_000.0)]
    return GpuCard(index=j, name="MTT S5000", util_pct=round(util), mem_used_mib=float(mem),
                   mem_total_mib=81920.0, temp_c=round(temp), power_w=float(power), processes=procs)


def demo_state(profile: Profile, step: int = 812, down: Iterable[str] = (),
               job_status: str | None = JobStatus.RUNNING, busy: bool = True) -> ClusterState:
    """A ClusterState for `profile`: every node up and running the job, except `down`.
    Node 1 card 3 runs hot and node 2 card 5 has its memory nearly full, so the trouble
    colours show in screenshots."""
    down = set(down)
    nodes: list[NodeState] = []
    ray_nodes: list[RayNodeState] = []
    for i, n in enumerate(profile.nodes):
        if n.name in down:
            nodes.append(NodeState(name=n.name, address=n.address, role=n.role, reachable=False,
                                   error="ssh: connection timed out",
                                   container=ContainerState(name=profile.container.name, status="unknown"),
                                   gpu=None, updated_at=T0))
            ray_nodes.append(RayNodeState(node_id=f"{i:02x}" * 4, address=n.address, alive=False,
                                          gpus_total=float(n.gpus), is_head=n.is_head))
            continue
        cards = [_card(i, j, step, busy) for j in range(n.gpus)]
        if busy and i == 1 and n.gpus > 3:
            cards[3].temp_c = 88.0
        if busy and i == 2 and n.gpus > 5:
            cards[5].mem_used_mib = 79_200.0
        nodes.append(NodeState(
            name=n.name, address=n.address, role=n.role, reachable=True,
            container=ContainerState(name=profile.container.name, status="running",
                                     image=profile.container.image),
            gpu=GpuReport(tool=profile.gpu_tool, cards=cards, simulated=True), updated_at=T0))
        ray_nodes.append(RayNodeState(node_id=f"{i:02x}" * 4, address=n.address, alive=True,
                                      gpus_total=float(n.gpus),
                                      gpus_used=float(n.gpus) if job_status == JobStatus.RUNNING else 0.0,
                                      is_head=n.is_head))
    alive = [r for r in ray_nodes if r.alive]
    jobs = [RayJobState(id="raysubmit_Zt9mW0aLq3Pc", status=JobStatus.FAILED, start_time=T0 - 86_400,
                        end_time=T0 - 80_000, message="RuntimeError: Parent directory /mnt/... does not exist.")]
    job = None
    if job_status:
        jobs.append(RayJobState(id=JOB_ID, status=JobStatus.of(job_status), start_time=T0 - 50_000,
                                entrypoint="python3 -u -m verl.trainer.main_ppo"))
        job = JobState(id=JOB_ID, status=JobStatus.of(job_status), step=step,
                       total_steps=profile.monitoring.total_steps, last_checkpoint=(step // 100) * 100)
    ray = RayState(available=True, nodes_alive=len(alive), nodes_dead=len(ray_nodes) - len(alive),
                   gpus_total=sum(r.gpus_total for r in alive),
                   gpus_used=sum(r.gpus_used for r in alive), nodes=ray_nodes, jobs=jobs, source="api")
    return ClusterState(profile=profile.name, simulated=profile.simulated, nodes=nodes, ray=ray,
                        job=job, taken_at=T0)


def demo_log(step: int = 812, count: int = 40) -> list[str]:
    """VeRL-looking driver log lines ending at `step`, as Ray prints them."""
    out: list[str] = ["(TaskRunner pid=48211) Total training steps: 2710"]
    first = max(1, step - count // 4 + 1)
    for s in range(first, step + 1):
        r = 0.30 + 0.12 * math.tanh(s / 600)
        out.append(f"(TaskRunner pid=48211) step:{s} - actor/pg_loss:{0.0195 - s * 1e-6:.4f} - "
                   f"actor/entropy:{0.41 - s * 1e-5:.4f} - critic/score/mean:{r:.4f} - "
                   f"response_length/mean:{4800 + (s * 37) % 700:.1f} - perf/mfu/actor:{0.31:.4f} - "
                   f"perf/throughput:{92.0 + (s % 7):.2f} - timing_s/step:{1032.0 + (s % 11) * 3:.1f}")
        out.append(f"(WorkerDict pid=5{s % 10}77, ip=127.0.0.3) [rollout] sglang: generated 512 "
                   f"sequences, max len {15000 + (s * 91) % 1300}")
        out.append(f"Training Progress:  {100 * s // 2710}%|###       | {s}/2710 [{s // 4}:00:00<452:00:00]")
    return out


def demo_metrics(profile: Profile, step: int = 812) -> tuple[MetricsSummary, Series]:
    """A summary and three series up to `step`, smooth and deterministic."""
    steps = list(range(max(1, step - 239), step + 1))
    reward = [(s, round(0.30 + 0.12 * math.tanh(s / 600) + 0.01 * math.sin(s / 3), 4)) for s in steps]
    tput = [(s, round(742 + 40 * math.sin(s / 9), 1)) for s in steps]
    rlen = [(s, round(4800.0 + (s * 37) % 700, 1)) for s in steps]
    total = profile.monitoring.total_steps or 2710
    step_time = 1032.0
    gpn = profile.nodes[0].gpus if profile.nodes else 8
    summary = MetricsSummary.judge(
        monitoring_ranges(profile.monitoring),
        job_id=JOB_ID, status=JobStatus.RUNNING, on_cluster=True, step=step, total_steps=total,
        step_time_s=step_time, eta_s=(total - step) * step_time, throughput_per_node=tput[-1][1],
        throughput_per_gpu=round(tput[-1][1] / gpn, 1), reward=reward[-1][1], reward_trend="rising",
        mfu_pct=31.4, response_length=rlen[-1][1], last_checkpoint=(step // 100) * 100)
    return summary, {"reward": reward, "throughput": tput, "response_length": rlen}


def demo_alerts(profile: Profile | None = None, step: int = 812) -> list[Alert]:
    """The demo's alerts: the live rule set (tui/core/alerts.py) fed the demo states and
    metrics, never a hand-written list, so the demo only shows what the live path raises."""
    from tui.core.alerts import AlertRules

    profile = profile or demo_profile()
    rules = AlertRules.for_profile(profile)
    out: list[Alert] = []
    for s in range(step - 10, step + 1):
        st = demo_state(profile, s)
        out += rules.observe_state(st, now=T0)
        out += rules.observe_job(st.job, demo_metrics(profile, s)[0], now=T0)
    return out


def demo_runs(profile: Profile, step: int = 812) -> list[RunSummary]:
    """The demo's run list: a first run that failed, the one running now resumed from its
    checkpoint (what `runs` shows for a team's second try)."""
    cards = profile.total_gpus
    first = RunSummary(id="raysubmit_demo0001", name="qwen3-8b-grpo", profile=profile.name, status="FAILED",
                       step=412, total_steps=1000, started_at=T0 - 40 * 3600, ended_at=T0 - 8 * 3600,
                       wall_s=32 * 3600.0, cards=cards, gpu_hours=round(cards * 31.5, 2), last_reward=0.41,
                       best_reward=0.44, mean_throughput=812.0, last_checkpoint=400, diagnosis="nccl-timeout")
    second = RunSummary(id="raysubmit_demo0002", name="qwen3-8b-grpo", profile=profile.name, status="RUNNING",
                        step=step, total_steps=1000, started_at=T0 - 6 * 3600, wall_s=6 * 3600.0, cards=cards,
                        gpu_hours=round(cards * 5.9, 2), last_reward=0.62, best_reward=0.63, mean_throughput=845.0,
                        last_checkpoint=(step // 100) * 100, parent={"job_id": first.id, "step": 400},
                        unknown=["ended_at"])
    return [first, second]


def demo_journal(profile: Profile, step: int = 812) -> list[Entry]:
    """The demo run's journal: its submit (resuming the first run), states, a checkpoint,
    and the node episode the demo's alerts show."""
    from tui.core.job.journal import action_entry, checkpoint_entry, state_entry

    t = T0 - 6 * 3600
    return [action_entry("submit", "console", t, "done",
                         "submitted raysubmit_demo0002, resuming step 400 of raysubmit_demo0001"),
            state_entry("PENDING", None, "console", at=t + 1), state_entry("RUNNING", 400, "console", at=t + 90),
            checkpoint_entry((step // 100) * 100, "watch", at=T0 - 1800)]


# --------------------------------------------------------------------------- static backend


@dataclass
class StaticBackend:
    """A backend over fixed data: the screen shows exactly what it is given.

    Tests change the world with `push_state`, `push_log`, `push_metrics` and
    `push_alert`, and read `calls` to see which actions ran. `action_delay` spaces the
    fake action events (0 in tests); `action_gate`, when set, makes every action wait for
    it after its first event so a test can observe an action that is still running.
    """

    profile: Profile
    state: ClusterState
    log_lines: list[str] = field(default_factory=list)
    summary: MetricsSummary | None = None
    series: Series = field(default_factory=dict)
    alerts: list[Alert] = field(default_factory=list)
    simulated: bool = True
    frame_pace_s: float = 0.0
    """Fixed data: each push is drawn at once (tests see it without waiting)."""
    action_delay: float = 0.0
    action_gate: asyncio.Event | None = None
    convert_exists: str | None = None
    check_results: list[CheckResult] | None = None
    """The preflight's results (`p`, and the plan `s` shows); None: `demo_checks()`."""
    warmup: list[ClusterState] = field(default_factory=list)
    """States delivered before `state` at start, so per-card sparklines have a history."""
    run_list: list[RunSummary] = field(default_factory=list)
    """What `runs()` answers (the `R` view); `demo_backend` fills it with `demo_runs`."""
    journal_entries: list[Entry] = field(default_factory=list)
    """What `journal()` answers (the alert list's whole-run view)."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    started: bool = False
    rules: Any = None
    """An AlertRules: when set, every pushed state and metrics go through it, as the
    live backend's do (the demo's alerts then come from the same rules)."""
    _state_cbs: list[StateCallback] = field(default_factory=list)
    _log_cbs: list[LogCallback] = field(default_factory=list)
    _metrics_cbs: list[MetricsCallback] = field(default_factory=list)
    _alert_cbs: list[AlertCallback] = field(default_factory=list)
    _all_lines: list[str] = field(default_factory=list)

    # -- lifecycle
    async def start(self) -> None:
        """Deliver the fixed data once, as a live backend's first round would."""
        self.started = True
        for st in self.warmup:
            for cb in self._state_cbs:
                cb(st)
        self.push_state(self.state)
        if self.log_lines:
            self.push_log(self.log_lines)
        if self.summary is not None or self.series:
            self.push_metrics(self.summary or MetricsSummary(), self.series)
        for a in self.alerts:
            self._emit_alert(a)

    async def stop(self) -> None:
        self.started = False

    # -- subscriptions
    def subscribe_state(self, cb: StateCallback) -> None:
        self._state_cbs.append(cb)

    def subscribe_log(self, cb: LogCallback) -> None:
        self._log_cbs.append(cb)

    def subscribe_log_restart(self, cb: Any) -> None:
        """Fixed data is one job's log: it never restarts."""

    def subscribe_metrics(self, cb: MetricsCallback) -> None:
        self._metrics_cbs.append(cb)

    def subscribe_alerts(self, cb: AlertCallback) -> None:
        self._alert_cbs.append(cb)

    # -- test/bench hooks: change the world
    def push_state(self, state: ClusterState) -> None:
        self.state = state
        for cb in self._state_cbs:
            cb(state)
        if self.rules is not None:
            for a in self.rules.observe_state(state, now=state.taken_at) + \
                    self.rules.observe_job(state.job, self.summary, now=state.taken_at):
                self._emit_alert(a)

    def push_log(self, lines: list[str]) -> None:
        self._all_lines.extend(lines)
        for cb in self._log_cbs:
            cb(list(lines))

    def runs(self) -> list[RunSummary]:
        return list(self.run_list)

    def run_series(self, job_id: str, keys: list[str]) -> list[tuple[int, float]]:
        """The demo runs' curves: the first run's (steps 1..412, formula-made) and the
        running one's (its series, stitched onto the first run's by step)."""
        from tui.core.job.compare import stitched_series

        own = {r.id: r for r in self.run_list}
        mine = self.all_series()

        def load(jid: str) -> dict[int, dict[str, float]]:
            r = own.get(jid)
            if r is None:
                return {}
            if r.parent is None:  # the first run: a slower climb, stopped at its last step
                scale = {k: sum(v for _, v in mine[k]) / len(mine[k]) / 0.4 for k in keys if mine.get(k)}
                return {s: {k: round(f * (0.26 + 0.1 * math.tanh(s / 300) + 0.012 * math.cos(s / 4)), 4)
                            for k, f in scale.items()} for s in range(1, (r.step or 0) + 1)}
            steps: dict[int, dict[str, float]] = {}
            for k in keys:
                for s, v in mine.get(k, []):
                    steps.setdefault(s, {})[k] = v
            return steps

        def parent_of(jid: str) -> str | None:
            r = own.get(jid)
            p = r.parent.get("job_id") if r is not None and r.parent else None
            return p if isinstance(p, str) else None

        return stitched_series(job_id, keys, parent_of, load)

    def journal(self) -> list[Entry]:
        return list(self.journal_entries)

    def job_status(self) -> JobStatus | None:
        return None if self.state.job is None else self.state.job.status

    async def dashboard_url(self) -> str:
        from tui.core.errors import RlconsoleError

        raise RlconsoleError("this is demo data: no Ray runs behind it (`rlconsole demo` runs a real one)")

    def all_series(self) -> Series:
        """Every scalar this backend has: the pushed series plus VeRL-named scalars
        derived from them (the graph screen plots any of these)."""
        out: Series = dict(self.series)
        reward = self.series.get("reward") or []
        steps = [s for s, _ in reward]
        if steps:
            out.setdefault("critic/score/mean", reward)
            out.setdefault("timing_s/step", [(s, 1032.0 + (s % 11) * 3) for s in steps])
            out.setdefault("perf/mfu/actor", [(s, round(0.31 + 0.01 * math.sin(s / 7), 4)) for s in steps])
            out.setdefault("actor/pg_loss", [(s, round(0.0195 - s * 1e-6 + 0.002 * math.sin(s), 5)) for s in steps])
            out.setdefault("actor/entropy", [(s, round(0.41 - s * 1e-5, 5)) for s in steps])
        return out

    def push_metrics(self, summary: MetricsSummary, series: Series) -> None:
        self.summary, self.series = summary, series
        for cb in self._metrics_cbs:
            cb(summary, series)

    def push_alert(self, alert: Alert) -> None:
        self.alerts.append(alert)
        self._emit_alert(alert)

    def _emit_alert(self, alert: Alert) -> None:
        for cb in self._alert_cbs:
            cb(alert)

    # -- actions
    def describe_stop(self, cluster: bool = False) -> str:
        job = self.state.job
        parts: list[str] = []
        if job and job.status in (JobStatus.RUNNING, JobStatus.PENDING):
            ck = f"last checkpoint at step {job.last_checkpoint}" if job.last_checkpoint is not None \
                else "no checkpoint saved yet"
            parts.append(f"stop job {job.id} at step {job.step}; {ck}")
        else:
            parts.append("no job is running")
        if cluster:
            parts.append(f"then `ray stop --force` on all {len(self.profile.nodes)} nodes "
                         f"({', '.join(n.name for n in self.profile.nodes[:6])}"
                         f"{', ...' if len(self.profile.nodes) > 6 else ''})")
        return "; ".join(parts)

    async def describe_convert(self) -> str | None:
        return self.convert_exists

    async def submit_plan(self) -> SubmitPlan:
        from tui.core.actions.plan import build_plan, running_job_text

        job = self.state.job
        return build_plan(self.profile, self.checks(), job.last_checkpoint if job else None,
                          running=running_job_text(self.state))

    def checks(self) -> list[CheckResult]:
        return self.check_results if self.check_results is not None else demo_checks(self.profile)

    async def log_search(self, pattern: str, start_line: int, backwards: bool) -> int | None:
        p = pattern.lower()
        rng = range(start_line - 1, -1, -1) if backwards else range(start_line + 1, len(self._all_lines))
        for i in rng:
            if p in self._all_lines[i].lower():
                return i
        return None

    async def _pause(self) -> None:
        await asyncio.sleep(self.action_delay)

    async def run_action(self, name: str, **opts: Any) -> AsyncIterator[ActionEvent]:
        """Fake actions: the same event shapes the real ones produce, in a few steps.
        Read-only mode refuses here as the live registry does (same message), before
        the call is recorded: a refused action never ran."""
        from tui.core.actions.registry import read_only_refusal

        at = T0
        refused = read_only_refusal(name, self.profile)
        if refused is not None:
            yield ActionEvent(action=name, kind="fail", message=refused, data={"refused": "read-only"}, at=at)
            return
        self.calls.append((name, dict(opts)))

        def ev(kind: str, message: str = "", node: str | None = None, status: str | None = None,
               **data: Any) -> ActionEvent:
            return ActionEvent(action=name, kind=kind, message=message, node=node,  # type: ignore[arg-type]
                               status=status, data=data, at=at)

        yield ev("start", f"{name} {' '.join(f'--{k}' for k, v in opts.items() if v)}".strip())
        if self.action_gate is not None:
            await self.action_gate.wait()
        if name in ("containers", "setup-ray"):
            for n in self.profile.nodes:
                yield ev("node", "pending", node=n.name, status="pending")
            for n in self.profile.nodes:
                await self._pause()
                yield ev("node", "running", node=n.name, status="running")
                yield ev("output", f"{'train-rl: running' if name == 'containers' else 'ray start: ok'}",
                         node=n.name)
                yield ev("node", "ok", node=n.name, status="ok")
            yield ev("done", f"{len(self.profile.nodes)} nodes ready")
        elif name == "convert" and not opts.get("force") and self.convert_exists:
            yield ev("skip", f"output not empty: {self.convert_exists}")
        elif name == "check":
            from tui.core.checks import check_event, summary

            results = self.checks()
            for r in results:
                await self._pause()
                e = check_event(r)
                e.at = at
                yield e
            yield ev("fail", summary(results))
        elif name == "stop":
            job = self.state.job
            await self._pause()
            if job:
                yield ev("output", f"Job '{job.id}' stopped")
            st = demo_state(self.profile, step=job.step if job and job.step else 0, job_status=JobStatus.STOPPED,
                            busy=False)
            if opts.get("cluster"):
                st.ray = RayState(available=False, error="ray is not running")
            self.push_state(st)
            if self.summary is not None:
                # a stopped job has no step time and no ETA (the live pane's rule too)
                self.push_metrics(self.summary.stopped(JobStatus.STOPPED), self.series)
            yield ev("done", "stopped")
        else:
            for i in range(3):
                await self._pause()
                yield ev("output", f"{name}: step {i + 1}/3")
            if name == "submit":
                # the job starts and its first steps arrive, as on a live cluster
                first = 3
                self.push_state(demo_state(self.profile, step=first))
                self.push_log(demo_log(first))
                self.push_metrics(*demo_metrics(self.profile, first))
                yield ev("done", f"submitted {JOB_ID}", job_id=JOB_ID)
                return
            yield ev("done", f"{name} finished")


def demo_checks(profile: Profile) -> list[CheckResult]:
    """The demo's preflight: one failure and one warning, so `p` and `s` show both."""
    from tui.core.checks import CheckResult, CheckStatus

    n = len(profile.nodes)
    return [
        CheckResult("profile", CheckStatus.PASS, "profile valid"),
        CheckResult("ssh.reachable", CheckStatus.PASS, f"{n}/{n} nodes reachable"),
        CheckResult("actor.pipeline_layers", CheckStatus.FAIL, "PP=8 does not divide 36 layers",
                    "use a PP that divides 36 (e.g. 2, 4)"),
        CheckResult("ray.dashboard", CheckStatus.PASS, "dashboard on 127.0.0.1"),
        CheckResult("model.expert_parallel", CheckStatus.WARN, "expert_model_parallel_size=8 on a dense model"),
    ]


def demo_backend(nodes: int = 4, gpus: int = 8, step: int = 812, **kw: Any) -> StaticBackend:
    """The deterministic backend the snapshots, screenshot and benchmark share."""
    prof = demo_profile(nodes, gpus)
    summary, series = demo_metrics(prof, step)
    warm = [demo_state(prof, s) for s in range(step - 10, step)]
    if "rules" not in kw:
        from tui.core.alerts import AlertRules

        kw["rules"] = AlertRules.for_profile(prof)
    kw.setdefault("run_list", demo_runs(prof, step))
    kw.setdefault("journal_entries", demo_journal(prof, step))
    return StaticBackend(profile=prof, state=demo_state(prof, step), log_lines=demo_log(step),
                         summary=summary, series=series, warmup=warm, **kw)


