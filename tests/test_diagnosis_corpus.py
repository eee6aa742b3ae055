"""The diagnosis catalog and its verdict against logs this project did not write.

tests/data/failures/ holds real excerpts copied verbatim from public VeRL / Ray / vLLM /
SGLang / Megatron / NCCL issue threads (first line: the source), and EXPECTED.yaml the
cause an expert names for each, decided before the catalog was tuned: a catalog id (the
first corpus) or the class of the cause and its first line (the tune half of issue 40's
fresh sample; the other half is tests/data/failures_heldout/, scored by
tests/test_diagnosis_heldout.py). The corpus test lists every miss. The other tests pin the verdict's rules (a specific cause before Ray's
wrappers, whole words, traceback source echoes), `rlconsole diagnose`, a broken user
catalog being told, the sim's fault texts, and zero false alarms on healthy logs.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.diagnosis_score import TUNE, score
from tui.core.alerts import AlertRules, diagnose_failure, diagnose_tail
from tui.core.diagnosis import Diagnoser
from tui.core.state import JobState, JobStatus

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "failures"
EXPECTED: dict[str, str | dict | None] = yaml.safe_load((CORPUS / "EXPECTED.yaml").read_text(encoding="utf-8"))


def klass(want: str | dict | None) -> str | None:
    """What an expectation names: a catalog id, or the class of the cause."""
    return want["class"] if isinstance(want, dict) else want
HEALTHY = sorted((REPO / "tests" / "data" / "samples" / "verl-logs").glob("*.txt"))


def excerpt(stem: str) -> list[str]:
    """The excerpt's lines without its source comment (line 1)."""
    return (CORPUS / f"{stem}.log").read_text(encoding="utf-8").splitlines()[1:]


@pytest.fixture
def diag() -> Diagnoser:
    return Diagnoser(user_catalog=False)


def test_corpus_is_real_excerpts_with_a_source() -> None:
    stems = sorted(p.stem for p in CORPUS.glob("*.log"))
    assert stems == sorted(EXPECTED), "every excerpt has an expectation and every expectation an excerpt"
    failures = [s for s in stems if EXPECTED[s] is not None]
    sized = []
    for s in stems:
        first = (CORPUS / f"{s}.log").read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# source: ") and ("github.com/" in first or ":" in first[10:]), s
        n = len(excerpt(s))
        assert 1 <= n <= 40, s
        if EXPECTED[s] is not None and n >= 3:
            sized.append(s)
    assert len(failures) >= 40 and len(sized) >= 40, (len(failures), len(sized))
    assert len({klass(v) for v in EXPECTED.values() if v}) >= 20  # a spread of classes, not 40 OOMs
    sources = {(CORPUS / f"{s}.log").read_text(encoding="utf-8").splitlines()[0] for s in stems}
    assert len(sources) >= 100  # threads, not one log cut in many


def test_corpus_names_every_case() -> None:
    """The tune set stays 100%: each id, each class (or `unrecognised-error` at the cause's
    line where the catalog has no entry for the class), no alarm on a benign excerpt."""
    s = score(TUNE)
    assert not s.misses(), f"{len(s.misses())} of {len(s.cases)} named wrong:\n" + "\n".join(s.misses())
    assert s.right == len(s.cases) == len(EXPECTED) and s.wrong == 0 and s.unnamed == 0


def test_corpus_covers_the_classes_the_issue_names() -> None:
    named = {klass(v) for v in EXPECTED.values() if v}
    # issue 40: the classes that had no entry
    assert {"config-syntax", "tokenizer-template", "hub-unreachable", "version-mismatch", "reward-function",
            "numeric-blowup", "permission-denied"} <= named
    assert {"cuda-oom", "vllm-kv-cache", "vllm-free-memory", "sglang-mem-fraction", "collective-timeout",
            "collective-error", "megatron-pp-layers", "config-key-missing", "hydra-override-missing-key",
            "hf-model-missing", "dataset-missing", "no-space-left", "ray-gcs-unreachable", "ray-node-dead",
            "raylet-died", "ray-node-startup-timeout", "python-import-error", "binary-mismatch",
            "ray-unpickle-exception", "native-abort", "tracker-init-failed"} <= named


def test_every_oom_wording_is_one_class(diag: Diagnoser) -> None:
    ooms = [s for s, v in EXPECTED.items() if v == "cuda-oom"]
    texts = {line for s in ooms for line in excerpt(s) if "memory" in line.lower()}
    assert any("CUDA Error: out of memory at" in t for t in texts)  # cumem allocator
    assert any("RuntimeError: CUDA out of memory" in t for t in texts)  # old torch
    assert any("torch.cuda.OutOfMemoryError" in t for t in texts)


