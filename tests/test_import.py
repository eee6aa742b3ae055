"""`rlconsole import`: bash is the oracle.

Each corpus script runs under real bash in a clean environment (`env -i`, PATH holding
only shims) where `python`, `python3`, `ray` and every other command the scripts call are
small Python files that record their argv, environment and working directory and exit 0,
so nothing real runs. The imported profile's `render --json` must give the launch the
same overrides (compared with Hydra's own parser) and the same environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tui.cli import main
from tui.core.importer import import_script, render_profile
from tui.core.importer.build import RENDER_ADDS
from tui.core.importer.hostfile import parse_hostfile
from tui.core.importer.shellexpand import ShellState, expand_word
from tui.core.profile import load_profile, load_profile_text

DATA = Path(__file__).parent / "data" / "import"
CORPUS = sorted((DATA / "corpus").glob("*.sh"))
SEED_SCRIPT = DATA / "seed_qwen3-8b_grpo_32gpu.sh"
SEED_HOSTFILE = DATA / "seed_hostfile"
SEED_PROFILE = Path(__file__).resolve().parent.parent / "profiles" / "qwen3-8b-grpo-32gpu.yaml"
SHIMMED = ["python", "python3", "ray", "modelscope", "mkdir", "huggingface-cli"]
BASELINE_ENV = {"PATH", "HOME", "PWD", "SHLVL", "_", "OLDPWD"}
CLIENT_VARS = {"RAY_ADDRESS"}


def _bash() -> str:
    b = shutil.which("bash")
    if b is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bash is needed: the tests use it as the oracle")
        pytest.skip("bash not installed")
    return b


def run_under_bash(script: Path, tmp: Path) -> list[dict[str, Any]]:
    """Run `script` with every command it calls shimmed; the shims' records, in order."""
    shims = tmp / "shims"
    shims.mkdir()
    log = tmp / "calls.jsonl"
    for name in SHIMMED:
        p = shims / name
        p.write_text(
            f"#!{sys.executable} -I\n"
            "import json, os, sys\n"
            f"with open({str(log)!r}, 'a') as f:\n"
            "    env = dict(kv.split('=', 1) for kv in open('/proc/self/environ').read().split('\\0') if '=' in kv)\n"
            "    f.write(json.dumps({'argv0': os.path.basename(sys.argv[0]), 'argv': sys.argv[1:],\n"
            "                        'env': env, 'cwd': os.getcwd()}) + '\\n')\n")
        p.chmod(0o755)
    home = tmp / "home"
    home.mkdir()
    work = tmp / "work"
    work.mkdir()
    subprocess.run(["env", "-i", f"PATH={shims}", f"HOME={home}", _bash(), str(script)],
                   cwd=work, capture_output=True, timeout=60, check=False)
    if not log.exists():
        return []
    return [json.loads(ln) for ln in log.read_text().splitlines()]


def _python_rest(argv: list[str]) -> list[str] | None:
    """The arguments after `-m verl...`/`main_ppo.py`, or None if this is not training."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return argv[i + 2:] if argv[i + 1].startswith("verl.") else None
        if a in ("-X", "-W"):
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        return argv[i + 1:] if a.endswith("main_ppo.py") else None
    return None


def bash_launch(records: list[dict[str, Any]], script_dir: Path) -> tuple[list[str], dict[str, str]]:
    """(arguments after the module, environment of the job) of the last training launch."""
    found = None
    for r in records:
        if r["argv0"] == "ray" and r["argv"][:2] == ["job", "submit"] and "--" in r["argv"]:
            j = r["argv"].index("--")
            rest = _python_rest(r["argv"][j + 2:])
            if rest is not None:
                env = {k: v for k, v in r["env"].items() if k not in BASELINE_ENV | CLIENT_VARS}
                opts = r["argv"][2:j]
                for k, o in enumerate(opts):
                    val = o.split("=", 1)[1] if "=" in o else (opts[k + 1] if k + 1 < len(opts) else "")
                    if o.startswith("--runtime-env-json"):
                        env.update({a: str(b) for a, b in json.loads(val).get("env_vars", {}).items()})
                    elif o.split("=")[0] == "--runtime-env" and (script_dir / val).is_file():
                        # Ray reads it from the cwd: the script's directory here (the seed's is absent)
                        data = yaml.safe_load((script_dir / val).read_text())
                        env.update({a: str(b) for a, b in data.get("env_vars", {}).items()})
                found = (rest, env)
        elif r["argv0"].startswith("python"):
            rest = _python_rest(r["argv"])
            if rest is not None:
                found = (rest, {k: v for k, v in r["env"].items() if k not in BASELINE_ENV})
    assert found is not None, "bash never reached the launch"
    return found


def _hydra(args: list[str]) -> dict[str, tuple[str, Any]]:
    """key -> (override type, value) as Hydra reads the arguments, the last of a key winning."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    out: dict[str, tuple[str, Any]] = {}
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("--config-path", "--config-name", "-cp", "-cn"):
            skip = True
            continue
        if a.startswith("-"):
            continue
        o = parser.parse_override(a)
        out[o.key_or_group] = (str(o.type), o.value())
    return out


def _expectations(script: Path) -> dict[str, list[str]]:
    exp: dict[str, list[str]] = {}
    for ln in script.read_text().splitlines():
        m = re.match(r"# expect-([a-z]+): (.*)$", ln)
        if m:
            exp.setdefault(m.group(1), []).append(m.group(2).strip())
    return exp


