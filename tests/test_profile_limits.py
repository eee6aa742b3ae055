"""Profiles that once gave a traceback or ran away (issue 15, item 3).

Each case must print one line `FILE:LINE: KEY: message` and exit 2, from `render` and from
`check --static` alike: deep nesting (RecursionError), a 5000-digit integer (ValueError
from Python's int-string limit), TP/PP of 0, `.inf` or `.nan` in the overrides
(ZeroDivisionError/OverflowError in the static checks), a billion-laughs alias tree in
`training.overrides` (gigabytes in seconds), `.nan` timeouts (silently no timeout) and a
`.nan` or tiny refresh (a loop spinning at full speed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.cli import main

GOOD = (Path(__file__).parent / "data" / "good_profile.yaml").read_text()


def _sub(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def _over(yaml_flow: str) -> str:
    return _sub("    trainer:\n", f"    {yaml_flow}\n    trainer:\n")


LAUGHS = "".join(
    f"    +lol{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
MEGA = "actor_rollout_ref.actor.megatron"

CASES = {
    # name: (profile text, line, key, fragment)
    "deep_list": (GOOD + "extra: " + "[" * 5000 + "]" * 5000 + "\n", 47, "extra[0][0][0]", "nested deeper than"),
    "deep_map": (GOOD + "extra: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", 47, "extra.a.a.a", "nested deeper than"),
    "huge_int": (_sub("gpus: 8\n    role: head", "gpus: " + "9" * 5000 + "\n    role: head"),
                 10, "nodes[0].gpus", "5000 digits"),
    "huge_int_override": (_sub("train_batch_size: 16", "train_batch_size: " + "1" * 5000),
                          41, "training.overrides.data.train_batch_size", "5000 digits"),
    "tp_zero": (_over(f"{MEGA}.tensor_model_parallel_size: 0"), 42,
                f"training.overrides.{MEGA}.tensor_model_parallel_size", "expected a positive integer, got 0"),
    "pp_inf": (_over(f"{MEGA}.pipeline_model_parallel_size: .inf"), 42,
               f"training.overrides.{MEGA}.pipeline_model_parallel_size", "got inf"),
    "pp_nan": (_over(f"{MEGA}.pipeline_model_parallel_size: .nan"), 42,
               f"training.overrides.{MEGA}.pipeline_model_parallel_size", "got nan"),
    "rollout_tp_zero": (_over("actor_rollout_ref.rollout.tensor_model_parallel_size: 0"), 42,
                        "training.overrides.actor_rollout_ref.rollout.tensor_model_parallel_size", "positive integer"),
    "nnodes_inf": (_sub("nnodes: 2", "nnodes: .inf"), 43, "training.overrides.trainer.nnodes", "got inf"),
    "laughs": (_sub("  overrides:\n", "  overrides:\n    +lol0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + LAUGHS),
               44, "training.overrides.+lol4", "aliases are expanded"),
    "nan_timeout": (_sub("  port: 2222\n", "  port: 2222\n  command_timeout_s: .nan\n"), 7,
                    "ssh.command_timeout_s", "expected a finite number, got nan"),
    "inf_connect_timeout": (_sub("  port: 2222\n", "  port: 2222\n  connect_timeout_s: .inf\n"), 7,
                            "ssh.connect_timeout_s", "finite"),
    "nan_join_timeout": (_sub("  head_port: 6379\n", "  head_port: 6379\n  join_timeout_s: .nan\n"), 36,
                         "ray.join_timeout_s", "finite"),
    "nan_refresh": (_sub("monitoring:\n", "monitoring:\n  refresh_s: .nan\n"), 46, "monitoring.refresh_s", "finite"),
    "tiny_refresh": (_sub("monitoring:\n", "monitoring:\n  refresh_s: 0.000001\n"), 46, "monitoring.refresh_s", ">= 0.1"),
    "nan_range": (_sub("mfu_pct: [25, 40]", "mfu_pct: [.nan, 40]"), 46, "monitoring.mfu_pct", "expected [low, high]"),
}


@pytest.mark.parametrize("command", [["render"], ["check", "--static"]])
@pytest.mark.parametrize("name", sorted(CASES))
def test_limit_one_line_exit_2(name: str, command: list[str], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    text, line, key, fragment = CASES[name]
    f = tmp_path / f"{name}.yaml"
    f.write_text(text)
    rc = main([*command, "--profile", str(f)])
    out = capsys.readouterr()
    assert rc == 2, out.err[-2000:]
    lines = out.err.splitlines()
    assert len(lines) == 1, out.err[-2000:]
    assert "Traceback" not in out.err
    assert lines[0].startswith(f"{f}:{line}: {key}"), lines[0]
    assert fragment in lines[0], lines[0]
    assert len(lines[0]) < 400


def test_a_huge_file_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "huge.yaml"
    f.write_text(GOOD + "# " + "x" * (5 << 20) + "\n")
    assert main(["render", "--profile", str(f)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "larger than a profile can be" in err[0]


def test_a_shared_anchor_that_does_not_multiply_still_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The alias limit counts expanded values: ordinary anchor reuse stays legal."""
    text = _sub("  overrides:\n", "  overrides:\n    +a: &base [1, 2, 3]\n    +b: *base\n")
    f = tmp_path / "ok.yaml"
    f.write_text(text)
    assert main(["render", "--profile", str(f)]) == 0, capsys.readouterr().err