def test_healthy_logs_and_benign_excerpts_raise_nothing(diag: Diagnoser) -> None:
    assert HEALTHY, "tests/data/samples/verl-logs is the healthy VeRL corpus"
    sources = {p.name: p.read_text(encoding="utf-8", errors="replace").splitlines() for p in HEALTHY}
    sources |= {s: excerpt(s) for s, v in EXPECTED.items() if v is None}
    assert len(sources) >= 8
    for name, lines in sources.items():
        v = diag.verdict(lines)
        assert v.finding is None and not v.findings, (name, [(f.signature.id, f.line) for f in v.findings])
        live = Diagnoser(user_catalog=False)
        alerts = [a for i, line in enumerate(lines) if (a := live.match(line, i)) is not None]
        assert not alerts, (name, alerts)


def test_the_specific_cause_wins_over_rays_wrappers(diag: Diagnoser) -> None:
    """An OOM, then Ray's "a worker died": the OOM is named, the wrapper kept as context,
    in the verdict, in the job-end alert and in `status`'s diagnosis alike."""
    tail = excerpt("oom-vlmrl-12") + excerpt("workerdied-verl-217")
    v = diag.verdict(tail)
    assert v.finding is not None and v.finding.signature.id == "cuda-oom"
    assert v.also == ["ray-worker-died"]
    assert v.to_json()["line"] == 1 and v.to_json()["also"] == ["ray-worker-died"]
    a = diagnose_tail(tail, 100)
    assert a is not None and a.diagnosis == "cuda-oom" and a.line == 100
    assert a.message.endswith("(also seen: ray-worker-died)")
    assert diagnose_failure(tail, 100).finding.signature.id == "cuda-oom"  # type: ignore[union-attr]
    rules = AlertRules()
    job = JobState(id="raysubmit_1", status=JobStatus.RUNNING, step=4)
    rules.observe_job(job, now=1.0)
    job.status = JobStatus.FAILED
    end = [x for x in rules.observe_job(job, now=2.0, log_tail=tail, tail_start=100) if x.key == "job-end"]
    assert len(end) == 1 and end[0].diagnosis == "cuda-oom" and "ray-worker-died" in end[0].message
    # a config error before Ray's "Unhandled error ... ray::WorkerDict": the config error
    v = diag.verdict(excerpt("config-key-verl-4672"))
    assert v.finding.signature.id == "config-key-missing"  # type: ignore[union-attr]
    # a collective timeout on the other ranks after a peer's OOM: the OOM
    v = diag.verdict(excerpt("oom-cumem-vllm-13941") + excerpt("nccl-timeout-llamafactory-6269"))
    assert v.finding.signature.id == "cuda-oom" and v.also == ["collective-timeout"]  # type: ignore[union-attr]
    # only a wrapper: the wrapper is the answer
    v = diag.verdict(excerpt("actordied-agentr1-33"))
    assert v.finding.signature.id == "ray-actor-died"  # type: ignore[union-attr]


def test_patterns_match_whole_words(diag: Diagnoser) -> None:
    line = "(raylet) [2025-01-02 03:04:05,678 I 1 1] core_worker.cc:100: kActorDiedErrorContext set for actor abc"
    assert diag.find(line, 0) is None
    assert diag.verdict([line]).finding is None
    assert diag.find("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
                     0) is not None


def test_a_tracebacks_source_echo_never_alerts(diag: Diagnoser) -> None:
    """`raise RuntimeError(f"NCCL error: {error_str}")` is code: only the exception line
    below it is an error, in the live alerts and in the verdict."""
    tb = ['(WorkerDict pid=7, ip=10.0.0.2) Traceback (most recent call last):',
          '(WorkerDict pid=7, ip=10.0.0.2)   File "/opt/verl/verl/utils/dist.py", line 88, in all_reduce',
          '(WorkerDict pid=7, ip=10.0.0.2)     raise RuntimeError(f"NCCL error: {error_str}")',
          '(WorkerDict pid=7, ip=10.0.0.2)     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^',
          '(WorkerDict pid=7, ip=10.0.0.2) RuntimeError: NCCL error: unhandled system error']
    alerts = [(i, a) for i, line in enumerate(tb) if (a := diag.match(line, i)) is not None]
    assert [i for i, _ in alerts] == [4] and alerts[0][1].diagnosis == "collective-error"
    v = Diagnoser(user_catalog=False).verdict(tb)
    assert [f.line_no for f in v.findings] == [4]
    # the echoed line alone (an excerpt cut below its frame line) is code too
    assert Diagnoser(user_catalog=False).verdict(tb[2:3]).finding is None
    # a frame line naming a file whose path looks like an error is not one either
    assert diag.verdict(['  File "/x/no_space_left_on_device.py", line 3, in f']).finding is None


