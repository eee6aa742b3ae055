"""The preflight on the real sim (real SSH, real dockerd), as a new user meets it: before
the containers exist, before the model is downloaded, with a job Python that lacks Hydra.

One cause gives one failure with its own fix; the checks that depend on it are skipped
naming it; results come grouped by check, then node, in text and in `--json`. Plus the
pure parts: the order, the folding and colouring of the text, the event round trip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import require_dockerd
from tui.cli import main
from tui.core.checks import (
    LIVE_CHECKS, CheckResult, CheckStatus, check_event, check_order, format_results, result_of,
    sort_results,
)
from tui.core.profile import load_profile

pytestmark = pytest.mark.integration

LIVE_IDS = {i for c in LIVE_CHECKS for i in (*c.ids, *c.also)}


@pytest.fixture(scope="module")
def fresh_sim(tmp_path_factory: pytest.TempPathFactory):
    """A 2 x 4 sim of its own: these tests need it before `containers` has run."""
    require_dockerd()
    from tui.sim.cluster import sim_down, sim_up

    sim = tmp_path_factory.mktemp("checks-sim")
    path = sim_up(2, 4, state_dir=sim)
    try:
        yield path
    finally:
        sim_down(state_dir=sim)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(args)
    return rc, capsys.readouterr().out


def check_json(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    rc, out = run(["check", "--profile", str(path), "--json"], capsys)
    return rc, json.loads(out)


def fails(doc: dict) -> list[dict]:
    return [r for r in doc["results"] if r["status"] == "fail"]


def assert_grouped(doc: dict, profile_path: Path) -> None:
    """By check (the declared order), then node (the profile's order); never interleaved."""
    p = load_profile(profile_path)
    ids = [r["id"] for r in doc["results"]]
    rank = check_order([i for i in dict.fromkeys(ids) if i not in LIVE_IDS])
    nodes = {n.name: i for i, n in enumerate(p.nodes)}
    keys = [(rank[r["id"]], -1 if r["node"] is None else nodes[r["node"]]) for r in doc["results"]]
    assert keys == sorted(keys), ids
    blocks = [i for k, i in enumerate(ids) if k == 0 or ids[k - 1] != i]
    assert len(blocks) == len(set(blocks)), f"a check's results are split: {blocks}"


def test_containers_absent_skips_with_reason(fresh_sim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No container yet: one failure per node (container.running, fix `rlconsole
    containers`); everything that runs in the container is skipped, saying so."""
    prof = load_profile(fresh_sim)
    rc, doc = check_json(fresh_sim, capsys)
    assert rc == 1
    assert [(r["id"], r["node"]) for r in fails(doc)] == [("container.running", n.name) for n in prof.nodes]
    assert all("rlconsole containers" in r["fix"] and "absent" in r["message"] for r in fails(doc))
    live = [r for r in doc["results"] if r["id"] in LIVE_IDS and r["id"] not in ("ssh.reachable", "container.running")]
    assert live, doc
    for r in live:
        assert r["status"] == "skip", r
        assert r["cause"] == "container.running" and "absent" in r["message"] and prof.container.name in r["message"], r
    # per node: every node-scoped check skipped on every node
    assert {r["node"] for r in live if r["id"] == "cards.count"} == {n.name for n in prof.nodes}
    text = "\n".join(r["message"] for r in doc["results"])
    assert "does not exist" not in text and "printed nothing" not in text and "No such container" not in text
    assert doc["skipped"] == len(live) and doc["failed"] == len(prof.nodes)
    assert_grouped(doc, fresh_sim)

    # the text: grouped the same way, a fold per check naming the nodes, the fix once
    rc, out = run(["check", "--profile", str(fresh_sim)], capsys)
    lines = out.splitlines()
    names = ", ".join(n.name for n in prof.nodes)
    assert f"FAIL container.running [{names}]: container {prof.container.name} is absent" in lines
    assert lines.count("     fix: run `rlconsole containers`") == 1
    assert any(ln.startswith(f"skip cards.count [{names}]: ") and ln.endswith("(see container.running)") for ln in lines)
    assert "\x1b[" not in out  # not a terminal: no colour
    assert lines[-1].startswith(f"{len(prof.nodes)} failed, ") and lines[-1].endswith(f"{len(live)} skipped")


def test_missing_model_is_one_failure(fresh_sim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Containers up, the model not downloaded: one failure (model.hf, fix `rlconsole
    model` then `convert`), not one per node from storage.paths with a mount fix."""
    rc, out = run(["containers", "--profile", str(fresh_sim), "--yes"], capsys)
    assert rc == 0, out
    rc, doc = check_json(fresh_sim, capsys)
    assert rc == 1
    bad = fails(doc)
    assert [r["id"] for r in bad] == ["model.hf"], bad
    assert "rlconsole model" in bad[0]["fix"] and "mount" not in bad[0]["fix"]
    by = {(r["id"], r["node"]): r for r in doc["results"]}
    prof = load_profile(fresh_sim)
    assert all(by[("storage.paths", n.name)]["status"] == "pass" for n in prof.nodes)
    assert by[("model.mcore", prof.head.name)]["status"] == "skip" and by[("model.mcore", prof.head.name)]["cause"] == "model.hf"
    assert by[("model.facts", prof.head.name)]["status"] == "skip"
    assert by[("code.python", prof.head.name)]["status"] == "pass"
    assert by[("code.overrides", prof.head.name)]["status"] == "pass"
    assert_grouped(doc, fresh_sim)


def test_job_python_without_hydra_fails_and_submit_refuses(fresh_sim: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """training.python names a real Python that lacks Hydra (a bare venv): a FAIL naming
    Hydra with the fix to install it where the job runs; the compose probe is skipped
    because of it (not a "WARN: overrides not composed"); submit refuses."""
    run(["containers", "--profile", str(fresh_sim), "--yes"], capsys)
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    py = bare / "bin" / "python3"
    assert subprocess.run([str(py), "-c", "import hydra"], capture_output=True, timeout=60).returncode != 0
    data = yaml.safe_load(fresh_sim.read_text())
    data["training"]["python"] = str(py)
    variant = tmp_path / "nohydra.yaml"
    variant.write_text(yaml.safe_dump(data, sort_keys=False))
    prof = load_profile(variant)

    rc, doc = check_json(variant, capsys)
    assert rc == 1
    by = {(r["id"], r["node"]): r for r in doc["results"]}
    py_res = by[("code.python", prof.head.name)]
    assert py_res["status"] == "fail" and "hydra" in py_res["message"] and "import hydra" in py_res["message"]
    assert "hydra-core" in py_res["fix"]
    ov = by[("code.overrides", prof.head.name)]
    assert ov["status"] == "skip" and ov["cause"] == "code.python", ov
    assert not any(r["status"] == "warn" and "hydra" in r["message"] for r in doc["results"])
    # the model is still missing in this sim: that is the other (and only other) failure
    assert {r["id"] for r in fails(doc)} == {"code.python", "model.hf"}

    rc, out = run(["submit", "--profile", str(variant), "--yes"], capsys)
    last = out.splitlines()[-1]
    assert rc == 1 and "preflight check(s) failed" in last and "code.python" in last, out
    assert "FAIL code.python" in out and "hydra-core" in out


# --------------------------------------------------------------------------- pure parts


def _profile():
    return load_profile(Path(__file__).resolve().parent.parent / "profiles" / "qwen3-8b-grpo-32gpu.yaml")


def test_sort_is_by_check_then_node_whatever_the_completion_order() -> None:
    import random

    p = _profile()
    names = [n.name for n in p.nodes]
    done = [CheckResult(i, "pass", "x", node=n) for i in ("net.interface", "cards.count", "ssh.reachable") for n in names]
    done += [CheckResult("ray.cluster", "warn", "y"), CheckResult("cards.total", "pass", "z")]
    want = ([CheckResult("cards.total", "pass", "z")]
            + [CheckResult(i, "pass", "x", node=n) for i in ("ssh.reachable", "cards.count", "net.interface") for n in names]
            + [CheckResult("ray.cluster", "warn", "y")])
    for seed in range(20):
        shuffled = done[:]
        random.Random(seed).shuffle(shuffled)
        # a static id is first-seen ordered: keep the static one first as run_checks does
        shuffled.remove(want[0])
        got = sort_results(p, [want[0], *shuffled])
        assert [(r.id, r.node) for r in got] == [(r.id, r.node) for r in want]


def test_status_is_a_str_enum_and_json_round_trips() -> None:
    r = CheckResult("code.python", "fail", "lacks hydra", "install hydra-core", "node1")
    assert r.status is CheckStatus.FAIL and r.status == "fail" and isinstance(r.status, str)
    assert json.loads(json.dumps(r.to_json()))["status"] == "fail"
    back = result_of(check_event(r))
    assert back == r
    skip = CheckResult("code.overrides", "skip", "needs the job's Python", node="node1", cause="code.python")
    assert result_of(check_event(skip)) == skip
    with pytest.raises(ValueError):
        CheckResult("x", "ok", "not a status")


def test_text_folds_nodes_and_colours_only_fail_and_warn() -> None:
    rs = [CheckResult("container.running", "fail", "container c is absent", "run `rlconsole containers`", n)
          for n in ("node1", "node2")]
    rs += [CheckResult("cards.count", "skip", "needs container c, which is absent", node=n, cause="container.running")
           for n in ("node1", "node2")]
    rs += [CheckResult("ray.cluster", "warn", "Ray is down", "run `rlconsole setup-ray`"),
           CheckResult("ray.dashboard", "pass", "dashboard on 127.0.0.1")]
    plain = format_results(rs)
    assert plain == [
        "FAIL container.running [node1, node2]: container c is absent",
        "     fix: run `rlconsole containers`",
        "skip cards.count [node1, node2]: needs container c, which is absent (see container.running)",
        "WARN ray.cluster: Ray is down",
        "     fix: run `rlconsole setup-ray`",
        "ok   ray.dashboard: dashboard on 127.0.0.1",
        "2 failed, 1 warnings, 1 passed, 2 skipped",
    ]
    coloured = format_results(rs, colour=True)
    assert coloured[0].startswith("\x1b[") and "FAIL\x1b[0m" in coloured[0]
    assert coloured[3].startswith("\x1b[") and "WARN\x1b[0m" in coloured[3]
    assert coloured[5] == plain[5]  # a pass is not coloured
    assert [ln.replace("\x1b[1;31m", "").replace("\x1b[33m", "").replace("\x1b[2m", "").replace("\x1b[0m", "")
            for ln in coloured] == plain


def test_colour_on_a_terminal_unless_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.cli.check import use_colour

    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=False) as tty, open(os.devnull, "w") as notty:
            monkeypatch.delenv("NO_COLOR", raising=False)
            assert use_colour(tty) and not use_colour(notty)
            monkeypatch.setenv("NO_COLOR", "1")
            assert not use_colour(tty)
            monkeypatch.setenv("NO_COLOR", "")  # set but empty: no-color.org says colour stays on
            assert use_colour(tty)
    finally:
        os.close(master)
        os.close(slave)


def test_console_gets_the_same_results_as_the_cli(fresh_sim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The console's `p` (LiveBackend.run_action("check")) and `rlconsole check --json`
    go through one path: the same results, in the same order, read back from the events."""
    import asyncio

    from tui.backend.live import LiveBackend

    prof = load_profile(fresh_sim)

    async def console() -> list:
        b = LiveBackend(prof)
        try:
            await asyncio.wait_for(b.pool.open(), 60)
            return [ev async for ev in b.run_action("check")]
        finally:
            await asyncio.wait_for(b.pool.close(), 60)

    events = asyncio.run(asyncio.wait_for(console(), 300))
    got = [r for r in (result_of(e) for e in events) if r is not None]
    assert events[0].kind == "start" and events[-1].kind == "fail" and events[-1].message.startswith("1 failed")
    _, doc = check_json(fresh_sim, capsys)
    assert [(r.id, r.status.value, r.node) for r in got] == [(r["id"], r["status"], r["node"]) for r in doc["results"]]


def test_unreachable_node_skips_its_checks(fresh_sim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A node whose SSH server is down: one failure (ssh.reachable) on it, its other
    checks skipped naming that, the rest of the cluster checked as usual."""
    from tui.sim.cluster import sim_node

    run(["containers", "--profile", str(fresh_sim), "--yes"], capsys)
    sim_node("stop", "node2", state_dir=fresh_sim.parent)
    try:
        rc, doc = check_json(fresh_sim, capsys)
    finally:
        sim_node("start", "node2", state_dir=fresh_sim.parent)
    assert rc == 1
    node2 = [r for r in doc["results"] if r["node"] == "node2"]
    assert [(r["id"], r["status"]) for r in node2 if r["status"] != "skip"] == [("ssh.reachable", "fail")], node2
    skipped = [r for r in node2 if r["status"] == "skip"]
    assert {"container.running", "cards.count", "storage.paths"} <= {r["id"] for r in skipped}
    assert all(r["cause"] == "ssh.reachable" and "unreachable" in r["message"] for r in skipped)
    assert [(r["id"], r["status"]) for r in doc["results"] if r["node"] == "node1" and r["id"] == "container.running"] \
        == [("container.running", "pass")]
    shared = [r for r in doc["results"] if r["id"] == "storage.shared"]
    assert shared and shared[0]["status"] == "pass" and "not checked on node2" in shared[0]["message"]
    assert {r["id"] for r in fails(doc)} == {"ssh.reachable", "model.hf"}  # the model is still missing here
    assert_grouped(doc, fresh_sim)
