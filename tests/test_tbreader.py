"""ScalarReader against tbparse as the oracle, on real event files written by
tensorboard's own writer (tui.sim.tbwrite): several files, both event layouts,
tensor-encoded scalars, a partial last record, appends between reads, garbage."""

from __future__ import annotations

import math
import os
import random
import shutil
import struct
import time
from pathlib import Path

import pytest

from tui.core.job.tbreader import ByteSource, LocalSource, ScalarReader, masked_crc32c
from tui.sim.tbwrite import ScalarWriter

# tbparse 0.0.9 under pandas 3 warns about its own use of `inplace=`; not our concern.
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")

F32_REL = 2.0 ** -23


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def oracle(d: Path) -> list[tuple[str, int, float]]:
    """tbparse's view: scalars plus (rank-0) tensors, as sorted (tag, step, value)."""
    from tbparse import SummaryReader

    r = SummaryReader(str(d))
    out: list[tuple[str, int, float]] = []
    for df in (r.scalars, r.tensors):
        if df is None or df.empty:
            continue
        out += [(str(t), int(s), float(v)) for t, s, v in zip(df["tag"], df["step"], df["value"])]
    return sorted(out)


def mine(reader: ScalarReader) -> list[tuple[str, int, float]]:
    return sorted((tag, s, v) for tag, lst in reader.scalars.items() for s, v in lst)


def assert_same(a: list[tuple[str, int, float]], b: list[tuple[str, int, float]]) -> None:
    assert len(a) == len(b)
    assert [(t, s) for t, s, _ in a] == [(t, s) for t, s, _ in b]
    for (t, s, x), (_, _, y) in zip(a, b):
        if math.isnan(x) or math.isnan(y):
            assert math.isnan(x) and math.isnan(y), (t, s)
        else:
            assert math.isclose(x, y, rel_tol=F32_REL, abs_tol=0.0), (t, s, x, y)


TAGS = ["actor/pg_loss", "critic/rewards/mean", "perf/throughput", "perf/mfu/actor",
        "timing_s/step", "val-core/openai/gsm8k/reward/mean@1", "response_length/mean",
        "perf/max_memory_reserved_gb"]


def values(step: int, rng: random.Random, tags: list[str] = TAGS) -> dict[str, float]:
    return {t: rng.uniform(-1e4, 1e4) if i % 3 else rng.random() for i, t in enumerate(tags)}


def _next_second() -> None:
    """Wait until the wall clock's second changes: an event file's name starts with it."""
    start = int(time.time())
    while int(time.time()) == start:
        time.sleep(0.05)


def write_run(d: Path, steps: range, *, per_scalar: bool, encoding: str = "simple",
              seed: int = 0, tags: list[str] = TAGS, sync: bool = True) -> Path:
    rng = random.Random(seed)
    with ScalarWriter(d, per_scalar=per_scalar, encoding=encoding, sync=sync) as w:  # type: ignore[arg-type]
        for s in steps:
            w.add_scalars(s, values(s, rng, tags))
        return Path(w.path)


# ------------------------------------------------------------------------ vs tbparse

@pytest.mark.parametrize("per_scalar", [True, False], ids=["per-scalar", "per-step"])
def test_matches_tbparse_several_files(tmp_path: Path, per_scalar: bool) -> None:
    write_run(tmp_path, range(0, 40), per_scalar=per_scalar, seed=1)
    # a second file (a resumed run) rewriting steps 30..59 with other values,
    # and one through tensorboard's threaded EventFileWriter. Files are read in name order
    # (as TensorBoard reads them): the resumed run's must be named after the first one's,
    # as a later start's is. Written within the same second, their names differed only by
    # the writer's counter, unpadded (as tensorboard's): "...10" sorts before "...9".
    _next_second()
    write_run(tmp_path, range(30, 60), per_scalar=per_scalar, seed=2)
    write_run(tmp_path, range(60, 70), per_scalar=not per_scalar, seed=3, sync=False)
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 3
    r = ScalarReader(tmp_path)
    n = r.update()
    assert n == (40 + 30 + 10) * len(TAGS)
    assert_same(mine(r), oracle(tmp_path))
    assert r.errors == {}
    assert r.steps() == list(range(70))
    # later events win per step: steps 30..39 come from the second file
    rng2 = random.Random(2)
    expected_30 = {k: f32(v) for k, v in values(30, rng2).items()}
    assert r.metrics_at(30) == expected_30
    # ...while `scalars` keeps both values of a rewritten step, in read order
    rng1 = random.Random(1)
    first = [values(s, rng1) for s in range(32)]
    assert r.scalars["actor/pg_loss"][28:34] == [
        (28, f32(first[28]["actor/pg_loss"])), (29, f32(first[29]["actor/pg_loss"])),
        (30, f32(first[30]["actor/pg_loss"])), (30, expected_30["actor/pg_loss"]),
        (31, f32(first[31]["actor/pg_loss"])), (31, r.metrics_at(31)["actor/pg_loss"])]
    rows = r.rows()
    assert [row["step"] for row in rows] == list(range(70))
    assert rows[30]["metrics"] == expected_30
    assert r.update() == 0  # nothing new