def test_sim_fault_texts_are_diagnosed_as_their_fault_says() -> None:
    """The stand-in tree's fault exceptions, printed as Python prints them, are named by
    the same rules as the real excerpts (tui/sim/faults.py says which id names each)."""
    from tui.sim.faults import FAULTS

    spec = importlib.util.spec_from_file_location(
        "sim_fault_under_test", REPO / "tui" / "sim" / "tree" / "verl" / "utils" / "sim_fault.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def printed(e: BaseException) -> str:
        t = type(e)
        name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
        return f"(WorkerDict pid=3120, ip=127.0.0.3) {name}: {e}"

    texts = {"oom": printed(mod.oom_error(5)), "collective-timeout": printed(mod.watchdog_error(3, 1582)),
             "disk-full": printed(mod.disk_full_error("/ckpt/global_step_100/actor/__3_0.distcp"))}
    for kind, line in texts.items():
        v = Diagnoser(user_catalog=False).verdict([line])
        assert v.finding is not None and v.finding.signature.id == FAULTS[kind].diagnosis, (kind, line)


# --------------------------------------------------------------------------- the CLI


def _cli(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "tui.cli", "diagnose", *args], input=stdin, capture_output=True,
                          text=True, cwd=REPO, timeout=120, env={**os.environ, **(env or {})})


