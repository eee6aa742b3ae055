"""The catalog on failures it was not written against (issue 40): the held-out score.

tests/data/failures_heldout/ is half of a fresh sample of real failure excerpts from
public threads, split off by a fixed rule (sha1 of the stem: even here, odd in the tune
set tests/data/failures/) before any catalog entry was written, with each expectation (the
class of the cause, its first line) written from the thread before scoring. It is scored,
never tuned on: this test pins the figure reached when it was first scored, so a change to
the catalog that moves it shows here (a case is never moved between the sets; a better
figure is written down here, as the worse one would be). BENCHMARKS.md reports it beside
the tune set's.
"""

from __future__ import annotations

import hashlib

from tests.diagnosis_score import HELDOUT, TUNE, expected_of, score


def test_the_heldout_score_is_what_was_measured() -> None:
    s = score(HELDOUT)
    detail = s.summary() + "\n" + "\n".join(s.misses())
    assert len(s.cases) == 48, detail
    # First scored (42 cases): 38 right, 2 wrong (a CUDA "no kernel image" named device-error;
    # an unrecognised-error a line after vLLM's bf16 refusal), 2 unnamed. Then the entries
    # hardware-unsupported and no-kernel-image (the two classes behind three of those four),
    # with a second batch of 5 cases of those classes collected and split before they were
    # written (all 5 right: the blind part for them). Now: 46 right (44 by class, 1
    # unrecognised-error at the cause's line, 1 benign left alone), 0 wrong, 1 unnamed (a
    # TensorFlow NCCL "communication aborted" line, left unnamed rather than tuned on).
    # Third batch (issue 37): a Ray gRPC server's port in use, 1 case here (2 in the tune set).
    # Its class was first written `port-in-use`, a name outside the catalog's vocabulary for
    # the class it has (`address-in-use`); renamed, it scored right by class but one line late
    # (the wrapped line that says "Address already in use", not the Check line before it).
    # The variant for Ray's Check line, written from the tune set's two, puts it on the line.
    assert (s.count("right-class"), s.count("right-unrecognised"), s.count("right-benign")) == (45, 1, 1), detail
    assert (s.count("wrong-class"), s.count("wrong-line"), s.count("alarm")) == (0, 0, 0), detail
    assert s.unnamed == 1, detail
    assert s.right == 47 and s.wrong == 0 and 47 / 48 >= 0.85
    assert s.lines == (45, 47), detail  # the reported line is the cause's line
    second = {"arch-bf16-v100-vllm-946", "arch-flashattn-raylight-68", "nokernel-scube-7",
              "nokernel-cpmkernels-6", "nokernel-neuralmotifs-6"}
    assert {c.stem for c in s.cases if c.outcome == "right-class"} >= second, detail


def test_the_two_sets_are_apart() -> None:
    """The fixed split rule holds, and no thread gives an excerpt to both sets."""
    held = expected_of(HELDOUT)
    tune = expected_of(TUNE)
    parity = {stem: int(hashlib.sha1(stem.encode()).hexdigest(), 16) % 2 for stem in held}
    assert set(parity.values()) == {0}
    issue40 = [stem for stem, want in tune.items() if isinstance(want, dict)]
    assert issue40 and all(int(hashlib.sha1(s.encode()).hexdigest(), 16) % 2 == 1 for s in issue40)
    assert not set(held) & set(tune)

    def sources(directory, stems):  # type: ignore[no-untyped-def]
        return {(directory / f"{s}.log").read_text(encoding="utf-8").splitlines()[0] for s in stems}

    assert not sources(HELDOUT, held) & sources(TUNE, tune)
    assert len(sources(HELDOUT, held)) == len(held)
    for stem, want in held.items():
        first = (HELDOUT / f"{stem}.log").read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# source: https://github.com/"), stem
        assert want is None or set(want) == {"class", "line"}, stem