def test_subdirectories_merge_like_tbparse(tmp_path: Path) -> None:
    write_run(tmp_path / "train", range(5), per_scalar=True, seed=1, tags=["loss"])
    write_run(tmp_path / "eval" / "deep", range(5), per_scalar=False, seed=2, tags=["acc", "loss2"])
    r = ScalarReader(tmp_path)
    r.update()
    assert_same(mine(r), oracle(tmp_path))
    assert r.tags == ["acc", "loss", "loss2"]
    p = ScalarReader(tmp_path, prefix_subdirs=True)
    p.update()
    assert p.tags == ["eval/deep/acc", "eval/deep/loss2", "train/loss"]


@pytest.mark.parametrize("encoding", ["tensor", "tensor_content"])
def test_tensor_encoded_scalars_match_tbparse(tmp_path: Path, encoding: str) -> None:
    write_run(tmp_path, range(12), per_scalar=True, encoding=encoding, seed=4)
    write_run(tmp_path, range(12, 20), per_scalar=False, encoding=encoding, seed=5)
    r = ScalarReader(tmp_path)
    assert r.update() == 20 * len(TAGS)
    ref = oracle(tmp_path)
    assert len(ref) == 20 * len(TAGS)
    assert_same(mine(r), ref)


def test_tf2_style_metadata_only_on_first_event_and_non_scalar_tensors(tmp_path: Path) -> None:
    """TF2 writes the plugin metadata once per tag; a later bare tensor of that tag is
    still a scalar. Tensors of another plugin (text, histograms) are not scalars."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    def tensor(v: float, dtype: int = types_pb2.DT_FLOAT) -> tensor_pb2.TensorProto:
        t = tensor_pb2.TensorProto(dtype=dtype, tensor_shape=tensor_shape_pb2.TensorShapeProto())
        if dtype == types_pb2.DT_DOUBLE:
            t.double_val.append(v)
        else:
            t.float_val.append(v)
        return t

    meta = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    text_meta = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    w = EventFileWriter(str(tmp_path))
    for step in range(4):
        vals = [
            summary_pb2.Summary.Value(tag="loss", tensor=tensor(0.1 * step),
                                      metadata=meta if step == 0 else None),
            summary_pb2.Summary.Value(tag="lr", tensor=tensor(1e-6 * step, types_pb2.DT_DOUBLE)),
            summary_pb2.Summary.Value(tag="simple", simple_value=step * 1.5),
            summary_pb2.Summary.Value(
                tag="notes", metadata=text_meta if step == 0 else None,
                tensor=tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[b"hi"],
                                              tensor_shape=tensor_shape_pb2.TensorShapeProto())),
        ]
        w.add_event(event_pb2.Event(step=step, wall_time=1000.0 + step,
                                    summary=summary_pb2.Summary(value=vals)))
    w.close()
    r = ScalarReader(tmp_path)
    assert r.update() == 12
    assert r.tags == ["loss", "lr", "simple"]
    assert r.scalars["lr"][3] == (3, 3e-06)  # float64 stays float64
    assert r.scalars["loss"][2] == (2, f32(0.2))
    assert r.wall_times[2] == 1002.0
    ref = [row for row in oracle(tmp_path) if row[0] != "notes"]
    assert_same(mine(r), ref)


def test_partial_last_record_then_resume(tmp_path: Path) -> None:
    src = tmp_path / "src"
    path = write_run(src, range(1, 31), per_scalar=True, seed=6)
    data = path.read_bytes()
    full = ScalarReader(src)
    full.update()
    # cut points: inside a header, inside the header CRC, inside data, inside the data CRC
    cuts = [len(data) - 1, len(data) - 4, len(data) - 5, len(data) - 20, len(data) - 40,
            len(data) - 50, len(data) - 59, len(data) - 60]
    for i, cut in enumerate(cuts):
        d = tmp_path / f"cut{i}"
        d.mkdir()
        target = d / path.name
        target.write_bytes(data[:cut])
        r = ScalarReader(d)
        r.update()
        assert r.errors == {}
        assert_same(mine(r), oracle(d))
        # the writer finishes the record: the reader resumes at the partial frame
        with target.open("ab") as f:
            f.write(data[cut:])
        added = r.update()
        assert added >= 1
        assert mine(r) == mine(full)
        assert r.rows() == full.rows()


def test_appends_between_reads(tmp_path: Path) -> None:
    rng = random.Random(7)
    w = ScalarWriter(tmp_path, per_scalar=True)  # tensorboard's threaded writer
    r = ScalarReader(tmp_path)
    assert r.update() == 0
    total = 0
    for chunk in range(5):
        for s in range(chunk * 10, chunk * 10 + 10):
            w.add_scalars(s, values(s, rng))
        w.flush()
        got = r.update()
        assert got == 10 * len(TAGS)
        total += got
        assert r.steps()[-1] == chunk * 10 + 9
        assert r.update() == 0
    w.close()
    assert len(r) == total
    assert_same(mine(r), oracle(tmp_path))


def test_byte_by_byte_growth(tmp_path: Path) -> None:
    """A file that grows a few bytes at a time (a slow network copy) reads the same."""
    src = tmp_path / "src"
    path = write_run(src, range(3), per_scalar=False, seed=8, tags=TAGS[:3])
    data = path.read_bytes()
    d = tmp_path / "grow"
    d.mkdir()
    target = d / path.name
    target.write_bytes(b"")
    r = ScalarReader(d)
    for i in range(0, len(data), 7):
        with target.open("ab") as f:
            f.write(data[i:i + 7])
        r.update()
    full = ScalarReader(src)
    full.update()
    assert mine(r) == mine(full)


def test_garbage_is_detected_not_decoded(tmp_path: Path) -> None:
    path = write_run(tmp_path / "src", range(10), per_scalar=True, seed=9, tags=TAGS[:2])
    data = bytearray(path.read_bytes())
    good = ScalarReader(tmp_path / "src")
    good.update()
    # corrupt the length field of the 6th frame
    off = 0
    for _ in range(5):
        off += struct.unpack("<Q", bytes(data[off:off + 8]))[0] + 16
    data[off] ^= 0x01
    d = tmp_path / "bad"
    d.mkdir()
    (d / path.name).write_bytes(bytes(data))
    r = ScalarReader(d)
    r.update()
    assert len(r.errors) == 1 and "checksum" in next(iter(r.errors.values()))
    assert len(r) == 4  # the first frame is file_version; frames 2..5 are scalars
    assert mine(r) == [row for row in mine(good) if row[1] in (0, 1)]
    assert r.update() == 0  # a broken file is not re-read


def test_not_an_event_file_is_garbage(tmp_path: Path) -> None:
    (tmp_path / "events.out.tfevents.123.host").write_bytes(b"this is not a tfrecord file at all\n" * 3)
    r = ScalarReader(tmp_path)
    assert r.update() == 0
    assert r.errors


def test_masked_crc32c_matches_tensorboard() -> None:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as ref

    for b in (b"", b"a", struct.pack("<Q", 12345), os.urandom(64)):
        assert masked_crc32c(b) == ref(b)


def test_float32_semantics_and_big_and_zero_steps(tmp_path: Path) -> None:
    with ScalarWriter(tmp_path, per_scalar=True, sync=True) as w:
        w.add_scalars(0, {"a": 0.1})
        w.add_scalars(2 ** 40, {"a": 1e30, "b": float("nan"), "c": float("inf")})
        w.add_scalars(300, {"a": -2.5})
    r = ScalarReader(tmp_path)
    assert r.update() == 5
    assert r.scalars["a"] == [(0, f32(0.1)), (300, -2.5), (2 ** 40, f32(1e30))]  # step order
    assert math.isnan(r.scalars["b"][0][1]) and r.scalars["c"][0][1] == math.inf
    assert r.steps() == [0, 300, 2 ** 40]
    assert_same(mine(r), oracle(tmp_path))


def test_non_ascii_and_long_tags(tmp_path: Path) -> None:
    tags = ["奖励/mean", "x" * 200, "a b/c"]
    write_run(tmp_path, range(3), per_scalar=True, seed=10, tags=tags)
    write_run(tmp_path, range(3, 6), per_scalar=False, seed=11, tags=tags)
    r = ScalarReader(tmp_path)
    assert r.update() == 18
    assert sorted(r.tags) == sorted(tags)
    assert_same(mine(r), oracle(tmp_path))


class MemorySource:
    """A ByteSource over in-memory files: what an SFTP source looks like to the reader."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.reads: list[tuple[str, int]] = []

    def list_files(self) -> list[str]:
        return list(self.files)

    def read(self, path: str, offset: int) -> bytes:
        self.reads.append((path, offset))
        return self.files[path][offset:]


