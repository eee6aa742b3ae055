"""Ray CLI text parsers on real captured output (tests/data/samples/ray): both `ray status`
layouts, `ray job list` reprs, `ray job status`/`submit`/`stop` output; plus the newer
Idle/failures/verbose layouts from Ray's own formatter, errors, cut-off output, ANSI."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.core.parsers.raystatus import (
    parse_ray_job_list,
    parse_ray_job_status,
    parse_ray_job_submit_id,
    parse_ray_status,
)
from tui.core.state import RayJobState, RayState
from tests.samples import FUZZ, read_sample, samples_dir


ACTIVE_4x8 = "ray/01_ray_status_4node_32GPU_Active_format.txt"
TOTAL_2x8 = "ray/02_ray_status_2node_16GPU_TotalUsage_TotalConstraints_newer.txt"
JOB_CLI = "ray/05_ray_job_cli_outputs.txt"


def job_cli_sources() -> dict[str, str]:
    """The job CLI sample's sources A..D, keyed by letter."""
    text = read_sample(JOB_CLI, strip_source=False)
    parts = re.split(r"^# SOURCE ([A-D])\b.*$", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


# ---------------------------------------------------------------------- ray status


@pytest.mark.parametrize("strip_source", [True, False])
def test_status_active_format_4_nodes_32_gpus(strip_source: bool) -> None:
    state = parse_ray_status(read_sample(ACTIVE_4x8, strip_source=strip_source))
    assert state.available and state.error is None and state.source == "ray status"
    assert (state.nodes_alive, state.nodes_dead) == (4, 0)
    assert (state.gpus_used, state.gpus_total) == (32.0, 32.0)
    assert [n.node_id[:8] for n in state.nodes] == ["5d49b419", "59308d67", "4c0f7b67", "01021d1b"]
    assert all(n.alive for n in state.nodes)


def test_status_total_usage_format_2_nodes_16_gpus() -> None:
    state = parse_ray_status(read_sample(TOTAL_2x8, strip_source=False))  # with the prompt line
    assert state.available
    assert (state.nodes_alive, state.nodes_dead) == (2, 0)
    assert (state.gpus_used, state.gpus_total) == (0.0, 16.0)
    assert len(state.nodes) == 2


NEWER_VERBOSE = """\
======== Autoscaler status: 2025-10-01 10:00:00.000000 ========
GCS request time: 0.001s

Node status
---------------------------------------------------------------
Active:
 1 node_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
 1 node_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
Idle:
 1 node_cccccccccccccccccccccccccccccccccccccccccccccccccccccccc
Pending:
 (no pending nodes)
Recent failures:
 node_dddddddddddddddddddddddddddddddddddddddddddddddddddddddd: NodeTerminated (ip: 10.10.142.71)
 ray.worker.gpu: LaunchFailed (latest_attempt: 10:00:00)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/384.0 CPU
 16.0/24.0 GPU (16.0 used of 16.0 reserved in placement groups)
 0B/3.91TiB memory
 0B/18.63GiB object_store_memory

From request_resources:
 (none)
Pending Demands:
 (no resource demands)

Node: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa (node_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa)
 Id: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
 Usage:
  0.0/96.0 CPU
  8.0/8.0 GPU
 Activity:
  Resource: GPU currently in use.

Node: cccccccccccccccccccccccccccccccccccccccccccccccccccccccc (node_cccccccccccccccccccccccccccccccccccccccccccccccccccccccc)
 Id: cccccccccccccccccccccccccccccccccccccccccccccccccccccccc
 Idle: 12000 ms
 Usage:
  0.0/96.0 CPU
  0.0/8.0 GPU
 Activity:
  (no activity)
"""


def test_status_newer_idle_failures_verbose() -> None:
    state = parse_ray_status(NEWER_VERBOSE)
    assert state.available
    assert state.nodes_alive == 3  # Active 2 + Idle 1
    assert state.nodes_dead == 1  # NodeTerminated only; LaunchFailed is not a node
    assert (state.gpus_used, state.gpus_total) == (16.0, 24.0)  # cluster line, not a node's
    nodes = {n.node_id[0]: n for n in state.nodes}
    assert set(nodes) == {"a", "b", "c", "d"}
    assert (nodes["a"].gpus_used, nodes["a"].gpus_total) == (8.0, 8.0)
    assert (nodes["c"].gpus_used, nodes["c"].gpus_total, nodes["c"].alive) == (0.0, 8.0, True)
    assert (nodes["d"].alive, nodes["d"].address) == (False, "10.10.142.71")


def test_status_autoscaler_node_types_count() -> None:
    text = read_sample(ACTIVE_4x8).replace(
        " 1 node_5d49b4192028cade9fcc36bf741baa374e6169db9d4aeeb264850668\n", " 3 ray.worker.gpu\n"
    )
    assert parse_ray_status(text).nodes_alive == 6


def test_status_with_ansi_and_crlf() -> None:
    text = "\x1b[1m" + read_sample(ACTIVE_4x8).replace("GPU", "\x1b[32mGPU\x1b[0m").replace("\n", "\r\n")
    state = parse_ray_status(text)
    assert (state.nodes_alive, state.gpus_total) == (4, 32.0)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("ConnectionError: Could not find any running Ray instance. Please specify the one to connect to "
         "by setting `--address` flag or `RAY_ADDRESS` environment variable.\n", "Could not find any running Ray"),
        ("No cluster status. It may take a few seconds for the Ray internal services to start up.\n",
         "No cluster status"),
        ("bash: ray: command not found\n", "command not found"),
        ("", "printed nothing"),
        ("hello\n", "no Ray status"),
    ],
)
def test_status_errors(text: str, needle: str) -> None:
    state = parse_ray_status(text)
    assert not state.available and state.source == "ray status"
    assert needle in (state.error or "")
    assert (state.nodes_alive, state.gpus_total) == (0, 0.0)


