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
                                  "ray job submit -- ", " \\\n", "\n# c\n", "export ", "f() {", "}\n", "x=(", "a.b="])
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