def test_cli_diagnose_text_json_stdin(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("\n".join(["step:1 - actor/loss:0.1"] + excerpt("dataset-unable-verl-1763")) + "\n")
    r = _cli(str(log))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Data file not found: /root/data/gsm8k/train.parquet"
    assert lines[1].startswith("  line 2: Without this content") and "Unable to find" in lines[1]
    assert any(x.startswith("  fix: Fix the path /root/data/gsm8k/train.parquet") for x in lines)
    assert "  also seen: ray-task-error" in lines
    r = _cli(str(log), "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout) == {
        "id": "dataset-missing", "title": "Data file not found: /root/data/gsm8k/train.parquet",
        "fix": json.loads(r.stdout)["fix"], "line": 2, "also": ["ray-task-error"]}
    r = _cli("-", "--json", stdin="\n".join(excerpt("gcs-timeout-ray-36651")))
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == "ray-gcs-unreachable"
    assert json.loads(r.stdout)["line"] == 1  # the first of its lines: the cause's first line


def test_cli_diagnose_reads_undecodable_stdin_and_shows_no_escapes() -> None:
    """A pasted log is any bytes (a binary blob, Latin-1, a cut UTF-8 sequence) and may
    carry terminal escapes: no traceback, the cause found, its line shown as text."""
    import os

    data = (b"ok line\n\xff\xfe\x80 not utf-8\n"
            b"\x1b]0;owned\x07torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\x1b[31m\n")
    r = subprocess.run([sys.executable, "-m", "tui.cli", "diagnose", "-"], input=data, capture_output=True,
                       cwd=REPO, timeout=120, env=dict(os.environ))
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr
    out = r.stdout.decode()
    assert out.splitlines()[1].startswith("  line 3:") and "CUDA out of memory" in out
    assert "\x1b" not in out and "\x07" not in out


def test_cli_diagnose_nothing_known_and_unreadable(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_text(HEALTHY[0].read_text(encoding="utf-8", errors="replace"))
    r = _cli(str(log), "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == {"id": None, "title": None, "fix": None, "line": None,
                                                          "also": []}
    r = _cli(str(log))
    assert r.returncode == 0 and r.stdout.startswith("no known failure in ")
    for bad in (tmp_path / "missing.log", tmp_path):
        r = _cli(str(bad))
        assert r.returncode == 2 and r.stdout == ""
        assert len(r.stderr.strip().splitlines()) == 1 and str(bad) in r.stderr and "Traceback" not in r.stderr


def test_cli_diagnose_uses_the_users_catalog_and_says_when_it_is_broken(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "diagnosis.yaml").write_text(
        "signatures:\n"
        "  - {id: site-nfs, level: error, pattern: 'Stale file handle', title: 'NFS went away',"
        " explanation: e, fix: 'remount /data'}\n")
    log = tmp_path / "run.log"
    log.write_text("\n".join(excerpt("workerdied-verl-217") + ["OSError: [Errno 116] Stale file handle"]) + "\n")
    r = _cli(str(log), "--json", env={"RLCONSOLE_CONFIG_DIR": str(cfg)})
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == "site-nfs", r.stderr
    assert json.loads(r.stdout)["also"] == ["ray-worker-died"]
    (cfg / "diagnosis.yaml").write_text(
        "signatures:\n  - {id: site-nfs, level: error, pattern: '(unclosed', title: t, explanation: e, fix: f}\n")
    r = _cli(str(log), "--json", env={"RLCONSOLE_CONFIG_DIR": str(cfg)})
    # without the site's entry the OSError is still the first real error: it outranks Ray's wrapper
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["id"] == "unrecognised-error", doc
    assert doc["title"] == "OSError: [Errno 116] Stale file handle" and doc["also"] == ["ray-worker-died"]
    assert "warning" in r.stderr and str(cfg / "diagnosis.yaml") in r.stderr and "'pattern'" in r.stderr


# --------------------------------------------------------------------------- a broken user catalog


def test_broken_user_catalog_is_an_alert_in_the_console_once(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.core.job.watcher import JobWatcher
    from tui.core.profile import load_profile

    monkeypatch.setenv("RLCONSOLE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "diagnosis.yaml").write_text("signatures: [ {id: x, level: fatal, pattern: a, title: t, "
                                             "explanation: e, fix: f} ]\n")
    got = []
    w = JobWatcher(load_profile(REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml"), None, "raysubmit_x",
                   on_alert=got.append, root=tmp_path / "spool")
    try:
        w._consume([])
        w._consume([])
    finally:
        w.spool.close()
    assert len(got) == 1 and got[0].level == "warning" and "diagnosis.yaml" in got[0].message
    assert "'level'" in got[0].message


def test_check_names_a_broken_user_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.core.checks import CheckStatus, static_checks
    from tui.core.profile import load_profile

    prof = load_profile(REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml")
    monkeypatch.setenv("RLCONSOLE_CONFIG_DIR", str(tmp_path))
    assert not [r for r in static_checks(prof) if r.id == "diagnosis.user_catalog"]
    (tmp_path / "diagnosis.yaml").write_text("signatures: [ {id: x, level: error, pattern: a, title: t} ]\n")
    r = [r for r in static_checks(prof) if r.id == "diagnosis.user_catalog"]
    assert len(r) == 1 and r[0].status is CheckStatus.WARN and "'explanation'" in r[0].message
    (tmp_path / "diagnosis.yaml").write_text(
        "signatures: [ {id: x, level: error, pattern: a, title: t, explanation: e, fix: f} ]\n")
    r = [r for r in static_checks(prof) if r.id == "diagnosis.user_catalog"]
    assert len(r) == 1 and r[0].status is CheckStatus.PASS


def test_broken_user_catalog_is_told_once_a_console_even_without_a_job(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The live backend tells it at start (no job needed), and the job watcher's own
    report of the same problem later is not a second alert."""
    import asyncio

    from tui.backend.live import LiveBackend
    from tui.core.profile import load_profile

    monkeypatch.setenv("RLCONSOLE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "diagnosis.yaml").write_text("signatures: [ {id: x, level: error, pattern: '(', title: t, "
                                             "explanation: e, fix: f} ]\n")
    b = LiveBackend(load_profile(REPO / "profiles" / "qwen3-8b-grpo-32gpu.yaml"))

    async def nothing() -> None:
        return None

    monkeypatch.setattr(b.monitor, "start", nothing)
    monkeypatch.setattr(b, "_job_loop", nothing)
    got: list = []
    b.subscribe_alerts(got.append)

    async def run() -> None:
        await asyncio.wait_for(b.start(), 30)
        for t in b._tasks:
            await asyncio.wait_for(t, 30)
        b._tasks = []

    asyncio.run(run())
    assert len(got) == 1 and got[0].level == "warning" and "'pattern'" in got[0].message
    again = Diagnoser().take_problems()  # what a job watcher created now reports
    assert len(again) == 1
    b._alert(again[0])
    assert len(got) == 1
