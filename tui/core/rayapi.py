"""The one client for Ray's dashboard HTTP API (jobs, and the probes' reads).

Why one: the console used to talk to Ray's job API twice, through a hand client in
the probes (bounded reads, typed readers) and through Ray's `JobSubmissionClient` in
the actions (unbounded `requests` reads, untyped dicts, a slow `import ray`). A
dashboard is remote data: every answer here is read at most `HTTP_BODY_MAX` bytes,
decoded with the same any-shape readers (`_d`, `_l`, `_num`, `_text`), and turned into
`RayJobState`, so a hostile or broken dashboard gives an error line or a partial state,
never a crash or a console that fills its memory.

The REST calls mirror what `ray.job_submission.JobSubmissionClient` sends
(ray/dashboard/modules/job/sdk.py and common.py): `POST /api/jobs/` with the JSON of
`JobSubmitRequest` (entrypoint, submission_id, runtime_env, metadata; None-valued
keys stripped), `GET /api/jobs/`, `GET /api/jobs/{id}`, `POST /api/jobs/{id}/stop`,
`GET /api/jobs/{id}/logs`. The dashboard is reached through the head's SSH
connection (a local port forward), so it never has to listen beyond loopback.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import re
from typing import Any
from urllib.parse import quote, urlsplit

from tui.core import netaddr
from tui.core.safetext import shown
from tui.core.secrets import mask_secrets
from tui.core.state import JobStatus, RayJobState

__all__ = [
    "HTTP_BODY_MAX",
    "RAY_MESSAGE_MAX",
    "RayApiError",
    "RayJobClient",
    "dashboard_connect_host",
    "dashboard_exposed",
    "http_get_json",
    "http_json",
    "job_from_api",
    "jobs_from_api",
    "job_message",
]

HTTP_BODY_MAX = 16 << 20
"""Bytes of one dashboard answer read at most. A 64-node cluster's node list with
details is well under 1 MiB; a dashboard (or whatever listens on its port) that
sends more is cut off with an error instead of filling the console's memory."""

RAY_MESSAGE_MAX = 500
"""Characters kept of a Ray message (a node's state_message, a job's message, an
error body): remote text, bounded."""

RAY_JOB_MESSAGE_TAIL = 4000
"""Characters kept of the end of a long job message, besides its first RAY_MESSAGE_MAX.
A FAILED job's message is "Job entrypoint command failed with exit code N, last available
logs (truncated to 20,000 chars):" and then the driver's last output, whose end holds the
error: a job refused at start (Hydra) is named from it even when its log was never read."""

MESSAGE_CUT = "\n[... {n} characters left out ...]\n"
"""Where a long job message's middle was left out."""

ENTRYPOINT_MAX = 4000
"""Characters kept of a job's entrypoint as Ray reports it."""

LOGS_MAX = 1 << 20
"""Characters of a job's logs kept (the tail): the job API returns the whole log in
one JSON string; the console shows the end of it."""


