"""Profile loading: the seed's profile, lookup, and the corpus of bad profiles.

Each file in tests/data/bad_profiles/ starts with `# expect: LINE KEY | fragment`: the
CLI must print exactly one line `FILE:LINE: KEY: ...fragment...` and exit 2.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tui.cli import main
from tui.core.errors import ProfileError, UsageError
from tui.core.profile import load_profile, load_profile_text, resolve_profile

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
SEED = REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml"
BAD = sorted((DATA / "bad_profiles").glob("*.yaml"))


def test_corpus_is_large_enough() -> None:
    assert len(BAD) >= 30


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_profile_one_line_exit_2(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = re.match(r"# expect: (\d+) (\S+(?: \S+)?) \| (.*)", path.read_text().splitlines()[0])
    assert m, f"{path.name}: bad expect header"
    line, key, fragment = m.group(1), m.group(2), m.group(3)
    rc = main(["render", "--profile", str(path)])
    out = capsys.readouterr()
    assert rc == 2
    assert out.out == ""
    lines = out.err.splitlines()
    assert len(lines) == 1, out.err
    err = lines[0]
    assert "Traceback" not in err
    assert err.startswith(f"{path}:{line}: ") or err.startswith(f"{path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}:{line}: "), err
    if key != "-":
        assert f":{line}: {key}: " in err, err
    assert fragment in err, err


def test_bad_profile_has_no_traceback_in_a_real_process(tmp_path: Path) -> None:
    bad = tmp_path / "x.yaml"
    bad.write_text((DATA / "good_profile.yaml").read_text().replace("gpus: 8\n    role: head", 'gpus: "eight"\n    role: head'))
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "render", "--profile", str(bad)],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "RLCONSOLE_STATE_DIR": str(tmp_path / "state"),
                               "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2
    assert proc.stderr.strip() == 'x.yaml:10: nodes[0].gpus: expected a positive integer, got "eight"'


def test_seed_profile_loads() -> None:
    p = load_profile(SEED)
    assert [n.name for n in p.nodes] == ["node125", "node71", "node116", "node119"]
    assert [n.address for n in p.nodes] == ["10.10.142.125", "10.10.134.71", "10.10.142.116", "10.10.142.119"]
    assert p.head.name == "node125" and p.total_gpus == 32
    assert p.container.name == "train-rl"
    assert p.container.image == "registry.mthreads.com/mcctest/training-suite:v2.1.5-musa-4.3.7"
    assert p.container.create.privileged and p.container.create.network == "host"
    assert p.container.create.env == {"MTHREADS_VISIBLE_DEVICES": "all"}
    assert p.container.create.volumes == ["/data/:/data/"]
    assert p.container.after_start == ["service ssh restart"]
    assert p.ray.dashboard_host == "127.0.0.1"
    assert p.model.num_layers == 36 and p.model.moe is False
    assert p.monitoring.mfu_pct == (25.0, 40.0)
    assert p.monitoring.total_steps == 2710


def test_lookup_by_name_and_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLCONSOLE_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.delenv("RLCONSOLE_PROFILE", raising=False)
    # packaged profile by name
    assert resolve_profile("qwen3-8b-grpo-32gpu").name == "qwen3-8b-grpo-32gpu.yaml"
    # ./profiles wins over the packaged one
    (tmp_path / "profiles").mkdir()
    local = tmp_path / "profiles" / "qwen3-8b-grpo-32gpu.yaml"
    local.write_text(SEED.read_text())
    assert resolve_profile("qwen3-8b-grpo-32gpu").resolve() == local.resolve()
    # user config dir
    (tmp_path / "cfg" / "profiles").mkdir(parents=True)
    mine = tmp_path / "cfg" / "profiles" / "mine.yaml"
    mine.write_text(SEED.read_text())
    assert resolve_profile("mine") == mine
    assert resolve_profile(str(mine)) == mine
    with pytest.raises(UsageError, match="no profile named 'nope'"):
        resolve_profile("nope")
    with pytest.raises(ProfileError, match="no such profile file"):
        resolve_profile("./nope.yaml")
    # no spec, no env, no sim: a usage error, never the seed's real cluster
    with pytest.raises(UsageError, match="no profile given"):
        resolve_profile(None, lambda: None)
    monkeypatch.setenv("RLCONSOLE_PROFILE", str(mine))
    assert resolve_profile(None) == mine


def test_local_paths_expand_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("KH", "/etc/kh")
    text = (DATA / "good_profile.yaml").read_text().replace(
        "  port: 2222", "  port: 2222\n  identity: ~/.ssh/id_rsa\n  known_hosts: $KH/known")
    p = load_profile_text(text, "x.yaml")
    assert p.nodes[0].ssh.identity == ["/home/someone/.ssh/id_rsa"]
    assert p.ssh.known_hosts == "/etc/kh/known"
    # remote paths are never expanded locally
    assert p.paths.verl == "/data/verl"


def test_defaults() -> None:
    p = load_profile_text((DATA / "good_profile.yaml").read_text(), "x.yaml")
    assert p.ray.dashboard_host == "127.0.0.1"
    assert p.ray.dashboard_port == 8265
    assert p.container.access == "docker-exec"
    assert p.container.create.command == ["sleep", "infinity"]
    assert p.nodes[1].role == "worker"
    assert p.nodes[1].ssh.port == 2222 and p.nodes[1].ssh.user == "rl"
    assert p.nodes[1].ssh.host == "127.0.0.3"
    assert p.training.module == "verl.trainer.main_ppo"
    assert p.ssh.max_channels <= 10


def test_slurm_profile_nodes_come_from_the_allocation() -> None:
    """`cluster.scheduler: slurm`: no node list needed; before an allocation is known the
    nodes are `slurm1`..`slurmN` (the first the head) with no address; `nodes:` may give
    ray_args to a Slurm host name; the walltime is read in Slurm's forms."""
    text = (DATA / "good_profile.yaml").read_text()
    i, j = text.index("nodes:"), text.index("container:")
    slurm = ("cluster:\n  scheduler: slurm\n  partition: gpu\n  nodes: 3\n  gpus_per_node: 8\n"
             "  time: 1-02:00:00\n  account: proj\n  extra_sbatch: [--mem=200G]\n  jobid: 42\n"
             "nodes:\n  - name: node7\n    ray_args: [--temp-dir=/tmp/r7]\n")
    p = load_profile_text(text[:i] + slurm + text[j:], "s.yaml")
    assert [(n.name, n.role, n.gpus, n.address) for n in p.nodes] == [
        ("slurm1", "head", 8, ""), ("slurm2", "worker", 8, ""), ("slurm3", "worker", 8, "")]
    c = p.cluster
    assert c.slurm and c.partition == "gpu" and c.transport == "srun" and c.jobid == "42"
    assert c.time_s == 26 * 3600 and c.extra_sbatch == ["--mem=200G"] and c.account == "proj"
    assert c.node_ray_args == {"node7": ["--temp-dir=/tmp/r7"]}
    static = load_profile_text(text, "t.yaml")
    assert not static.cluster.slurm and [n.name for n in static.nodes] == ["n1", "n2"]


@pytest.mark.parametrize("text,secs", [("30", 1800), ("5:30", 330), ("4:00:00", 14400), ("2-0", 172800),
                                       ("1-1:1", 90060), ("1-00:00:05", 86405), ("0", None), ("1:2:3:4", None)])
def test_walltime_forms(text: str, secs: int | None) -> None:
    from tui.core.profile import parse_walltime

    assert parse_walltime(text) == secs
