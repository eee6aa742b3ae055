"""A profile found in ./profiles that makes this machine run commands (issue 27).

`--profile NAME` looks in ./profiles first: the current directory, perhaps a repository
just cloned. A profile there that sets `notify.to` (a local command run with every
alert, or a URL every alert is posted to) or `ssh.config` (an SSH config runs local
commands: ProxyCommand, Match exec) acts as soon as the console starts. The start
names it: one warning line on stderr (a real CLI process here) and a warning alert in
the console. The same profile read from elsewhere, or one in ./profiles that sets none
of those keys, says nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOOD = (Path(__file__).parent / "data" / "good_profile.yaml").read_text()
RISKY = GOOD.replace("ssh:\n  user: rl\n", "ssh:\n  user: rl\n  config: ./ssh_config\n", 1) + \
    "notify:\n  to: ['mail -s rl me@example.org', 'https://hooks.example.org/rl']\n"


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(cwd),
           "RLCONSOLE_STATE_DIR": str(cwd / "state"), "RLCONSOLE_CONFIG_DIR": str(cwd / "config")}
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd)


def _repo(tmp_path: Path, text: str, name: str = "cloned") -> Path:
    d = tmp_path / "repo" / "profiles"
    d.mkdir(parents=True)
    (d / f"{name}.yaml").write_text(text)
    return d / f"{name}.yaml"


def test_profile_from_cwd_that_runs_commands_is_named_on_stderr(tmp_path: Path) -> None:
    f = _repo(tmp_path, RISKY)
    r = _cli(f.parent.parent, "render", "--profile", "cloned")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert line.startswith("rlconsole: warning: profile ") and str(f.resolve()) in line, line
    assert "./profiles" in line and "notify.to (runs 1 local command" in line, line
    assert "notify.to (posts every alert to a URL)" in line and "ssh.config" in line, line


def test_same_profile_from_elsewhere_or_a_harmless_one_says_nothing(tmp_path: Path) -> None:
    """The controls: the warning is about ./profiles and about those keys."""
    elsewhere = tmp_path / "mine" / "run.yaml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(RISKY)
    cwd = tmp_path / "work"
    (cwd / "profiles").mkdir(parents=True)
    r = _cli(cwd, "render", "--profile", str(elsewhere))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    harmless = _repo(tmp_path, GOOD, "plain")
    r = _cli(harmless.parent.parent, "render", "--profile", "plain")
    assert r.returncode == 0 and r.stderr == "", r.stderr


async def test_console_shows_it_as_a_warning_alert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.app import RlconsoleApp
    from tui.cli.console import static_backend
    from tui.cli.main import _load

    f = _repo(tmp_path, RISKY)
    monkeypatch.chdir(f.parent.parent)
    args = argparse.Namespace(profile="cloned", notices=[])
    prof = _load(args)  # what `rlconsole --profile cloned` does before it opens the console
    assert len(args.notices) == 1 and str(f.resolve()) in args.notices[0]
    app = RlconsoleApp(static_backend(prof), notices=args.notices)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if any(a.source == "console" for a in app.main_screen.alerts):
                break
            await pilot.pause(0.02)
        mine = [a for a in app.main_screen.alerts if a.source == "console"]
        assert [(a.level, a.message) for a in mine] == [("warning", args.notices[0])]
