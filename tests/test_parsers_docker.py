"""docker inspect / docker ps parsers on real captured output (tests/data/samples/docker)
and on what a node really answers: no such container, no docker, daemon down, cut-off
JSON, ANSI colour, full `docker inspect` arrays."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.core.parsers.docker import container_from_ps, parse_docker_inspect, parse_docker_ps_json
from tui.core.state import ContainerState
from tests.samples import FUZZ, read_sample, samples_dir


INSPECT = "docker/01_docker_inspect_State_samples_REAL.json.txt"
PS = "docker/02_docker_ps_format_json_REAL.txt"
STATUSES = {
    "created", "running", "paused", "restarting", "removing", "exited", "dead",
    "absent", "unknown", "unavailable",
}


def inspect_blocks() -> dict[str, str]:
    """The sample's blocks (A)..(F), keyed by letter."""
    text = read_sample(INSPECT)
    parts = re.split(r"^# \(([A-F])\)", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def full_inspect(state: dict, *, name: str = "train-rl", image: str = "mt/verl:latest") -> str:
    """A `docker inspect` answer as Docker prints it: a JSON array, 4-space indent."""
    return json.dumps(
        [{
            "Id": "c0ffee" * 10 + "abcd",
            "Name": f"/{name}",
            "Image": "sha256:" + "1" * 64,
            "State": state,
            "Config": {"Image": image, "Cmd": ["sleep", "infinity"]},
        }],
        indent=4,
    ) + "\n"


# ------------------------------------------------------------------ the real samples


def test_sample_has_all_blocks() -> None:
    assert set(inspect_blocks()) == set("ABCDEF")


def test_sample_a_running() -> None:
    st_ = parse_docker_inspect(inspect_blocks()["A"], "train-rl")
    assert st_.status == "running"
    assert st_.started_at == "2017-08-04T08:52:17.813347421Z"
    assert (st_.exit_code, st_.oom_killed, st_.error) == (0, False, None)


def test_sample_b_restarting_although_running_true() -> None:
    st_ = parse_docker_inspect(inspect_blocks()["B"], "train-rl")
    assert st_.status == "restarting"  # Running is true too: Status is the truth
    assert st_.started_at == "2016-02-17T14:01:45.304670287Z"


def test_sample_c_dead_137() -> None:
    st_ = parse_docker_inspect(inspect_blocks()["C"], "train-rl")
    assert (st_.status, st_.exit_code, st_.oom_killed) == ("dead", 137, False)


def test_sample_d_paused_without_status_field() -> None:
    st_ = parse_docker_inspect(inspect_blocks()["D"], "train-rl")
    assert st_.status == "paused"  # Docker 1.8: derived from Paused (Running is also true)
    assert st_.started_at == "2015-09-23T03:32:26.454832197Z"


def test_sample_e_running_with_health() -> None:
    st_ = parse_docker_inspect(inspect_blocks()["E"], "train-rl")
    assert st_.status == "running"  # not the Health "Status": "healthy"
    assert st_.exit_code == 0


def test_sample_f_oom_in_full_inspect() -> None:
    assert '"OOMKilled": true' in inspect_blocks()["F"]
    text = full_inspect({
        "Status": "exited", "Running": False, "Paused": False, "Restarting": False,
        "OOMKilled": True, "Dead": False, "Pid": 0, "ExitCode": 1, "Error": "",
        "StartedAt": "2024-01-01T00:00:00Z", "FinishedAt": "2024-01-01T00:05:00Z",
    })
    st_ = parse_docker_inspect(text, "train-rl")
    assert (st_.status, st_.exit_code, st_.oom_killed, st_.image) == ("exited", 1, True, "mt/verl:latest")


def test_whole_sample_file_reads_first_state() -> None:
    st_ = parse_docker_inspect(read_sample(INSPECT, strip_source=False), "x")
    assert st_.status == "running"


def test_docker_ps_sample() -> None:
    rows = parse_docker_ps_json(read_sample(PS, strip_source=False))
    assert [r["Names"] for r in rows] == ["bar", "foo"]  # 2nd line has trailing junk "."
    assert rows[0]["State"] == "running" and rows[0]["Image"] == "nginx:alpine"
    assert rows[0]["Labels"] == "maintainer=NGINX Docker Maintainers <docker-maint@nginx.com>"
    assert rows[1]["Status"] == "Up 12 seconds" and rows[1]["Size"] == "0B"
    st_ = container_from_ps(rows, "foo")
    assert (st_.status, st_.image) == ("running", "nginx:alpine")
    assert container_from_ps(rows, "train-rl").status == "absent"


# -------------------------------------------------------------- full inspect output


@pytest.mark.parametrize("status", ["created", "running", "paused", "restarting", "removing", "exited", "dead"])
def test_every_docker_status(status: str) -> None:
    st_ = parse_docker_inspect(full_inspect({"Status": status, "ExitCode": 0}), "train-rl")
    assert st_.status == status and st_.image == "mt/verl:latest"


def test_created_never_started() -> None:
    st_ = parse_docker_inspect(
        full_inspect({"Status": "created", "StartedAt": "0001-01-01T00:00:00Z", "ExitCode": 0}), "train-rl"
    )
    assert st_.status == "created" and st_.started_at is None


def test_state_error_is_reported_even_if_it_says_not_found() -> None:
    err = 'OCI runtime create failed: exec: "slep": executable file not found in $PATH: unknown'
    st_ = parse_docker_inspect(full_inspect({"Status": "created", "ExitCode": 127, "Error": err}), "train-rl")
    assert (st_.status, st_.exit_code, st_.error) == ("created", 127, err)


def test_picks_the_named_container() -> None:
    a = json.loads(full_inspect({"Status": "exited"}, name="other"))[0]
    b = json.loads(full_inspect({"Status": "running"}, name="train-rl"))[0]
    st_ = parse_docker_inspect(json.dumps([a, b]), "train-rl")
    assert st_.status == "running"


def test_unknown_status_word() -> None:
    st_ = parse_docker_inspect(full_inspect({"Status": "hibernating"}), "train-rl")
    assert st_.status == "unknown" and "hibernating" in (st_.error or "")


def test_ansi_and_crlf() -> None:
    text = "\x1b[0m" + full_inspect({"Status": "running"}).replace("\n", "\r\n")
    assert parse_docker_inspect(text, "train-rl").status == "running"


# ------------------------------------------------------------------ failure answers


@pytest.mark.parametrize(
    "text",
    [
        "[]\nError: No such container: train-rl\n",
        "Error: No such container: train-rl\n",
        "[]\n",
        "Error response from daemon: No such container: train-rl\n",
        "Error: No such object: train-rl\n",
    ],
)
def test_absent(text: str) -> None:
    st_ = parse_docker_inspect(text, "train-rl", rc=1)
    assert st_.status == "absent" and st_.name == "train-rl"


@pytest.mark.parametrize(
    "text",
    [
        "sh: 1: docker: not found\n",
        "bash: docker: command not found\n",
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
    ],
)
def test_unavailable(text: str) -> None:
    st_ = parse_docker_inspect(text, "train-rl", rc=127)
    assert st_.status == "unavailable" and st_.error == text.strip()


def test_permission_denied_is_unknown_with_message() -> None:
    text = ("permission denied while trying to connect to the Docker daemon socket at "
            "unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.24/containers/json\"\n")
    st_ = parse_docker_inspect(text, "train-rl", rc=1)
    assert st_.status == "unknown" and "permission denied" in (st_.error or "")


@pytest.mark.parametrize("text", ["", "\n", "   "])
def test_empty(text: str) -> None:
    st_ = parse_docker_inspect(text, "train-rl", rc=255)
    assert st_.status == "unknown" and "exit code 255" in (st_.error or "")
    assert parse_docker_ps_json(text) == []


def test_truncated_inspect_still_reads_status() -> None:
    text = full_inspect({"Status": "running", "Running": True, "ExitCode": 0, "OOMKilled": False, "Pid": 5})
    cut = text.index('"Pid"')
    st_ = parse_docker_inspect(text[:cut], "train-rl")
    assert st_.status == "running" and st_.error == "docker inspect output was incomplete"


def test_truncated_before_status_is_unknown() -> None:
    text = full_inspect({"Running": True, "Status": "running"})
    st_ = parse_docker_inspect(text[: text.index('"Running"')], "train-rl")
    assert st_.status == "unknown" and st_.error


# --------------------------------------------------------------------------- fuzzing


@FUZZ
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    st_ = parse_docker_inspect(text, "train-rl")
    assert isinstance(st_, ContainerState) and st_.status in STATUSES
    assert isinstance(parse_docker_ps_json(text), list)


@FUZZ
@given(st.data())
def test_inspect_prefix_never_lies(data: st.DataObject) -> None:
    raw = full_inspect({
        "Status": "exited", "Running": False, "Paused": False, "Restarting": False, "OOMKilled": True,
        "Dead": False, "Pid": 0, "ExitCode": 137, "Error": "", "StartedAt": "2024-01-01T00:00:00Z",
        "Health": {"Status": "unhealthy"},
    }).encode()
    cut = data.draw(st.integers(0, len(raw)))
    st_ = parse_docker_inspect(raw[:cut].decode("utf-8", errors="ignore"), "train-rl")
    assert st_.status in {"exited", "unknown", "created"}  # "created": a prefix cut before StartedAt
    assert st_.exit_code in (None, 137)


@FUZZ
@given(st.data())
def test_sample_prefixes(data: st.DataObject) -> None:
    for rel in (INSPECT, PS):
        raw = (samples_dir() / rel).read_bytes()
        cut = data.draw(st.integers(0, len(raw)))
        text = raw[:cut].decode("utf-8", errors="ignore")
        assert parse_docker_inspect(text, "bar").status in STATUSES
        assert len(parse_docker_ps_json(text)) <= 2


def test_container_from_ps_exited_and_multiple_names() -> None:
    line = json.dumps({"Names": "train-rl,alias", "State": "exited", "Status": "Exited (137) 5 seconds ago",
                       "Image": "mt/verl:latest"})
    st_ = container_from_ps(parse_docker_ps_json("$ docker ps -a --format json\n" + line + "\n"), "train-rl")
    assert (st_.status, st_.exit_code, st_.image) == ("exited", 137, "mt/verl:latest")
    array = parse_docker_ps_json(json.dumps([{"Names": "a"}, {"Names": "b"}, 3]))
    assert [r["Names"] for r in array] == ["a", "b"]