def test_pluggable_source(tmp_path: Path) -> None:
    path = write_run(tmp_path, range(20), per_scalar=True, seed=12)
    data = path.read_bytes()
    src = MemorySource()
    assert isinstance(src, ByteSource)
    assert isinstance(LocalSource(tmp_path), ByteSource)
    src.files["remote/events.out.tfevents.1.node125"] = data[: len(data) // 2]
    r = ScalarReader(src)
    first = r.update()
    src.files["remote/events.out.tfevents.1.node125"] = data
    second = r.update()
    assert first + second == 20 * len(TAGS)
    offsets = [off for _, off in src.reads]
    assert offsets[0] == 0 and 0 < offsets[1] <= len(data) // 2
    local = ScalarReader(tmp_path)
    local.update()
    assert r.rows() == local.rows()


def test_wall_times_and_single_file_path(tmp_path: Path) -> None:
    with ScalarWriter(tmp_path, per_scalar=True, sync=True) as w:
        for s in range(1, 4):
            w.add_scalars(s, {"a": s}, wall_time=1000.0 + 60 * s)
        p = w.path
    r = ScalarReader(p)  # one event file instead of a directory
    r.update()
    assert r.wall_times == {1: 1060.0, 2: 1120.0, 3: 1180.0}
    assert r.last_step == 3


def test_file_copied_into_dir_later(tmp_path: Path) -> None:
    src = tmp_path / "src"
    p1 = write_run(src, range(5), per_scalar=True, seed=13, tags=TAGS[:2])
    d = tmp_path / "run"
    d.mkdir()
    r = ScalarReader(d)
    assert r.update() == 0
    shutil.copy(p1, d / p1.name)
    assert r.update() == 10


# ------------------------------------------------------------------------ an earlier run under the same name

def _started(path: Path) -> int:
    return int(path.name.split(".")[3])  # events.out.tfevents.<time>.<host>...


def test_an_earlier_runs_files_count_only_up_to_the_resume_step(tmp_path: Path) -> None:
    """VeRL writes every run of one experiment name into one TensorBoard dir. The run the
    console watches reads an earlier run's files only up to the step it resumed from:
    started afresh, none of the failed run's steps are its own (they were shown as its
    step, throughput and reward until it passed them); resumed from step 4, the earlier
    run's steps 0..4 are its history and its own steps from 5 on win. Without
    `earlier_run` (a job this console did not submit) every file counts, as in TensorBoard."""
    old = write_run(tmp_path, range(0, 9), per_scalar=False, seed=1)
    _next_second()
    new = write_run(tmp_path, range(0, 3), per_scalar=False, seed=2)
    assert _started(new) > _started(old)
    fresh = ScalarReader(tmp_path, earlier_run=(_started(new), 0))
    assert fresh.update() > 0
    assert fresh.steps() == [0, 1, 2] and fresh.last_step == 2
    rng2 = random.Random(2)
    assert fresh.metrics_at(0) == {k: f32(v) for k, v in values(0, rng2).items()}  # the new run's own
    assert fresh.update() == 0  # nothing new: the cut stays made

    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    old = write_run(resumed_dir, range(0, 9), per_scalar=False, seed=1)
    _next_second()
    new = write_run(resumed_dir, range(5, 7), per_scalar=False, seed=2)
    resumed = ScalarReader(resumed_dir, earlier_run=(_started(new), 4))
    resumed.update()
    assert resumed.steps() == [0, 1, 2, 3, 4, 5, 6]
    rng1, rng2 = random.Random(1), random.Random(2)
    assert resumed.metrics_at(3) == {k: f32(v) for k, v in [values(s, rng1) for s in range(4)][3].items()}
    assert resumed.metrics_at(5) == {k: f32(v) for k, v in values(5, rng2).items()}

    everything = ScalarReader(resumed_dir)
    everything.update()
    assert everything.steps() == list(range(9))  # TensorBoard's view: both runs as one


def test_the_watched_run_reads_earlier_runs_from_its_record() -> None:
    """What the job watcher hands the reader: from the run's record, its submission (less
    the clocks' slack) and the step its parent left off at; nothing for a job without a
    record (submitted elsewhere: every file counts)."""
    from tui.core.job.watcher import EARLIER_RUN_SLACK_S, earlier_run

    assert earlier_run(None) is None
    from tui.core.job.history import RunRecord

    def rec(**extra: object) -> RunRecord:
        return RunRecord(profile="p", profile_path="/p.yaml", job_id="j2", submitted_at=1000.0, entrypoint=[],
                         runtime_env={}, extra=dict(extra))

    assert earlier_run(rec()) == (1000.0 - EARLIER_RUN_SLACK_S, 0)
    assert earlier_run(rec(parent={"job_id": "j", "step": 40})) == (1000.0 - EARLIER_RUN_SLACK_S, 40)
    assert earlier_run(rec(parent={"job_id": "j", "step": "40; rm"})) == \
        (1000.0 - EARLIER_RUN_SLACK_S, 0)  # a hand-edited history is data, not trusted
    assert earlier_run(rec(parent="j")) == (1000.0 - EARLIER_RUN_SLACK_S, 0)