def test_string_sizes_and_large_but_sane_ints_still_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _over(f"{MEGA}.tensor_model_parallel_size: \"2\"\n    +seed: 123456789012345678901234567890")
    f = tmp_path / "ok.yaml"
    f.write_text(text)
    assert main(["check", "--static", "--profile", str(f)]) in (0, 1), capsys.readouterr().err


# ------------------------------------------------------------- issue 27: real CLI process

REPO = Path(__file__).resolve().parent.parent
BIG = "1" + "0" * 20000

EMPTY_AND_ODD = {
    # name: (profile text, line, key, fragment) -- each once a traceback (TypeError,
    # ValueError from int() of "²" or of 20000 digits) or a value printed 20000 wide
    "node_name_null": (_sub("  - name: n1\n", "  - name:\n"), 8, "nodes[0].name", "required key has no value"),
    "node_name_empty": (_sub("  - name: n1\n", "  - name: ''\n"), 8, "nodes[0].name", "non-empty string"),
    "node_address_null": (_sub("address: 127.0.0.2\n", "address:\n"), 9, "nodes[0].address", "no value"),
    "node_address_empty": (_sub("address: 127.0.0.2\n", "address: ' '\n"), 9, "nodes[0].address", "non-empty"),
    "container_name_null": (_sub("  name: train-rl\n", "  name:\n"), 16, "container.name", "no value"),
    "container_name_empty": (_sub("  name: train-rl\n", "  name: ''\n"), 16, "container.name", "non-empty"),
    "cards_20000_digits": (_sub("gpus: 8\n    role: head", f"gpus: {BIG}\n    role: head"), 10, "nodes[0].gpus",
                           "20001 digits"),
    "cards_20000_digits_quoted": (_sub("gpus: 8\n    role: head", f'gpus: "{BIG}"\n    role: head'), 10,
                                  "nodes[0].gpus", "(20001 characters)"),
    "nnodes_20000_digits_quoted": (_sub("nnodes: 2", f'nnodes: "{BIG}"'), 43, "training.overrides.trainer.nnodes",
                                   "20001 digits"),
    "nnodes_superscript": (_sub("nnodes: 2", 'nnodes: "²"'), 43, "training.overrides.trainer.nnodes",
                           "written with 0-9"),
    "nnodes_arabic_indic": (_sub("nnodes: 2", 'nnodes: "٣"'), 43, "training.overrides.trainer.nnodes",
                            "written with 0-9"),
    "port_arabic_indic": (_sub("  port: 2222\n", '  port: "٣"\n'), 6, "ssh.port", "expected an integer"),
    # issue 39 leftovers: D3 (a hex integer's digits were not counted; its str() in the
    # message raised) and D14 (a jump hop's port was not checked: it loaded)
    "port_hex_20000_digits": (_sub("  head_port: 6379\n", "  head_port: 0x" + "f" * 20000 + "\n"), 35,
                              "ray.head_port", "20000 digits"),
    "port_hex_90_digits": (_sub("  head_port: 6379\n", "  head_port: 0x" + "f" * 90 + "\n"), 35,
                           "ray.head_port", "a port number 1-65535, got an integer of about 109 digits"),
    "jump_not_a_port": (_sub("  port: 2222\n", "  port: 2222\n  jump: ['127.0.0.1:notaport']\n"), 7,
                        "ssh.jump", 'hop 1: expected [user@]host[:port] with a port 1-65535, got "127.0.0.1:notaport"'),
    "jump_host_port_0": (_sub("  port: 2222\n", "  port: 2222\n  jump_host: bastion:0\n"), 7,
                         "ssh.jump_host", "a port 1-65535"),
    "node_jump_superscript": (_sub("    role: head\n", "    role: head\n    ssh: {jump: ['bastion:²']}\n"), 12,
                              "nodes[0].ssh.jump", "a port 1-65535"),
}


@pytest.mark.parametrize("name", sorted(EMPTY_AND_ODD))
def test_odd_values_one_line_exit_2_in_a_real_cli_process(name: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    text, line, key, fragment = EMPTY_AND_ODD[name]
    f = tmp_path / f"{name}.yaml"
    f.write_text(text, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "check", "--static", "--profile", str(f)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path),
                               "RLCONSOLE_STATE_DIR": str(tmp_path / "state"), "LANG": "C.UTF-8"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith(f"{name}.yaml:{line}: {key}: ") or lines[0].startswith(f"{f}:{line}: {key}: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert len(lines[0]) < 400
