"""Parsers for `docker inspect --type container NAME` and `docker ps --format '{{json .}}'`.

Every node runs the training inside one container (`train-rl` in the seed), and the
console must tell "not created yet" from "created but stopped" from "running" from
"Docker is not there at all", because each calls for a different action. `State.Status`
is the only field that tells them apart reliably (`Running` is also true while
restarting or paused), so it is the truth; the booleans are used only for old Docker
(1.8) that printed no `Status`.

Nothing here raises: unreadable output gives `ContainerState(status="unknown",
error=...)`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tui.core.parsers.ansi import strip_ansi
from tui.core.state import ContainerState

__all__ = ["parse_docker_inspect", "parse_docker_ps_json", "container_from_ps"]

_DOCKER_STATUSES = {"created", "running", "paused", "restarting", "removing", "exited", "dead"}
_NEVER = "0001-01-01T00:00:00Z"

_NO_DOCKER_RE = re.compile(
    r"docker: (?:command )?not found|command not found: docker|docker: No such file or directory"
    r"|exec: \"docker\": executable file not found",
    re.IGNORECASE,
)
_DAEMON_DOWN_RE = re.compile(
    r"Cannot connect to the Docker daemon|Is the docker daemon running|"
    r"error during connect|docker daemon is not running",
    re.IGNORECASE,
)
_ABSENT_RE = re.compile(r"No such (?:container|object)", re.IGNORECASE)
_STATE_START_RE = re.compile(r'"State"\s*:\s*\{')
# A value must be followed by a delimiter: at the cut end of a capture "137" may be "1".
_PAIR_RE = re.compile(r'"(\w+)"\s*:\s*("(?:[^"\\\n]|\\.)*"|(?:true|false|null|-?[0-9]+(?:\.[0-9]+)?)(?=[\s,}]))')


def _first_message(clean: str) -> str:
    for line in clean.split("\n"):
        if line.strip():
            return line.strip()[:500]
    return ""


def _status_from_state(state: dict[str, Any]) -> tuple[str, str | None]:
    """(status, error) from a State object; derives a status for pre-1.9 Docker."""
    raw = state.get("Status")
    if isinstance(raw, str) and raw.strip():
        status = raw.strip().casefold()
        if status in _DOCKER_STATUSES:
            return status, None
        return "unknown", f"unrecognised container status {raw.strip()!r}"
    # Old Docker: no Status. Order matters: a paused or restarting container is also Running.
    if state.get("Dead") is True:
        return "dead", None
    if state.get("Restarting") is True:
        return "restarting", None
    if state.get("Paused") is True:
        return "paused", None
    if state.get("Running") is True:
        return "running", None
    if state.get("Running") is False:
        started = state.get("StartedAt")
        if isinstance(started, str) and started and started != _NEVER:
            return "exited", None
        return "created", None
    return "unknown", "docker inspect State has no Status"


def _state_to_container(name: str, state: dict[str, Any], config_image: str | None) -> ContainerState:
    status, error = _status_from_state(state)
    started = state.get("StartedAt")
    exit_code = state.get("ExitCode")
    oom = state.get("OOMKilled")
    state_error = state.get("Error")
    if not error and isinstance(state_error, str) and state_error.strip():
        error = state_error.strip()
    return ContainerState(
        name=name,
        status=status,  # type: ignore[arg-type]  # checked against ContainerStatus above
        image=config_image,
        started_at=started if isinstance(started, str) and started and started != _NEVER else None,
        exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        oom_killed=oom if isinstance(oom, bool) else None,
        error=error,
    )


def _pick(objects: list[Any], name: str) -> dict[str, Any] | None:
    """The inspected container named `name` (Docker prefixes names with "/")."""
    dicts = [o for o in objects if isinstance(o, dict)]
    wanted = name.lstrip("/")
    for obj in dicts:
        obj_name = obj.get("Name")
        obj_id = obj.get("Id")
        if isinstance(obj_name, str) and obj_name.lstrip("/") == wanted:
            return obj
        if isinstance(obj_id, str) and wanted and obj_id.startswith(wanted):
            return obj
    return dicts[0] if dicts else None


def _image(obj: dict[str, Any]) -> str | None:
    config = obj.get("Config")
    if isinstance(config, dict) and isinstance(config.get("Image"), str) and config["Image"]:
        return str(config["Image"])
    image = obj.get("Image")
    return image if isinstance(image, str) and image else None


def _scan_state(clean: str, start: int) -> dict[str, Any]:
    """Key/value pairs of a State object read with a regex: for fragments and cut-off
    output where the JSON as a whole does not decode."""
    body = clean[start:]
    depth_end = body.find("}")
    nested = body.find("{")
    if depth_end >= 0 and (nested < 0 or depth_end < nested):
        body = body[:depth_end]
    elif nested >= 0:
        body = body[:nested]  # stop before Health etc.: its "Status" is not the container's
    state: dict[str, Any] = {}
    for key, raw in _PAIR_RE.findall(body):
        if key in state:
            continue
        try:
            state[key] = json.loads(raw)
        except ValueError:
            continue
    return state


def parse_docker_inspect(text: str, name: str, rc: int | None = None) -> ContainerState:
    """Turn `docker inspect --type container NAME` output (stdout+stderr) into a
    ContainerState; never raises.

    `absent`: "No such container"/"No such object" or an empty `[]`. `unavailable`:
    no docker binary, or its daemon does not answer. `rc` (the exit code) is only used
    to word errors. A bare `"State": {...}` fragment is accepted too (and cut-off
    output is read as far as it goes), so a partial capture still shows the status.
    """
    try:
        return _parse_docker_inspect(text, name, rc)
    except Exception as exc:  # noqa: BLE001 - defensive: a parser never raises
        return ContainerState(name=name, status="unknown", error=f"docker inspect parser failed: {exc!r}")


def _parse_docker_inspect(text: str, name: str, rc: int | None) -> ContainerState:
    clean = strip_ansi(text)
    match = re.search(r"^[ \t]*[\[{]", clean, re.MULTILINE)
    value: Any = None
    if match:
        try:
            value, _ = json.JSONDecoder().raw_decode(clean, match.end() - 1)
        except ValueError:
            value = None
    if isinstance(value, list):
        if not value:
            return ContainerState(name=name, status="absent", error=None)
        obj = _pick(value, name)
        if obj is not None and isinstance(obj.get("State"), dict):
            return _state_to_container(name, obj["State"], _image(obj))
    elif isinstance(value, dict):
        if isinstance(value.get("State"), dict):
            return _state_to_container(name, value["State"], _image(value))
        if "Status" in value or "Running" in value:
            return _state_to_container(name, value, None)
    # Only now look for error messages: a decoded container's State.Error may itself say
    # "executable file not found" (an entrypoint that does not exist), which is not ours.
    if _NO_DOCKER_RE.search(clean) or _DAEMON_DOWN_RE.search(clean):
        return ContainerState(name=name, status="unavailable", error=_first_message(clean))
    if _ABSENT_RE.search(clean):
        return ContainerState(name=name, status="absent", error=None)
    state_start = _STATE_START_RE.search(clean)
    if state_start:
        fragment_start = state_start.end() - 1
        try:
            state, _ = json.JSONDecoder().raw_decode(clean, fragment_start)
            partial = False
        except ValueError:
            state, partial = _scan_state(clean, fragment_start + 1), True
        if isinstance(state, dict) and state:
            result = _state_to_container(name, state, None)
            if partial and result.error is None:
                result.error = "docker inspect output was incomplete"
            return result
    if not clean.strip():
        detail = f" (exit code {rc})" if rc not in (None, 0) else ""
        return ContainerState(name=name, status="unknown", error=f"docker inspect printed nothing{detail}")
    message = _first_message(clean)
    prefix = f"exit code {rc}: " if rc not in (None, 0) else ""
    return ContainerState(name=name, status="unknown", error=f"{prefix}unreadable docker inspect output: {message}")


def parse_docker_ps_json(text: str) -> list[dict[str, Any]]:
    """Rows of `docker ps --format '{{json .}}'` (one JSON object per line); never raises.

    All values are strings in Docker's output and are kept as given. Lines that are
    not JSON (a prompt, a comment, a cut-off last line) are skipped; trailing junk
    after an object is ignored; a JSON array line (compose-cli's variant) contributes
    its objects.
    """
    rows: list[dict[str, Any]] = []
    try:
        decoder = json.JSONDecoder()
        for line in strip_ansi(text).split("\n"):
            stripped = line.strip()
            if not stripped or stripped[0] not in "[{":
                continue
            try:
                value, _ = decoder.raw_decode(stripped)
            except ValueError:
                continue
            if isinstance(value, dict):
                rows.append(value)
            elif isinstance(value, list):
                rows.extend(v for v in value if isinstance(v, dict))
    except Exception:  # noqa: BLE001 - keep the rows read so far
        return rows
    return rows


_PS_EXIT_RE = re.compile(r"Exited \((-?[0-9]{1,9})\)")


def container_from_ps(rows: list[dict[str, Any]], name: str) -> ContainerState:
    """The container `name` from `docker ps -a --format '{{json .}}'` rows.

    A cheaper fallback when `docker inspect` is not usable: `State` is the same
    word as inspect's `State.Status`; `Status` ("Exited (137) 5 seconds ago") gives
    the exit code. A name absent from the rows is `absent` (the caller must have
    listed with `-a`, or stopped containers look absent).
    """
    wanted = name.lstrip("/")
    for row in rows:
        names = str(row.get("Names", ""))
        if wanted not in [n.strip().lstrip("/") for n in names.split(",")]:
            continue
        state = str(row.get("State", "")).strip().casefold()
        status = state if state in _DOCKER_STATUSES else "unknown"
        exit_match = _PS_EXIT_RE.search(str(row.get("Status", "")))
        image = row.get("Image")
        return ContainerState(
            name=name,
            status=status,  # type: ignore[arg-type]
            image=str(image) if image else None,
            exit_code=int(exit_match.group(1)) if exit_match else None,
            error=None if status != "unknown" else f"unrecognised container state {state!r}",
        )
    return ContainerState(name=name, status="absent")