# ------------------------------------------------------------------------- ray jobs


def test_job_list_repr_sample() -> None:
    jobs = parse_ray_job_list(job_cli_sources()["A"])
    assert len(jobs) == 1
    job = jobs[0]
    assert (job.id, job.status) == ("raysubmit_fAZRRVStVyyS5xnu", "RUNNING")
    assert job.entrypoint == "python run_hp_search.py"
    assert job.message == "Job is currently running."
    assert job.start_time == pytest.approx(1692980228.147)  # ms -> s
    assert job.end_time is None


def test_job_list_pprint_of_several_jobs() -> None:
    """Ray 2.60's `ray job list` prints pprint.pformat(list_jobs()): one job a line."""
    line = (
        "JobDetails(type=<JobType.SUBMISSION: 'SUBMISSION'>, job_id='{jid}', submission_id='{sid}', "
        "driver_info=None, status=<JobStatus.{st}: '{st}'>, entrypoint=\"python3 -m verl.trainer.main_ppo "
        "algorithm.adv_estimator=grpo 'status=RUNNING'\", message='Job failed due to an application error, "
        "last available logs:\\nTraceback\\n', error_type=None, start_time=1692980228147, end_time={end}, "
        "metadata={{}}, runtime_env={{'env_vars': {{'A': 'x=1'}}}}, driver_agent_http_address=None, "
        "driver_node_id=None, driver_exit_code=None)"
    )
    text = (
        "[" + line.format(jid="03000000", sid="raysubmit_one", st="FAILED", end="1692980238147") + ",\n "
        + line.format(jid="04000000", sid="None", st="RUNNING", end="None") + "]\n"
    ).replace("submission_id='None'", "submission_id=None")
    jobs = parse_ray_job_list(text)
    assert [(j.id, j.status) for j in jobs] == [("raysubmit_one", "FAILED"), ("04000000", "RUNNING")]
    assert jobs[0].entrypoint.endswith("'status=RUNNING'")
    assert jobs[0].message == "Job failed due to an application error, last available logs:\nTraceback\n"
    assert jobs[0].end_time == pytest.approx(1692980238.147)


def test_job_list_dashboard_json() -> None:
    data = [
        {"job_id": "02000000", "submission_id": "raysubmit_x", "status": "SUCCEEDED", "entrypoint": "python a.py",
         "message": "Job finished successfully.", "start_time": 1700000000000, "end_time": 1700000100000},
        {"job_id": "01000000", "submission_id": None, "status": "FAILED", "entrypoint": ""},
    ]
    jobs = parse_ray_job_list("Job submission server address: http://127.0.0.1:8265\n" + json.dumps(data))
    assert [(j.id, j.status) for j in jobs] == [("raysubmit_x", "SUCCEEDED"), ("01000000", "FAILED")]
    assert jobs[0].end_time == pytest.approx(1700000100.0)


