"""`convert` on a cluster without the HF model fetches it first (seed 5.1 then 5.2), so
the console's `c` does the whole model step; with the model present it only converts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tui.core.actions.registry import run_action
from tui.core.actions.remote import PoolRemote
from tui.core.profile import load_profile
from tui.core.ssh import SessionPool

pytestmark = pytest.mark.integration


async def test_convert_downloads_a_missing_model_first(sim_as_up, tmp_path: Path) -> None:
    data = yaml.safe_load(Path(sim_as_up.profile_path).read_text())
    data["container"]["access"] = "direct"  # no container needed for this
    root = tmp_path / "models"
    data["paths"]["hf_model"] = str(root / "hf")
    data["paths"]["mcore_checkpoint"] = str(root / "mcore")
    data["model"]["download"] = [a if a != data["model"]["download"][-1] else str(root / "hf")
                                 for a in data["model"]["download"]]
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    prof = load_profile(p)
    async with SessionPool(prof) as pool:
        evs = [ev async for ev in run_action("convert", prof, PoolRemote(pool, prof))]
        assert evs[-1].kind == "done", [e.one_line() for e in evs]
        assert any("downloading it first" in e.message for e in evs)
        assert (root / "hf" / "config.json").exists() and (root / "mcore" / "common.pt").exists()
        again = [ev async for ev in run_action("convert", prof, PoolRemote(pool, prof))]
        assert again[-1].kind == "skip" and not any("downloading" in e.message for e in again)