def _import_and_render(script: Path, tmp: Path, capsys: pytest.CaptureFixture[str],
                       extra: list[str] | None = None) -> tuple[dict[str, Any], str, str]:
    out = tmp / "imported.yaml"
    home = str(tmp / "home")
    rc = main(["import", str(script), "--home", home, "-o", str(out), *(extra or [])])
    summary = capsys.readouterr().err
    assert rc == 0, summary
    assert main(["render", "--profile", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    return data, out.read_text(), summary


def test_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 15


@pytest.mark.parametrize("script", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_matches_bash(script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = run_under_bash(script, tmp_path)
    bash_args, bash_env = bash_launch(records, script.parent)
    rendered, text, summary = _import_and_render(script, tmp_path, capsys)
    ours_args = _python_rest(rendered["entrypoint"][1:])
    prof = load_profile_text(text, "imported.yaml")
    placeholders = {o.key for o in prof.training.overrides if "<unresolved:" in json.dumps(o.value)}
    exp = _expectations(script)

    want = _hydra(bash_args)
    got = _hydra(ours_args)
    for k in placeholders:  # bash ran the command (a missing one: empty); we never guess
        want.pop(k, None)
        got.pop(k, None)
    assert got == want

    # --config-path/--config-name as the script gave them (the profile always passes both).
    for opt in ("--config-path", "--config-name"):
        given = [a for i, a in enumerate(bash_args) if a.startswith(opt + "=")] + [
            f"{opt}={bash_args[i + 1]}" for i, a in enumerate(bash_args) if a == opt]
        if given and given[0].split("=", 1)[1].startswith("/") or (given and opt == "--config-name"):
            assert given[0] in ours_args

    env = dict(rendered["runtime_env"]["env_vars"])
    for k in RENDER_ADDS:
        if k not in bash_env:
            env.pop(k, None)
    assert env == bash_env

    for line in exp.get("unresolved", []):
        assert re.search(rf"line {line}: .*(needs a command|function)", summary), (line, summary)
        assert f"line {line}:" in text  # and the profile's header says so too
    for name in exp.get("unset", []):
        assert f"${name} is never set" in summary
    if exp.get("args"):
        assert '"$@"' in summary
    for key in exp.get("duplicate", []):
        assert f"{key} given twice" in summary
    if exp.get("dropped"):
        dropped = exp["dropped"][0].split(",")
        assert "ends the command" in summary
        named = [_hydra([a]).popitem()[0] for a in re.findall(r"dropped by bash: (\S+)", summary)]
        assert named == [d.lstrip("+") for d in dropped]
        assert all(d.lstrip("+") not in got for d in dropped)
    # Placeholder values: one `SCRIPT:LINE:` line each, exactly the ones the script's
    # expect-placeholder comments name (none for the scripts with real values only).
    flagged = re.findall(rf"^{re.escape(str(script))}:(\d+): placeholder in (.*): set it in the profile before running$",
                         summary, re.M)
    home = str(tmp_path / "home")
    assert flagged == [tuple(e.replace("$HOME", home).split(" ", 1)) for e in exp.get("placeholder", [])]
    # check --static reads it (it may FAIL on the script's own choices, never on the profile)
    assert main(["check", "--static", "--profile", str(tmp_path / "imported.yaml")]) in (0, 1)


@pytest.mark.parametrize("script", [p for p in CORPUS if "trap" in p.stem], ids=lambda p: p.stem)
def test_keep_dropped_keeps_what_bash_drops(script: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    rendered, text, summary = _import_and_render(script, tmp_path, capsys, ["--keep-dropped"])
    keys = set(_hydra(_python_rest(rendered["entrypoint"][1:])))
    for d in _expectations(script)["dropped"][0].split(","):
        assert d.lstrip("+") in keys
    assert "--keep-dropped" in text


def test_nothing_real_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The importer itself executes nothing: a script whose every command would leave a
    mark leaves none."""
    mark = tmp_path / "ran"
    script = tmp_path / "s.sh"
    script.write_text(f"touch {mark}\nX=$(touch {mark}2)\nY=`touch {mark}3`\n"
                      f"python3 -m verl.trainer.main_ppo trainer.nnodes=1 +a.b=$X$Y\n")
    assert main(["import", str(script)]) == 0
    out = capsys.readouterr()
    assert not list(tmp_path.glob("ran*"))
    assert "<unresolved: line 2: $(touch" in out.out
    assert "line 3: `touch" in out.err


def test_seed_script_matches_bash_and_names_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = run_under_bash(SEED_SCRIPT, tmp_path)
    bash_args, bash_env = bash_launch(records, SEED_SCRIPT.parent)
    rendered, text, summary = _import_and_render(SEED_SCRIPT, tmp_path, capsys,
                                                 ["--hostfile", str(SEED_HOSTFILE)])
    assert _hydra(_python_rest(rendered["entrypoint"][1:])) == _hydra(bash_args)
    # Bash stops at the `# Actor并行策略` line: everything after it is a separate command.
    dropped = [_hydra([a]).popitem()[0] for a in re.findall(r"dropped by bash: (\S+)", summary)]
    assert dropped[0] == "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"
    assert dropped[-1] == "trainer.total_epochs"
    assert len(dropped) == 60 and len(_hydra(bash_args)) == 18
    assert not set(dropped) & set(_hydra(bash_args))
    assert "line 80: dropped by bash: actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=8" in summary
    assert "line 96: dropped by bash: +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=48" in summary
    assert "line 79: a comment inside the backslash continuation" in summary
    assert "trainer.nnodes=1 (VeRL default: the launch does not pass it) but the hostfile lists 4 hosts" in summary
    env = {k: v for k, v in rendered["runtime_env"]["env_vars"].items() if k not in RENDER_ADDS}
    assert env == bash_env


def test_seed_import_renders_like_the_shipped_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --keep-dropped the import is the shipped profile's render, except for exactly
    the departures both profiles' headers document."""
    ours, text, summary = _import_and_render(SEED_SCRIPT, tmp_path, capsys,
                                             ["--hostfile", str(SEED_HOSTFILE), "--keep-dropped"])
    assert main(["render", "--profile", str(SEED_PROFILE), "--json"]) == 0
    shipped = json.loads(capsys.readouterr().out)
    a, b = _hydra(_python_rest(ours["entrypoint"][1:])), _hydra(_python_rest(shipped["entrypoint"][1:]))
    # shipped: trainer.default_local_dir set explicitly (its header says so)
    assert set(b) - set(a) == {"trainer.default_local_dir"} and not set(a) - set(b)
    assert all(a[k] == b[k] for k in a)
    assert ours["entrypoint"][:6] == shipped["entrypoint"][:6]
    assert ours["address"] == shipped["address"]
    assert ours["submission_id"].rsplit("-", 2)[0] == shipped["submission_id"].rsplit("-", 2)[0]
    ev, sv = ours["runtime_env"]["env_vars"], shipped["runtime_env"]["env_vars"]
    # imported: the script's `export VERL_PATH` reaches the launch; TENSORBOARD_DIR is a
    # placeholder and PYTHONPATH lacks Megatron (the script does not say where they are).
    assert set(ev) - set(sv) == {"VERL_PATH"} and not set(sv) - set(ev)
    assert {k for k in sv if ev[k] != sv[k]} == {"TENSORBOARD_DIR", "PYTHONPATH"}
    header = " ".join(ln.lstrip("#").strip() for ln in text.split("version: 1")[0].splitlines())
    for documented in ("TENSORBOARD_DIR", "PYTHONPATH", "VERL_PATH", "kept (--keep-dropped)"):
        assert documented in header
    shipped_header = SEED_PROFILE.read_text().split("version: 1")[0]
    for documented in ("TENSORBOARD_DIR", "PYTHONPATH", "default_local_dir"):
        assert documented in shipped_header
    prof = load_profile(tmp_path / "imported.yaml")
    assert [n.address for n in prof.nodes] == [n.address for n in load_profile(SEED_PROFILE).nodes]
    assert prof.head.address == "10.10.142.125" and prof.total_gpus == 32
    # paths written once, as anchors
    assert "hf_model: &hf_model /data/datapool/models/Qwen3-8B" in text
    assert text.count("*mcore_checkpoint") == 2
    # check --static: the seed's own PP/EP choices may be reported; the profile loads
    assert main(["check", "--static", "--profile", str(tmp_path / "imported.yaml")]) in (0, 1)


@pytest.mark.parametrize("text,expected", [
    ("10.0.0.1\n10.0.0.2\n", [("10.0.0.1", None, True), ("10.0.0.2", None, False)]),
    ("# cluster\nn1 slots=8\nn2 slots=4  # small\n", [("n1", 8, True), ("n2", 4, False)]),
    ("10.0.0.1 8\n10.0.0.2 8 head\n", [("10.0.0.1", 8, False), ("10.0.0.2", 8, True)]),
])
def test_hostfile_formats(text: str, expected: list[tuple[str, int | None, bool]]) -> None:
    hosts, _ = parse_hostfile(text)
    assert [(h.address, h.gpus, h.head) for h in hosts] == expected


def test_no_hostfile_gives_a_loadable_template(tmp_path: Path) -> None:
    res = import_script(CORPUS[0], home="/root")
    text = render_profile(res)
    prof = load_profile_text(text, "x.yaml")
    assert [n.address for n in prof.nodes] == ["192.0.2.1"]
    assert "RFC 5737" in text


@pytest.mark.parametrize("raw,expected", [
    ("'a b'\"c\"d", ["a bcd"]), ("$X", ["1", "2"]), ('"$X"', ["1 2"]), ("$NOPE", []),
    ('"$NOPE"', [""]), ("${NOPE:-${Y:-z}}", ["z"]), ("${X#1 }", ["2"]), ("$((3 + 4 * 2))", ["11"]),
    ("a\\ b", ["a b"]), ("$'x\\ty'", ["x\ty"]), ("~/p", ["/h/p"]), ("'~'/p", ["~/p"]),
])
def test_expand_word_like_bash(raw: str, expected: list[str], tmp_path: Path) -> None:
    st = ShellState(vars={"X": "1 2"}, home="/h")
    assert expand_word(raw, st, 1) == expected
    bash = shutil.which("bash")
    if bash:  # and bash agrees
        r = subprocess.run(["env", "-i", "HOME=/h", bash, "-c",
                            f"X='1 2'; for w in {raw}; do printf '%s\\0' \"$w\"; done"],
                           capture_output=True, text=True, timeout=30)
        assert r.stdout.split("\0")[:-1] == expected


def test_cli_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(tmp_path / "missing.sh")]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "Traceback" not in err
    s = tmp_path / "s.sh"
    s.write_text("echo hello\nray start --head\n")
    assert main(["import", str(s)]) == 2
    assert "no VeRL launch found" in capsys.readouterr().err


def test_odd_scripts_never_crash_and_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unterminated quotes, heredocs, wrappers, YAML-special keys, odd expansions: the
    importer reports what it cannot read and still writes a profile that loads."""
    s = tmp_path / "s.sh"
    s.write_text(
        "cat > /tmp/x <<'EOF'\npython3 -m verl.trainer.main_ppo should.not=count\nEOF\n"
        "A=${!ref} B=${A/x/y} C=$((1/0)) D=$(( 2 ** 10 ))\n"
        "nohup env FOO=1 python3 -m verl.trainer.main_ppo a.on=1 a.null=x 'b.c=multi\nline' "
        "x.y=$D 0bad=1 +z.w=${C} > log 2>&1 &\n"
        "echo 'unterminated\n")
    assert main(["import", str(s), "-o", str(tmp_path / "p.yaml")]) == 0
    err = capsys.readouterr().err
    assert main(["import", str(s), "-o", str(tmp_path / "p.yaml")]) == 2  # never silently replaced
    assert "exists; pass --force" in capsys.readouterr().err
    prof = load_profile(tmp_path / "p.yaml")
    got = {o.key: o.value for o in prof.training.overrides}
    assert got["a.on"] == 1 and got["a.null"] == "x" and got["x.y"] == 1024
    assert "should.not" not in got and "0bad" not in got and "b.c" not in got
    assert prof.env == {"FOO": "1"}
    assert "division by zero" in err and "not imported" in err


def test_hostfile_against_the_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hf = tmp_path / "hosts"
    hf.write_text("10.1.0.5 8\n10.1.0.6 4 head\n10.1.0.7 8\n")
    out = tmp_path / "p.yaml"
    assert main(["import", str(DATA / "corpus" / "13_submit_json.sh"), "--hostfile", str(hf), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "trainer.nnodes=2 but the hostfile lists 3 hosts" in err
    assert "trainer.n_gpus_per_node=8 but the hostfile gives 10.1.0.6 4" in err
    prof = load_profile(out)
    assert prof.head.address == "10.1.0.6" and [n.gpus for n in prof.nodes] == [8, 4, 8]
    assert "# hostfile line 2" in out.read_text()


_PIECES = ["a", "b/c", "'q  r'", '"$X"', "$X", "${N:-$X}", '"${X}y"', "\\ ", "$((1+2*3))", '"~"',
           "$'t\\tu'", "''", '""', "${#X}", "${X%2}", "${N:-'s t'}", '"${N:=d}"', "$N", "${X:+p}",
           "\\$X", '"\\"q\\""', "${ARR[1]}", '"${ARR[@]}"', "${ARR[@]}", "${#ARR[@]}", "=", "%",
           "'$X'", '"a\'b"', "${N-}", '"$((2**3))"', "$(( Y + 1 ))", "$((Y/2))", '"${N:-"in ner"}"',
           "${N:-a b}", '"${N:-$X}"', "${X#1}", "${X##*2}", '"$Y"x', '"c\\\nd"', "'e\\\nf'"]


def test_expander_agrees_with_bash_on_generated_words() -> None:
    """Words glued from quoting/expansion pieces: our fields == bash's fields."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    bash = _bash()

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5))
    def check(pieces: list[str]) -> None:
        word = "".join(pieces)
        state = ShellState(vars={"X": "1  2", "Y": "5"}, arrays={"ARR": ["e f", "g"]}, home="/h")
        ours = expand_word(word, state, 1)
        r = subprocess.run(["env", "-i", "HOME=/h", bash, "-c",
                            f"X='1  2'; Y=5; ARR=('e f' g); for w in {word}; do printf '%s\\0' \"$w\"; done"],
                           capture_output=True, text=True, timeout=30)
        assert r.stdout.split("\0")[:-1] == ours, word

    check()


_VALUES = ["8", "1e-6", "True", "grpo", "/data/x.parquet", "$V1", '"$V2"', "'q'", "${V3:-dflt}",
           '"[\'$V1\',\'b\']"', "$((V4 * 2))", "${UNSET}", "'[\"console\",\"tb\"]'", "$V1$V4"]


def test_generated_scripts_match_bash(tmp_path_factory: pytest.TempPathFactory,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Whole scripts with random variables, quoting and comment/blank-line traps: the
    imported profile renders the overrides bash passes, and names the ones it drops."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    _bash()

    @settings(max_examples=25, deadline=None, derandomize=True)
    @given(st.lists(st.tuples(st.sampled_from(["", "", "+", "++"]), st.sampled_from(_VALUES),
                              st.sampled_from(["", "", "", "", "# note", "#", ""])),
                    min_size=1, max_size=8),
           st.booleans(), st.sampled_from(["/p/q", "abc", "x.y"]))
    def check(items: list[tuple[str, str, str]], submit: bool, v1: str) -> None:
        tmp = tmp_path_factory.mktemp("gen")
        lines = ["#!/bin/bash", f"V1={v1}", "export V2='two'  # a comment", "V3=", "V4=21"]
        lines.append("ray job submit --no-wait -- python3 -u -m verl.trainer.main_ppo \\" if submit
                     else "python3 -m verl.trainer.main_ppo \\")
        for i, (prefix, value, after) in enumerate(items):
            last = i == len(items) - 1
            lines.append(f"    {prefix}k{i}.v={value}" + ("" if last else " \\"))
            if after and not last:
                lines.append(f"    {after}" if after.startswith("#") else "")
        script = tmp / "gen.sh"
        script.write_text("\n".join(lines) + "\n")
        bash_args, bash_env = bash_launch(run_under_bash(script, tmp), tmp)
        rendered, text, summary = _import_and_render(script, tmp, capsys)
        want, got = _hydra(bash_args), _hydra(_python_rest(rendered["entrypoint"][1:]))
        assert got == want, script.read_text()
        dropped = [_hydra([a]).popitem()[0] for a in re.findall(r"dropped by bash: (\S+)", summary)]
        assert set(dropped) == {f"k{i}.v" for i in range(len(items))} - set(want), script.read_text()
        env = {k: v for k, v in rendered["runtime_env"]["env_vars"].items() if k not in RENDER_ADDS}
        assert env == bash_env

    check()


def test_garbage_never_crashes(tmp_path: Path) -> None:
    """Any text: a usage error or a profile that loads, never a traceback."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tui.core.errors import UsageError

    alphabet = st.sampled_from(list("ab=.+-_ /\\\n\t'\"$`(){}[]#;&|<>~!*?@%^:,0123456789")
                               + ["${", "$(", "$((", "))", "<<EOF\n", "\nEOF\n", "python3 -m verl.trainer.main_ppo ",
                                  "ray job submit -- ", " \\\n", "\n# c\n", "export ", "f() {", "}\n", "x=(", "a.b=",
                                  # issue 39 S3's shapes: a nameless function, a non-ASCII digit,
                                  # array gaps, += copies, arithmetic through names
                                  "function\n", "shift ", "²", "a[", "]=", "+=", "$((a))", "a=-", "f\n", "<<", ")"])
    script = tmp_path / "g.sh"

    @settings(max_examples=int(os.environ.get("IMPORT_FUZZ", "200")), deadline=None,
              derandomize=not os.environ.get("IMPORT_FUZZ"))
    @given(st.lists(alphabet, max_size=60).map("".join))
    def check(text: str) -> None:
        script.write_text(text + "\npython3 -m verl.trainer.main_ppo a.b=1 " + text.replace("\n", " ")[:40] + "\n")
        try:
            res = import_script(script, home="/h")
        except UsageError:
            return
        load_profile_text(render_profile(res), "g.yaml")

    check()


def test_seed_copies_are_verbatim() -> None:
    """The copied script and hostfile are the seed document's text (first line: source),
    checked against the repository's own copy of that document (tests/data/seed), so a
    clone checks them alone; `RLCONSOLE_SHARED`, when set, also checks the original."""
    from tests.samples import SEED_DOC, seed_text

    texts = [seed_text()]
    shared = os.environ.get("RLCONSOLE_SHARED")
    if shared:
        texts.append((Path(shared) / "seed" / "000_c3d4f0c48559e113.txt").read_text())
    for copy in (SEED_SCRIPT, SEED_HOSTFILE):
        first, body = copy.read_text().split("\n", 1)
        assert first.startswith("# Source: ") and "000_c3d4f0c48559e113.txt" in first
        assert SEED_DOC.exists()
        for text in texts:
            assert body.strip() in text


# --------------------------------------------------------------- untrusted script text
# A script is untrusted: no text in it may become YAML structure of the profile (a
# `notify:` section runs its commands at the first alert), reach a message unescaped, or
# exhaust time, memory or the stack.

TOP = ["version", "name", "description", "nodes", "container", "paths", "ray", "env", "training"]
INJECT = 'A: b\nnotify:\n  to: ["touch /tmp/x"]\n#'
NASTY = [INJECT, "x\nnotify:\n  to: [evil]\n#", "a\u2028notify: [evil]", "a\x85b: c", "it's \"q\"",
         "a # not a comment", "k: v", "- item", "-leading", "!!python/object:os.system", "&a anchor",
         "*a", "{a: 1}", "[1, 2]", "null", "on", "", " ", "\x1b]0;title\x07", "tab\there", "é ☃ \U0001f600"]


def _q(s: str) -> str:
    """`s` as one single-quoted bash word (any text without NUL)."""
    return "'" + s.replace("'", "'\\''") + "'"


def _slot_script(renv_name: str = "RENV_NAME", renv_value: str = "v", image: str = "repo/verl:1",
                 value: str = "plain", run: str = "run1", config_name: str = "ppo_trainer") -> str:
    renv = json.dumps({"env_vars": {renv_name: renv_value}})
    return ("#!/bin/bash\n"
            f"export IMAGE={_q(image)}\n"
            f"ray job submit --runtime-env-json={_q(renv)} -- python3 -m verl.trainer.main_ppo \\\n"
            f"    --config-name {_q(config_name)} \\\n"
            f"    custom.value={_q(value)} \\\n"
            f"    trainer.experiment_name={_q(run)} \\\n"
            "    trainer.nnodes=2 trainer.n_gpus_per_node=8\n")


def _import_slots(d: Path, script_name: str = "run.sh", hostfile_name: str = "hosts",
                  **slots: str) -> tuple[Any, str, dict[str, Any]]:
    """Import a script with text in its slots; the result, the profile text, and the
    profile as loaded by the project's loader (checked) and as plain YAML."""
    d.mkdir(parents=True, exist_ok=True)
    script = d / script_name
    script.write_text(_slot_script(**slots), encoding="utf-8")
    hosts = d / hostfile_name
    hosts.write_text("10.0.0.1 8\n10.0.0.2 8\n")
    res = import_script(script, hostfile=hosts, home="/h")
    text = render_profile(res)
    load_profile_text(text, "imported.yaml")
    return res, text, yaml.safe_load(text)


def test_runtime_env_name_that_is_not_a_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The exact attack: an env-var name holding `notify:` in --runtime-env-json (and in a
    --runtime-env file). Refused with one line naming the script and line; nothing written."""
    s = tmp_path / "s.sh"
    s.write_text(_slot_script(renv_name=INJECT))
    out = tmp_path / "p.yaml"
    assert main(["import", str(s), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{s}: line 3: runtime env variable name" in err and "[A-Za-z_][A-Za-z0-9_]*" in err, err
    assert not out.exists()
    (tmp_path / "renv.yaml").write_text(yaml.safe_dump({"env_vars": {INJECT: "v", "OK": "1"}}))
    s.write_text("ray job submit --runtime-env renv.yaml -- python3 -m verl.trainer.main_ppo a.b=1\n")
    assert main(["import", str(s), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runtime env variable name 'A: b\\nnotify:" in err, err
    assert not out.exists()


@pytest.mark.parametrize("evil", NASTY, ids=[f"nasty{i}" for i in range(len(NASTY))])
def test_script_text_stays_in_its_slot(evil: str, tmp_path: Path) -> None:
    """Each nasty text at once as the script's and the hostfile's file names (header
    comments, description), a Hydra override value, the run name and the image (an env
    value): the profile has the writer's top-level keys, an empty `notify`, and every
    value loads back as the importer read it (or is left out with a finding)."""
    fname = evil.replace("/", "_")
    res, text, data = _import_slots(tmp_path, script_name=fname + ".sh", hostfile_name=fname + ".hosts",
                                    image=evil, value=evil, run=evil, renv_value=evil)
    assert list(data) == TOP, text
    prof = load_profile_text(text, "p.yaml")
    assert prof.notify.to == [] and prof.description == f"imported from {tmp_path / (fname + '.sh')}"
    assert prof.env["IMAGE"] == evil and prof.env["RENV_NAME"] == evil
    got = {o.key: o.value for o in prof.training.overrides}
    want = {it.key: it.value for it in res.overrides}
    assert got == want and got["trainer.nnodes"] == 2
    if "custom.value" not in want:  # (a line break: Hydra cannot take it from a profile)
        assert any("custom.value" in str(f) and "not imported" in str(f) for f in res.findings)
    for ln in text.splitlines():  # script text in a comment is one line, no control character
        assert _one_line(ln), ln


def test_messages_show_script_text_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A terminal escape or line break in a name or in an unexpandable `$(...)` reaches
    stderr as `\\x1b` / `\\n`, never as the byte itself."""
    d = tmp_path / "d"
    d.mkdir()
    s = d / "run\x1b[2J\nfake: line.sh"
    s.write_text("X=$(printf '\x1b]0;owned\x07')\npython3 -m verl.trainer.main_ppo a.b=$X\n")
    assert main(["import", str(s), "-o", str(tmp_path / "p.yaml")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\nfake: line" not in err, err
    assert "run\\x1b[2J\\nfake: line.sh" in err and "printf '\\x1b]0;owned\\x07'" in err
    assert main(["import", str(d / "missing\x1b[2J.sh")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "missing\\x1b[2J.sh: cannot read" in err


def test_file_names_with_line_breaks_stay_comments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The exact attack through file names: a script and a hostfile named with `notify:`
    after a line break (and after YAML's other line breaks, \\u2028 and \\x85)."""
    for brk in ("\n", "\u2028", "\x85"):
        d = tmp_path / f"d{ord(brk)}"
        d.mkdir()
        s = d / f"x{brk}notify:{brk}  to: [\"touch x\"]{brk}#.sh"
        s.write_text(_slot_script())
        hf = d / f"h{brk}notify: [evil]{brk}#"
        hf.write_text("10.0.0.1 8\n10.0.0.2 8\n")
        out = d / "p.yaml"
        assert main(["import", str(s), "--hostfile", str(hf), "-o", str(out)]) == 0, capsys.readouterr().err
        capsys.readouterr()
        prof = load_profile(out)
        assert prof.notify.to == [] and [n.address for n in prof.nodes] == ["10.0.0.1", "10.0.0.2"]
        assert list(yaml.safe_load(out.read_text())) == TOP
        assert prof.description == f"imported from {s}"


def _one_line(ln: str) -> bool:
    """No line break YAML knows (\\r, \\x85, \\u2028, \\u2029) and no control character."""
    import unicodedata

    return not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in ln)


_SLOT_PATHS: dict[str, tuple[str, ...]] = {
    "renv_name": ("env",), "renv_value": ("env", "RENV_NAME"), "image": ("env", "IMAGE"),
    "value": ("training", "overrides", "custom", "value"),
    "run": ("training", "overrides", "trainer", "experiment_name"),
    "config_name": ("training", "config_name"), "script_name": ("name", "description"),
    "hostfile_name": (),
}


def _pop(data: dict[str, Any], path: tuple[str, ...], key: str | None = None) -> Any:
    """Remove the slot's entry (or, for `name`/`description`, both) and return it."""
    if path == ("name", "description"):
        return data.pop("name"), data.pop("description", None)
    if not path:
        return None
    nodes = [data]
    for p in path[:-1]:
        if p not in nodes[-1]:
            return KeyError
        nodes.append(nodes[-1][p])
    got = nodes[-1].pop(key if key is not None else path[-1], KeyError)
    for parent, p, node in reversed(list(zip(nodes, path, nodes[1:]))):  # no empty section left
        if not node:
            del parent[p]
    return got


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return type(a) is type(b) and a == b


def test_no_script_text_can_add_or_change_another_key(tmp_path: Path) -> None:
    """Property: whatever text fills one script-controlled slot, the loaded profile has
    the same top-level keys and the same values everywhere else as with a benign text;
    the slot's own value loads back as the importer read it, or the import is refused
    (env names) / the override left out, each with one clear line."""
    import itertools

    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as st

    from tui.core.errors import ProfileError, UsageError

    counter = itertools.count()
    benign: dict[str, dict[str, Any]] = {}
    pieces = st.one_of(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                               max_size=6),
                       st.sampled_from(["\udcff", "\n", "\r\n", "\u2028", "\x85", ": ", "#", "- ", "!!python/object:x",
                                        "&a ", "*a", "'", '"', "notify:\n  to: [x]\n", "\\", "$", "{", "["]))

    @settings(max_examples=int(os.environ.get("IMPORT_FUZZ", "150")), deadline=None,
              derandomize=not os.environ.get("IMPORT_FUZZ"), suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(_SLOT_PATHS)), st.lists(pieces, max_size=6).map("".join))
    def check(slot: str, text: str) -> None:
        if slot.endswith("_name") and slot != "renv_name" and slot != "config_name":
            text = text.replace("/", "_")
            assume(text not in ("", ".", "..") and len(os.fsencode(text)) < 200)
        else:  # (a file name may hold undecodable bytes; the script's UTF-8 text cannot)
            assume("\udcff" not in text)
        assume(not (slot == "renv_name" and text in ("IMAGE",)))
        d = tmp_path / str(next(counter))
        if slot not in benign:
            benign[slot] = _import_slots(tmp_path / f"benign-{slot}")[2]
        try:
            res, text_out, data = _import_slots(d, **{slot: text})
        except ProfileError as e:  # the loader's own rule for the slot (an empty config name)
            assert e.key == ".".join(_SLOT_PATHS[slot]) and str(e).isprintable(), str(e)
            return
        except UsageError as e:
            msg = str(e)
            assert slot == "renv_name" and "\n" not in msg and msg.isprintable(), msg
            assert "runtime env variable name" in msg and "refused" in msg
            assert not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text)
            return
        assert list(data) == list(benign[slot]), text_out
        for ln in text_out.splitlines():
            assert _one_line(ln), ln
        path = _SLOT_PATHS[slot]
        mine = json.loads(json.dumps(data, default=str))  # (a copy)
        base = json.loads(json.dumps(benign[slot], default=str))
        if slot != "script_name":  # (it names the example's own directory)
            assert mine.pop("description") == f"imported from {d / 'run.sh'}"
            base.pop("description")
        if slot == "renv_name":
            assert mine["env"].pop(text) == "v" and base["env"].pop("RENV_NAME") == "v"
        elif path:
            got = _pop(mine, path)
            _pop(base, path)
            if slot == "script_name":
                assert got == (res.name, f"imported from {d / text}".encode("utf-8", "backslashreplace").decode())
            elif slot in ("value", "run"):
                want = {it.key: it.value for it in res.overrides}.get(".".join(path[2:]), KeyError)
                assert _same(got, want) or (got is KeyError and want is KeyError), (got, want)
                if want is KeyError:
                    assert any("not imported" in str(f) for f in res.findings)
            else:
                assert got == text
        assert mine == base, text_out

    check()


# ------------------------------------------------------------------------ resource bounds


def _import_bounded(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    """`rlconsole import` in a child with 2 GiB of address space and a generous timeout,
    so an unbounded importer fails this test (MemoryError, a hang) instead of the machine."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    try:
        return subprocess.run([sys.executable, "-m", "tui.cli", "import", *args, "-o", str(tmp / "out.yaml")],
                              capture_output=True, text=True, timeout=300, preexec_fn=cap, env=env, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"import {args} did not finish: unbounded")


def _refused(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    for n in needles:
        assert n in r.stderr, r.stderr


LAUNCH = "python3 -m verl.trainer.main_ppo a.b=1"


@pytest.mark.parametrize("body, needle", [
    ("a=x\n" + "a=$a$a\n" * 40, "line 22: a word expands to more than 1,048,576 characters"),
    ("a=(x)\n" + 'a=("${a[@]}" "${a[@]}")\n' * 40, "array a grows past 100,000 elements"),
    ("a[100000000]=x\n", "line 1: array a grows past 100,000 elements"),
    ("x=" + "$(" * 5000 + "echo" + ")" * 5000 + "\n", "line 1: quotes, $( and ${ nested more than 100 deep"),
    ('x="' + "${y:-\"" * 3000 + "\n", "line 1: quotes, $( and ${ nested more than 100 deep"),
    ("x=$((" + "1+" * 600 + "1))\n", "line 1: an arithmetic expression of more than 1,000 characters"),
    ("x=$((" + "-" * 900 + "1))\n", "line 1: arithmetic nested more than 200 deep"),
    ("f() { a=$a$a$a$a; g; }\ng() { f; }\na=xxxxxxxxxxxxxxxx\n" + "f\n" * 100,
     "characters"),
], ids=["doubling", "array-doubling", "array-index", "deep-$(", "deep-${", "long-arith", "deep-arith",
        "function-calls"])
def test_expansion_is_bounded(body: str, needle: str, tmp_path: Path) -> None:
    s = tmp_path / "big.sh"
    s.write_text(body + LAUNCH + "\n")
    _refused(_import_bounded([str(s)], tmp_path), f"{s}: ", needle)


_PEAK_CHILD = (
    "import sys\n"
    "from tui.cli.main import main\n"
    "try:\n"
    "    rc = main(sys.argv[1:])\n"
    "except SystemExit as e:\n"
    "    rc = e.code\n"
    "hwm = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')]\n"
    "print('PEAK', int(hwm[0]) * 1024)\n"
    "sys.exit(rc)\n")
"""The child's own peak resident memory: VmHWM, its address space's since exec. Not
`ru_maxrss`, which Linux carries over from the image before exec: a child forked from a
pytest worker that had grown to 250 MB reported 250 MB (seen with four workers)."""


def _import_peak(script: Path, tmp: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """`rlconsole import SCRIPT` in a child (2 GiB of address space, as `_import_bounded`),
    and the child's peak resident memory, interpreter included (no clock involved)."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    try:
        r = subprocess.run([sys.executable, "-c", _PEAK_CHILD, "import", str(script), "-o", str(tmp / "out.yaml")],
                           capture_output=True, text=True, timeout=600, preexec_fn=cap, env=env, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"import {script} did not finish: unbounded")
    m = re.search(r"^PEAK (\d+)$", r.stdout, re.M)
    return r, int(m.group(1)) if m else -1


_L = "python3 -m verl.trainer.main_ppo a.b=1"
_SMALL_BOMBS = {
    # every command kept its own copy of every exported variable: E x C entries
    "exported-x-commands": "export " + " ".join(f"e{i}=" for i in range(3000)) + "\n" + "x\n" * 8000,
    # an element far out fills the gap: 100,000 elements per line, many arrays
    "array-gaps": "".join(f"a{i}[99999]=x\n" for i in range(3000)),
    # a 300-byte script: one-letter fields cost a hundred bytes each, far more than their characters
    "one-letter-fields": "a='x '\n" + 'a="$a$a"\n' * 19 + "c $a $a $a $a $a $a $a $a\n" * 4,
    # a function's body read once per call: 100 calls of 30,000 commands
    "function-replays": "f() {\n" + "x\n" * 30000 + "}\n" + "f\n" * 100,
    # the scan alone: a 1 MiB script of empty commands
    "many-commands": "x;" * 500_000,
}


@pytest.mark.parametrize("name", list(_SMALL_BOMBS))
def test_small_scripts_stay_small(name: str, tmp_path: Path) -> None:
    """Issue 39 S3: a 39 KB script made the importer use 1.4 GB. Words, fields, array
    elements, commands read and exported copies are counted (import limits, MAX_ITEMS):
    any script within the 1 MiB file limit is refused in one line (exit 2) with a
    bounded peak, far below what the unbounded walk took (GBs: MemoryError under 2 GiB)."""
    s = tmp_path / "bomb.sh"
    s.write_text(_SMALL_BOMBS[name] + _L + "\n")
    assert s.stat().st_size <= 1 << 20
    r, peak = _import_peak(s, tmp_path)
    _refused(r, f"{s}: ", "more than 500,000")
    assert 0 < peak < 200 << 20, (peak, r.stderr[-500:])  # (the interpreter and the CLI alone: ~30 MB)


def test_odd_shapes_are_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Issue 39 S3: three inputs ended in a traceback. `function` with no name, `shift ²`
    (a digit to str.isdigit, not to int), and arithmetic nested through names (each name
    could nest 200 deep again): a note or one refusal line, exit 0 or 2, never a traceback."""
    s = tmp_path / "odd.sh"
    s.write_text("function\n" + _L + "\n")
    r = _import_bounded([str(s)], tmp_path)
    assert r.returncode == 0 and "`function` without a name" in r.stderr, r.stderr[-2000:]
    (tmp_path / "out.yaml").unlink()
    s.write_text("f() { shift ²; }\nf a b\n" + _L + "\n")
    r = _import_bounded([str(s)], tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    (tmp_path / "out.yaml").unlink()
    neg = "-" * 190
    s.write_text("".join(f"v{i}={neg}v{i + 1}\n" for i in range(12)) + "v12=1\nx=$((v0))\n" + _L + "\n")
    _refused(_import_bounded([str(s)], tmp_path), f"{s}: line 14: arithmetic nested more than 200 deep")
    s.write_text("x=$((1a))\n" + _L + "\n")  # Python's parser warned on stderr ("invalid decimal literal")
    r = _import_bounded([str(s)], tmp_path)
    assert r.returncode == 0 and "SyntaxWarning" not in r.stderr, r.stderr[-2000:]


def test_a_heredoc_start_at_the_end_does_not_hang(tmp_path: Path) -> None:
    """`<<` as the last characters of the text the scanner reads (an array body `x=(a <<)`,
    a script without a last newline) looped for ever: peek() at the end is "", which
    `in " \\t"` finds. Found by the fuzz below with S3's alphabet."""
    for body in ("x=(a <<)\n" + LAUNCH + "\n", LAUNCH + "\nx=(a <<-)\n", LAUNCH + " <<"):
        s = tmp_path / "h.sh"
        s.write_text(body)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        try:
            r = subprocess.run([sys.executable, "-m", "tui.cli", "import", str(s), "-o", str(tmp_path / "o.yaml"),
                                "--force"], capture_output=True, text=True, timeout=60, env=env, check=False)
        except subprocess.TimeoutExpired:
            pytest.fail(f"import of {body!r} did not finish")
        assert r.returncode in (0, 2) and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_huge_arithmetic_is_64_bit_as_in_bash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`$((10**100000))`, `2**99999999999`, `1<<10**9`: bash wraps at 64 bits, so does the
    importer (an unbounded one runs out of memory computing them)."""
    exprs = ["10**100000", "2**99999999999", "3**99999999", "1<<1000000000", "2**63", "-7/2", "-7%2", "1<<-1"]
    s = tmp_path / "a.sh"
    s.write_text("".join(f"V{i}=$(({e}))\n" for i, e in enumerate(exprs))
                 + "python3 -m verl.trainer.main_ppo " + " ".join(f"k.v{i}=$V{i}" for i in range(len(exprs))) + "\n")
    r = _import_bounded([str(s)], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    prof = load_profile(tmp_path / "out.yaml")
    b = subprocess.run([_bash(), "-c", "; ".join(f"echo $(({e}))" for e in exprs)],
                       capture_output=True, text=True, timeout=60, check=True)
    assert [prof.override_value(f"k.v{i}") for i in range(len(exprs))] == [int(x) for x in b.stdout.split()]


def test_node_counts_are_bounded(tmp_path: Path) -> None:
    for nn in ("100000000", "1e8"):
        s = tmp_path / f"n{nn}.sh"
        s.write_text(f"python3 -m verl.trainer.main_ppo trainer.nnodes={nn} trainer.n_gpus_per_node=8\n")
        _refused(_import_bounded([str(s)], tmp_path), f"{s}: line 1: trainer.nnodes=", "more than 4096 nodes")
    hf = tmp_path / "hosts"
    hf.write_text("".join(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255} 8\n" for i in range(5000)))
    s = tmp_path / "ok.sh"
    s.write_text(LAUNCH + "\n")
    _refused(_import_bounded([str(s), "--hostfile", str(hf)], tmp_path), f"{hf}: 5000 hosts, more than 4096")


def test_only_regular_files_are_read_and_only_so_much(tmp_path: Path) -> None:
    """`--runtime-env /dev/zero`, a FIFO nobody writes, a 2 MiB script: refused, never
    read (an unbounded read of /dev/zero fills memory; a FIFO blocks forever)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    s = tmp_path / "s.sh"
    for target in ("/dev/zero", str(fifo)):
        s.write_text(f"ray job submit --runtime-env {target} -- {LAUNCH}\n")
        _refused(_import_bounded([str(s)], tmp_path), f"{target}: not a regular file; refused")
    s.write_text(LAUNCH + "\n")
    for hf in ("/dev/zero", str(fifo)):
        _refused(_import_bounded([str(s), "--hostfile", hf], tmp_path), f"{hf}: not a regular file")
    _refused(_import_bounded([str(fifo)], tmp_path), f"{fifo}: not a regular file")
    big = tmp_path / "big.sh"
    big.write_text(LAUNCH + "\n" + "# pad\n" * (2 << 18))
    _refused(_import_bounded([str(big)], tmp_path), f"{big}: larger than 1,048,576 bytes")


def test_runtime_env_alias_bomb_and_deep_json(tmp_path: Path) -> None:
    """A YAML alias tree as an env value (its str() is exponential) is not imported; JSON
    nested past the stack is refused with one line."""
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]" for i in range(9)]
    (tmp_path / "renv.yaml").write_text("\n".join(bomb) + "\nenv_vars: {BOMB: *j, OK: fine}\n")
    s = tmp_path / "s.sh"
    s.write_text(f"ray job submit --runtime-env renv.yaml -- {LAUNCH}\n")
    r = _import_bounded([str(s)], tmp_path)
    assert r.returncode == 0 and "runtime env var 'BOMB': a list, not a string; not imported" in r.stderr
    assert load_profile(tmp_path / "out.yaml").env == {"OK": "fine"}
    s.write_text("ray job submit --runtime-env-json='" + "[" * 100000 + "' -- " + LAUNCH + "\n")
    _refused(_import_bounded([str(s)], tmp_path), f"{s}: line 1: --runtime-env-json nested too deeply")


def test_pwd_is_the_launch_directory_not_empty(tmp_path: Path) -> None:
    """bash sets $PWD itself (even under `env -i`): the import cannot know it, so it writes a
    placeholder that `check` fails on, never the empty string (VeRL 0.9.0's qwen3_30b_a3b
    example builds its data paths from $PWD)."""
    from tui.core.importer.shellexpand import PWD_PLACEHOLDER
    from tui.core.placeholders import placeholder_reason

    script = tmp_path / "run.sh"
    script.write_text('DATA=$PWD/data\npython3 -m verl.trainer.main_ppo data.train_files=$DATA/train.parquet '
                      'trainer.nnodes=1\n')
    res = import_script(script, home="/h")
    value = next(i.value for i in res.overrides if i.key == "data.train_files")
    assert value == f"{PWD_PLACEHOLDER}/data/train.parquet"
    assert placeholder_reason(value)
    notes = [str(f) for f in res.findings]
    assert any("$PWD is the directory the script is launched from" in n for n in notes), notes
    assert not any("$PWD is never set" in n for n in notes)


def test_quoted_dollar_at_of_nothing_is_no_word(tmp_path: Path) -> None:
    """`"$@"` with no arguments is no word at all in bash (VeRL's examples end their launch
    line with it): no empty argument, no note about one."""
    script = tmp_path / "run.sh"
    script.write_text('python3 -m verl.trainer.main_ppo trainer.nnodes=1 "$@"\n')
    res = import_script(script, home="/h")
    assert [i.key for i in res.overrides] == ["trainer.nnodes"]
    notes = [str(f) for f in res.findings]
    assert not any("argument ''" in n for n in notes), notes
    assert any("pass the script's own arguments" in n for n in notes)
