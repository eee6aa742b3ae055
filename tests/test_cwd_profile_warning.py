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


# ------------------------------------------- issue 39 S9 (two bypasses) and D23 (runs at once)


def _cwd_repo(tmp_path: Path) -> Path:
    d = tmp_path / "repo"
    (d / "profiles").mkdir(parents=True)
    return d


def test_a_link_in_profiles_is_from_profiles_wherever_it_points(tmp_path: Path) -> None:
    """Bypass 1: ./profiles/NAME.yaml a link to a file outside ./profiles (elsewhere in the
    clone): the resolved path was checked alone, so nothing was said."""
    repo = _cwd_repo(tmp_path)
    (repo / "conf").mkdir()
    (repo / "conf" / "real.yaml").write_text(RISKY)
    (repo / "profiles" / "linked.yaml").symlink_to("../conf/real.yaml")
    r = _cli(repo, "render", "--profile", "linked")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlconsole: warning: profile "), r.stderr
    assert "comes from ./profiles" in lines[0] and "notify.to (runs 1 local command" in lines[0]


def test_a_bare_name_that_names_a_file_of_the_cwd_is_from_the_cwd(tmp_path: Path) -> None:
    """Bypass 2: `--profile NAME` is taken as a path first: a file NAME in the current
    directory itself (not in ./profiles) was read with nothing said. The same file given
    as a path (`./NAME`, `NAME.yaml`) is the user's own choice, as any path."""
    repo = _cwd_repo(tmp_path)
    (repo / "qwen3-8b-grpo-32gpu").write_text(RISKY)  # the packaged profile's name
    r = _cli(repo, "render", "--profile", "qwen3-8b-grpo-32gpu")
    assert r.returncode == 0, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "comes from the current directory" in r.stderr, r.stderr
    r = _cli(repo, "render", "--profile", "./qwen3-8b-grpo-32gpu")
    assert r.returncode == 0 and r.stderr == "", r.stderr


def _exec_profile(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A ./profiles profile whose ssh config runs a command when read (Match exec) and
    whose notify.to is a command: each leaves a marker file when it runs."""
    repo = _cwd_repo(tmp_path)
    ran = tmp_path / "ssh-config-ran"
    notified = tmp_path / "notify-ran"
    (repo / "ssh_config").write_text(f'Match exec "touch {ran}"\n  User rl\n')
    text = GOOD.replace("ssh:\n  user: rl\n", f"ssh:\n  user: rl\n  config: {repo / 'ssh_config'}\n"
                                              "  connect_timeout_s: 5\n", 1) + \
        f"notify:\n  to: ['touch {notified}']\n"
    (repo / "profiles" / "cloned.yaml").write_text(text)
    return repo, ran, notified


def test_its_commands_do_not_run_until_the_user_says_so(tmp_path: Path) -> None:
    """D23: `status` on a ./profiles profile read its ssh.config at once: `Match exec` ran a
    command before anything was asked. Headless, without --trust-profile, the profile is
    used without its local commands (no ssh.config, no notify target), and the one warning
    line says so; with --trust-profile they are used (the marker shows the test can tell)."""
    repo, ran, _ = _exec_profile(tmp_path)
    r = _cli(repo, "status", "--profile", "cloned")
    assert not ran.exists(), "the profile's ssh config ran a command unasked"
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("rlconsole: warning: profile ")]
    assert len(warn) == 1 and "Not used for this run" in warn[0] and "--trust-profile" in warn[0], r.stderr
    r = _cli(repo, "status", "--profile", "cloned", "--trust-profile")
    assert ran.exists(), r.stderr[-2000:]
    assert "(used: --trust-profile)" in r.stderr


class _Tty:
    """A terminal's stdin/stderr for `_load`'s question: says `answer`, keeps what is written."""

    def __init__(self, answer: str = "") -> None:
        self.answer = answer
        self.out: list[str] = []

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        return self.answer

    def write(self, s: str) -> int:
        self.out.append(s)
        return len(s)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("answer, used", [("y\n", True), ("\n", False), ("no\n", False)])
def test_at_a_terminal_the_question_decides(answer: str, used: bool, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """At a terminal the start asks (the warning, then `use its local commands for this
    run? [y/N]`): y keeps notify.to and ssh.config; anything else drops them. The console's
    alert says which."""
    from tui.cli.main import _load

    repo, _, notified = _exec_profile(tmp_path)
    monkeypatch.chdir(repo)
    tty_in, tty_err = _Tty(answer), _Tty()
    monkeypatch.setattr(sys, "stdin", tty_in)
    monkeypatch.setattr(sys, "stderr", tty_err)
    args = argparse.Namespace(profile="cloned", notices=[])
    prof = _load(args)
    asked = "".join(tty_err.out)
    assert "comes from ./profiles" in asked and asked.endswith("use its local commands for this run? [y/N] ")
    assert (prof.notify.to == [f"touch {notified}"]) is used
    assert (prof.ssh.config is not None) is used
    assert len(args.notices) == 1 and ("(used: answered y)" in args.notices[0]) is used
    assert ("Not used for this run" in args.notices[0]) is not used


def test_headless_load_drops_them_and_trust_keeps_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.cli.main import _load

    repo, _, notified = _exec_profile(tmp_path)
    monkeypatch.chdir(repo)
    prof = _load(argparse.Namespace(profile="cloned", notices=[]))
    assert prof.notify.to == [] and prof.ssh.config is None
    prof = _load(argparse.Namespace(profile="cloned", notices=[], trust_profile=True))
    assert prof.notify.to == [f"touch {notified}"] and prof.ssh.config == str(repo / "ssh_config")


def test_served_tabs_do_what_serve_was_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` gives each tab the resolved profile path (a link's target, outside
    ./profiles) and a tab has no terminal: it must not read the file's commands afresh.
    Headless serve drops them, and so does each tab (--no-profile-commands); a trusted one
    hands --trust-profile on."""
    import tui.cli.serve as serve_mod
    from tui.cli import main
    from tui.cli.main import _load
    from tui.cli.serve import console_command

    repo = _cwd_repo(tmp_path)
    (repo / "conf").mkdir()
    (repo / "conf" / "real.yaml").write_text(RISKY)
    (repo / "profiles" / "linked.yaml").symlink_to("../conf/real.yaml")
    monkeypatch.chdir(repo)
    got: dict[str, object] = {}
    monkeypatch.setattr(serve_mod, "run_serve", lambda prof, **kw: got.update(prof=prof, **kw) or 0)
    assert main(["serve", "-P", "linked"]) == 0
    assert got["profile_commands"] == "dropped"
    tab = console_command(str(got["prof"].path), True, "dropped")  # type: ignore[attr-defined]
    assert tab.endswith("--read-only --no-profile-commands")
    # what the tab loads: the link's target, by its path; without them all the same
    prof = _load(argparse.Namespace(profile=str(repo / "conf" / "real.yaml"), notices=[], no_profile_commands=True))
    assert prof.notify.to == [] and prof.ssh.config is None
    got.clear()
    assert main(["serve", "-P", "linked", "--trust-profile"]) == 0
    assert got["profile_commands"] == "trusted"
    assert console_command("/p.yaml", True, "trusted").endswith("--trust-profile")
    got.clear()
    assert main(["serve", "-P", "qwen3-8b-grpo-32gpu"]) == 0  # not from here: nothing to hand on
    assert got["profile_commands"] is None
