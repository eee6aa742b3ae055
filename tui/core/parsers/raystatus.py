"""Fallback text parsers for Ray's CLI: `ray status`, `ray job list`, `ray job status`.

The dashboard API and the Python SDK are the structured sources; these parsers exist
for when only a shell reaches the head (the dashboard port closed, no matching Ray
client on the console's side). The text differs between Ray versions:

* `ray status`: "Active:/Pending:/Recent failures:" then "Resources / Usage:" (Ray 2.x
  legacy autoscaler), or with "Idle:" and "Total Usage:" / "Total Constraints:" /
  "Total Demands:" / "From request_resources:" / "Pending Demands:" in newer Ray;
  `-v` adds per-node "Node: ..." blocks.
* `ray job list`: a (pretty-printed) Python list of `JobDetails(...)` reprs.
* `ray job status ID`: "Status for job 'ID': RUNNING" + "Status message: ...", or the
  "Job 'ID' succeeded/failed/was stopped" banners, which `ray job submit` (without
  `--no-wait`) and `ray job stop` also print.

Nothing here raises.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from tui.core.parsers.ansi import strip_ansi
from tui.core.state import JobStatus, RayJobState, RayNodeState, RayState

__all__ = [
    "SOURCE",
    "parse_ray_status",
    "parse_ray_job_list",
    "parse_ray_job_status",
    "parse_ray_job_submit_id",
]

SOURCE = "ray status"

# Linear time on any line (node output is untrusted): no two adjacent quantifiers here
# can match the same characters. `\s*:?\s*$` (a colon between two optional runs of
# spaces) tried every split of a long run of spaces: 12 s on 32k spaces.
_SECTION_RE = re.compile(
    r"^(Active|Idle|Pending|Recent failures|Usage|Total Usage|Total Constraints|"
    r"Total Demands|Demands|From request_resources|Pending Demands|Resources|Node status)\s*(?::\s*)?$"
)
# The name runs to the end of the (right-stripped) line; `(\S.*?)\s*$` retried the
# trailing spaces after each character of a run of spaces inside the name: quadratic.
_COUNT_LINE_RE = re.compile(r"^\s*([0-9]{1,9})\s+(\S.*)")
_GPU_LINE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*/\s*([0-9]+(?:\.[0-9]+)?)\s+GPU(?:\s|$)")
_FAILURE_RE = re.compile(
    r"^\s*(\S+?):\s*NodeTerminated\s*\((?:ip|instance_id):\s*([^)]*)\)"
)
_NODE_ID_RE = re.compile(r"node_([0-9a-f]{16,})", re.IGNORECASE)
_NODE_BLOCK_RE = re.compile(r"^Node:\s*(\S+)(?:\s*\(([^)]*)\))?\s*$")
_IP_RE = re.compile(r"^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$")
# `(?<!=)`: a run of "=" is tried once, from its first character, not from each one
# (a 64k run of "=" took 27 s).
_HEADER_RE = re.compile(r"(?<!=)=+\s*Autoscaler status\b|^Node status\s*$", re.MULTILINE)
_ERROR_RE = re.compile(
    r"(?i)(ConnectionError|Could not find any running Ray instance|No cluster status|"
    r"cluster is not found|Failed to connect|Unable to connect|not found at|"
    r"command not found|ray: not found|Error\b.*)"
)


def _error_line(clean: str) -> str | None:
    for line in clean.split("\n"):
        if _ERROR_RE.search(line):
            return line.strip()[:500]
    return None


def parse_ray_status(text: str) -> RayState:
    """Parse `ray status` text into a RayState with source "ray status"; never raises.

    Alive nodes are the counts under "Active:" plus "Idle:" (a node type line
    `` 1 node_<id>`` counts 1; an autoscaler type ``2 ray.worker.gpu`` counts 2).
    Dead nodes are the "NodeTerminated" lines of "Recent failures:" (launch failures
    are not nodes). GPUs come from the cluster-wide ``used/total GPU`` line of
    "Usage:"/"Total Usage:"; per-node ``Node:`` blocks (`ray status -v`) give
    per-node GPU figures.
    """
    try:
        return _parse_ray_status(text)
    except Exception as exc:  # noqa: BLE001 - defensive: a parser never raises
        return RayState(available=False, source=SOURCE, error=f"ray status parser failed: {exc!r}")


class _RayStatusWalk:
    """One pass over `ray status` lines: the section a line is in decides what it
    counts, and a `Node:` block (`ray status -v`) collects one node's GPU line."""

    def __init__(self) -> None:
        self.state = RayState(source=SOURCE, available=True)
        self.section: str | None = None
        self.nodes: dict[str, RayNodeState] = {}
        self.node_block: RayNodeState | None = None
        self.cluster_gpu_seen = False
        self.handlers = {"Active": self._alive_line, "Idle": self._alive_line,
                         "Recent failures": self._failure_line, "Usage": self._usage_line,
                         "Total Usage": self._usage_line, "node": self._node_gpu_line}

    def line(self, raw: str) -> None:
        line = raw.rstrip()
        stripped = line.strip()
        if self._node_block_start(line) or self._node_id_line(stripped):
            return
        header = _SECTION_RE.match(stripped) if line == stripped else None
        if header:
            self.section = header.group(1)
            self.node_block = None
            return
        if not stripped or stripped.startswith("(") or set(stripped) <= set("-="):
            return
        handler = self.handlers.get(self.section or "")
        if handler is not None:
            handler(line)

    def _node_block_start(self, line: str) -> bool:
        block = _NODE_BLOCK_RE.match(line)
        if not block:
            return False
        ident = block.group(1)
        node_id = _NODE_ID_RE.search(ident) or _NODE_ID_RE.search(block.group(2) or "")
        key = node_id.group(1) if node_id else ident
        self.node_block = self.nodes.get(key)
        if self.node_block is None:
            self.node_block = RayNodeState(node_id=key, address=ident if _IP_RE.match(ident) else "", alive=True)
            self.nodes[key] = self.node_block
        self.section = "node"
        return True

    def _node_id_line(self, stripped: str) -> bool:
        """`Id: <hex>` inside a node block names the node its header abbreviated."""
        block = self.node_block
        if self.section != "node" or block is None or not stripped.startswith("Id:"):
            return False
        real_id = stripped[3:].strip()
        if real_id and real_id != block.node_id:
            self.nodes.pop(block.node_id, None)
            existing = self.nodes.get(real_id)
            if existing is not None:
                self.node_block = existing
            else:
                block.node_id = real_id
                self.nodes[real_id] = block
        return True

    def _alive_line(self, line: str) -> None:
        count = _COUNT_LINE_RE.match(line)
        if not count:
            return
        self.state.nodes_alive += int(count.group(1))
        node_id = _NODE_ID_RE.search(count.group(2))
        if node_id and int(count.group(1)) == 1:
            self.nodes.setdefault(node_id.group(1), RayNodeState(node_id=node_id.group(1), address="", alive=True))

    def _failure_line(self, line: str) -> None:
        failure = _FAILURE_RE.match(line)
        if not failure:
            return
        self.state.nodes_dead += 1
        node_type, where = failure.group(1), failure.group(2).strip()
        node_id = _NODE_ID_RE.search(node_type)
        key = node_id.group(1) if node_id else (where or node_type)
        self.nodes[key] = RayNodeState(node_id=key, address=where if _IP_RE.match(where) else "", alive=False)

    def _usage_line(self, line: str) -> None:
        gpu = _GPU_LINE_RE.match(line) if not self.cluster_gpu_seen else None
        if gpu:
            self.state.gpus_used = float(gpu.group(1))
            self.state.gpus_total = float(gpu.group(2))
            self.cluster_gpu_seen = True

    def _node_gpu_line(self, line: str) -> None:
        gpu = _GPU_LINE_RE.match(line) if self.node_block is not None else None
        if gpu and self.node_block is not None:
            self.node_block.gpus_used = float(gpu.group(1))
            self.node_block.gpus_total = float(gpu.group(2))


