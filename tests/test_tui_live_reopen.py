"""Issue 36 majors 2 and 3 on the live path (`LiveBackend` over real SSH and Ray on the
simulated cluster): a job fails of an OOM (`sim fault oom`); the console opened on it
afterwards shows the cause and its fix in the banner and the Training pane (it showed
`ℹ watching job`); a new job submitted then replaces the failed one's log in the log pane
(it was appended after the old run's lines, so alerts' line numbers pointed into the old
run)."""

from __future__ import annotations

import asyncio
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tui.cli import main
from tui.core.profile import load_profile

from .pilot_helpers import settle, until

pytestmark = pytest.mark.integration

WAIT_S = 240.0


def _status(profile: Path) -> dict[str, Any]:
    from tui.cli.status import run_status

    out = io.StringIO()
    run_status(load_profile(profile), json=True, out=out)
    return json.loads(out.getvalue())


def _submit(profile: Path) -> str:
    from tui.core.job.history import last_run

    assert main(["submit", "--profile", str(profile), "--yes", "--skip-checks"]) == 0
    rec = last_run(load_profile(profile).name)
    assert rec is not None
    return rec.job_id


async def test_reopened_on_a_failed_job_then_a_new_one(ray_sim: Any, tmp_path: Path) -> None:
    from tui.app import RlconsoleApp
    from tui.backend.live import LiveBackend
    from widgets.alerts_bar import AlertsBar
    from widgets.log_pane import LogPane
    from widgets.metrics_pane import MetricsPane

    data = yaml.safe_load(Path(ray_sim.profile_path).read_text())
    data["training"]["overrides"].setdefault("trainer", {})["total_epochs"] = 1000
    data.setdefault("env", {})["RLCONSOLE_SIM_STEP_S"] = "0.5"
    data["monitoring"].update(refresh_s=1.0)
    prof = tmp_path / "reopen.yaml"
    prof.write_text(yaml.safe_dump(data, sort_keys=False))
    first = await asyncio.to_thread(_submit, prof)
    assert await asyncio.to_thread(main, ["sim", "fault", "oom", "--at-step", "1", "--node", "node2"]) == 0
    end = time.monotonic() + WAIT_S
    while (await asyncio.to_thread(_status, prof)).get("job", {}).get("status") != "FAILED":
        assert time.monotonic() < end, "the job to fail"
        await asyncio.sleep(2)

    b = LiveBackend(load_profile(prof))
    app = RlconsoleApp(b, bell=False)
    async with app.run_test(size=(120, 40)) as pilot:
        bar = app.main_screen.query_one(AlertsBar)

        def banner() -> str:
            return "\n".join(bar.render_line(y).text for y in range(bar.size.height))

        await until(pilot, lambda: first in banner() and "FAILED" in banner(), WAIT_S)
        await settle(pilot)
        text = " ".join(banner().split())
        assert "watching job" not in text and "out of memory" in text.lower(), text
        cause = app.main_screen.query_one(MetricsPane).query_one("#metrics-cause")
        assert cause.display and "out of memory" in str(cause.render()).lower()
        pane = app.main_screen.query_one(LogPane)
        assert any("OutOfMemoryError" in ln for ln in pane._kept)

        second = await asyncio.to_thread(_submit, prof)  # clears the fault too
        try:
            await until(pilot, lambda: second in pane.border_title and pane.total > 0, WAIT_S)
            await settle(pilot)
            assert not any("OutOfMemoryError" in ln for ln in pane._kept), "the old run's log is gone"
            assert not any(a.key == f"job-end:{first}" for a in bar.now.current())
            # nor the old run's log finding: its line is a line of the old log (the list keeps it)
            assert not any(a.source == "log" for a in bar.now.current()), bar.now.current()
            assert any("out of memory" in a.message.lower() for a in bar.alerts)
            await _dashboard_and_job_id_keys(app, pilot, second)
        finally:
            await asyncio.to_thread(main, ["stop", "--profile", str(prof), "--yes"])


async def _dashboard_and_job_id_keys(app: Any, pilot: Any, job: str) -> None:
    """`D` (issue 36, nice to have): the dashboard's URL on this machine, shown and copied,
    answers Ray's own API through the SSH forward (the dashboard stays on the head's
    loopback); `y` copies the watched job's id."""
    import urllib.request

    shown_before = len(app._notifications)
    await pilot.press("D")
    await until(pilot, lambda: any("Ray dashboard" in n.message for n in list(app._notifications)[shown_before:]), 30)
    note = next(n.message for n in list(app._notifications)[shown_before:] if "Ray dashboard" in n.message)
    assert "http://127.0.0.1:" in note and "copied" in note, note
    url = app.clipboard
    assert url.startswith("http://127.0.0.1:") and url in note, (url, note)

    def jobs() -> Any:
        with urllib.request.urlopen(f"{url}/api/jobs/", timeout=10) as r:  # noqa: S310 - loopback
            return json.load(r)

    assert job in [j.get("submission_id") for j in await asyncio.to_thread(jobs)]
    await pilot.press("y")
    await until(pilot, lambda: app.clipboard == job, 10)
