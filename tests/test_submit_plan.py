"""`s` says what it will launch and asks; u/m/c/r ask while a training job runs (issue 14,
item 5). The plan is the core's (`tui/core/actions/plan.py`): the console's modal and the
CLI's `submit` prompt and `--dry-run` show the same lines.

On the demo backend (Pilot), and on the live path: `LiveBackend.submit_plan` and the CLI
over a real SSH server (the checkpoint tracker read with a real shell)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.conftest import make_node
from tui.app import RlconsoleApp
from tui.backend.static import demo_backend, demo_profile, demo_state
from tui.cli import main
from tui.core.actions.plan import FRESH_S, build_plan, running_job_text
from tui.core.checks import CheckResult, CheckStatus
from tui.core.profile import SshSettings, packaged_profiles_dir
from tui.screens.main import MainScreen
from tui.screens.preflight import PreflightScreen
from widgets.confirm import ConfirmationModal
from widgets.log_pane import LogPane

SIZE = (120, 40)
WAIT_S = 60.0
PASSING = [CheckResult("profile", CheckStatus.PASS, "profile valid"),
           CheckResult("ssh.reachable", CheckStatus.PASS, "4/4 nodes reachable"),
           CheckResult("model.expert_parallel", CheckStatus.WARN, "expert_model_parallel_size=8 on a dense model")]


async def settle(pilot) -> None:
    await pilot.pause()
    if isinstance(pilot.app.screen, MainScreen):
        pilot.app.screen.query_one(LogPane).flush()
    await pilot.pause()


async def until(pilot, cond, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "condition not reached"
        await pilot.pause(0.05)


def _idle_demo(checks: list[CheckResult] | None = None):
    """The demo with its job finished (SUCCEEDED at step 812, last checkpoint 800)."""
    b = demo_backend(check_results=checks)
    b.state = demo_state(b.profile, job_status="SUCCEEDED", busy=False)
    return b


# --------------------------------------------------------------------------- the plan


def test_plan_lines_name_run_resume_cards_and_verdict() -> None:
    prof = demo_profile()
    plan = build_plan(prof, PASSING, resume_step=800)
    text = "\n".join(plan.lines())
    assert "run:     Qwen3-8B_megatron_sglang (project verl_grpo_qwen3_8b)" in text
    assert f"from step 800 ({prof.paths.checkpoint_dir}/global_step_800)" in text
    assert "cards:   32 on 4 nodes, head node125" in text
    assert "steps:   2710, about " in text and "15-20 min a step" in text
    assert "preflight: 2 passed, 1 warnings, 0 failed" in text
    assert plan.ok and "refuse" not in text

    scratch = build_plan(prof, PASSING, resume_step=None)
    assert scratch.resume == f"from scratch (no checkpoint in {prof.paths.checkpoint_dir})"


def test_plan_refuses_on_a_failed_check_or_a_running_job() -> None:
    prof = demo_profile()
    failing = [*PASSING, CheckResult("ray.cluster", CheckStatus.FAIL, "Ray is not running", node=None)]
    plan = build_plan(prof, failing, resume_step=None)
    assert not plan.ok and plan.failed_ids == ("ray.cluster",)
    assert "preflight: 2 passed, 1 warnings, 1 failed (ray.cluster)" in plan.lines()
    assert any("submit will refuse" in ln for ln in plan.lines())

    running = running_job_text(demo_state(prof))
    assert running == "job raysubmit_8Hk2xQ4vTnB1 at step 812"
    busy = build_plan(prof, PASSING, resume_step=800, running=running)
    assert not busy.ok and any(ln.startswith(f"running: {running}") for ln in busy.lines())
    assert running_job_text(demo_state(prof, job_status="SUCCEEDED")) is None


def test_a_verdict_is_fresh_only_when_it_passed_and_is_recent() -> None:
    prof = demo_profile()
    plan = build_plan(prof, PASSING, resume_step=None, now=1000.0)
    assert plan.fresh(now=1000.0 + FRESH_S / 2)
    assert not plan.fresh(now=1000.0 + FRESH_S + 1)
    failed = build_plan(prof, [CheckResult("x", CheckStatus.FAIL, "no")], resume_step=None, now=1000.0)
    assert not failed.fresh(now=1000.0)


# --------------------------------------------------------------------------- the console


async def test_s_shows_the_plan_and_cancel_submits_nothing() -> None:
    b = _idle_demo(PASSING)
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        modal = app.screen
        assert modal.title_text == "Submit Qwen3-8B_megatron_sglang?"
        assert "cards:   32 on 4 nodes, head node125" in modal.message
        assert "from step 800" in modal.message
        assert "preflight: 2 passed, 1 warnings, 0 failed" in modal.message
        await pilot.press("n")
        await settle(pilot)
        assert b.calls == [] and isinstance(app.screen, MainScreen)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        await pilot.press("y")
        await until(pilot, lambda: b.calls != [])
        assert b.calls == [("submit", {})]


async def test_s_with_a_failing_check_refuses_and_offers_the_checks() -> None:
    b = _idle_demo()  # the demo's preflight: actor.pipeline_layers fails
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        assert app.screen.title_text == "Submit would be refused"
        assert "1 failed (actor.pipeline_layers)" in app.screen.message
        assert "Show checks" in app.screen.confirm_label
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, PreflightScreen))
        assert app.screen.rows[0].id == "actor.pipeline_layers"
    assert b.calls == []


async def test_s_while_a_job_runs_refuses() -> None:
    b = demo_backend(check_results=PASSING)  # the demo's job RUNNING at step 812
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        assert app.screen.title_text == "Submit would be refused"
        assert "running: job raysubmit_8Hk2xQ4vTnB1 at step 812" in app.screen.message
        await pilot.press("n")
        await settle(pilot)
    assert b.calls == []


@pytest.mark.parametrize("key,action,risk", [
    ("u", "containers", "recreates a container"), ("m", "model", "competes with it"),
    ("c", "convert", "loads the model on the head's cards"), ("r", "setup-ray", "the job dies")])
async def test_cluster_keys_ask_while_a_job_runs(key: str, action: str, risk: str) -> None:
    b = demo_backend()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        assert "A training job is running (job raysubmit_8Hk2xQ4vTnB1 at step 812)" in app.screen.message
        assert risk in app.screen.message
        await pilot.press("n")
        await settle(pilot)
        assert b.calls == [] and isinstance(app.screen, MainScreen)


@pytest.mark.parametrize("key,action", [("u", "containers"), ("m", "model"), ("c", "convert"), ("r", "setup-ray")])
async def test_cluster_keys_act_at_once_without_a_job(key: str, action: str) -> None:
    b = _idle_demo()
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await until(pilot, lambda: b.calls != [])
        assert b.calls == [(action, {})]
        assert not isinstance(app.screen, ConfirmationModal)


# --------------------------------------------------------------------------- the live path


def _direct_profile(node, ssh_kit, ckpt: Path):
    """A one-node profile whose container access is `direct` (commands run on the SSH
    server's own shell), with the checkpoint directory in a temp dir."""
    base = demo_profile(1, 8)
    return replace(base, nodes=[node], container=replace(base.container, access="direct"),
                   paths=replace(base.paths, checkpoint_dir=str(ckpt)),
                   ssh=SshSettings(known_hosts=str(ssh_kit.known_hosts), connect_timeout_s=10))


@pytest.mark.parametrize("tracker,want", [("812\n", 812), (None, None), ("12abc", None),
                                          ("9" * 5000, None), ("  40  ", 40),
                                          ("٣\n", None)])  # ASCII digits only: int() reads "٣" as 3
async def test_live_plan_reads_the_tracker_over_ssh(node_server, ssh_kit, tmp_path: Path,
                                                    tracker: str | None, want: int | None) -> None:
    """LiveBackend.submit_plan over a real SSH server: the resume step is the tracker's
    integer (an untrusted answer: anything else is no checkpoint), the checks ran."""
    from tui.backend.live import LiveBackend

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    if tracker is not None:
        (ckpt / "latest_checkpointed_iteration.txt").write_text(tracker)
    srv = await node_server()
    prof = _direct_profile(make_node("node1", "127.0.0.1", srv.port, ssh_kit.client_key), ssh_kit, ckpt)
    backend = LiveBackend(prof)
    try:
        assert (await asyncio.wait_for(backend.pool.open(), WAIT_S)) == {"node1": True}
        plan = await asyncio.wait_for(backend.submit_plan(), WAIT_S)
    finally:
        await asyncio.wait_for(backend.stop(), WAIT_S)
    assert plan.resume_step == want
    assert plan.resume.startswith(f"from step {want}" if want is not None else "from scratch")
    assert plan.cards == 8 and plan.head == "node1"
    assert plan.passed + plan.warnings + len(plan.failed_ids) > 3  # the live checks ran
    assert srv.commands > 0


def _profile_file(tmp_path: Path, port: int, ssh_kit, ckpt: Path) -> Path:
    data = yaml.safe_load((packaged_profiles_dir() / "qwen3-8b-grpo-32gpu.yaml").read_text())
    import getpass

    data["nodes"] = [{"name": "node1", "address": "127.0.0.1", "gpus": 8, "role": "head",
                      "ssh": {"port": port, "user": getpass.getuser(), "identity": str(ssh_kit.client_key)}}]
    data["ssh"] = {"known_hosts": str(ssh_kit.known_hosts), "connect_timeout_s": 10}
    data["container"]["access"] = "direct"
    data["paths"]["checkpoint_dir"] = str(ckpt)
    p = tmp_path / "direct.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


async def test_cli_submit_dry_run_prints_the_plan(node_server, ssh_kit, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "latest_checkpointed_iteration.txt").write_text("300\n")
    srv = await node_server()
    p = _profile_file(tmp_path, srv.port, ssh_kit, ckpt)
    # main() runs its own event loop: in a thread, as a user's shell would run it
    rc = await asyncio.wait_for(asyncio.to_thread(main, ["submit", "--profile", str(p), "--dry-run", "--json"]),
                                WAIT_S)
    out = capsys.readouterr().out
    doc = json.loads(out.splitlines()[0])["plan"]
    assert doc["resume_step"] == 300 and doc["cards"] == 8 and doc["run_name"] == "Qwen3-8B_megatron_sglang"
    assert rc == (0 if doc["ok"] else 1)
    assert doc["failed"], "a node without Ray or the model fails the preflight"  # so the plan refuses
    assert rc == 1

    rc = await asyncio.wait_for(asyncio.to_thread(main, ["submit", "--profile", str(p), "--dry-run"]), WAIT_S)
    text = capsys.readouterr().out
    assert "submit: resume:  from step 300" in text and "submit: cards:   8 on 1 nodes, head node1" in text
    assert "submit will refuse" in text and rc == 1


def test_cli_submit_headless_without_yes_refuses_before_connecting(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((packaged_profiles_dir() / "qwen3-8b-grpo-32gpu.yaml").read_text())
    for i, n in enumerate(data["nodes"]):
        n["address"] = f"127.0.0.{i + 2}"
        n.pop("ssh", None)
    data.setdefault("ssh", {})["port"] = 1  # nothing listens: a connection attempt would show
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["submit", "--profile", str(p)]) == 2  # stdin is not a terminal under pytest
    err = capsys.readouterr().err
    assert "refusing without --yes (no terminal to ask on)" in err and len(err.strip().splitlines()) == 1



# --------------------------------------------------------------------------- a finished run, --fresh


def test_a_finished_run_is_said_and_fresh_overwrites_named() -> None:
    """A checkpoint at the last step: a resume would end at once (issue 36 major 9)."""
    from tui.core.actions.resume import fresh_profile
    from tui.core.render import entrypoint

    prof = demo_profile()
    total = build_plan(prof, PASSING, None).total_steps
    assert total
    plan = build_plan(prof, PASSING, total)
    assert plan.finished and plan.ok
    assert any(ln.startswith(f"finished: the checkpoint is the run's last step ({total} of {total})")
               and "submit --fresh" in ln for ln in plan.lines())
    assert plan.to_json()["finished"] is True
    assert not build_plan(prof, PASSING, total - 10).finished and not build_plan(prof, PASSING, None).finished

    fresh = build_plan(prof, PASSING, total, fresh=True)
    assert not fresh.finished and fresh.from_scratch and fresh.resume_run is None
    assert fresh.resume == "from scratch (trainer.resume_mode=disable)"
    assert any(ln.startswith(f"fresh:   the checkpoints in {prof.paths.checkpoint_dir} (up to step {total})")
               for ln in fresh.lines())
    argv = entrypoint(fresh_profile(replace(prof)))
    assert argv[-1] == "trainer.resume_mode=disable"
    assert not any(a.startswith(("trainer.resume_from_path", "+trainer.resume_mode")) for a in argv[:-1])
    assert "trainer.resume_mode=disable" not in entrypoint(prof)  # the profile itself is unchanged


async def test_s_on_a_finished_run_offers_a_fresh_start() -> None:
    b = _idle_demo(PASSING)
    total = build_plan(b.profile, PASSING, None).total_steps
    b.state.job.last_checkpoint = total
    app = RlconsoleApp(b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        modal = app.screen
        assert modal.title_text == f"Qwen3-8B_megatron_sglang finished at step {total}"
        assert "resuming would end at once" in modal.message and "overwritten" in modal.message
        assert modal.confirm_label == "Start fresh" and modal.destructive
        await pilot.press("y")
        await until(pilot, lambda: b.calls != [])
        assert b.calls == [("submit", {"fresh": True})]


async def test_cli_submit_on_a_finished_run_refuses_without_fresh(node_server, ssh_kit, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Over a real SSH server: the tracker at the last step; --dry-run says finished (exit
    1), --fresh --dry-run plans step 0 with VeRL's own switch."""
    from tui.core.profile import load_profile

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    srv = await node_server()
    p = _profile_file(tmp_path, srv.port, ssh_kit, ckpt)
    total = build_plan(load_profile(p), [], None).total_steps
    (ckpt / "latest_checkpointed_iteration.txt").write_text(f"{total}\n")
    rc = await asyncio.wait_for(asyncio.to_thread(main, ["submit", "--profile", str(p), "--dry-run", "--json"]),
                                WAIT_S)
    doc = json.loads(capsys.readouterr().out.splitlines()[0])["plan"]
    assert doc["finished"] is True and doc["resume_step"] == total and rc == 1
    rc = await asyncio.wait_for(asyncio.to_thread(
        main, ["submit", "--profile", str(p), "--dry-run", "--json", "--fresh"]), WAIT_S)
    doc = json.loads(capsys.readouterr().out.splitlines()[0])["plan"]
    assert doc["fresh"] is True and doc["finished"] is False
    assert doc["resume"] == "from scratch (trainer.resume_mode=disable)"