def _parse_ray_status(text: str) -> RayState:
    clean = strip_ansi(text)
    if not _HEADER_RE.search(clean):
        error = _error_line(clean) or ("ray status printed nothing" if not clean.strip() else "no Ray status in output")
        return RayState(source=SOURCE, error=error)
    walk = _RayStatusWalk()
    for raw in clean.split("\n"):
        walk.line(raw)
    walk.state.nodes = list(walk.nodes.values())
    return walk.state


# --------------------------------------------------------------------------- jobs

_REPR_VALUE = (
    r"<\w+\.(\w+):\s*'[^']*'>"          # an enum repr: <JobStatus.RUNNING: 'RUNNING'>
    r"|'(?:[^'\\]|\\.)*'"               # a single-quoted str repr
    r'|"(?:[^"\\]|\\.)*"'               # a double-quoted str repr
    r"|None|True|False"
    r"|-?[0-9]+(?:\.[0-9]+)?(?=[\s,)\]])"     # a number, only when complete (cut output)
)
_REPR_PAIR_RE = re.compile(rf"\b(\w+)=({_REPR_VALUE})")
_JOB_KEYS = {"job_id", "submission_id", "status", "entrypoint", "message", "start_time", "end_time"}


def _repr_value(raw: str) -> Any:
    enum = re.fullmatch(r"<\w+\.(\w+):\s*'[^']*'>", raw)
    if enum:
        return enum.group(1)
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return raw.strip("'\"")


