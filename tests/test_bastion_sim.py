"""`rlconsole sim up --bastion`: the nodes' SSH servers accept only the bastion's address,
the sim's profile reaches them through `ssh.jump`, and `status --json` works through it;
without the jump, or with the bastion's host key unknown, the reason is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tui.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bastion_sim(tmp_path_factory: pytest.TempPathFactory):
    from tui.sim.cluster import sim_down, sim_up

    d = tmp_path_factory.mktemp("bastion-sim")
    path = sim_up(2, 2, state_dir=d, bastion=True, docker=False)
    try:
        yield d, Path(path)
    finally:
        sim_down(state_dir=d)


def status(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    main(["status", "--json", "--profile", str(path)])
    return json.loads(capsys.readouterr().out)


def test_status_json_through_the_bastion(bastion_sim, capsys: pytest.CaptureFixture[str]) -> None:
    d, path = bastion_sim
    data = yaml.safe_load(path.read_text())
    assert data["ssh"]["jump"].split("@")[1].startswith("127.0.0.254:")
    st = status(path, capsys)
    assert [n["reachable"] for n in st["nodes"]] == [True, True], st["nodes"]


def test_direct_is_refused_and_an_unknown_bastion_is_named(bastion_sim, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    d, path = bastion_sim
    data = yaml.safe_load(path.read_text())
    jump = data["ssh"].pop("jump")
    direct = tmp_path / "direct.yaml"
    direct.write_text(yaml.safe_dump(data, sort_keys=False))
    st = status(direct, capsys)
    for n in st["nodes"]:
        assert not n["reachable"]
        assert "accepts SSH only from the bastion (127.0.0.254), not from 127.0.0.1" in json.dumps(n), n

    kh = tmp_path / "known_hosts"
    kh.write_text("".join(line + "\n" for line in Path(data["ssh"]["known_hosts"]).read_text().splitlines()
                          if not line.startswith("[127.0.0.254]")))
    data["ssh"].update(jump=jump, known_hosts=str(kh))
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(yaml.safe_dump(data, sort_keys=False))
    st = status(unknown, capsys)
    port = jump.rsplit(":", 1)[1]
    for n in st["nodes"]:
        assert not n["reachable"]
        assert (f"jump host 127.0.0.254:{port} (for {n['name']}): host key for 127.0.0.254:{port} "
                "not in known_hosts") in json.dumps(n), n


async def test_the_console_through_the_bastion(bastion_sim) -> None:
    import asyncio

    from tui.app import RlconsoleApp
    from tui.core.profile import load_profile
    from tui.backend.live import LiveBackend

    _, path = bastion_sim
    app = RlconsoleApp(LiveBackend(load_profile(path)), bell=False)
    async with app.run_test(size=(120, 40)) as pilot:
        loop = asyncio.get_running_loop()
        end = loop.time() + 120
        while True:
            st = app.main_screen.state
            if st is not None and all(n.reachable and n.gpu is not None for n in st.nodes):
                break
            assert loop.time() < end, f"nodes not reachable through the bastion: {st and [(n.name, n.error) for n in st.nodes]}"
            await pilot.pause(0.1)
        assert len(st.nodes[0].gpu.cards) == 2
