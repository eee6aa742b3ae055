"""Preflight (`rlconsole check`) on the simulated cluster: the correct profile passes every
check; each planted fault (the job's Python without Hydra, the seed's debug torch.save in
the VeRL tree, a missing `+` on an override, a network interface no node has, a data file
that is not there, an incomplete MCore checkpoint, a card count the nodes do not have)
fails its own check and no other. Real SSH, real dockerd, real Ray: on `ray_sim`, the
worker's sim with Ray kept up (it was in test_chain.py, whose whole chain ends with Ray
stopped, so it brought Ray up again). Every fault is put back in a `finally`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_chain import run, variant
from tui.core.profile import load_profile

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chain_sim(ray_sim: Any) -> Path:
    """The worker's shared sim with Ray up (`ray_sim`), with this module's own
    console state dir."""
    return Path(ray_sim.profile_path)


def test_preflight_planted_faults(chain_sim: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The correct sim profile passes every check; each planted fault fails its check."""
    from tui.sim.tree_install import set_debug_save

    P = ["--profile", str(chain_sim)]
    prof = load_profile(chain_sim)
    for action in ("containers", "model", "convert", "setup-ray"):
        rc, out, _ = run([action, *P, "--yes"], capsys)
        assert rc == 0, out[-1500:]

    def check(path: Path) -> dict[str, list[dict]]:
        rc, out, _ = run(["check", "--profile", str(path), "--json"], capsys)
        by: dict[str, list[dict]] = {}
        for r in json.loads(out)["results"]:
            by.setdefault(r["id"], []).append(r)
        return by

    def failing(by: dict[str, list[dict]]) -> set[str]:
        return {k for k, rs in by.items() if any(r["status"] == "fail" for r in rs)}

    base = check(chain_sim)
    assert failing(base) == set(), {k: v for k, v in base.items() if k in failing(base)}

    # the job's Python lacks Hydra (a bare venv as training.python): one failure, code.python,
    # with the fix to install it where the job runs; the compose probe is skipped because of
    # it (it used to be only "WARN hydra is not importable"); submit refuses, submits nothing
    import subprocess
    import sys

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    nohydra = variant(chain_sim, tmp_path / "nohydra.yaml",
                      lambda d: d["training"].update(python=str(bare / "bin" / "python3")))
    by = check(nohydra)
    assert failing(by) == {"code.python"}, {k: v for k, v in by.items() if k in failing(by)}
    assert "import hydra" in by["code.python"][0]["message"] and "hydra-core" in by["code.python"][0]["fix"]
    assert [r["status"] for r in by["code.overrides"]] == ["skip"] and by["code.overrides"][0]["cause"] == "code.python"
    runs = Path(__import__("os").environ["RLCONSOLE_STATE_DIR"]) / "runs.jsonl"
    before = runs.read_text() if runs.exists() else ""
    rc, out, _ = run(["submit", "--profile", str(nohydra), "--yes"], capsys)
    last = out.splitlines()[-1]
    assert rc == 1 and "1 preflight check(s) failed (code.python)" in last, out[-2000:]
    assert (runs.read_text() if runs.exists() else "") == before

    # the seed's debug torch.save, planted in the VeRL tree
    verl = Path(prof.paths.verl)
    set_debug_save(verl, planted=True)
    try:
        by = check(chain_sim)
        assert failing(by) == {"code.debug_save"}
        msg = by["code.debug_save"][0]["message"]
        assert "megatron_actor.py:" in msg or "ray_trainer.py:" in msg
        assert "/mnt/seed-program-nas" in msg
    finally:
        set_debug_save(verl, planted=False)

    # a missing `+` on a key the config lacks
    def no_plus(d: dict) -> None:
        rollout = d["training"]["overrides"]["actor_rollout_ref"]["rollout"]
        rollout["engine_kwargs.sglang"] = rollout.pop("+engine_kwargs.sglang")
    by = check(variant(chain_sim, tmp_path / "noplus.yaml", no_plus))
    assert failing(by) == {"code.overrides"}
    assert "engine_kwargs.sglang" in by["code.overrides"][0]["message"]
    assert "prefix it with +" in (by["code.overrides"][0]["fix"] or "")

    # a network interface no node has
    by = check(variant(chain_sim, tmp_path / "iface.yaml", lambda d: d["env"].update(MCCL_SOCKET_IFNAME="bond0")))
    assert failing(by) == {"net.interface"}
    assert all(r["node"] for r in by["net.interface"] if r["status"] == "fail")

    # a data file that is not there
    train = Path(prof.paths.train_files[0])
    moved = train.with_suffix(".away")
    train.rename(moved)
    try:
        by = check(chain_sim)
        assert "data.files" in failing(by)
        assert failing(by) <= {"data.files", "code.overrides"}  # the stand-in's Hydra reads nothing; VeRL's may
    finally:
        moved.rename(train)

    # an incomplete MCore checkpoint
    common = Path(prof.paths.mcore_checkpoint) / "common.pt"
    common.rename(common.with_suffix(".away"))
    try:
        by = check(chain_sim)
        assert failing(by) == {"model.mcore"}
    finally:
        common.with_suffix(".away").rename(common)

    # a card count the nodes do not have
    def more_cards(d: dict) -> None:
        d["nodes"][1]["gpus"] = 16
    by = check(variant(chain_sim, tmp_path / "cards.yaml", more_cards))
    assert "cards.count" in failing(by)
    assert [r["node"] for r in by["cards.count"] if r["status"] == "fail"] == ["node2"]