def test_job_list_older_mapping_fragment_source_d() -> None:
    fragment = job_cli_sources()["D"]
    body = fragment[fragment.index('"raysubmit'):].rstrip().rstrip(",")
    jobs = parse_ray_job_list("{" + body + "}}")
    assert [(j.id, j.status) for j in jobs] == [("raysubmitWshwfnsmnr1Qtjex", "FAILED")]
    assert (jobs[0].message or "").startswith("Job failed due to an application error")


def test_job_status_source_b() -> None:
    job = parse_ray_job_status(job_cli_sources()["B"])
    assert job == RayJobState(
        id="raysubmit_8cQxrAChfX9BYKUW", status="RUNNING", message="Job is currently running."
    )


def test_job_submit_then_failed_source_c() -> None:
    text = job_cli_sources()["C"]
    assert parse_ray_job_submit_id(text) == "raysubmit_zU9BFLQ4RxXdxY6j"
    job = parse_ray_job_status(text)
    assert job is not None
    assert (job.id, job.status) == ("raysubmit_zU9BFLQ4RxXdxY6j", "FAILED")
    assert job.message == "Unexpected error occurred: The actor died unexpectedly before finishing this task."


def test_job_submit_no_wait_is_pending() -> None:
    text = job_cli_sources()["C"].split("Tailing logs")[0]
    job = parse_ray_job_status(text)
    assert job is not None and (job.id, job.status, job.message) == ("raysubmit_zU9BFLQ4RxXdxY6j", "PENDING", None)


def test_job_stop_source_a_tail() -> None:
    text = job_cli_sources()["A"].split("$ ray job stop")[1]
    assert parse_ray_job_status(text) is None  # "Job has not exited " was cut before its status
    text += "Job has not exited yet. Status: RUNNING\n\x1b[33mJob 'raysubmit_fAZRRVStVyyS5xnu' was stopped\x1b[0m\n"
    job = parse_ray_job_status(text)
    assert job is not None and (job.id, job.status) == ("raysubmit_fAZRRVStVyyS5xnu", "STOPPED")


@pytest.mark.parametrize(
    "text,status",
    [
        ("-------------------------------\nJob 'raysubmit_a' succeeded\n-------------------------------\n", "SUCCEEDED"),
        ("Status for job 'raysubmit_a': JobStatus.PENDING\n", "PENDING"),
        ("Status for job 'raysubmit_a': STOPPED\nStatus message: Job was intentionally stopped.\n", "STOPPED"),
    ],
)
def test_job_status_variants(text: str, status: str) -> None:
    job = parse_ray_job_status(text)
    assert job is not None and job.id == "raysubmit_a" and job.status == status


@pytest.mark.parametrize(
    "text",
    [
        "",
        "RuntimeError: Request failed with status code 404: Job raysubmit_x does not exist.\n",
        "ConnectionError: Failed to connect to Ray at address: http://127.0.0.1:8265.\n",
        "Status for job 'raysubmit_a': RUNN",
    ],
)
def test_job_status_none(text: str) -> None:
    assert parse_ray_job_status(text) is None
    assert parse_ray_job_list(text) == []
    assert parse_ray_job_submit_id(text) is None


# --------------------------------------------------------------------------- fuzzing


@FUZZ
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    assert isinstance(parse_ray_status(text), RayState)
    assert isinstance(parse_ray_job_list(text), list)
    job = parse_ray_job_status(text)
    assert job is None or isinstance(job, RayJobState)
    parse_ray_job_submit_id(text)


@FUZZ
@given(st.data())
def test_status_prefix_never_invents_values(data: st.DataObject) -> None:
    raw = (samples_dir() / ACTIVE_4x8).read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    state = parse_ray_status(raw[:cut].decode("utf-8", errors="ignore"))
    assert 0 <= state.nodes_alive <= 4 and state.nodes_dead == 0
    assert (state.gpus_used, state.gpus_total) in {(0.0, 0.0), (32.0, 32.0)}


@FUZZ
@given(st.data())
def test_job_cli_prefix_never_invents_values(data: st.DataObject) -> None:
    raw = (samples_dir() / JOB_CLI).read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    text = raw[:cut].decode("utf-8", errors="ignore")
    for job in parse_ray_job_list(text):
        assert job.id in {"raysubmit_fAZRRVStVyyS5xnu", "02000000"}
        assert job.status == "RUNNING"
        assert job.start_time in (None, pytest.approx(1692980228.147))
    job = parse_ray_job_status(text)
    if job is not None:
        assert job.status in {"RUNNING", "PENDING", "FAILED"}
