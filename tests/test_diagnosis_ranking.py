"""The verdict reads a log as an expert does, and one incident is one alert (issue 40, and
issue 36 major 4).

Ranking: an error outranks a warning; a cause outranks its consequences (a watchdog
timeout, a dead worker, Ray's wrappers) wherever they stand, before or after it; among
causes the first in time wins, and the reported line is the cause's first line. When no
entry knows the failure, the first real error of the log is the answer
(`unrecognised-error`). Live alerts: findings of one class within the window are one
incident, the other wordings noted as "also seen". The lines below are real texts (the
catalog cites each source) arranged as logs interleave them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tui.core.alerts import diagnose_tail
from tui.core.diagnosis import UNRECOGNISED_ID, Diagnoser

REPO = Path(__file__).resolve().parent.parent

OOM = "(WorkerDict pid=3120, ip=10.10.142.71) torch.OutOfMemoryError: MUSA out of memory. Tried to allocate 2.32 GiB."
RAY_OOM = ("(TaskRunner pid=2016) ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict."
           "actor_rollout_update_actor() (pid=3120, ip=10.10.142.71)")
WATCHDOG = ("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, "
            "NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.")
ACTOR_DIED = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
DISK_WARN = ("(raylet) [2025-02-27 03:14:57,124 E 1 1] file_system_monitor.cc:116: /tmp/ray/session_latest is over "
             "95% full, available space: 6.1 GB; capacity: 120 GB. Object creation will fail if spilling is "
             "required.")
DATASET = "FileNotFoundError: Unable to find '/data/datapool/verl/musa_examples/data/aime_2024.parquet'"
CUDA_HINT = "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
CUDA_OOM = "RuntimeError: CUDA error: out of memory"


@pytest.fixture
def diag() -> Diagnoser:
    return Diagnoser(user_catalog=False)


def named(d: Diagnoser, lines: list[str]) -> tuple[str | None, int | None]:
    j = d.verdict(lines).to_json()
    return j["id"], j["line"]


@pytest.mark.parametrize("consequence", [WATCHDOG, ACTOR_DIED, RAY_OOM])
def test_a_consequence_never_beats_its_cause_before_or_after_it(diag: Diagnoser, consequence: str) -> None:
    assert named(diag, [OOM, consequence]) == ("musa-oom", 1)
    assert named(diag, [consequence, OOM]) == ("musa-oom", 2)
    assert named(diag, ["step:4 - a:1", consequence, "x", OOM, consequence]) == ("musa-oom", 4)


def test_a_warning_never_beats_an_error(diag: Diagnoser) -> None:
    """The issue's wrong verdict: an early warning about disk space beat the real error."""
    assert named(diag, [DISK_WARN, "step:5 - a:1", DATASET]) == ("dataset-missing", 3)
    assert named(diag, [DISK_WARN])[0] == "no-space-left"  # alone, the warning is all there is
    v = diag.verdict([DISK_WARN, DATASET])
    assert v.finding is not None and v.finding.signature.level == "error" and v.also == ["no-space-left"]


def test_among_causes_the_first_in_time_wins(diag: Diagnoser) -> None:
    assert named(diag, [DATASET, OOM]) == ("dataset-missing", 1)
    assert named(diag, [OOM, DATASET]) == ("musa-oom", 1)


def test_the_reported_line_is_the_causes_first_line(diag: Diagnoser) -> None:
    """A hint printed after the error, the same error on other ranks: the first line."""
    lines = ["step:3 - a:1", CUDA_OOM, CUDA_HINT, "[rank1]: " + CUDA_OOM, "[rank2]: " + CUDA_OOM]
    assert named(diag, lines) == ("cuda-oom", 2)
    a = diagnose_tail(lines, 100)
    assert a is not None and a.line == 101


def test_ray_wrapper_naming_the_exception_type_is_its_class_but_a_wrapper(diag: Diagnoser) -> None:
    """RayTaskError(OutOfMemoryError) is the OOM class (alone, it names it) but never beats
    the OOM line itself, before or after it."""
    v = diag.verdict([RAY_OOM])
    assert v.finding is not None and v.finding.signature.klass == "device-oom"
    assert v.finding.signature.role == "wrapper"
    assert named(diag, [RAY_OOM, "  File \"x.py\", line 3, in f", OOM]) == ("musa-oom", 3)


# --------------------------------------------------------------------------- one alert per incident


