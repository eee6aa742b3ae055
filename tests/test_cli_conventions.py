"""CLI conventions: --version, shell completion, `profiles`, help that documents every
environment variable the code reads, and `metrics` saying when it found no steps."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tui.cli import build_parser, main

REPO = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_version() -> None:
    from importlib.metadata import version

    r = _run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"rlconsole {version('rlconsole')}", r


def test_bash_completion_is_valid_and_complete() -> None:
    r = _run("completion", "bash")
    assert r.returncode == 0, r.stderr
    check = subprocess.run(["bash", "-n"], input=r.stdout, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr
    for name in ("render", "status", "check", "submit", "sim", "completion", "profiles", "demo"):
        assert f"    {name}) opts=" in r.stdout
    assert "--static" in r.stdout and "--skip-checks" in r.stdout


def test_bash_completion_completes_in_a_real_bash(tmp_path: Path) -> None:
    """Source the script in bash and ask it, as bash does on Tab."""
    script = tmp_path / "rlconsole.bash"
    script.write_text(_run("completion", "bash").stdout)
    probe = (f"source {script}; COMP_WORDS=(rlconsole check --st); COMP_CWORD=2; _rlconsole; "
             "echo \"${COMPREPLY[@]}\"; COMP_WORDS=(rlconsole se); COMP_CWORD=1; _rlconsole; echo \"${COMPREPLY[@]}\"")
    r = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    first, second = r.stdout.splitlines()[:2]
    assert first.split() == ["--static"], r.stdout
    assert "setup-ray" in second.split(), r.stdout


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells(shell: str) -> None:
    r = _run("completion", shell)
    assert r.returncode == 0 and "rlconsole" in r.stdout
    if shell == "fish":
        assert "__fish_use_subcommand' -a submit" in r.stdout
    else:
        assert r.stdout.startswith("#compdef rlconsole") and "complete -F _rlconsole rlconsole" in r.stdout
    if shutil.which(shell):  # syntax-check where the shell exists; the text checks above run anyway
        check = subprocess.run([shell, "-n"], input=r.stdout, capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr


def test_profiles_lists_packaged_and_user_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "cfg"
    (cfg / "profiles").mkdir(parents=True)
    (cfg / "profiles" / "mine.yaml").write_text((REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml").read_text())
    monkeypatch.setenv("RLCONSOLE_CONFIG_DIR", str(cfg))
    monkeypatch.chdir(tmp_path)
    assert main(["profiles"]) == 0
    out = capsys.readouterr()
    rows = dict(line.split(None, 1) for line in out.out.splitlines())
    assert rows["mine"].strip() == str(cfg / "profiles" / "mine.yaml")
    assert rows["qwen3-8b-grpo-32gpu"].strip().endswith("profiles/qwen3-8b-grpo-32gpu.yaml")
    assert "searched, in order" in out.err
    assert main(["profiles", "--names"]) == 0
    assert sorted(capsys.readouterr().out.split()) == ["mine", "qwen3-8b-grpo-32gpu"]


def test_help_documents_every_environment_variable_the_code_reads() -> None:
    """Each RLCONSOLE_* variable read outside the simulator's own internals is in the
    epilog of `rlconsole --help`."""
    read: set[str] = set()
    for f in list((REPO / "tui").rglob("*.py")) + list((REPO / "widgets").rglob("*.py")):
        if "sim" in f.relative_to(REPO).parts[:3]:
            continue  # tui/sim/: variables the sim sets for its own nodes
        text = f.read_text(encoding="utf-8")
        read |= set(re.findall(r"""(?:environ(?:\.get)?[\[(]|getenv\()\s*["'](RLCONSOLE_[A-Z_]+)""", text))
        read |= set(re.findall(r"""^[A-Z_]+_ENV\s*=\s*["'](RLCONSOLE_[A-Z_]+)""", text, re.MULTILINE))
    assert {"RLCONSOLE_PROFILE", "RLCONSOLE_STATE_DIR"} <= read, read
    help_text = build_parser().format_help()
    missing = sorted(v for v in read if v not in help_text)
    assert not missing, f"read by the code but not in `rlconsole --help`: {missing}"


def test_every_option_has_help() -> None:
    import argparse

    from tui.cli.completion import _commands

    parser = build_parser()
    bare = []
    for name, sp in [("rlconsole", parser), *_commands(parser).items()]:
        for action in sp._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                bare.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not bare, f"options without help text: {bare}"


def test_metrics_warns_when_no_steps(tmp_path: Path) -> None:
    log = tmp_path / "nothing.log"
    log.write_text("hello\nno steps here\n")
    r = _run("metrics", str(log), "--json")
    assert r.returncode == 0 and r.stdout.strip() == "[]"
    assert "no steps found" in r.stderr