def _status_word(value: Any) -> str:
    """"RUNNING", "JobStatus.RUNNING", "running" -> "RUNNING" (else upper-cased as is)."""
    text = str(value).strip().rsplit(".", 1)[-1].upper()
    return text


def _ms_to_s(value: Any) -> float | None:
    """Ray reports job times in milliseconds since the epoch; RayJobState holds seconds
    (comparable with time.time()). Values already in seconds are kept."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value) / 1000.0 if value > 1e11 else float(value)


def _job_from_fields(fields: dict[str, Any]) -> RayJobState | None:
    job_id = fields.get("submission_id") or fields.get("job_id") or fields.get("submissionId") or fields.get("jobId")
    status = fields.get("status")
    if not job_id or status is None:
        return None
    message = fields.get("message")
    entrypoint = fields.get("entrypoint")
    return RayJobState(
        id=str(job_id),
        status=JobStatus.of(_status_word(status)),
        entrypoint=str(entrypoint) if isinstance(entrypoint, str) else "",
        start_time=_ms_to_s(fields.get("start_time", fields.get("startTime"))),
        end_time=_ms_to_s(fields.get("end_time", fields.get("endTime"))),
        message=str(message) if isinstance(message, str) and message else None,
    )


def _jobs_from_json(value: Any) -> list[RayJobState]:
    """The dashboard's `/api/jobs/` (a list) or the older `{id: {...}}` mapping."""
    jobs: list[RayJobState] = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                job = _job_from_fields(item)
                if job:
                    jobs.append(job)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict):
                fields = dict(item)
                fields.setdefault("submission_id", key)
                job = _job_from_fields(fields)
                if job:
                    jobs.append(job)
    return jobs


def parse_ray_job_list(text: str) -> list[RayJobState]:
    """Jobs from `ray job list` (a Python repr of `JobDetails(...)` objects, one or
    several per line) or from the dashboard's JSON job list; never raises.

    The repr is read with a tokenising regex (quoted strings are consumed whole, so an
    entrypoint containing `status=` cannot confuse it) and the first value of each key
    in a `JobDetails(` block wins (nested `DriverInfo(...)` has no job keys). A repr
    cut off mid-way still yields the job if its id and status arrived.
    """
    try:
        return _parse_ray_job_list(text)
    except Exception:  # noqa: BLE001 - a parser never raises
        return []