def test_one_oom_is_one_alert_the_other_wording_also_seen(diag: Diagnoser) -> None:
    """Issue 36 major 4: the MUSA OOM and Ray's RayTaskError(OutOfMemoryError) were two
    error alerts ("MUSA out of memory", "GPU out of memory")."""
    alerts = [a for i, line in enumerate([OOM, RAY_OOM, OOM, RAY_OOM]) if (a := diag.match(line, i))]
    assert len(alerts) == 1 and alerts[0].diagnosis == "musa-oom"
    assert alerts[0].message.startswith("MUSA out of memory — ")
    assert alerts[0].message.endswith("(also seen: GPU out of memory)")
    # either order
    d = Diagnoser(user_catalog=False)
    alerts = [a for i, line in enumerate([RAY_OOM, OOM]) if (a := d.match(line, i))]
    assert len(alerts) == 1 and "(also seen: MUSA out of memory)" in alerts[0].message


def test_another_subject_of_a_class_is_another_incident(diag: Diagnoser) -> None:
    """Two config keys wrong are two problems: the class merges wordings, not subjects."""
    a1 = diag.match("Could not override 'trainer.no_such_key'.", 1)
    a2 = diag.match("Could not append to config. An item is already at 'rollout_manager.loss_mask_mode'.", 2)
    a3 = diag.match("omegaconf.errors.ConfigKeyError: Key 'trainer.no_such_key' not in 'TrainerConfig'", 3)
    assert a1 is not None and a2 is not None and a3 is None  # the same key again: also seen
    assert "also seen" not in a2.message


def test_an_incident_recurs_after_the_window(diag: Diagnoser) -> None:
    assert diag.match(OOM, 0) is not None and diag.match(RAY_OOM, 1) is None
    assert diag.match(RAY_OOM, diag.dedup_lines + 5) is not None


# --------------------------------------------------------------------------- the first real error


def test_the_first_real_error_when_no_entry_knows_it(diag: Diagnoser) -> None:
    tb = ["(TaskRunner pid=9) step:2 - a:1",
          "(TaskRunner pid=9) ray.exceptions.RayTaskError(IndexError): ray::WorkerDict.compute_log_prob() (pid=7)",
          "(TaskRunner pid=9) Traceback (most recent call last):",
          '(TaskRunner pid=9)   File "/opt/verl/verl/workers/actor/dp_actor.py", line 88, in compute_log_prob',
          "(TaskRunner pid=9)     raise IndexError(\"list index out of range\")",
          "(TaskRunner pid=9) IndexError: list index out of range",
          "(TaskRunner pid=9) During handling of the above exception, another exception occurred:",
          "(TaskRunner pid=9) RuntimeError: the second one"]
    j = diag.verdict(tb).to_json()
    assert j["id"] == UNRECOGNISED_ID and j["line"] == 6, j
    assert j["title"] == "IndexError: list index out of range" and j["fix"]
    assert j["also"] == ["ray-task-error"]  # Ray's wrapper unwrapped: the inner error is the answer
    a = diagnose_tail(tb, 0)
    assert a is not None and a.diagnosis == UNRECOGNISED_ID
    assert a.message.startswith("unrecognised failure: IndexError: list index out of range — ")


