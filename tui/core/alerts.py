"""Alerts: the few things a person watching a run must not miss, and the one rule set that
raises them.

Two kinds of alert travel the same way (plain data, so the core raises them, the CLI can
print them and the TUI shows them):

- *events*: something happened once (a known traceback in the log, an action failed).
  `key` is None.
- *episodes*: a condition that holds for a while (a node is down, a card is hot, steps
  stopped). The rule set raises one alert when the condition starts (`key` set) and one
  when it ends (same `key`, `ends=True`, a message saying so: "node node3 is back"), never
  one per refresh. Whoever shows "the state now" keeps the open episodes by key and drops
  one when its end arrives, so a banner can never keep a condition that is over.

`AlertRules` is the rule set. It is fed typed state only (ClusterState snapshots, the
job's JobState and its metrics summary, the profile's `monitoring:` thresholds) and
returns the alerts to deliver; it does no I/O and reads no clock unless not given `now`,
so both backends (live on a cluster, static on demo data) and the tests drive the very
same rules. No Textual here: the core never imports it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from tui.core.alert import LEVEL_ORDER as LEVEL_ORDER  # re-exported: the type lives in alert.py
from tui.core.alert import MAX_MESSAGE_CHARS, Alert, AlertLevel
from tui.core.alert import OpenAlerts as OpenAlerts  # re-exported
from tui.core.job.metrics import MetricsSummary, judge_range
from tui.core.state import ACTIVE_JOB_STATUSES, TERMINAL_JOB_STATUSES, CardLimits, JobStatus, mem_pct

if TYPE_CHECKING:
    from tui.core.diagnosis import Finding, Verdict
    from tui.core.profile import Monitoring, Profile
    from tui.core.state import ClusterState, JobState, NodeState

def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 1] + "…"


@dataclass
class Thresholds:
    """What the rules compare against; `from_monitoring` reads the profile's
    `monitoring:` section (defaults there are the same as here)."""

    hot_c: float = 85.0
    mem_full_pct: float = 95.0
    stall_factor: float = 3.0
    out_of_range_steps: int = 3
    mfu_pct: tuple[float, float] | None = None
    throughput_per_node: tuple[float, float] | None = None
    step_time_s: tuple[float, float] | None = None

    @property
    def cards(self) -> CardLimits:
        """The card rule, shared with the node grid's colours."""
        return CardLimits(hot_c=self.hot_c, mem_full_pct=self.mem_full_pct)

    @classmethod
    def from_monitoring(cls, m: Monitoring) -> Thresholds:
        st = m.step_time_min
        return cls(hot_c=m.hot_c, mem_full_pct=m.mem_full_pct, stall_factor=m.stall_factor,
                   out_of_range_steps=m.out_of_range_steps, mfu_pct=m.mfu_pct,
                   throughput_per_node=m.throughput_tokens_per_s_per_node,
                   step_time_s=(st[0] * 60, st[1] * 60) if st else None)


Condition = tuple[AlertLevel, str, str, "int | None"]
"""(level, source, message, log line) of a condition that holds now."""

