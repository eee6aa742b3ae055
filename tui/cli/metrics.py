"""`rlconsole metrics SOURCE [--json|--csv]`: the functions behind the command.

SOURCE is what a user has at hand after (or during) a run: the driver log saved from
``ray job logs`` or a TensorBoard run directory (``$TENSORBOARD_DIR``). Newer VeRL's
``file`` logger (JSON lines ``{"step": N, "data": {...}}``) is accepted too, since it
is the same data. Every source becomes the contract's shape,
``[{"step": N, "metrics": {key: number}}]`` in step order.

The argparse wiring lives in tui/cli/main.py; this module raises `MetricsSourceError` with a
one-line message naming the file (and line, where one is at fault) for it to print.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from typing import IO, Any

from tui.core.job.metrics import json_safe
from tui.core.job.tbreader import EVENT_FILE_MARKER, ScalarReader
from tui.core.job.verl_log import LogMetricsParser
from tui.core.linecap import capped_lines
from tui.core.safetext import csv_cell

__all__ = ["load_metrics", "write_json", "write_csv", "MetricsSourceError",
           "MetricsSourceNotFound", "detect_kind"]

Row = dict[str, Any]


class MetricsSourceError(ValueError):
    """A source that cannot be read; the message is one line naming the file."""


class MetricsSourceNotFound(MetricsSourceError, FileNotFoundError):
    """SOURCE does not exist (also a FileNotFoundError, for callers that catch that)."""


def detect_kind(source: str | os.PathLike[str]) -> str:
    """"tensorboard", "jsonl" or "log" - what `load_metrics` will read `source` as."""
    path = os.fspath(source)
    if os.path.isdir(path) or EVENT_FILE_MARKER in os.path.basename(path):
        return "tensorboard"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in capped_lines(f):  # (a saved log: its lines are cut as the live ones are)
                s = line.strip()
                if not s:
                    continue
                if s.startswith("{"):
                    try:
                        obj = json.loads(s)
                    except ValueError:
                        return "log"
                    if isinstance(obj, dict) and "step" in obj:
                        return "jsonl"
                return "log"
    except OSError as exc:
        raise MetricsSourceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return "log"


def _load_jsonl(path: str) -> list[Row]:
    steps: dict[int, dict[str, float]] = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(capped_lines(f), 1):
            s = line.strip()
            if not s:
                continue
            try:
                obj = json.loads(s)
                step = int(obj["step"])
                data = obj.get("data", obj.get("metrics", {}))
            except (ValueError, KeyError, TypeError) as exc:
                raise MetricsSourceError(
                    f"{path}:{lineno}: not a file-logger record ({exc})") from exc
            cur = steps.setdefault(step, {})
            for k, v in (data or {}).items():
                if isinstance(v, bool):
                    continue
                if isinstance(v, (int, float)):
                    cur[str(k)] = float(v)
    return [{"step": s, "metrics": steps[s]} for s in sorted(steps)]


def load_metrics(source: str | os.PathLike[str]) -> list[Row]:
    """Read a VeRL log file, a file-logger JSONL file, or a TensorBoard run directory
    (or one event file) into ``[{"step": N, "metrics": {...}}]`` in step order."""
    path = os.fspath(source)
    if not os.path.exists(path):
        raise MetricsSourceNotFound(f"{path}: no such file or directory")
    kind = detect_kind(path)
    if kind == "tensorboard":
        reader = ScalarReader(path)
        if not reader.source.list_files():
            raise MetricsSourceError(
                f"{path}: no TensorBoard event files ({EVENT_FILE_MARKER}*) under it")
        try:
            reader.update()
        except OSError as exc:
            raise MetricsSourceError(f"{path}: cannot read: {exc}") from exc
        if reader.errors and not reader.steps():
            raise MetricsSourceError(next(iter(reader.errors.values())))
        return reader.rows()
    if kind == "jsonl":
        return _load_jsonl(path)
    parser = LogMetricsParser(clock=None)
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            # newline="" keeps tqdm's bare \r inside lines instead of splitting on it.
            parser.feed_many(capped_lines(f))  # each line at most LINE_CAP, as the live path
    except OSError as exc:
        raise MetricsSourceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return parser.rows()


def _open_out(out: IO[str] | str | os.PathLike[str]) -> tuple[IO[str], bool]:
    if isinstance(out, (str, os.PathLike)):
        return open(out, "w", encoding="utf-8", newline=""), True
    return out, False


def write_json(rows: Iterable[Mapping[str, Any]], out: IO[str] | str | os.PathLike[str]
               ) -> None:
    """The contract's JSON: a list of ``{"step": N, "metrics": {...}}``, one row per
    line so that large outputs stay greppable. NaN/inf are not JSON: written as null."""
    f, close = _open_out(out)
    try:
        f.write("[")
        first = True
        for row in rows:
            obj = {"step": int(row["step"]), "metrics": json_safe(dict(row["metrics"]))}
            f.write("\n" if first else ",\n")
            f.write(json.dumps(obj, allow_nan=False))
            first = False
        f.write("\n]\n" if not first else "]\n")
    finally:
        if close:
            f.close()


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_csv(rows: Iterable[Mapping[str, Any]], out: IO[str] | str | os.PathLike[str]
              ) -> None:
    """Wide CSV: ``step`` then the sorted union of metric keys; empty where a step has
    no value for a key (validation keys appear every `test_freq` steps only). A key is a
    log's or an event file's name: written as text a spreadsheet cannot run and a
    terminal cannot obey (`safetext.csv_cell`); the values are numbers."""
    rows = list(rows)
    keys = sorted({k for row in rows for k in row["metrics"]})
    f, close = _open_out(out)
    try:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["step", *(csv_cell(k) for k in keys)])
        for row in rows:
            m = row["metrics"]
            w.writerow([int(row["step"]), *(_cell(m.get(k)) for k in keys)])
    finally:
        if close:
            f.close()


def spool_log_for_job(job_id: str) -> str:
    """`rlconsole metrics --job ID`: the job's driver log as spooled locally by the console
    or `rlconsole logs` (no SSH). The id names a directory under the spool, so it must pass
    the one rule for remote names (`safepath`): one plain, confined component."""
    from tui.core.job.watcher import spool_dir
    from tui.core.safepath import UnsafeName, confined, safe_job_id

    try:
        path = confined(spool_dir(), safe_job_id(job_id)) / "driver.log"
    except UnsafeName as e:
        raise MetricsSourceError(f"--job {job_id!r}: not a job id ({e})") from None
    if not path.is_file():
        raise MetricsSourceError(f"--job {job_id}: nothing spooled at {path} "
                                 "(run `rlconsole logs --job ID` or the console first)")
    return str(path)