@pytest.mark.parametrize(("lines", "line"), [
    (["Fatal Python error: Floating point exception"], 1),   # a fatal line (native-abort names it)
    (["step:3", "Segmentation fault"], 2),
    (["step:3", "Job entrypoint command failed with exit code 1, last available logs"], 2),
    (["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "KeyboardInterrupt"], 3),
    (["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "socket.timeout: timed out"], 3),
])
def test_fatal_lines_exits_and_bare_exception_names(diag: Diagnoser, lines: list[str], line: int) -> None:
    j = diag.verdict(lines).to_json()
    assert j["id"] is not None and j["line"] == line, j


@pytest.mark.parametrize("lines", [
    ["/x/config_converter.py:152: UserWarning: The model has a long context length"],   # a warning
    ["WARNING 01-12 08:36:17 arg_utils.py:940] The model has a long context length (131072). This may cause OOM "
     "errors during the initial memory profiling phase"],
    ["(TaskRunner pid=1) Error in reward_fn: 'reward_extra_info'"],                      # handled by VeRL
    ["Exception ignored in: <function ResourceTracker.__del__ at 0x7fa0b72c04a0>",       # Python carried on
     "Traceback (most recent call last):", '  File "r.py", line 1, in __del__', "ChildProcessError: [Errno 10]"],
    ['  File "x.py", line 3, in f', '    raise ValueError("boom")'],                       # an echo of code
    ["step:10 - actor/pg_loss:0.01 - response_length/clip_ratio:0.0 - exit code: 0"],
    ["The error rate is 0.1: ErrorCorrectingCode: x"],
])
def test_no_verdict_on_healthy_or_benign_lines(diag: Diagnoser, lines: list[str]) -> None:
    assert diag.verdict(lines).to_json()["id"] is None


def test_an_exception_in_the_reward_function_is_named_as_one(diag: Diagnoser) -> None:
    tb = ["(TaskRunner pid=1) Traceback (most recent call last):",
          '(TaskRunner pid=1)   File "/opt/verl/verl/workers/reward_manager/naive.py", line 89, in __call__',
          "(TaskRunner pid=1)     score = self.compute_score(",
          '(TaskRunner pid=1)   File "/home/u/my_reward.py", line 12, in compute_score',
          "(TaskRunner pid=1)     return float(answer) == gt",
          "(TaskRunner pid=1) ValueError: could not convert string to float: 'forty-two'"]
    j = diag.verdict(tb).to_json()
    assert j["id"] == "reward-function" and j["line"] == 6
    assert j["title"] == "The reward function failed: ValueError: could not convert string to float: 'forty-two'"


def test_cli_json_for_an_unrecognised_error(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("step:1 - a:1\n\x1b[31mMyCustomError: widget \x07exploded\x1b[0m\n")
    r = subprocess.run([sys.executable, "-m", "tui.cli", "diagnose", str(log), "--json"], capture_output=True,
                       text=True, cwd=REPO, timeout=120)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["id"] == UNRECOGNISED_ID and doc["line"] == 2
    assert "MyCustomError: widget" in doc["title"] and "\x1b" not in doc["title"] and "\x07" not in doc["title"]
    r = subprocess.run([sys.executable, "-m", "tui.cli", "diagnose", str(log)], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert r.stdout.startswith("unrecognised failure: MyCustomError: widget") and "\x1b" not in r.stdout


def test_rays_job_message_beats_an_error_no_entry_knows() -> None:
    """A SIGKILLed driver writes nothing: a known failure in Ray's job message (exit code
    137) names the end rather than some earlier exception no entry knows; an unrecognised
    error of the log still beats an unrecognised job message."""
    from tui.core.alerts import AlertRules, diagnose_failure
    from tui.core.state import JobState, JobStatus

    tail = ["step:7 - a:1", "Traceback (most recent call last):", "ZeroDivisionError: division by zero"]
    killed = "Job entrypoint command failed with exit code 137, last available logs (truncated to 20,000 chars):"
    v = diagnose_failure(tail, 100, killed)
    assert v.finding is not None and v.finding.signature.id == "driver-killed" and v.finding.line_no == -1
    v = diagnose_failure(tail, 100, "Job entrypoint command failed with exit code 1, last available logs")
    assert v.finding is not None and v.finding.signature.id == UNRECOGNISED_ID and v.finding.line_no == 102
    rules = AlertRules()
    job = JobState(id="raysubmit_2", status=JobStatus.RUNNING, step=7)
    rules.observe_job(job, now=1.0)
    job.status = JobStatus.FAILED
    end = [a for a in rules.observe_job(job, now=2.0, log_tail=tail, tail_start=100, job_message=killed)
           if a.key == "job-end"]
    assert len(end) == 1 and end[0].diagnosis == "driver-killed" and end[0].line is None


def test_a_refusal_in_rays_job_message_is_named_without_the_log() -> None:
    """A job Hydra refuses ends before its log is read; Ray's message for it carries the
    driver's last output (a real refusal, tests/data/failures/hydra-override-verl-7430.log,
    after start-up lines that push it past the message's head): that names it."""
    from tui.core.alerts import AlertRules, diagnose_failure
    from tui.core.rayapi import job_from_api
    from tui.core.state import JobState, JobStatus

    log = (Path(__file__).parent / "data" / "failures" / "hydra-override-verl-7430.log").read_text()
    driver = "".join(f"INFO 12-06 10:00:{i % 60:02d} [config.py:{i}] resolved a config default\n" for i in range(300))
    driver += "".join(line + "\n" for line in log.splitlines() if not line.startswith(("#", "$")))
    raw = "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n" + driver
    rj = job_from_api({"submission_id": "raysubmit_3", "status": "FAILED", "message": raw})
    assert rj is not None and rj.message is not None and len(rj.message) < len(raw)
    v = diagnose_failure([], 0, rj.message)
    assert v.finding is not None and v.finding.signature.id == "hydra-override-missing-key"
    assert v.finding.line_no == -1  # named by Ray's message, not a log line
    rules = AlertRules()
    job = JobState(id="raysubmit_3", status=JobStatus.PENDING)
    rules.observe_job(job, now=1.0)
    job.status = JobStatus.FAILED
    end = [a for a in rules.observe_job(job, now=2.0, log_tail=[], job_message=rj.message) if a.key == "job-end"]
    assert len(end) == 1 and end[0].diagnosis == "hydra-override-missing-key" and end[0].line is None
    # only the head, as the console kept it before: nothing named
    head_only = diagnose_failure([], 0, raw[:500]).finding
    assert head_only is None or head_only.signature.id != "hydra-override-missing-key"
