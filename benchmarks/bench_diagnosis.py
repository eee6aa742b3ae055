"""Diagnosis that generalises (issue 40): the catalog on real failures it was not written
against, beside the set it was tuned on, and what reading a log costs.

    python benchmarks/bench_diagnosis.py [--write]

Scores (tests/diagnosis_score.py) the tune set (tests/data/failures/) and the held-out set
(tests/data/failures_heldout/, split off from the same fresh sample by a fixed rule before
any entry was written, never tuned on), with the catalog and verdict of today and with
those of before issue 40 (git commit BASELINE, read with `git show`; skipped without git).
Right is the class of the cause, or `unrecognised-error` at the cause's line; wrong is
another class, an unrecognised error elsewhere, or an alarm on a benign excerpt. Then the
cost: the live path (`Diagnoser.match`, every line) and the verdict (`Diagnoser.verdict`,
the first real error included) on bench_logparse's realistic driver log, today and before.
`--write` replaces the section between `<!-- bench:diagnosis -->` markers and this
benchmark's rows of the summary table.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_logparse import make_log  # noqa: E402
from benchmarks.mdsection import write_section  # noqa: E402
from tests.diagnosis_score import HELDOUT, TUNE, Score, expected_of, score  # noqa: E402
from tui.core.diagnosis import PACKAGED_CATALOG, Diagnoser, load_catalog  # noqa: E402

NAME, HEADING = "diagnosis", "Diagnosis: named by class on failures it was not written against"
BASELINE = "5737b1d51a91ae021a31de7ef870311a47919523"
"""The last diagnosis before issue 40 (a verdict naming the last cause, no classes, no
unrecognised-error)."""
SUMMARY: list[dict[str, str]] = []


def _baseline() -> tuple[ModuleType, Any] | None:
    """The diagnosis module and its catalog at BASELINE, loaded from `git show`."""
    try:
        code = subprocess.run(["git", "show", f"{BASELINE}:tui/core/diagnosis.py"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        cat = subprocess.run(["git", "show", f"{BASELINE}:tui/core/diagnosis.yaml"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    d = Path(tempfile.mkdtemp(prefix="diag-baseline-"))
    (d / "old_diagnosis.py").write_text(code, encoding="utf-8")
    (d / "diagnosis.yaml").write_text(cat, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_diagnosis", d / "old_diagnosis.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_diagnosis"] = mod
    spec.loader.exec_module(mod)
    return mod, mod.Diagnoser(mod.load_catalog(d / "diagnosis.yaml", user=False), user_catalog=False)


def _score_baseline(diag: Any, directory: Path, only_class: bool) -> Score:
    """The baseline's verdicts judged as today's are: its ids mapped to today's classes
    (the ids it has are all still in the catalog); it had no unrecognised-error."""
    from tests.diagnosis_score import Case

    klass = {s.id: s.klass for s in load_catalog(PACKAGED_CATALOG)}
    s = Score()
    for stem, exp in sorted(expected_of(directory).items()):
        if only_class and isinstance(exp, str):
            continue
        v = diag.verdict((directory / f"{stem}.log").read_text(encoding="utf-8").splitlines())
        f = v.finding
        got_id = f.signature.id if f else None
        got_class = klass.get(got_id, got_id) if got_id else None
        got_line = f.line_no + 1 if f else None
        if exp is None:
            outcome = "right-benign" if f is None and not v.findings else "alarm"
        elif isinstance(exp, str):
            outcome = "right-class" if got_id == exp else ("unnamed" if f is None else "wrong-class")
        elif f is None:
            outcome = "unnamed"
        else:
            outcome = "right-class" if got_class == exp["class"] else "wrong-class"
        s.cases.append(Case(stem, exp, got_id, got_class, got_line, len(v.findings), outcome))
    return s


def _cost(diag: Any, lines: list[str]) -> tuple[float, float]:
    """(live `match` microseconds a line, `verdict` microseconds a line), CPU time, best of 3."""
    best_m = best_v = float("inf")
    for _ in range(3):
        if hasattr(diag, "reset"):
            diag.reset()
        t = time.process_time()
        for i, line in enumerate(lines):
            diag.match(line, i)
        best_m = min(best_m, time.process_time() - t)
        t = time.process_time()
        diag.verdict(lines)
        best_v = min(best_v, time.process_time() - t)
    return best_m / len(lines) * 1e6, best_v / len(lines) * 1e6


def _row(label: str, s: Score) -> str:
    ok, of = s.lines
    n = len(s.cases)
    return (f"| {label} | {n} | **{s.right}** ({100 * s.right / n:.0f}%) | {s.count('right-class')} | "
            f"{s.count('right-unrecognised')} | {s.count('right-benign')} | {s.wrong} | {s.unnamed} | "
            f"{ok}/{of} |")


def run(n_lines: int) -> str:
    tune_new = {k for k, v in expected_of(TUNE).items() if not isinstance(v, str)}
    today = {"held-out": score(HELDOUT), "tune (issue 40's half)": score(TUNE, tune_new), "tune (all)": score(TUNE)}
    base = _baseline()
    out = ["| set, catalog | cases | right | by class | unrecognised-error at the cause's line | benign left "
           "alone | wrong | unnamed | the cause's line |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    before: dict[str, Score] = {}
    if base is not None:
        _, old = base
        before = {"held-out": _score_baseline(old, HELDOUT, True),
                  "tune (issue 40's half)": _score_baseline(old, TUNE, True)}
    for name in ("held-out", "tune (issue 40's half)"):
        out.append(_row(f"**{name}**, today", today[name]))
        if name in before:
            out.append(_row(f"{name}, before issue 40", before[name]))
    out.append(_row("tune (all, incl. the first corpus), today", today["tune (all)"]))
    held = today["held-out"]
    out += ["", "Held-out cases not right today (the set is scored, never tuned on):", ""]
    out += [f"- `{c.stem}`: expected {c.expected['class']} at line {c.expected['line']}, got "
            f"{c.got_id or 'nothing'}{f' at line {c.got_line}' if c.got_line else ''} ({c.outcome})"
            for c in held.cases if not c.right]
    lines = make_log(n_lines, step_every=200)
    m_new, v_new = _cost(Diagnoser(user_catalog=False), lines)
    cost = f"today {m_new:.1f} µs a line live (`match`), {v_new:.1f} µs a line for the verdict"
    m_old = None
    if base is not None:
        m_old, v_old = _cost(base[1], lines)
        cost += f"; before issue 40 {m_old:.1f} and {v_old:.1f}"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    out += ["", f"- Cost on bench_logparse's realistic driver log ({n_lines:,} lines, a step line every "
            f"200): {cost} (CPU time, best of 3). The catalog has {len({s.id for s in load_catalog(PACKAGED_CATALOG)})} "
            f"entries in {len({s.klass for s in load_catalog(PACKAGED_CATALOG)})} classes, "
            f"{len(load_catalog(PACKAGED_CATALOG))} wordings.",
            "- Right: the class of the cause, or `unrecognised-error` at the cause's line (the catalog has no "
            "entry for the class but points at it); wrong: another class, `unrecognised-error` at another line, "
            "or any finding on a benign excerpt; the last column counts cases whose reported line is the "
            "cause's first line. Expectations were written from the threads before scoring; the split is "
            "sha1(stem) parity (tests/test_diagnosis_heldout.py checks it). The first batch (42) was scored "
            "at 38 right, 2 wrong, 2 unnamed; three of those four were two classes the catalog lacked, and "
            "the entries `hardware-unsupported` and `no-kernel-image` were written after reading them (so "
            "the first batch is no longer blind for those two classes). A second batch of 5 cases of those "
            "classes from other threads was collected and split by the same rule before the entries were "
            "written (4 more went to the tune set): all 5 right, the blind figure for them. A third batch "
            "(3 cases: a Ray gRPC server's port in use, behind a CI flake; 1 here, 2 in the tune set) was "
            "scored before its variant was written: right by class (`address-in-use`, once its expectation's "
            "class name was corrected to the catalog's) but a line late here; the variant for Ray's "
            "\"Check failed ... The specified port is N\" line, written from the tune set's two, puts it "
            "on the line.",
            f"- Machine: Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load:.1f}, "
            f"{time.strftime('%Y-%m-%d')}."]
    SUMMARY[:] = [{"figure": "diagnosis, held-out real failures: right (bench_diagnosis)",
                   "baseline": (f"{before['held-out'].right}/{len(held.cases)} (before issue 40)"
                                if "held-out" in before else "-"),
                   "rlconsole": f"{held.right}/{len(held.cases)}, {held.wrong} wrong",
                   "ratio": "-", "target": ">= 85%, 0 wrong",
                   "met": "yes" if held.right >= 0.85 * len(held.cases) and held.wrong == 0
                   else f"no ({held.wrong} wrong: see section)"},
                  {"figure": "diagnosis, live cost a log line (bench_diagnosis)",
                   "baseline": f"{m_old:.1f} µs (before issue 40)" if m_old else "-",
                   "rlconsole": f"{m_new:.1f} µs",
                   "ratio": f"{m_new / m_old:.2f}x" if m_old else "-", "target": "<= 1.5x before",
                   "met": ("yes" if m_new <= 1.5 * m_old else "no") if m_old else "-"}]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = ap.parse_args(argv)
    body = run(args.lines)
    print(body)
    if args.write:
        from benchmarks.mdsection import record_summary

        write_section(NAME, body, HEADING)
        record_summary(NAME, SUMMARY)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