def _fmt_s(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class AlertRules:
    """The one rule set. Call `observe_state` with each ClusterState snapshot and
    `observe_job` with the watched job after each metrics refresh; each returns the alerts
    to deliver now (new episodes, ended episodes, events), in order.

    Each rule family owns a key prefix ("node:", "card:", "ray-node:", "job-end",
    "stall", "range:"); a family that was not looked at in a call (no job passed, a node
    that did not answer) keeps its open episodes as they are.
    """

    def __init__(self, thresholds: Thresholds | None = None,
                 expected_cards: Mapping[str, int] | None = None,
                 diagnose: Callable[[list[str], int], Alert | None] | None = None) -> None:
        self.t = thresholds or Thresholds()
        self.expected_cards = dict(expected_cards or {})
        self.diagnose = diagnose if diagnose is not None else diagnose_tail
        self.open: dict[str, Alert] = {}
        self.job_status: dict[str, str] = {}  # the last status seen per job id
        self._last_active: dict[str, str] = {}  # per job id: its last active status, until its end is told
        self._job_id: str | None = None
        self._last_step: int | None = None
        self._last_step_at: float | None = None
        self._intervals: list[float] = []  # wall seconds per step between observed step changes
        self._range_runs: dict[str, int] = {}
        self._range_step: int | None = None

    @classmethod
    def for_profile(cls, profile: Profile) -> AlertRules:
        return cls(Thresholds.from_monitoring(profile.monitoring),
                   {n.name: n.gpus for n in profile.nodes})

    # ------------------------------------------------------------------ episodes

    def _settle(self, prefix: str, now_true: dict[str, Condition], at: float,
                end_message: Callable[[str, Alert], str], keep: Iterable[str] = ()) -> list[Alert]:
        """Open episodes for conditions new in `now_true`, end open ones under `prefix` that
        no longer hold (except keys in `keep`: not looked at this time)."""
        out: list[Alert] = []
        keep = set(keep)
        for key in [k for k in self.open if k.startswith(prefix)]:
            if key not in now_true and key not in keep:
                started = self.open.pop(key)
                out.append(Alert("info", started.source, _clip(end_message(key, started)),
                                 at=at, key=key, ends=True))
        for key, (level, source, message, line) in now_true.items():
            if key not in self.open:
                a = Alert(level, source, _clip(message), line=line, at=at, key=key)
                self.open[key] = a
                out.append(a)
        return out

    # ------------------------------------------------------------------ cluster

    def observe_state(self, st: ClusterState, now: float | None = None) -> list[Alert]:
        """Node down/back, card hot / memory near full / missing, Ray node lost."""
        at = time.time() if now is None else now
        down: dict[str, Condition] = {}
        cards: dict[str, Condition] = {}
        keep_cards: list[str] = []
        for n in st.nodes:
            if not n.reachable:
                self._node_down(n, down)
            if not n.reachable or n.gpu is None or not n.gpu.parsed:
                # no card report (a down node, an unparsed one): its card episodes stay as they were
                keep_cards += [k for k in self.open if k.startswith(f"card:{n.name}:")]
                continue
            self._card_conditions(n, cards)

        def node_end(key: str, a: Alert) -> str:
            return f"node {key.split(':', 1)[1]} is back"

        def card_end(key: str, a: Alert) -> str:
            _, node, what = key.split(":", 2)
            if what == "missing":
                return f"{node} reports all its cards again"
            idx, kind = what.split(":")
            return f"{node} card {idx} " + ("cooled down" if kind == "hot" else "memory below the near-full mark")

        out = self._settle("node:", down, at, node_end)
        out += self._settle("card:", cards, at, card_end, keep=keep_cards)
        if st.ray.available:  # when Ray does not answer, nothing is known of its nodes
            out += self._ray_nodes(st, at)
        return out

    def _node_down(self, n: NodeState, down: dict[str, Condition]) -> None:
        if n.error == "connecting":  # first contact still under way: not known yet
            if f"node:{n.name}" in self.open:
                down[f"node:{n.name}"] = ("error", "probe", "", None)
            return
        down[f"node:{n.name}"] = ("error", "probe", f"node {n.name} is down: {n.error or 'unreachable'}", None)

    def _card_conditions(self, n: NodeState, cards: dict[str, Condition]) -> None:
        """A reachable node's cards: hot, memory near full, missing from its report."""
        limits = self.t.cards
        for c in n.gpus:
            if limits.is_hot(c):
                cards[f"card:{n.name}:{c.index}:hot"] = (
                    "warning", "probe", f"{n.name} card {c.index} at {c.temp_c:.0f}°C (hot >= {self.t.hot_c:g}°C)", None)
            if limits.mem_full(c):
                cards[f"card:{n.name}:{c.index}:mem"] = (
                    "warning", "probe",
                    f"{n.name} card {c.index} memory {mem_pct(c):.0f}% of {(c.mem_total_mib or 0) / 1024:.0f} GiB "
                    f"(near full >= {self.t.mem_full_pct:g}%)", None)
        want = self.expected_cards.get(n.name)
        if want:
            have = {c.index for c in n.gpus}
            missing = [i for i in range(want) if i not in have]
            if missing:
                cards[f"card:{n.name}:missing"] = (
                    "error", "probe",
                    f"{n.name} reports {len(have)} of {want} cards (missing: {', '.join(map(str, missing))})", None)

    def _ray_nodes(self, st: ClusterState, at: float) -> list[Alert]:
        """A node Ray lists as dead: an episode until Ray lists it alive, or not at all.
        A node that rejoined is alive: its raylet has a new node id at the same address,
        and Ray keeps listing the old one as DEAD for the rest of the cluster's life (a
        console opened after a worker's restart called it lost)."""
        names = {n.address: n.name for n in st.nodes}
        at_address = st.ray.by_address()  # the ALIVE record where an address has one
        lost: dict[str, Condition] = {}
        for addr, rn in at_address.items():  # in Ray's order
            if not rn.alive:
                who = names.get(addr, addr)
                lost[f"ray-node:{addr}"] = ("error", "ray", f"Ray lost node {who} ({addr})", None)

        def ray_end(key: str, a: Alert) -> str:
            addr = key.split(":", 1)[1]
            who = names.get(addr, addr)
            back = addr in at_address and at_address[addr].alive
            return f"Ray node {who} is alive again" if back else f"Ray no longer lists node {who}"

        return self._settle("ray-node:", lost, at, ray_end)

    # ------------------------------------------------------------------ job

    def observe_job(self, job: JobState | None, summary: MetricsSummary | None = None,
                    now: float | None = None, log_tail: list[str] | None = None,
                    tail_start: int = 0, job_message: str | None = None) -> list[Alert]:
        """Job state changes, steps stalled, throughput/MFU out of range.

        `summary` is the metrics pane's summary (the core's `MetricsSummary`); `log_tail` the
        last lines of the job's log (line `tail_start` is the first), read for a
        diagnosis when the job turns FAILED; `job_message` Ray's message for the job, read
        when the log names no cause (a SIGKILLed driver writes nothing).
        """
        at = time.time() if now is None else now
        if job is None:
            return []
        summary = summary or MetricsSummary()
        out: list[Alert] = []
        if job.id != self._job_id:  # another job: its step and range history start afresh
            self._job_id = job.id
            self._last_step = self._last_step_at = self._range_step = None
            self._range_runs.clear()
            self._intervals.clear()

        # -- state changes: only a change seen while watching, never an old job's end
        self.job_status[job.id] = job.status
        if job.status in ACTIVE_JOB_STATUSES:
            self._last_active[job.id] = job.status
        end: dict[str, Condition] = {}
        keep_end: list[str] = []
        diag_id: str | None = None
        if job.status in TERMINAL_JOB_STATUSES:
            # An end is news when this job was seen active, even if a refresh in between
            # could not tell (UNKNOWN, or not in Ray's list while its dashboard did not
            # answer): such a gap must not swallow the end of a run that was watched.
            prev = self._last_active.pop(job.id, None)
            if prev is not None:
                msg = f"job {job.id} {prev} -> {job.status}"
                if job.step is not None:
                    msg += f" at step {job.step}"
                line = None
                levels: dict[str, AlertLevel] = {JobStatus.FAILED: "error", JobStatus.STOPPED: "warning"}
                level = levels.get(job.status, "info")
                if job.status == JobStatus.FAILED:
                    d = self.diagnose(log_tail or [], tail_start)
                    if (d is None or d.diagnosis == UNRECOGNISED) and job_message:
                        # Ray's message may know better than an error no entry knows (a
                        # SIGKILLed driver writes nothing: the log's last error is not it)
                        m = self.diagnose(job_message_lines(job_message), 0)
                        if m is not None and (d is None or m.diagnosis != UNRECOGNISED):
                            d = m
                            d.line = None  # Ray's message, not a log line
                    if d is not None:
                        msg += f": {d.message}"
                        line = d.line
                        diag_id = d.diagnosis
                    else:
                        msg += ": no known cause in the log's last lines (`rlconsole logs`)"
                end["job-end"] = (level, "job", msg, line)
            else:
                keep_end = ["job-end"]
        ended = self._settle("job-end", end, at, lambda k, a: f"job {job.id} is {job.status}", keep=keep_end)
        for a in ended:
            if not a.ends:
                a.diagnosis = diag_id
        out += ended

        # -- steps stalled
        step = summary.step if summary.step is not None else job.step
        stall: dict[str, Condition] = {}
        if job.status == JobStatus.RUNNING and isinstance(step, int):
            if self._last_step is None or step > self._last_step:
                if self._last_step is not None and self._last_step_at is not None:
                    self._intervals = (self._intervals + [(at - self._last_step_at) / (step - self._last_step)])[-10:]
                self._last_step, self._last_step_at = step, at
            expected = self.expected_step_s()
            if expected and self._last_step_at is not None:
                quiet = at - self._last_step_at
                limit = self.t.stall_factor * expected
                if quiet > limit:
                    stall["stall"] = ("warning", "job",
                                      f"no new step for {_fmt_s(quiet)} (last step {step}; "
                                      f"expected one every {_fmt_s(expected)}, alert after {self.t.stall_factor:g}x)",
                                      None)
        out += self._settle("stall", stall, at,
                            lambda k, a: (f"steps resumed at step {step}" if job.status == JobStatus.RUNNING
                                          else f"job {job.id} is {job.status}: no longer waiting for steps"))

        # -- throughput / MFU out of range for N consecutive steps
        out += self._ranges(job, summary, step, at)
        return out

    def expected_step_s(self) -> float | None:
        """The observed cadence when known, else the top of the profile's step-time range.

        The cadence is the median of the wall-clock seconds per step between the step
        changes this rule set saw (the last 10): wall clock, not the log's `timing_s/step`,
        because a stall is about the clock; the median, so that the burst of steps read
        when attaching to a running job (many steps in one refresh) does not make the
        expected time tiny."""
        if len(self._intervals) >= 2:
            iv = sorted(self._intervals)
            return max(iv[len(iv) // 2], 1e-3)
        if self.t.step_time_s:
            return self.t.step_time_s[1]
        return None

    def _ranges(self, job: JobState, summary: MetricsSummary, step: Any, at: float) -> list[Alert]:
        checks = [("throughput", "throughput", summary.throughput_per_node, self.t.throughput_per_node,
                   "tokens/s per node"),
                  ("mfu", "MFU", summary.mfu_pct, self.t.mfu_pct, "%")]
        new_step = isinstance(step, int) and (self._range_step is None or step > self._range_step)
        if new_step and job.status == JobStatus.RUNNING:
            self._range_step = step
            for name, _, value, rng, _ in checks:
                inside = judge_range(value, rng)
                if inside is None:
                    continue
                self._range_runs[name] = self._range_runs.get(name, 0) + 1 if not inside else 0
        cond: dict[str, Condition] = {}
        keep: list[str] = []
        for name, label, value, rng, unit in checks:
            key = f"range:{name}"
            if job.status != JobStatus.RUNNING:
                continue  # a job that ended is not slow: its episodes end
            if not new_step:
                if key in self.open:
                    keep.append(key)
                continue
            if rng is not None and self._range_runs.get(name, 0) >= self.t.out_of_range_steps:
                cond[key] = ("warning", "job",
                             f"{label} {value:.4g} {unit} outside the profile's {rng[0]:g}-{rng[1]:g} for "
                             f"{self._range_runs[name]} steps in a row (step {step})", None)

        def end(key: str, a: Alert) -> str:
            name = key.split(":", 1)[1]
            label = "throughput" if name == "throughput" else "MFU"
            return f"{label} back in the profile's range" if job.status == JobStatus.RUNNING else f"job {job.id} is {job.status}"

        return self._settle("range:", cond, at, end, keep=keep)


UNRECOGNISED = "unrecognised-error"
"""The verdict's id for an error no catalog entry knows (tui.core.diagnosis.UNRECOGNISED_ID;
not imported: this module loads without the catalog)."""


def diagnose_tail(lines: list[str], start: int) -> Alert | None:
    """The diagnosis of a failed job's last log lines as an alert: the verdict's cause
    (see `Diagnoser.verdict`; "unrecognised failure: <line>" when no entry knows it), the
    other known failures seen named after it as context."""
    v = diagnose_tail_verdict(lines, start)
    if v.finding is None:
        return None
    a = v.finding.alert()
    if v.also:
        a.message += f" (also seen: {', '.join(v.also)})"
    return a


JOB_MESSAGE_LINES = 200
"""Lines of Ray's job message read for a diagnosis: its first (Ray's own words) and its last
(the driver's last output, which Ray appends to a failed entrypoint's message)."""


def job_message_lines(message: str) -> list[str]:
    """Ray's job message as lines to diagnose: the first, then at most the last
    JOB_MESSAGE_LINES - 1 (the message is already bounded: `rayapi.job_message`)."""
    lines = message.splitlines()
    return lines if len(lines) <= JOB_MESSAGE_LINES else lines[:1] + lines[-(JOB_MESSAGE_LINES - 1):]


def diagnose_failure(lines: list[str], start: int, job_message: str | None = None) -> Verdict:
    """Why a job FAILED: the log's verdict, else what Ray's job message names (Ray's words
    and the driver's last output it carries: a SIGKILLed driver writes nothing to the log,
    a job refused at start may end before its log is read; then the finding's line is -1).
    A known failure in Ray's message also beats an error of the log no entry knows."""
    v = diagnose_tail_verdict(lines, start)
    weak = v.finding is None or v.finding.unrecognised
    if weak and job_message:
        m = diagnose_tail_verdict(job_message_lines(job_message), 0)
        if m.finding is not None and (v.finding is None or not m.finding.unrecognised):
            m.finding.line_no = -1
            m.also = v.also + [i for i in m.also if i not in v.also]
            return m
    return v


def diagnose_tail_finding(lines: list[str], start: int) -> Finding | None:
    """The verdict's finding (signature id, groups, line) for these lines."""
    return diagnose_tail_verdict(lines, start).finding


def diagnose_tail_verdict(lines: list[str], start: int) -> Verdict:
    """The one verdict the console, `status --json`, `watch` and `diagnose` share: the
    packaged catalog plus the user's; an error before a warning, a known cause before the
    first real error no entry knows, before a consequence, before a wrapper; among equals
    the first in time."""
    from tui.core.diagnosis import Diagnoser, Verdict

    if not lines:
        return Verdict(finding=None)
    return Diagnoser().verdict(lines, start)
