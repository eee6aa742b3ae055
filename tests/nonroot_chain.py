"""The headless chain as a user without root or Docker meets it (issue 36).

Not collected by itself (not a `test_*.py` file): tests/test_sim_nonroot.py runs this file
with pytest as an unprivileged user whose PATH has no dockerd, docker or sshd. `sim up`
with its defaults must then choose the sim's own container runtime and no PID namespaces,
say so, and carry the whole chain (tests/test_chain.py's `whole_chain`: containers, model,
convert, setup-ray, submit, steps, logs, stop, stop --cluster, with their failure cases).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.test_chain import whole_chain
from tui.core.profile import load_profile
from tui.sim.cluster import sim_down, sim_status, sim_up
from tui.sim.simdocker import RUNTIME

pytestmark = pytest.mark.integration


def test_chain_without_root_or_docker(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert os.geteuid() != 0, "this file is run as an unprivileged user (tests/test_sim_nonroot.py)"
    assert not [x for x in ("dockerd", "docker", "sshd") if shutil.which(x)], os.environ.get("PATH")
    sim = Path(os.environ.get("RLCONSOLE_TEST_SIM_DIR") or tmp_path / "sim")
    monkeypatch.setenv("RLCONSOLE_STATE_DIR", str(tmp_path / "console"))
    profile = sim_up(2, 2, state_dir=sim)  # the defaults: what `rlconsole demo` does
    try:
        st = sim_status(sim)
        assert st.running and st.docker == RUNTIME and st.namespaces is False, st
        assert st.docker_why and st.docker_why.startswith("no dockerd"), st.docker_why
        assert f"docker:     {RUNTIME}" in st.to_text()
        assert load_profile(profile).sim_containers == RUNTIME  # the console's header says it
        whole_chain(profile, tmp_path, capsys)
    finally:
        sim_down(sim)
