"""The GPU probe: the shell snippet (run for real with fake tools on PATH that refuse
any argv but the expected one), the marker format it prints, and the dispatcher.
Also: every sample file outside verl-logs/ is known to some parser test here, so a
new sample cannot be added without being parsed."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.core.parsers.detect import (
    GMI_JSON_ARGS,
    GPU_PROBE_SCRIPT,
    parse_gpu_output,
    parse_probe_output,
)
from tui.core.parsers.docker import parse_docker_inspect, parse_docker_ps_json
from tui.core.parsers.gmi import parse_gmi_json, parse_gmi_plain, parse_gmi_processes
from tui.core.parsers.nvsmi import NVSMI_APPS_ARGS, NVSMI_QUERY_ARGS, parse_nvsmi_csv
from tui.core.parsers.raystatus import parse_ray_job_list, parse_ray_job_status, parse_ray_status
from tui.core.state import GpuReport
from tests.samples import FUZZ, read_sample, samples_dir


S5000 = "mthreads-gmi/01_gmi_plain_S5000x8_gmi2.4.1_drv5.1.0-server.txt"
S80 = "mthreads-gmi/04_gmi_plain_S80_with_processes_gmi1.9.0_drv2.7.0.txt"
JSON_EXCERPT = "mthreads-gmi/09_gmi_query_json_S5000_EXCERPT_2of8.json"
MUSATOP = "mthreads-gmi/11_musatop_fixture_gmi_x10000_process_REAL_FORMAT.txt"
H200 = "nvidia-smi/01_query_gpu_csv_header_units_and_compute_apps_8xH200_REAL.txt"


def _gpu_cards(report: GpuReport) -> int:
    return len(report.cards)


# Every sample (outside verl-logs/) -> (parser, a check of its result). The detailed
# assertions live in test_parsers_{gmi,nvsmi,docker,ray}.py; this table guarantees
# coverage of the whole directory.
SAMPLE_CHECKS: dict[str, tuple[Callable[[str], object], Callable[[object], bool]]] = {
    S5000: (parse_gmi_plain, lambda r: r.parsed and _gpu_cards(r) == 8),
    S80: (parse_gmi_plain, lambda r: r.parsed and len(r.cards[0].processes) == 4),
    JSON_EXCERPT: (parse_gmi_json, lambda r: r.parsed and _gpu_cards(r) == 2),
    MUSATOP: (parse_gmi_processes, lambda r: [p.pid for p in r[0]] == [12345]),
    H200: (parse_nvsmi_csv, lambda r: r.parsed and _gpu_cards(r) == 8),
    "nvidia-smi/03_noheader_nounits_NA_and_NotSupported_variants_REAL.txt": (
        parse_nvsmi_csv, lambda r: r.cards and r.cards[0].power_w == 228.82,
    ),
    "docker/01_docker_inspect_State_samples_REAL.json.txt": (
        lambda t: parse_docker_inspect(t, "train-rl"), lambda r: r.status == "running",
    ),
    "docker/02_docker_ps_format_json_REAL.txt": (parse_docker_ps_json, lambda r: len(r) == 2),
    "ray/01_ray_status_4node_32GPU_Active_format.txt": (
        parse_ray_status, lambda r: r.nodes_alive == 4 and r.gpus_total == 32,
    ),
    "ray/02_ray_status_2node_16GPU_TotalUsage_TotalConstraints_newer.txt": (
        parse_ray_status, lambda r: r.nodes_alive == 2 and r.gpus_total == 16,
    ),
    "ray/05_ray_job_cli_outputs.txt": (
        lambda t: (parse_ray_job_list(t), parse_ray_job_status(t)),
        lambda r: len(r[0]) == 1 and r[1].status == "FAILED",
    ),
}


def _all_samples() -> list[str]:
    root = samples_dir()
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] != "verl-logs" and not p.name.startswith(".")
    )


def test_every_sample_has_a_parser_test() -> None:
    assert set(_all_samples()) == set(SAMPLE_CHECKS), "a sample was added or removed: cover it"


@pytest.mark.parametrize("rel", sorted(SAMPLE_CHECKS))
@pytest.mark.parametrize("strip_source", [True, False])
def test_every_sample_parses(rel: str, strip_source: bool) -> None:
    parser, check = SAMPLE_CHECKS[rel]
    assert check(parser(read_sample(rel, strip_source=strip_source)))


# ------------------------------------------------------------------ parse_gpu_output


def test_dispatch_gmi_plain_and_json() -> None:
    plain = parse_gpu_output("mthreads-gmi", read_sample(S5000), 0)
    assert plain.parsed and len(plain.cards) == 8 and plain.tool == "mthreads-gmi"
    js = parse_gpu_output("/usr/bin/mthreads-gmi", read_sample(JSON_EXCERPT, strip_source=False), 0)
    assert js.parsed and [c.power_w for c in js.cards] == [96.66, 97.09]


def test_dispatch_nvidia() -> None:
    report = parse_gpu_output("nvidia-smi", read_sample(H200), 0)
    assert report.parsed and report.tool == "nvidia-smi" and len(report.cards) == 8


@pytest.mark.parametrize("tool", ["mthreads-gmi", "nvidia-smi"])
def test_error_on_stdout_with_exit_zero(tool: str) -> None:
    report = parse_gpu_output(tool, "Error: failed to initialize the management library\n", 0)
    assert not report.parsed
    assert report.error == "Error: failed to initialize the management library"


def test_nonzero_exit_with_good_table_is_still_parsed() -> None:
    report = parse_gpu_output("mthreads-gmi", read_sample(S80), 3)
    assert report.parsed and report.error is None


def test_nonzero_exit_wording() -> None:
    assert parse_gpu_output("mthreads-gmi", "", 127).error == "mthreads-gmi: command not found (exit code 127)"
    assert parse_gpu_output("nvidia-smi", "", 9).error == "nvidia-smi exited with code 9 and printed nothing"
    err = parse_gpu_output("nvidia-smi", "Failed to initialize NVML: Unknown Error\n", 255).error
    assert err == "Failed to initialize NVML: Unknown Error (exit code 255)"


def test_unknown_tool() -> None:
    report = parse_gpu_output("rocm-smi", "whatever", 0)
    assert not report.parsed and "unknown GPU tool" in (report.error or "")


# ------------------------------------------------------------------ probe output format


def _probe(tool: str, *sections: tuple[str, str, int | None], end: bool = True) -> str:
    out = f"@@tool={tool}\n"
    for cmd, body, rc in sections:
        out += f"@@cmd={cmd}\n{body}"
        if rc is not None:
            out += f"@@rc={rc}\n"
    return out + ("@@end\n" if end else "")


def test_probe_gmi_json_with_plain_processes() -> None:
    text = "Last login: Mon\nWelcome to node125\n" + _probe(
        "mthreads-gmi",
        ("mthreads-gmi -q --json", read_sample(JSON_EXCERPT), 0),
        ("mthreads-gmi", read_sample(S80), 0),
    )
    report = parse_probe_output(text)
    assert report.parsed and report.tool == "mthreads-gmi" and report.driver_version == "3.3.5-server"
    assert [len(c.processes) for c in report.cards] == [4, 0]  # card 0's table rows, by index
    assert report.cards[0].processes[0].pid == 4307


def test_probe_gmi_json_fails_plain_fallback() -> None:
    report = parse_probe_output(_probe(
        "mthreads-gmi",
        ("mthreads-gmi -q --json", "Error: unknown option --json\n", 2),
        ("mthreads-gmi", read_sample(S5000), 0),
    ))
    assert report.parsed and len(report.cards) == 8 and report.driver_version == "5.1.0-server"


def test_probe_gmi_both_fail_with_exit_zero() -> None:
    msg = "Error: failed to initialize mtml: Driver Not Loaded"
    report = parse_probe_output(_probe(
        "mthreads-gmi", ("mthreads-gmi -q --json", msg + "\n", 0), ("mthreads-gmi", msg + "\n", 0),
    ))
    assert not report.parsed and report.error == msg


def test_probe_gmi_truncated_json_without_end() -> None:
    body = read_sample(JSON_EXCERPT)
    cut = body.index('"Index": "1"')
    report = parse_probe_output(_probe("mthreads-gmi", ("mthreads-gmi -q --json", body[:cut], None), end=False))
    assert not report.parsed
    assert [c.index for c in report.cards] == [0]
    assert "incomplete" in (report.error or "")


def test_probe_nvidia_with_apps() -> None:
    rows = "".join(
        f"{i}, NVIDIA H200, 100, 130000, 143771, 60, 690.5, GPU-{i:08x}-0000-0000-0000-{i:012x}\n" for i in range(8)
    )
    apps = "GPU-00000002-0000-0000-0000-000000000002, 4242, python3, 129000\n"
    report = parse_probe_output(_probe(
        "nvidia-smi", (" ".join(NVSMI_QUERY_ARGS), rows, 0), (" ".join(NVSMI_APPS_ARGS), apps, 0),
    ))
    assert report.parsed and len(report.cards) == 8
    assert [(p.pid, p.mem_used_mib) for p in report.cards[2].processes] == [(4242, 129000)]
    assert report.cards[0].power_w == 690.5


def test_probe_no_tool() -> None:
    report = parse_probe_output("@@tool=none\n@@end\n")
    assert not report.parsed and report.tool == "none" and "neither" in (report.error or "")


def test_probe_marker_then_raw_output() -> None:
    report = parse_probe_output("@@tool=mthreads-gmi\n" + read_sample(S5000))
    assert report.parsed and len(report.cards) == 8


@pytest.mark.parametrize("text", ["", "bash: line 1: syntax error\n", "random words\n"])
def test_probe_without_marker(text: str) -> None:
    report = parse_probe_output(text)
    assert not report.parsed and report.error


# ------------------------------------------------------------------ the shell snippet


def test_probe_script_runs_only_fixed_commands() -> None:
    assert " -r" not in GPU_PROBE_SCRIPT
    invoked = re.findall(r"out=\$\(([^)]*?) 2>&1\)", GPU_PROBE_SCRIPT)
    assert invoked == [
        "mthreads-gmi -q --json",
        "mthreads-gmi",
        " ".join(NVSMI_QUERY_ARGS),
        " ".join(NVSMI_APPS_ARGS),
    ]
    assert invoked[0] == " ".join(GMI_JSON_ARGS)  # the sampler asks what the JSON parser is paired with


def _fake_tool(bindir: Path, name: str, answers: dict[str, tuple[str, int]]) -> None:
    """A fake card tool that answers only the argv strings it knows and fails loudly
    (exit 99, no output the parser could use) on any other flags."""
    cases = "\n".join(
        f"  {json.dumps(argv)}) cat <<'__EOF__'\n{out.rstrip(chr(10))}\n__EOF__\n  exit {rc};;"
        for argv, (out, rc) in answers.items()
    )
    script = f'#!/bin/sh\ncase "$*" in\n{cases}\n  *) echo "UNEXPECTED ARGS: $*" >&2; exit 99;;\nesac\n'
    path = bindir / name
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _run_probe(bindir: Path) -> str:
    sh = shutil.which("sh") or "/bin/sh"
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "LC_ALL": "C"}
    done = subprocess.run([sh, "-c", GPU_PROBE_SCRIPT], capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "UNEXPECTED" not in done.stdout
    return done.stdout


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    return path


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")
def test_script_with_fake_gmi(bindir: Path) -> None:
    _fake_tool(bindir, "mthreads-gmi", {
        "-q --json": (read_sample(JSON_EXCERPT), 0),
        "": (read_sample(S80), 0),
    })
    if shutil.which("mthreads-gmi", path="/usr/bin:/bin"):
        pytest.skip("a real mthreads-gmi is installed")
    report = parse_probe_output(_run_probe(bindir))
    assert report.parsed and report.tool == "mthreads-gmi"
    assert [c.temp_c for c in report.cards] == [27, 26]
    assert len(report.cards[0].processes) == 4


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")
def test_script_with_fake_gmi_json_unsupported(bindir: Path) -> None:
    _fake_tool(bindir, "mthreads-gmi", {
        "-q --json": ("Error: invalid option --json\n", 1),
        "": (read_sample(S5000), 0),
    })
    if shutil.which("mthreads-gmi", path="/usr/bin:/bin"):
        pytest.skip("a real mthreads-gmi is installed")
    report = parse_probe_output(_run_probe(bindir))
    assert report.parsed and len(report.cards) == 8


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")
def test_script_with_fake_nvidia(bindir: Path) -> None:
    if shutil.which("mthreads-gmi", path="/usr/bin:/bin") or shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        pytest.skip("a real card tool is installed")
    rows = "0, NVIDIA H200, [N/A], 10, 143771, [Not Supported], 80.00, GPU-a44622e3-2296-6285-0a86-84d0f6c67900\n"
    apps = "GPU-a44622e3-2296-6285-0a86-84d0f6c67900, 77, [Not Found], 9\n"
    _fake_tool(bindir, "nvidia-smi", {
        " ".join(NVSMI_QUERY_ARGS[1:]): (rows, 0),
        " ".join(NVSMI_APPS_ARGS[1:]): (apps, 0),
    })
    report = parse_probe_output(_run_probe(bindir))
    assert report.parsed and report.tool == "nvidia-smi"
    card = report.cards[0]
    assert (card.util_pct, card.temp_c, card.mem_used_mib, card.power_w) == (None, None, 10, 80.0)
    assert [(p.pid, p.name) for p in card.processes] == [(77, "")]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")
def test_script_with_no_tool(bindir: Path) -> None:
    if shutil.which("mthreads-gmi", path="/usr/bin:/bin") or shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        pytest.skip("a real card tool is installed")
    out = _run_probe(bindir)
    assert out.splitlines() == ["@@tool=none", "@@end"]
    assert parse_probe_output(out).tool == "none"


# --------------------------------------------------------------------------- fuzzing


@FUZZ
@given(st.text(), st.sampled_from(["mthreads-gmi", "nvidia-smi", "x"]), st.integers(-5, 300))
def test_dispatch_never_raises(text: str, tool: str, rc: int) -> None:
    report = parse_gpu_output(tool, text, rc)
    assert isinstance(report, GpuReport) and (report.parsed or report.error)


@FUZZ
@given(st.text())
def test_probe_never_raises(text: str) -> None:
    for candidate in (text, "@@tool=mthreads-gmi\n@@cmd=mthreads-gmi -q --json\n" + text, "@@tool=nvidia-smi\n" + text):
        report = parse_probe_output(candidate)
        assert isinstance(report, GpuReport) and (report.parsed or report.error)


@FUZZ
@given(st.data())
def test_probe_prefix_never_invents_values(data: st.DataObject) -> None:
    full = _probe(
        "mthreads-gmi",
        ("mthreads-gmi -q --json", read_sample(JSON_EXCERPT), 0),
        ("mthreads-gmi", read_sample(S80), 0),
    ).encode()
    cut = data.draw(st.integers(0, len(full)))
    report = parse_probe_output(full[:cut].decode("utf-8", errors="ignore"))
    assert len(report.cards) <= 2
    for card in report.cards:
        assert card.mem_total_mib == 81920 and card.temp_c in (27, 26)
        assert all(p.pid in {4307, 5034, 5519, 6173} for p in card.processes)
