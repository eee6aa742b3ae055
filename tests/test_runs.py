"""`rlconsole runs` (issue 30, item 1) and the resume link (item 4): every run of the
profile from the local history and spools, with no SSH, marking what it cannot know."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.cli import main
from tui.core.job.history import RunRecord, record_run
from tui.core.alert import Alert
from tui.core.job.journal import Journal, alert_entry, checkpoint_entry, state_entry
from tui.core.locations import spool_root

REPO = Path(__file__).resolve().parent.parent
PROFILE = str(REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml")


def _run(job_id: str, t: float, extra: dict | None = None, profile: str = "qwen3-8b-grpo-32gpu") -> Path:
    record_run(RunRecord(profile=profile, profile_path=PROFILE, job_id=job_id, submitted_at=t,
                         entrypoint=["python3", "-m", "verl"], runtime_env={"env_vars": {}},
                         checkpoint_dir="/data/ckpt", extra=extra or {}))
    base = spool_root() / job_id
    base.mkdir(parents=True, exist_ok=True)
    return base


def _log(base: Path, steps: dict[int, float], total: int = 100) -> None:
    lines = [f"Total training steps: {total}"]
    lines += [f"(TaskRunner pid=7) step:{s} - critic/rewards/mean:{r} - perf/throughput:{600 + s}"
              for s, r in steps.items()]
    (base / "driver.log").write_text("\n".join(lines) + "\n")


def test_runs_from_history_spools_and_journals_without_ssh(capsys: pytest.CaptureFixture[str]) -> None:
    a = _run("raysubmit_A", 1000.0, {"cards": 32, "run_name": "grpo-a"})
    _log(a, {1: 0.1, 2: 0.6, 3: 0.4})
    Journal(a).append([state_entry("PENDING", None, "console", at=1000.0),
                       state_entry("RUNNING", None, "console", at=1100.0),
                       checkpoint_entry(3, "console", at=1500.0),
                       state_entry("FAILED", 3, "watch", at=1100.0 + 1800)])
    Journal(a).append(alert_entry(Alert("error", "log", "CUDA out of memory", line=3, at=2800.0,
                                        diagnosis="cuda-oom"), "console"))
    b = _run("raysubmit_B", 5000.0, {"cards": 32, "parent": {"job_id": "raysubmit_A", "step": 3}})
    _log(b, {4: 0.7})  # nobody watched it: no journal
    _run("raysubmit_other", 6000.0, profile="another-profile")
    assert main(["runs", "--json", "-P", PROFILE]) == 0
    got = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(got) == ["raysubmit_A", "raysubmit_B"]
    ra, rb = got["raysubmit_A"], got["raysubmit_B"]
    assert ra["status"] == "FAILED" and ra["step"] == 3 and ra["total_steps"] == 100 and ra["name"] == "grpo-a"
    assert ra["gpu_hours"] == pytest.approx(32 * 0.5)  # RUNNING from 1100 to 2900
    assert ra["wall_s"] == pytest.approx(1900.0) and ra["ended_at"] == 2900.0
    assert ra["last_reward"] == 0.4 and ra["best_reward"] == 0.6 and ra["mean_throughput"] == pytest.approx(602)
    assert ra["diagnosis"] == "cuda-oom" and ra["last_checkpoint"] == 3 and ra["parent"] is None
    assert rb["parent"] == {"job_id": "raysubmit_A", "step": 3} and rb["step"] == 4
    assert rb["status"] == "UNKNOWN" and rb["gpu_hours"] is None
    assert {"status", "gpu_hours", "ended_at", "wall_s"} <= set(rb["unknown"])
    assert "gpu_hours" not in ra["unknown"]
    assert main(["runs", "-P", PROFILE]) == 0
    text = capsys.readouterr().out
    assert "resumed from step 3 of raysubmit_A" in text and "diagnosis: cuda-oom" in text


def test_a_spool_the_history_does_not_name_is_listed_when_its_journal_says_whose(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = spool_root() / "raysubmit_lost"
    base.mkdir(parents=True)
    _log(base, {1: 0.2})
    e = state_entry("RUNNING", None, "watch", at=100.0)
    e.data["profile"] = "qwen3-8b-grpo-32gpu"
    Journal(base).append(e)
    (spool_root() / "raysubmit_foreign").mkdir()
    assert main(["runs", "--json", "-P", PROFILE]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in got] == ["raysubmit_lost"] and got[0]["status"] == "RUNNING"
    assert got[0]["cards"] == 32 and got[0]["gpu_hours"] > 0  # still RUNNING: counted up to now


def test_submit_plan_names_the_run_it_resumes(tmp_path: Path) -> None:
    from tui.core.actions.plan import build_plan, resume_parent
    from tui.core.profile import load_profile

    prof = load_profile(PROFILE)
    ck = prof.paths.checkpoint_dir
    record_run(RunRecord(profile=prof.name, profile_path=PROFILE, job_id="raysubmit_old", submitted_at=1.0,
                         entrypoint=[], runtime_env={}, checkpoint_dir=ck))
    record_run(RunRecord(profile=prof.name, profile_path=PROFILE, job_id="raysubmit_prev", submitted_at=2.0,
                         entrypoint=[], runtime_env={}, checkpoint_dir=ck))
    record_run(RunRecord(profile=prof.name, profile_path=PROFILE, job_id="raysubmit_elsewhere", submitted_at=3.0,
                         entrypoint=[], runtime_env={}, checkpoint_dir="/other/dir"))
    Journal.for_job("raysubmit_old").append(checkpoint_entry(40, "console"))
    assert resume_parent(prof, 40) == "raysubmit_old"  # the run that wrote step 40
    assert resume_parent(prof, 60) == "raysubmit_prev"  # else the last run on that dir
    assert resume_parent(prof, None) is None
    plan = build_plan(prof, [], 40, resume_run="raysubmit_old")
    assert "from step 40" in plan.lines()[1] and "the checkpoint of run raysubmit_old" in plan.lines()[1]
    assert plan.to_json()["resume_run"] == "raysubmit_old"


def test_gpu_hours_follow_the_states_in_time_order_whoever_wrote_them_first() -> None:
    from tui.core.job.runs import list_runs

    base = _run("raysubmit_C", 100.0, {"cards": 16})
    # the console saw RUNNING before the CLI wrote its (earlier) PENDING
    Journal(base).append([state_entry("RUNNING", None, "console", at=200.0),
                          state_entry("PENDING", None, "cli", at=100.0),
                          state_entry("STOPPED", 3, "cli", at=200.0 + 1800)])
    (r,) = list_runs("qwen3-8b-grpo-32gpu")
    assert r.status == "STOPPED" and r.gpu_hours == pytest.approx(16 * 0.5) and r.ended_at == 2000.0


def test_runs_rows_are_told_apart_in_one_unit_each(capsys: pytest.CaptureFixture[str]) -> None:
    """Ids that share a long start keep their unique end; wall time is a duration; throughput
    is per node (the seed's 8 cards a node), as the training pane shows it."""
    ids = [f"Qwen3-8B_megatron_sglang-20261206-01{n}" for n in ("2538", "3112")]
    for rid in ids:
        base = _run(rid, 1000.0, {"cards": 32})
        _log(base, {1: 0.5})
        Journal(base).append([state_entry("RUNNING", None, "console", at=1000.0),
                              state_entry("FAILED", 1, "console", at=1000.0 + 190)])
    assert main(["runs", "-P", PROFILE]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ids  # 40 characters: whole
    assert all(" 3m10s " in r for r in rows), rows
    assert all(" 4,808 " in r for r in rows), rows  # 601 tokens/s a card x 8 cards a node


def test_a_long_id_keeps_its_end() -> None:
    from tui.cli.runs import ID_WIDTH, _fit

    rid = "a-very-long-experiment-name-for-a-sweep_lr1e-6_bs64-20261206-013112"
    cut = _fit(rid, ID_WIDTH)
    assert len(cut) == ID_WIDTH and cut.endswith("20261206-013112") and cut.startswith("a-very")


def test_runs_does_not_follow_a_symlinked_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 39 S7: a link in the spool to a folder elsewhere (another user's, `/`) is not a
    run: `runs` neither reads it nor writes its parse cache there (before: it followed it,
    listed its journal's run and wrote parsed.json into the target)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _log(elsewhere, {1: 0.2})
    e = state_entry("RUNNING", None, "watch", at=100.0)
    e.data["profile"] = "qwen3-8b-grpo-32gpu"
    Journal(elsewhere).append(e)
    before = sorted(p.name for p in elsewhere.iterdir())
    spool_root().mkdir(parents=True, exist_ok=True)
    (spool_root() / "raysubmit_link").symlink_to(elsewhere, target_is_directory=True)
    real = spool_root() / "raysubmit_real"
    real.mkdir()
    Journal(real).append(e)
    assert main(["runs", "--json", "-P", PROFILE]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in got] == ["raysubmit_real"]
    assert sorted(p.name for p in elsewhere.iterdir()) == before


def test_runs_sort_by_a_figure_biggest_first_and_those_without_it_last(capsys: pytest.CaptureFixture[str]) -> None:
    """`--sort` (issue 36, nice to have: runs by reward or GPU-hours, as htop sorts): the
    order of the figure, biggest first; a run that recorded none comes last, not first as a
    None-as-zero or a string sort would put it; an unknown key is a usage error, exit 2."""
    _log(_run("raysubmit_low", 1000.0), {1: 0.1, 2: 0.2})
    _log(_run("raysubmit_high", 2000.0), {1: 0.9})
    _run("raysubmit_none", 3000.0)  # no log: no reward
    _log(_run("raysubmit_mid", 4000.0), {1: 0.5, 2: 0.6})

    def ids(*args: str) -> list[str]:
        assert main(["runs", "--json", "-P", PROFILE, *args]) == 0
        return [r["id"] for r in json.loads(capsys.readouterr().out)]

    assert ids() == ["raysubmit_low", "raysubmit_high", "raysubmit_none", "raysubmit_mid"]
    assert ids("--sort", "reward") == ["raysubmit_high", "raysubmit_mid", "raysubmit_low", "raysubmit_none"]
    assert ids("--sort", "steps") == ["raysubmit_low", "raysubmit_mid", "raysubmit_high", "raysubmit_none"]
    assert ids("--sort", "started") == ids()
    assert main(["runs", "-P", PROFILE, "--sort", "reward"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows == ["raysubmit_high", "raysubmit_mid", "raysubmit_low", "raysubmit_none"]
    assert main(["runs", "-P", PROFILE, "--sort", "colour"]) == 2
    err = capsys.readouterr().err
    assert "colour" in err and "reward" in err and "gpu-hours" in err and "Traceback" not in err


def test_the_sort_help_names_every_order_the_core_has() -> None:
    """The `--sort` help is written out (the CLI does not import the core to parse its
    arguments); it must not drift from `RUN_SORTS`."""
    from tui.cli.main import build_parser
    from tui.core.job.runs import RUN_SORTS

    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    action = next(a for a in sub.choices["runs"]._actions if a.dest == "sort")
    missing = [k for k in RUN_SORTS if k not in (action.help or "")]
    assert not missing, (missing, action.help)
