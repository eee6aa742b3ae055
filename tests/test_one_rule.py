"""One source per rule: change a rule's input and every user of the rule follows.

Each rule below is read in more than one place (an alert and a colour, a preflight check
and an action's warning, the console's JSON and its screens). A copy of a rule kept in
one of those places would go on with its old value: each test changes the input and
checks every user."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from tui.app import RlconsoleApp
from tui.backend.static import StaticBackend, demo_profile, demo_state
from tui.core.alerts import AlertRules
from tui.core.checks import static_dashboard
from tui.core.state import GpuCard, JobState, JobStatus, RayJobState
from widgets.node_grid import NodeGrid


def _with_one_warm_card(profile, temp_c: float, mem_pct: float):
    """The demo state with node 0's card 3 at `temp_c` and `mem_pct` memory."""
    st = demo_state(profile)
    node = st.nodes[0]
    cards = list(node.gpus)
    cards[3] = GpuCard(index=3, name=cards[3].name, util_pct=90.0, mem_used_mib=mem_pct * 819.2,
                       mem_total_mib=81920.0, temp_c=temp_c, power_w=400.0)
    node.gpu = replace(node.gpu, cards=cards)
    return st


async def _grid_showing(pilot, name: str) -> NodeGrid:
    """The node grid once it shows node `name`."""
    grid = pilot.app.screen.query_one(NodeGrid)
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while name not in grid.rows:
        assert loop.time() < end, "the grid never showed the node"
        await pilot.pause(0.05)
    return grid


async def _grid_kind(profile, state) -> str:
    backend = StaticBackend(profile=profile, state=state)
    app = RlconsoleApp(backend, bell=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        grid = await _grid_showing(pilot, profile.nodes[0].name)
        return grid.row(profile.nodes[0].name).cells[3].kind


@pytest.mark.parametrize("hot_c,mem_full,expect", [
    (85.0, 95.0, set()),               # the defaults: 70 degC and 60 % are normal
    (60.0, 95.0, {"hot"}),             # a lowered hot_c: the same card is hot, everywhere
    (85.0, 50.0, {"mem"}),             # a lowered mem_full_pct: nearly full, everywhere
])
async def test_card_limits_one_rule_for_alerts_and_grid(hot_c: float, mem_full: float, expect: set[str]) -> None:
    base = demo_profile()
    profile = replace(base, monitoring=replace(base.monitoring, hot_c=hot_c, mem_full_pct=mem_full))
    state = _with_one_warm_card(profile, temp_c=70.0, mem_pct=60.0)
    alerts = AlertRules.for_profile(profile).observe_state(state, now=state.taken_at)
    raised = {a.key.rsplit(":", 1)[1] for a in alerts if a.key.startswith(f"card:{profile.nodes[0].name}:3:")}
    assert raised == expect
    kind = await _grid_kind(profile, state)
    drawn = {"-hot": {"hot"}, "-memfull": {"mem"}}.get(kind, set())
    assert drawn == expect, f"alerts say {expect or 'nothing'}, the grid draws {kind}"


@pytest.mark.parametrize("host,exposed", [
    ("127.0.0.1", False), ("127.0.0.2", False), ("localhost", False),
    ("0.0.0.0", True), ("192.0.2.10", True), ("::", True),
])
async def test_dashboard_exposure_one_rule_for_check_and_setup_ray(host: str, exposed: bool) -> None:
    """The preflight's warning and setup-ray's warning say the same about every bind."""
    from tui.core.actions.ray_setup import setup_ray

    base = demo_profile()
    profile = replace(base, ray=replace(base.ray, dashboard_host=host))
    check = static_dashboard(profile, None)  # type: ignore[arg-type]
    assert (check[0].status.value == "warn") is exposed, check

    class NoRemote:  # setup-ray's warning comes before it touches a node; nothing is asked
        def __getattr__(self, name: str):
            raise AssertionError(f"setup-ray asked the cluster ({name}) before warning")

    gen = setup_ray(profile, NoRemote())
    events = []
    try:
        async for ev in gen:
            events.append(ev)
    except AssertionError:
        pass
    finally:
        await gen.aclose()
    warned = any(ev.kind == "warn" and "dashboard" in ev.message for ev in events)
    assert warned is exposed, [e.message for e in events]


@pytest.mark.parametrize("word,member", [("RUNNING", JobStatus.RUNNING), ("failed", JobStatus.FAILED),
                                         ("SOMETHING_NEW", JobStatus.UNKNOWN)])
def test_job_status_is_typed_wherever_it_is_stored(word: str, member: JobStatus) -> None:
    """A status from Ray (or the history) is a `JobStatus` member once stored: comparing
    with the enum, `status --json` and the alert rules all see the same value."""
    assert JobState(id="j", status=word).status is member
    assert RayJobState(id="j", status=word).status is member
    import json

    from tui.core.state import ClusterState

    st = ClusterState(profile="p", simulated=True, nodes=[], job=JobState(id="j", status=word))
    assert json.loads(json.dumps(st.to_json()))["job"]["status"] == member.value


def test_outside_text_has_one_rule_and_no_copy() -> None:
    """Text from outside is made safe to show by `safetext.shown` alone (issue 39 S1): the
    importer's `shown` is that function, and no printer or widget keeps a filter of its own
    (a copy once let the 8-bit CSI through `diagnose`, and turned escapes into spaces in
    `watch` and `journal`)."""
    import re
    from pathlib import Path

    from tui.core import safetext
    from tui.core.importer import limits

    assert limits.shown is safetext.shown
    root = Path(__file__).resolve().parent.parent
    copy = re.compile(r"isprintable\(\) else|\[\\x00-\\x08")
    found = [f"{p.relative_to(root)}" for d in ("tui/cli", "tui/screens", "widgets", "tui/core")
             for p in sorted((root / d).rglob("*.py"))
             if p.name not in ("safetext.py", "ansi.py") and copy.search(p.read_text(encoding="utf-8"))]
    assert found == [], f"a filter of its own (use tui.core.safetext): {found}"


@pytest.mark.parametrize("temp_c,mem_pct,mark", [(93.0, 50.0, "H"), (60.0, 99.0, "M"), (60.0, 50.0, "%")])
async def test_dense_grid_says_hot_and_memory_full_in_letters(monkeypatch, temp_c: float, mem_pct: float,
                                                              mark: str) -> None:
    """The dense grid's trouble reads without colour (NO_COLOR): `90H` hot, `90M` memory
    full, `90%` neither (it was told by the cell's colour alone)."""
    monkeypatch.setenv("NO_COLOR", "1")
    profile = demo_profile()
    state = _with_one_warm_card(profile, temp_c=temp_c, mem_pct=mem_pct)
    app = RlconsoleApp(StaticBackend(profile=profile, state=state), bell=False)
    async with app.run_test(size=(80, 24)) as pilot:
        grid = await _grid_showing(pilot, profile.nodes[0].name)
        await pilot.pause()
        assert grid.dense
        cells = grid.block_text(profile.nodes[0].name)[0].split()[-8:]
        assert cells[3] == f"90{mark}", cells
        assert all(c.endswith("%") for i, c in enumerate(cells) if i != 3), cells
