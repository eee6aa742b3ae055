"""`convert --force` deletes paths.mcore_checkpoint; the guard before it was weak
(issue 15, item 13): `/./data` passed, and a checkpoint path that is a parent of the HF
model deleted the model. Such paths are refused by the action (before anything on the
cluster is touched) and flagged by `check --static`. Also (Low): a dashboard bound to any
non-loopback address is warned about, not only 0.0.0.0."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import pytest

from tui.cli import main
from tui.core.actions.model import convert, deletion_problem
from tui.core.profile import Convert, load_profile

GOOD = Path(__file__).parent / "data" / "good_profile.yaml"

BAD = {
    "/": "too close to /",
    "/data": "too close to /",
    "/./data": "not a normalised path",
    "/data/./x": "not a normalised path",
    "/data//x": "not a normalised path",
    "/data/x/..": "not a normalised path",
    "/data/models/m/../m-mcore": "not a normalised path",
    "//data/x": "not a normalised path",
    "/data/models": "contains paths.hf_model",  # the HF model is /data/models/m
    "/data/models/m": "is paths.hf_model",
    "/data/tb": "is paths.tensorboard_dir",
}
GOOD_PATHS = ["/data/models/m-mcore", "/data/models/m-mcore/", "/data/models/m/mcore", "/data/ckpt-mcore"]


def _profile(mcore: str):  # type: ignore[no-untyped-def]
    p = copy.deepcopy(load_profile(GOOD))
    p.paths.mcore_checkpoint = mcore
    p.convert = Convert(script="/data/verl/scripts/converter_hf_to_mcore.py")
    return p


@pytest.mark.parametrize("path,why", sorted(BAD.items()))
def test_dangerous_checkpoint_paths_are_refused(path: str, why: str) -> None:
    problem = deletion_problem(_profile(path))
    assert problem and why in problem, problem


@pytest.mark.parametrize("path", GOOD_PATHS)
def test_ordinary_checkpoint_paths_pass(path: str) -> None:
    assert deletion_problem(_profile(path)) is None


@pytest.mark.parametrize("path", ["/./data", "/data/models"])
def test_convert_force_refuses_before_touching_the_cluster(path: str) -> None:
    """No remote is given: the refusal must come before any command would run."""
    async def go() -> list:
        return [ev async for ev in convert(_profile(path), remote=None, force=True)]  # type: ignore[arg-type]

    events = asyncio.run(asyncio.wait_for(go(), 10))
    assert events[-1].kind == "fail" and "refusing to delete paths.mcore_checkpoint" in events[-1].message


@pytest.mark.parametrize("path,why", [("/./data", "not a normalised path"), ("/data/models", "contains paths.hf_model")])
def test_static_check_flags_them(path: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(GOOD.read_text().replace("mcore_checkpoint: /data/models/m-mcore", f"mcore_checkpoint: {path}"))
    assert main(["check", "--static", "--json", "--profile", str(f)]) == 1
    res = {r["id"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert res["paths.mcore_checkpoint"]["status"] == "fail" and why in res["paths.mcore_checkpoint"]["message"]


@pytest.mark.parametrize("host,status", [("127.0.0.1", "pass"), ("::1", "pass"), ("localhost", "pass"),
                                         ("0.0.0.0", "warn"), ("10.10.1.2", "warn"), ("203.0.113.9", "warn"),
                                         ("head.example.org", "warn")])
def test_dashboard_on_a_public_address_warns(host: str, status: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(GOOD.read_text().replace("ray:\n  head_port: 6379\n", f"ray:\n  head_port: 6379\n  dashboard_host: \"{host}\"\n"))
    main(["check", "--static", "--json", "--profile", str(f)])
    res = {r["id"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert res["ray.dashboard"]["status"] == status, res["ray.dashboard"]
