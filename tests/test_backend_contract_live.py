"""The backend contract (tests/test_backend_contract.py) on `LiveBackend` over the
built-in SSH servers and dockerd: the `ray_sim` modules' simulated cluster (RAY_SIM_SHAPE),
with Ray kept up between the modules that only submit jobs (issue 37).

On that sim, containers, convert and setup-ray find their work done and say so (done or
skipped: the contract accepts both); the job, its steps, metrics and log, the re-attach
and the stop are the contract's own. The actions doing their work from nothing are
test_chain's (the CLI), the OpenSSH and Slurm contracts' and the console keys' tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_backend_contract import OVERALL_S, Kit, _contract, live_kit, within

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kit(ray_sim: Any) -> Kit:
    from tui.core.profile import load_profile

    return live_kit("live", load_profile(ray_sim.profile_path), ray_sim.nodes, ray_sim.cards)


async def test_backend_contract_on_the_ray_sim(kit: Kit) -> None:
    await within(f"the whole contract on the {kit.name} backend", _contract(kit), OVERALL_S)
