"""`rlconsole status`: the JSON contract, the 80-column table, exit 0 even when every
node is down."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

import pytest


from tui.core.profile import load_profile
from tui.core.state import ClusterState, ContainerState, GpuCard, GpuReport, NodeState, RayState
from tui.cli.status import render_table, run_status


def _state() -> ClusterState:
    cards = [GpuCard(index=i, name="MTT S5000", util_pct=10.0 * i, mem_used_mib=1024.0 * i, mem_total_mib=81920.0,
                     temp_c=48.0 + i, power_w=97.0) for i in range(8)]
    return ClusterState(
        profile="sim-4x8", simulated=True, taken_at=0.0,
        nodes=[
            NodeState("node1", "127.0.0.2", "head", True, None, ContainerState("train-rl", "running"),
                      GpuReport("mthreads-gmi", cards)),
            NodeState("node2", "127.0.0.3", "worker", False,
                      "host key for 127.0.0.3:2222 not in known_hosts /x/known_hosts: verify it (compare its "
                      "fingerprint with the node's `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`) and add "
                      "it with: ssh-keyscan -p 2222 127.0.0.3 >> /x/known_hosts"),
            NodeState("node3-with-a-very-long-name", "127.0.0.4", "worker", True, None,
                      ContainerState("train-rl", "absent"),
                      GpuReport("mthreads-gmi", [], parsed=False, error="Failed to initialize MTML")),
        ],
        ray=RayState(available=False, error="Ray is not running (nothing listens on 127.0.0.2:6379)"),
    )


def test_table_fits_80_columns_and_says_simulated():
    text = render_table(_state())
    assert "SIMULATED" in text
    assert all(len(line) <= 80 for line in text.splitlines()), max(text.splitlines(), key=len)
    assert "ssh-keyscan -p 2222 127.0.0.3 >> /x/known_hosts" in text.replace("\n    ", " ")  # wrapped, not cut
    assert "unparsed" in text and "Failed to initialize MTML" in text
    assert "DOWN" in text and "Ray: not available" in text and "Job: none" in text
    row = next(line for line in text.splitlines() if line.startswith("node1"))
    assert "running" in row and "8" in row and "35%/70%" in row


def test_what_is_simulated_is_said():
    text = render_table(_state(), sim_notes=("trainer on VeRL 0.7.0 config", "containers: simulated (no dockerd)"))
    lines = text.splitlines()
    assert "simulated cluster: trainer on VeRL 0.7.0 config" in lines
    assert "simulated cluster: containers: simulated (no dockerd)" in lines


def test_a_failed_job_names_its_cause_and_fix_in_plain_status():
    """Not only `--json`: the text form says why the job failed and what to do, wrapped in 80."""
    from tui.core.state import JobState

    st = _state()
    st.job = JobState("raysubmit_1", "FAILED", step=25, total_steps=160, diagnosis={
        "id": "musa-oom", "title": "A card ran out of memory (MUSA out of memory, tried to allocate 2.00 GiB)",
        "fix": "Lower actor_rollout_ref.rollout.gpu_memory_utilization or the micro-batch size; " * 2,
        "line": 106, "also": []})
    text = render_table(st)
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Job: raysubmit_1 FAILED step 25/160"))
    assert lines[at + 1].startswith("     cause: A card ran out of memory") and "(log line 107)" in text
    assert any(ln.startswith("     fix: Lower actor_rollout_ref.rollout.gpu_memory_utilization") for ln in lines)
    assert all(len(ln) <= 80 for ln in lines)
    st.job.diagnosis = None
    assert "cause:" not in render_table(st)


@pytest.mark.integration
def test_status_json_on_the_sim(sim_as_up, capsys):
    rc = run_status(sim_as_up.profile, json=True)
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["simulated"] is True
    assert len(doc["nodes"]) == 4 and all(n["reachable"] for n in doc["nodes"])
    assert sum(len(n["gpus"]) for n in doc["nodes"]) == 32
    for n in doc["nodes"]:
        assert {"name", "reachable", "container", "gpus"} <= n.keys() and "status" in n["container"]
        for g in n["gpus"]:
            assert {"index", "name", "util_pct", "mem_used_mib", "mem_total_mib", "temp_c", "power_w"} <= g.keys()
            assert g["mem_total_mib"] == 81920 and g["util_pct"] is not None
    assert {"nodes_alive", "gpus_total", "gpus_used"} <= doc["ray"].keys()
    assert doc["job"] is None


@pytest.mark.integration
def test_status_table_on_the_sim(sim_as_up):
    out = io.StringIO()
    assert run_status(sim_as_up.profile, json=False, out=out) == 0
    text = out.getvalue()
    assert "SIMULATED" in text and "4/4 reachable, 32 cards" in text
    assert all(len(line) <= 80 for line in text.splitlines())


@pytest.mark.integration
def test_status_exit_0_when_every_node_is_down(sim_as_up, tmp_path, capsys):
    # The sim's profile, with every node moved to a port where nothing listens.
    text = Path(sim_as_up.profile_path).read_text()
    for n in sim_as_up.profile.nodes:
        s = socket.socket()
        s.bind((n.address, 0))
        free = s.getsockname()[1]
        s.close()
        text = text.replace(f"port: {n.ssh.port}\n", f"port: {free}\n")
    p = tmp_path / "down.yaml"
    p.write_text(text)
    prof = load_profile(p)
    prof.ssh.connect_timeout_s = 2
    assert run_status(prof, json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["reachable"] for n in doc["nodes"]] == [False] * 4
    assert all("refused" in n["error"] for n in doc["nodes"])
    assert doc["ray"]["available"] is False
    assert run_status(prof, json=False) == 0
    assert "0/4 reachable" in capsys.readouterr().out


@pytest.mark.integration
def test_status_json_with_a_run_from_an_earlier_sim(sim_as_up, capsys):
    """After `sim down` / `sim up`, the run history still names the job of the earlier
    sim (and its spool holds its steps). The current Ray does not know it: `status
    --json` shows it as the last run (`on_cluster: false`, its last step and
    checkpoint), never as running or unknown, with no metrics and no ETA."""
    from tui.core.job.history import RunRecord, record_run
    from tui.core.job.watcher import spool_dir
    from tui.core.state import JobStatus

    prof = sim_as_up.profile
    old = "raysubmit_EarlierSim0001"
    record_run(RunRecord(profile=prof.name, profile_path=str(sim_as_up.profile_path), job_id=old,
                         submitted_at=1_700_000_000.0, entrypoint=["python3"], runtime_env={}))
    d = spool_dir() / old
    d.mkdir(parents=True)
    (d / "driver.log").write_text(
        "(TaskRunner pid=7) Total training steps: 160\n"
        + "".join(f"(TaskRunner pid=7) step:{s} - critic/rewards/mean:0.{s} - timing_s/step:1.0\n"
                  for s in range(1, 5))
        + "(TaskRunner pid=7) Training Progress:   2%|2         | 4/160 [00:04<02:51, 1.10s/it]\n")
    rc = run_status(prof, json=True)
    assert rc == 0
    job = json.loads(capsys.readouterr().out)["job"]
    assert job is not None and job["id"] == old
    assert job["on_cluster"] is False and job["status"] == JobStatus.NOT_ON_CLUSTER
    assert job["status"] not in ("RUNNING", "PENDING", "UNKNOWN")
    assert job["step"] == 4 and job["total_steps"] == 160
    assert job["metrics"] == {} and job["summary"].get("eta_s") is None
    out = io.StringIO()
    run_status(prof, json=False, out=out)
    assert f"Job: last run {old}: not on this cluster step 4/160" in out.getvalue()