def _parse_ray_job_list(text: str) -> list[RayJobState]:
    clean = strip_ansi(text)
    blocks = re.split(r"\bJobDetails\(", clean)
    jobs: list[RayJobState] = []
    if len(blocks) > 1:
        for block in blocks[1:]:
            fields: dict[str, Any] = {}
            for match in _REPR_PAIR_RE.finditer(block):
                key = match.group(1)
                if key in _JOB_KEYS and key not in fields:
                    fields[key] = _repr_value(match.group(2))
            job = _job_from_fields(fields)
            if job:
                jobs.append(job)
        return jobs
    start = re.search(r"^[ \t]*[\[{]", clean, re.MULTILINE)
    if start:
        try:
            value, _ = json.JSONDecoder().raw_decode(clean, start.end() - 1)
        except ValueError:
            return []
        return _jobs_from_json(value)
    return []


_STATUS_WORD = r"(PENDING|RUNNING|STOPPED|SUCCEEDED|FAILED)\b"  # whole words: "RUNN" is a cut line
_STATUS_FOR_RE = re.compile(rf"Status for job '([^']+)':\s*(?:JobStatus\.)?{_STATUS_WORD}")
_BANNER_RE = re.compile(
    r"Job '([^']+)' (succeeded|failed|was stopped|submitted successfully)", re.IGNORECASE
)
_NOT_EXITED_RE = re.compile(rf"Job has not exited yet\. Status:\s*(?:JobStatus\.)?{_STATUS_WORD}")
_STOPPING_RE = re.compile(r"(?:Attempting to stop|Waiting for) job '([^']+)'")
_MESSAGE_RE = re.compile(r"^Status message:\s*(.*)$", re.MULTILINE)
_BANNER_STATUS = {
    "succeeded": JobStatus.SUCCEEDED,
    "failed": JobStatus.FAILED,
    "was stopped": JobStatus.STOPPED,
    "submitted successfully": JobStatus.PENDING,
}


def parse_ray_job_status(text: str) -> RayJobState | None:
    """The job state in `ray job status ID` output (also `ray job submit` / `ray job
    stop` output, which print the same lines); None when no job status is in it.

    The last status line wins: `submit` without `--no-wait` prints "submitted
    successfully" first and the final "Job 'ID' failed" banner after the logs.
    "Status message:" after the last status line becomes `message`. Never raises.
    """
    try:
        return _parse_ray_job_status(text)
    except Exception:  # noqa: BLE001 - a parser never raises
        return None


def _parse_ray_job_status(text: str) -> RayJobState | None:
    clean = strip_ansi(text)
    found: list[tuple[int, str, str]] = []  # (position, id, status)
    for match in _STATUS_FOR_RE.finditer(clean):
        found.append((match.start(), match.group(1), match.group(2).upper()))
    for match in _BANNER_RE.finditer(clean):
        found.append((match.start(), match.group(1), _BANNER_STATUS[match.group(2).lower()]))
    stopping = list(_STOPPING_RE.finditer(clean))
    if stopping:
        for match in _NOT_EXITED_RE.finditer(clean):
            found.append((match.start(), stopping[-1].group(1), match.group(1).upper()))
    if not found:
        return None
    position, job_id, status = max(found, key=lambda item: item[0])
    message = None
    for match in _MESSAGE_RE.finditer(clean, position):
        message = match.group(1).strip() or None
        break
    return RayJobState(id=job_id, status=JobStatus.of(status), message=message)


_SUBMITTED_RE = re.compile(r"Job '([^']+)' submitted successfully")


def parse_ray_job_submit_id(text: str) -> str | None:
    """The submission id `ray job submit` printed ("Job 'raysubmit_...' submitted
    successfully"), so the console can follow the job it just started; None if the
    submit failed. Never raises."""
    try:
        match = _SUBMITTED_RE.search(strip_ansi(text))
    except Exception:  # noqa: BLE001
        return None
    return match.group(1) if match else None