class RayApiError(ConnectionError):
    """The dashboard did not give a usable answer (no HTTP, an error status, too big,
    malformed). A ConnectionError so every caller that already treated "cannot reach
    Ray" as one story keeps doing so. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------------- exposure rule

def dashboard_exposed(host: str) -> bool:
    """Whether a dashboard bound to `host` can be reached from the network (anyone who
    reaches the port can submit jobs: Ray's job API has no authentication): the one
    rule (tui/core/netaddr.py) the preflight check and setup-ray's warning both use."""
    return netaddr.exposed(host)


def dashboard_connect_host(host: str, wildcard_to: str = "127.0.0.1") -> str:
    """Where to connect to a dashboard bound to `host`: a wildcard bind is not an
    address, so it becomes `wildcard_to` (loopback when connecting on the head
    itself, the head's address when connecting from elsewhere)."""
    return wildcard_to if netaddr.is_wildcard(host) else host


# --------------------------------------------------------------------------- HTTP


async def http_json(port: int, method: str, path: str, body: Any = None, timeout: float = 5.0,
                    host: str = "127.0.0.1") -> Any:
    """One HTTP/1.0 request to host:port and its JSON answer. Deliberately tiny: the
    dashboard speaks plain HTTP on a forwarded loopback port, and aiohttp or
    `import ray` would cost more start-up time than the request itself.

    The answer is untrusted: at most HTTP_BODY_MAX bytes are read (beyond: a
    RayApiError saying the answer was truncated), and any malformed answer (status
    line, chunking, JSON nested too deep, numbers too long) is a ConnectionError or
    ValueError, never another exception type. A non-200 status is a RayApiError
    carrying the status and the first line of the body, bounded."""
    payload = b"" if body is None else json.dumps(body).encode()

    async def go() -> Any:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            head_lines = [f"{method} {path} HTTP/1.0", f"Host: {host}:{port}", "Accept: application/json",
                          "Connection: close"]
            if body is not None:
                head_lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
            writer.write(("\r\n".join(head_lines) + "\r\n\r\n").encode() + payload)
            await writer.drain()
            buf = bytearray()
            while True:
                chunk = await reader.read(1 << 16)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > HTTP_BODY_MAX:
                    raise RayApiError(f"answer for {path} over {HTTP_BODY_MAX >> 20} MiB: "
                                      "output truncated, not parsed")
            data = bytes(buf)
        finally:
            writer.close()
        head, _, rest = data.partition(b"\r\n\r\n")
        status_line = head.split(b"\r\n", 1)[0].decode(errors="replace")
        if not status_line.startswith("HTTP/"):
            raise RayApiError("no HTTP answer (is the dashboard listening?)")
        fields = status_line.split()
        if len(fields) < 2 or not (fields[1].isascii() and fields[1].isdigit()) or len(fields[1]) != 3:
            raise RayApiError(f"malformed HTTP status line for {path}: {status_line[:80]!r}")
        code = int(fields[1])
        if b"transfer-encoding: chunked" in head.lower():
            rest = _dechunk(rest)
        if code != 200:
            why = _first_line(rest.decode(errors="replace"))
            raise RayApiError(f"HTTP {code} for {path}" + (f": {why}" if why else ""), status=code)
        try:
            return json.loads(rest)
        except RecursionError:
            raise ValueError(f"answer for {path}: JSON nested too deep") from None

    return await asyncio.wait_for(go(), timeout)


async def http_get_json(port: int, path: str, timeout: float = 5.0, host: str = "127.0.0.1") -> Any:
    """GET http://host:port/path and decode JSON (see `http_json`)."""
    return await http_json(port, "GET", path, None, timeout, host)


def _first_line(text: str) -> str:
    """The first non-empty line of an error body, printable (the one rule for outside
    text, `safetext.shown`) and bounded: it goes into a one-line failure message."""
    for line in text.splitlines():
        line = shown(line.strip())
        if line:
            return line[:RAY_MESSAGE_MAX]
    return ""


def _dechunk(body: bytes) -> bytes:
    """HTTP/1.1 chunked transfer coding -> the body; ValueError on a malformed size."""
    out, rest = bytearray(), body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        raw = size_line.split(b";")[0].strip() or b"0"
        if len(raw) > 16:
            raise ValueError("malformed chunk size")
        size = int(raw, 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return bytes(out)


# --------------------------------------------------------------------------- any-shape readers
# The dashboard's answers are remote data: every field is read through these, which
# return the expected type or a neutral value, so an unexpected shape gives a partial
# state, never an AttributeError/TypeError (`status` printed one).

def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def state_api_rows(doc: Any) -> list[Any] | None:
    """The rows of a state API answer (`/api/v0/nodes`, `/api/v0/actors`:
    `{"result": true, "data": {"result": {"result": [...]}}}`); None for any other shape,
    e.g. `{"result": false, "msg": ...}` from a dashboard whose GCS does not answer."""
    body = _d(doc)
    rows = _d(_d(body.get("data")).get("result")).get("result")
    return rows if body.get("result") is True and isinstance(rows, list) else None


def _l(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _num(x: Any, default: float = 0.0) -> float:
    """A finite float from a JSON number (or numeric string), else `default`."""
    if isinstance(x, bool):
        return default
    if isinstance(x, (int, float)) or (isinstance(x, str) and len(x) <= 40):
        try:
            v = float(x)
        except (ValueError, OverflowError):
            return default
        return v if v == v and v not in (float("inf"), float("-inf")) else default
    return default


def _text(x: Any, limit: int = 200) -> str:
    """A JSON string, bounded; anything else is empty."""
    return x[:limit] if isinstance(x, str) else ""


def job_message(x: Any) -> str:
    """A job's message, bounded: all of it when short, else its head and its tail (where
    the driver's last lines are) around a marker saying how much was left out. The driver's
    output may print a credential: it is masked here, before `status --json` or an alert
    can show it."""
    return _job_message(x) if isinstance(x, str) and x else ""


@functools.lru_cache(maxsize=128)
def _job_message(x: str) -> str:
    """`job_message`, once per distinct message: the job list is read every refresh and a
    finished job's message never changes (masking a long one costs ~1 ms)."""
    if len(x) > RAY_MESSAGE_MAX + RAY_JOB_MESSAGE_TAIL:
        tail = x[-RAY_JOB_MESSAGE_TAIL:]
        tail = tail[tail.find("\n") + 1:] if "\n" in tail[:-1] else tail  # from a line's start
        x = x[:RAY_MESSAGE_MAX] + MESSAGE_CUT.format(n=len(x) - RAY_MESSAGE_MAX - len(tail)) + tail
    return mask_secrets(x)


def _pair_first(x: Any, default: float) -> float:
    """Ray's usage pairs are `[used, total]`: the first, if there is one."""
    seq = _l(x)
    return _num(seq[0], default) if seq else default


def job_from_api(j: Any) -> RayJobState | None:
    """One row of `/api/jobs/` (or the answer of `/api/jobs/{id}`) -> RayJobState;
    None when it is not an object (a row without an id keeps id "": the probe shows
    it as Ray has it). Times are Ray's milliseconds."""
    if not isinstance(j, dict):
        return None
    jid = _text(j.get("submission_id")) or _text(j.get("job_id"))
    start, end = _num(j.get("start_time")), _num(j.get("end_time"))
    return RayJobState(
        id=jid, status=JobStatus.of(_text(j.get("status"), 40) or JobStatus.UNKNOWN),
        entrypoint=_text(j.get("entrypoint"), ENTRYPOINT_MAX),
        start_time=start / 1000 if start else None,
        end_time=end / 1000 if end else None,
        message=job_message(j.get("message")) or None)


def jobs_from_api(doc: Any) -> list[RayJobState]:
    """`/api/jobs/` -> jobs, oldest first; rows of any other shape are left out."""
    jobs = [j for j in (job_from_api(x) for x in _l(doc)) if j is not None]
    jobs.sort(key=lambda j: j.start_time or 0)
    return jobs


# --------------------------------------------------------------------------- job client


RUN_TAG_KEY = "rlconsole_run"
"""The metadata key of the fresh id `submit` gives each job. Ray hands a job's metadata to
its driver in the environment (`RAY_JOB_CONFIG_JSON_ENV_VAR`), so the id finds the job's
driver among a node's processes, and nothing else: a submission id alone is unique on one
cluster only, and the sim's nodes share one machine's processes."""

RUN_TAG_RE = re.compile(r"[0-9a-f]{32}")
"""What `submit` writes (uuid4's hex). Anything else under the key is not taken: the
metadata is whatever a job's submitter wrote, and a tag such as "PATH=" would match every
process's environment, so `stop` would signal them all."""


@dataclasses.dataclass(frozen=True)
class JobTrace:
    """A submitted job as its processes can be found: Ray's own id (its actors carry it; ""
    until the driver has joined), the address of the node its supervisor started the driver
    on ("" before that), and `RUN_TAG_KEY`'s value ("" for a job not submitted by
    rlconsole)."""

    submission_id: str
    ray_job_id: str
    driver_ip: str
    run_tag: str

    @property
    def environ_needle(self) -> str:
        """What the driver's environment holds and no other process's: the run tag, or
        for a job without one Ray's own `"job_submission_id": "<id>"` (json.dumps form)."""
        return self.run_tag or json.dumps({"job_submission_id": self.submission_id})[1:-1]


class RayJobClient:
    """Ray's job API at one (forwarded, loopback) port. Stateless but for the
    address: creating one costs nothing, so a reconnect (a new forwarded port) simply
    makes a new one."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
        self.port, self.host, self.timeout = port, host, timeout

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        return await http_json(self.port, method, path, body, self.timeout, self.host)

    async def list_jobs(self) -> list[RayJobState]:
        """Every job Ray knows, oldest first."""
        return jobs_from_api(await self._call("GET", "/api/jobs/"))

    async def get_job(self, job_id: str) -> RayJobState | None:
        """One job; None when Ray knows no such job (HTTP 404)."""
        try:
            doc = await self._call("GET", f"/api/jobs/{quote(job_id, safe='')}")
        except RayApiError as e:
            if e.status == 404:
                return None
            raise
        return job_from_api(doc)

    async def job_trace(self, job_id: str) -> JobTrace | None:
        """What finds a submitted job's processes (`JobTrace`); None when Ray knows no such
        job (an empty answer)."""
        j = _d(await self._call("GET", f"/api/jobs/{quote(job_id, safe='')}"))
        if not j:
            return None
        agent = _text(j.get("driver_agent_http_address"), 300)
        host = (urlsplit(agent).hostname or "") if agent.startswith("http") else ""
        tag = _text(_d(j.get("metadata")).get(RUN_TAG_KEY), 64)
        return JobTrace(submission_id=_text(j.get("submission_id"), 200) or job_id,
                        ray_job_id=_text(j.get("job_id"), 64), driver_ip=host,
                        run_tag=tag if RUN_TAG_RE.fullmatch(tag) else "")

    async def live_actors(self, ray_job_id: str) -> int | None:
        """How many actors of the job with Ray's id `ray_job_id` (`JobTrace.ray_job_id`) Ray has not
        marked dead yet (alive, being created, restarting): what may still take a card after
        the job itself ended. 0 for "" (a driver that never started has no actor); None when
        the answer is not the state API's."""
        if not ray_job_id:
            return 0
        rows = state_api_rows(await self._call(
            "GET", "/api/v0/actors?limit=10000&filter_keys=job_id&filter_predicates=%3D"
                   f"&filter_values={quote(ray_job_id, safe='')}"))
        return None if rows is None else sum(1 for r in rows if _d(r).get("state") != "DEAD")

    async def job_logs(self, job_id: str, tail_chars: int = LOGS_MAX) -> str:
        """The end of a job's driver log (at most `tail_chars` characters); the whole
        answer is still bounded by HTTP_BODY_MAX."""
        doc = await self._call("GET", f"/api/jobs/{quote(job_id, safe='')}/logs")
        logs = _text(_d(doc).get("logs"), HTTP_BODY_MAX)
        return logs[-tail_chars:] if tail_chars > 0 else ""

    async def submit(self, entrypoint: str, submission_id: str | None = None,
                     runtime_env: dict[str, Any] | None = None, metadata: dict[str, str] | None = None) -> str:
        """Submit a job; its submission id. The body is JobSubmissionClient's: the
        JobSubmitRequest fields with None-valued keys left out (metadata defaults to
        {} as there: an HTTP address has no default metadata)."""
        body: dict[str, Any] = {"entrypoint": entrypoint, "submission_id": submission_id,
                                "runtime_env": dict(runtime_env or {}), "metadata": dict(metadata or {})}
        body = {k: v for k, v in body.items() if v is not None}
        doc = _d(await self._call("POST", "/api/jobs/", body))
        sid = _text(doc.get("submission_id")) or _text(doc.get("job_id"))
        if not sid:
            raise RayApiError("Ray accepted the job but its answer names no submission id")
        return sid

    async def stop(self, job_id: str) -> bool:
        """Ask Ray to stop a job; whether it was stopped (False: already ended)."""
        doc = await self._call("POST", f"/api/jobs/{quote(job_id, safe='')}/stop")
        return _d(doc).get("stopped") is True

    async def status(self, job_id: str) -> str:
        """A job's status word; "UNKNOWN" when Ray does not know it."""
        j = await self.get_job(job_id)
        return j.status if j is not None else JobStatus.UNKNOWN


def client_for_url(url: str, timeout: float = 30.0) -> RayJobClient:
    """A client for `http://host:port` (what `Remote.dashboard_url` returns)."""
    parts = urlsplit(url)
    if parts.port is None:
        raise ValueError(f"no port in dashboard URL {url!r}")
    return RayJobClient(parts.port, parts.hostname or "127.0.0.1", timeout)
