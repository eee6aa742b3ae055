"""Probes: SSH command output and the Ray dashboard API turned into typed state.

* Cards and container: ONE long-lived `sh` loop per node (`sampler_script`) takes the
  card tool's output (`parsers.detect.GPU_PROBE_SCRIPT`, which finds mthreads-gmi or
  nvidia-smi and runs only their fixed queries) and `docker inspect` of the profile's
  container every refresh interval, between marker lines. A login shell per sample
  would cost 120-160 ms with a heavy ~/.bashrc (LAB.md); the loop starts one shell per
  node for the whole session. If it dies it is restarted.
  The node sends only what changed (issue 37; the protocol is under `sampler_script`):
  its first sample in full, then nothing for a sample that repeats but for the tools'
  own timestamps (a heartbeat of one marker line every few such samples, so a silent
  node is told from a hung one), and for a changed one only its changed lines
  (`@@sample-delta`): a changed card is the lines of that card. The console keeps the
  node's whole sample (the last full one plus the changes: `SampleStream`) and parses
  it whole, as before; a new stream (a reconnect) starts with a full sample.
  The container is inspected when Docker reports an event of it (a `docker events`
  watcher in the loop's background), not every sample: `docker inspect` was two thirds
  of a sample's cost on the node (`_container_watch`).
* Ray: through the head's SSH connection, a local port forward to the dashboard (so it
  never needs to listen beyond the head's loopback) and its HTTP API
  (`/api/v0/nodes?detail=1`, `/api/cluster_status`, `/api/jobs/`), read with
  `rayapi` (a few lines of asyncio, bounded; no `import ray`, no aiohttp on the start-up
  path). One missed dashboard poll while the GCS listens keeps the last good answer
  (`ClusterMonitor.RAY_MISSES_KEPT`). When the
  dashboard does not answer, a direct-tcpip probe of the GCS port tells "Ray not
  running" apart from "dashboard off"; only in the latter case does `ray status` run
  over SSH (slow: a Python start) and its text get parsed.
* `ClusterMonitor` keeps a `ClusterState` current and tells subscribers (plain
  callbacks or asyncio queues; no Textual here). A node whose SSH drops is shown down
  at once (the session reports it), a silent one after a liveness check; the others
  keep updating, and it comes back by itself.
* `snapshot(profile)` is the one-shot version for `rlconsole status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import secrets
import shlex
import time
from typing import Any, Callable

from tui.core.linecap import LineCapper
from tui.core.parsers.detect import GPU_PROBE_SCRIPT, parse_probe_output
from tui.core.parsers.docker import parse_docker_inspect
from tui.core.parsers.raystatus import parse_ray_status
from tui.core.profile import Node, Profile
from tui.core.rayapi import (
    RAY_MESSAGE_MAX,
    _d,
    _l,
    _num,
    _pair_first,
    _text,
    dashboard_connect_host,
    http_get_json,
    jobs_from_api,
)
from tui.core.ssh import CommandTimeout, NodeDown, NodeSession, SessionPool, SshError
from tui.core.state import ClusterState, ContainerState, GpuReport, JobState, JobStatus, NodeState, RayNodeState, RayState
from tui.core.transport import open_pool
from tui.core.waits import kicked_or_timeout

log = logging.getLogger("rlconsole.probes")

__all__ = [
    "ClusterMonitor",
    "container_probe_command",
    "parse_sample",
    "probe_node",
    "probe_ray",
    "sampler_script",
    "snapshot",
]

SAMPLE_BEGIN = "@@sample-begin"
SAMPLE_END = "@@sample-end"
DOCKER_BEGIN = "@@docker-begin"
DOCKER_RC = "@@docker-rc="


# --------------------------------------------------------------------------- node probes


def container_probe_command(profile: Profile) -> str | None:
    """`docker inspect` of the profile's container on the host; None when the SSH
    endpoint already is the container (`access: direct`)."""
    c = profile.container
    if c.access != "docker-exec":
        return None
    return shlex.join([*c.docker, "inspect", "--type", "container", c.name])


CONTAINER_EVENTS: tuple[str, ...] = ("create", "start", "restart", "die", "kill", "oom", "stop", "pause",
                                     "unpause", "destroy", "rename", "update", "health_status")
"""The container events after which `docker inspect` may say something new: its state,
exit code, health, name or limits. Not `exec_*` (a health check or the console's own
`docker exec` runs one every few seconds and changes nothing the console shows)."""

EVENTS_WATCH_S = 60
"""How long one `docker events` watcher runs (`--until`, by the node's clock) before
the loop starts the next and inspects once more: it ends by itself, so one the loop
lost (killed with SIGKILL) outlives it by at most this long, and a change the watcher
missed (the daemon restarted) is seen within it."""


def container_events_command(profile: Profile) -> str | None:
    """`docker events` for the profile's container, one line per event that may change
    what `container_probe_command` prints (`--until` is added by the loop); None as there."""
    c = profile.container
    if c.access != "docker-exec":
        return None
    filters = [f"container={c.name}", "type=container", *(f"event={e}" for e in CONTAINER_EVENTS)]
    return shlex.join([*c.docker, "events", *(a for f in filters for a in ("--filter", f)), "--format", "e"])


def _one_sample(profile: Profile, end: bool = True, cached_docker: bool = False) -> str:
    """One sample's commands. With `cached_docker`, the container's part is what the
    loop's `rlc_inspect` read last (`rlc_dko`, `rlc_dkr`), not a new `docker inspect`."""
    parts = [f"echo '{SAMPLE_BEGIN}'", GPU_PROBE_SCRIPT.rstrip("\n")]
    docker = container_probe_command(profile)
    if docker:
        out, rc = ("rlc_dko", "rlc_dkr") if cached_docker else ("out", "rc")
        parts += [f"echo '{DOCKER_BEGIN}'"]
        if not cached_docker:
            parts += [f"out=$({docker} 2>&1); rc=$?"]
        parts += [
            f'[ -n "${out}" ] && printf \'%s\\n\' "${out}"',
            f'echo "{DOCKER_RC}${rc}"',
        ]
    if end:
        parts.append(f"echo '{SAMPLE_END}'")
    return "\n".join(parts) + "\n"


def _container_watch(profile: Profile) -> str:
    """Shell functions for the loop: `rlc_watch` decides whether this sample inspects
    the container (`rlc_due`), `rlc_inspect` does it, into `rlc_dko`/`rlc_dkr`.

    Why: `docker inspect` was two thirds of a sample's cost on the node (the docker CLI
    alone is ~20 ms of CPU, every refresh, on every node), for a container whose state
    changes a few times in a run. A `docker events` watcher in the background appends a
    line to a private file per event; the loop inspects when the file is not empty, when
    a watcher (re)starts (that sample and the next, so a change while it connects is
    seen) and on every sample while there is no watcher. A watcher that fails before its
    `--until` (no `events` in this docker, no daemon) is retried a watch later; until
    then every sample inspects, as the loop did before. No epoch clock or no `mktemp`:
    every sample inspects. Both functions run in the loop's own shell, never in a `$()`.
    Where `/dev/fd` reaches the file (Linux) it is unlinked as soon as it is open: nothing
    is left on the node however the loop ends; elsewhere the loop's EXIT trap removes it."""
    docker = container_probe_command(profile)
    events = container_events_command(profile)
    assert docker and events
    return (
        "rlc_dko=; rlc_dkr=; rlc_evp=; rlc_evu=0; rlc_evr=0; rlc_dn=0; rlc_evn=\n"
        # The traps before the file, and the name the EXIT trap removes (`rlc_evn`) set by
        # mktemp's own command: a loop told to end while mktemp runs leaves nothing (the
        # shell runs the trap after that command, the name already set). Only a SIGKILL
        # before the unlink below can leave the file; no trap runs for that one.
        "trap '[ -n \"$rlc_evn\" ] && rm -f \"$rlc_evn\"; [ -n \"$rlc_evp\" ] && kill \"$rlc_evp\" 2>/dev/null' EXIT\n"
        "trap 'exit 0' HUP INT TERM PIPE\n"
        'rlc_evn=$(mktemp "${TMPDIR:-/tmp}/rlconsole-events.XXXXXX" 2>/dev/null) || rlc_evn=\n'
        "rlc_evf=$rlc_evn\n"
        # Linux: the file kept open on fd 9 and unlinked at once, so a loop killed with
        # SIGKILL leaves nothing behind; read and truncated through /dev/fd/9 (the kernel
        # resolves it for the process that opens it, in any PID namespace)
        'if [ -n "$rlc_evf" ] && [ -w "$rlc_evf" ] && [ -d /dev/fd ]; then\n'
        '  exec 9>>"$rlc_evf"\n'
        '  if [ /dev/fd/9 -ef "$rlc_evf" ] 2>/dev/null && rm -f "$rlc_evf"; then rlc_evf=/dev/fd/9; rlc_evn=; fi\n'
        "fi\n"
        f"rlc_inspect() {{\nrlc_dko=$({docker} 2>&1); rlc_dkr=$?\n}}\n"
        "rlc_watch() {\n"
        "rlc_due=\n"
        'case "$rlc_n" in *[!0-9]*|\'\') rlc_due=1; return ;; esac\n'
        'if [ -n "$rlc_evp" ]; then\n'
        '  if [ "$rlc_n" -le "$rlc_evu" ] && kill -0 "$rlc_evp" 2>/dev/null; then\n'
        '    if [ -s "$rlc_evf" ]; then : >"$rlc_evf"; rlc_due=1; fi\n'
        "  else\n"
        '    kill "$rlc_evp" 2>/dev/null; wait "$rlc_evp"; rlc_rc=$?\n'
        "    rlc_evp=; rlc_due=1\n"
        '    if [ "$rlc_rc" -ne 0 ] && [ "$rlc_n" -lt "$rlc_evu" ]; then rlc_evr=$((rlc_n + '
        f"{EVENTS_WATCH_S})); fi\n"
        "  fi\n"
        "fi\n"
        'if [ -z "$rlc_evp" ] && [ -n "$rlc_evf" ] && [ "$rlc_n" -ge "$rlc_evr" ]; then\n'
        '  : >"$rlc_evf"\n'
        f"  rlc_evu=$((rlc_n + {EVENTS_WATCH_S}))\n"
        f'  {events} --until "$rlc_evu" </dev/null >>"$rlc_evf" 2>/dev/null &\n'
        "  rlc_evp=$!; rlc_dn=2\n"
        "fi\n"
        '[ -z "$rlc_evp" ] && rlc_due=1\n'
        'if [ "$rlc_dn" -gt 0 ]; then rlc_dn=$((rlc_dn - 1)); rlc_due=1; fi\n'
        "}\n"
    )


SAMPLE_DELTA = "@@sample-delta "
SPLICE = "@@splice "

VOLATILE_ERES: tuple[str, ...] = (
    "^[A-Z][a-z][a-z] [A-Z][a-z][a-z] [ 0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] [0-9][0-9][0-9][0-9]$",
    '^[ \t]*"Timestamp"[ \t]*:',
)
"""`_VOLATILE` (the card tools' own timestamps) as POSIX EREs for the node's awk, which
decides there what `sample_key` decides here: a line matching one of these changes in
every sample and is not a change of the node (tests/test_sampler_delta.py checks that
both agree line by line on the tools' real output)."""

DELTA_AWK = """
function vol(s) { return s ~ /VOLATILE_0/ || s ~ /VOLATILE_1/ }
function same(a, b) { return (a "") == (b "") || (vol(a) && vol(b)) }
function add(a, d, b, k,   x) {
    ns++; SA[ns] = a - 1; SD[ns] = d; SB[ns] = b; SN[ns] = k; size += 24
    for (x = b; x < b + k; x++) size += length(C[x]) + 1
}
function run(a, b, len,   i, j) {
    i = 0
    while (i < len) {
        if ((P[a + i] "") == (C[b + i] "")) { i++; continue }
        j = i
        while (j < len && (P[a + j] "") != (C[b + j] "")) { if (!same(P[a + j], C[b + j])) real = 1; j++ }
        add(a + i, j - i, b + i, j - i)
        i = j
    }
}
function sec(a0, a1, b0, b1,   la, lb, p, s) {
    la = a1 - a0; lb = b1 - b0
    if (la == lb) { run(a0, b0, la); return }
    real = 1
    p = 0
    while (p < la && p < lb && same(P[a0 + p], C[b0 + p])) p++
    s = 0
    while (s < la - p && s < lb - p && same(P[a1 - 1 - s], C[b1 - 1 - s])) s++
    run(a0, b0, p)
    add(a0 + p, la - p - s, b0 + p, lb - p - s)
    run(a1 - s, b1 - s, s)
}
!cur && $0 == sep { cur = 1; next }
!cur { P[++n] = $0; next }
{ C[++m] = $0; full += length($0) + 1 }
END {
    np = 1; PS[1] = 1
    for (i = 2; i <= n; i++) if (substr(P[i], 1, 2) == "@@") PS[++np] = i
    nc = 1; CS[1] = 1
    for (i = 2; i <= m; i++) if (substr(C[i], 1, 2) == "@@") CS[++nc] = i
    if (np != nc) np = nc = 1
    PS[np + 1] = n + 1; CS[nc + 1] = m + 1
    for (k = 1; k <= np; k++) sec(PS[k], PS[k + 1], CS[k], CS[k + 1])
    if (!real) exit 0
    if (size >= full) { for (i = 1; i <= m; i++) print C[i]; exit 0 }
    print "SAMPLE_DELTA" ns " " m
    for (k = 1; k <= ns; k++) {
        print "SPLICE" SA[k] " " SD[k] " " SN[k]
        for (i = SB[k]; i < SB[k] + SN[k]; i++) print C[i]
    }
}
""".replace("VOLATILE_0", VOLATILE_ERES[0]).replace("VOLATILE_1", VOLATILE_ERES[1]) \
    .replace("SAMPLE_DELTA", SAMPLE_DELTA).replace("SPLICE", SPLICE)
"""The node side of the delta protocol: POSIX awk (mawk, gawk, busybox and BWK awk alike:
no extensions, string comparison forced with `""`), one run per sample. Its input is the
sample last sent, a separator line, and the sample now; it prints nothing when the two
differ only in the tools' timestamps, else the splices that make the one the other,
section by section (a section starts at a `@@` marker line, so a card tool's changed
card is its own lines, and a changed process table does not shift the JSON's lines),
or the whole sample when that is no longer. Each splice replaces `SD` lines of the
last sample from line `SA` (0-based) with the `SN` lines that follow its header."""


def sampler_script(profile: Profile, interval: float | None = None, *, deltas: bool = True,
                   heartbeat_s: int = 0) -> str:
    """The per-node loop: one sample (cards, then container) every `interval` s.
    With interval 0, a single sample (for one-shot status).

    What the loop sends (`deltas`, the default; the console's side is `SampleStream`):

    * its first sample in full: `@@sample-begin` ... `@@sample-end`, as a one-shot sample;
    * for a sample that repeats the last one sent but for the tools' timestamps: nothing,
      or a heartbeat when the node has sent nothing for `heartbeat_s` seconds (whole
      seconds by its clock, `date +%s`; 0, or a `date` without `%s`: every such sample):
      the end marker alone (`@@sample-end`, 13 bytes), i.e. an empty message;
    * for a changed one: `@@sample-delta NS M`, NS splices (`@@splice A D N` and N lines:
      replace D lines from line A of the last sample sent), the end marker; M is the
      sample's line count after. Or the whole sample, when the splices would not be shorter.

    The node keeps the last sample it sent (a shell variable) and runs awk (`DELTA_AWK`,
    POSIX) once per sample to compare; a node without awk, or where awk fails, sends
    every sample in full, as `deltas=False` does (the loop before issue 37).

    The container's part of each sample is the last `docker inspect`, run again only on
    the container's events (`_container_watch`); `deltas=False` inspects every sample."""
    body = _one_sample(profile)
    if not interval:
        return body
    if not deltas:
        return f"while :; do\n{body}sleep {interval:g} || exit 0\ndone\n"
    sep = f"@@sep-{secrets.token_hex(8)}"  # not a line any tool prints: it splits awk's input
    watch = container_probe_command(profile) is not None
    return (
        (_container_watch(profile) if watch else "")
        + f"rlc_sample() {{\n{_one_sample(profile, end=False, cached_docker=watch)}}}\n"
        f"rlc_sep='{sep}'\n"
        "rlc_p=\n"
        "rlc_l=$(date +%s 2>/dev/null)\n"
        "if command -v awk >/dev/null 2>&1; then rlc_awk=1; else rlc_awk=; fi\n"
        "while :; do\n"
        "rlc_n=$(date +%s 2>/dev/null)\n"
        + ("rlc_watch\n[ -n \"$rlc_due\" ] && rlc_inspect\n" if watch else "")
        + "rlc_c=$(rlc_sample)\n"
        'if [ -n "$rlc_p" ] && [ -n "$rlc_awk" ]; then\n'
        f'  rlc_o=$(printf \'%s\\n\' "$rlc_p" "$rlc_sep" "$rlc_c" | awk -v sep="$rlc_sep" \'{DELTA_AWK}\' 2>/dev/null)'
        ' || rlc_o=$rlc_c\n'
        "else\n"
        "  rlc_o=$rlc_c\n"
        "fi\n"
        'if [ -n "$rlc_o" ]; then\n'
        f"  printf '%s\\n%s\\n' \"$rlc_o\" '{SAMPLE_END}'\n"
        "  rlc_p=$rlc_c\n"
        "  rlc_l=$rlc_n\n"
        "else\n"
        '  case "$rlc_n:$rlc_l" in\n'
        f"    *[!0-9:]*|:*|*:) echo '{SAMPLE_END}' ;;\n"  # no clock: a heartbeat every unchanged sample
        f'    *) if [ $((rlc_n - rlc_l)) -ge {max(0, int(heartbeat_s))} ]; then echo \'{SAMPLE_END}\'; rlc_l=$rlc_n; fi ;;\n'
        "  esac\n"
        "fi\n"
        f"sleep {interval:g} || exit 0\n"
        "done\n"
    )


def _sample_parts_by_line(lines: list[str]) -> tuple[str, str | None, int | None]:
    """(card tool text, docker inspect text or None, docker's exit code) of any sample,
    line by line: the reference for `_sample_parts`, and the way for odd ones."""
    gpu_lines: list[str] = []
    docker_lines: list[str] | None = None
    rc: int | None = None
    for line in lines:
        if line == SAMPLE_BEGIN:
            continue
        if line == DOCKER_BEGIN:
            docker_lines = []
            continue
        if line.startswith(DOCKER_RC):
            value = line[len(DOCKER_RC):]
            # ASCII digits only: int() also takes "٣", " 3", "1_0"
            rc = int(value) if re.fullmatch(r"-?[0-9]{1,9}", value) else None
            continue
        (docker_lines if docker_lines is not None else gpu_lines).append(line)
    return "\n".join(gpu_lines) + "\n", None if docker_lines is None else "\n".join(docker_lines) + "\n", rc


_DOCKER_PART = "\n" + DOCKER_BEGIN + "\n"


def _sample_parts(text: str) -> tuple[str, str | None, int | None] | None:
    """`_sample_parts_by_line` for the usual sample (one begin marker first, the card
    tool's lines, one docker part last), found by string search instead of a Python
    loop over its ~450 lines: a third of a busy node's parse went to that loop and to
    joining the lines again. None for any other shape (the line-by-line way decides)."""
    head = SAMPLE_BEGIN + "\n"
    if not text.startswith(head) or text.count(SAMPLE_BEGIN) != 1:
        return None
    marks = text.count("@@docker")
    if marks == 0:
        body = text[len(head):]
        if not body:
            return "\n", None, None
        return (body if body.endswith("\n") else body + "\n"), None, None
    d = text.find(_DOCKER_PART)
    if marks != 2 or d < len(head):  # d == len(head) - 1: no card tool line at all
        return None
    r = text.find("\n" + DOCKER_RC, d + 1)
    if r < 0 or text.find("\n", r + 1) not in (-1, len(text) - 1):  # the exit code is the last line
        return None
    value = text[r + 1 + len(DOCKER_RC):].rstrip("\n")
    rc = int(value) if re.fullmatch(r"-?[0-9]{1,9}", value) else None
    docker_start = d + len(_DOCKER_PART)
    return text[len(head):d + 1], (text[docker_start:r + 1] if r + 1 > docker_start else "\n"), rc


def parse_sample(sample: str | list[str], profile: Profile) -> tuple[GpuReport, ContainerState]:
    """One sample (its text, or its lines, between the begin and end markers) -> card
    report and container state. Never raises: parsers return "unparsed" states instead."""
    if isinstance(sample, str):
        parts = _sample_parts(sample)
        if parts is None:
            parts = _sample_parts_by_line(sample[:-1].split("\n") if sample.endswith("\n") else sample.split("\n"))
    else:
        parts = _sample_parts_by_line(sample)
    gpu_text, docker_text, rc = parts
    gpu = parse_probe_output(gpu_text)
    gpu.simulated = profile.simulated
    name = profile.container.name
    if container_probe_command(profile) is None:
        container = ContainerState(name=name, status="running")  # we are inside it
    elif docker_text is None:
        container = ContainerState(name=name, status="unknown", error="no docker inspect output in sample")
    else:
        container = parse_docker_inspect(docker_text, name, rc)
    return gpu, container


# The card tools stamp each report with the time (the plain table's first line, the JSON's
# "Timestamp"); everything else in an idle node's sample repeats byte for byte.
# `[^\S\n]`: spaces within the line only; `\s*` ran across newlines, so each of n blank
# lines rescanned all the blank lines after it (quadratic).
_VOLATILE = re.compile(r'^(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}'
                       r'|[^\S\n]*"Timestamp"[^\S\n]*:.*)$', re.MULTILINE)


def sample_key(text: str) -> str:
    """What decides whether a sample needs parsing: its text without the tools' own
    timestamps. Equal keys mean equal parsed states, so an unchanged node costs a
    comparison per refresh instead of a parse."""
    return _VOLATILE.sub("", text)


_Pending = tuple[str, "str | None", "str | None", "asyncio.Future[tuple[str | None, Any]]"]
"""A changed sample waiting for the batch's worker-thread hop: (text, the node's last key,
its key where the loop computed it, the future its node awaits)."""

INLINE_KEY_CHARS = 64 << 10
"""A sample up to this size is compared with the last one on the event loop (tens of
microseconds); a larger one, odd for a sampler, goes to a worker thread like a parse."""

SAMPLE_CAP = 16 << 20
"""Characters of sampler output held while waiting for a sample's end marker: what a
node sends is untrusted, and a sampler that never ends a sample must not grow memory."""


def split_samples(buf: str) -> tuple[list[str], str]:
    """Complete samples (their text, up to the end marker's line) and the unfinished
    rest. The sampler's output is framed here, by marker, instead of line by line."""
    out: list[str] = []
    start = 0
    mark = SAMPLE_END + "\n"
    while True:
        i = buf.find(mark, start)
        if i < 0:
            break
        if i > 0 and buf[i - 1] != "\n":  # the marker text inside a line, not a marker line
            start = i + len(mark)
            continue
        text = buf[:i]
        out.append(text.replace("\r\n", "\n") if "\r" in text else text)
        buf, start = buf[i + len(mark):], 0
    return out, buf


class SampleProtocolError(ValueError):
    """A sampler message that does not apply to the sample the console holds: the stream
    is restarted, which starts with a full sample."""


def apply_delta(lines: list[str], text: str) -> list[str]:
    """The node's sample after the delta message `text` (`@@sample-delta NS M`, then NS
    splices; see `sampler_script`), given its sample as `lines`. Raises
    SampleProtocolError when the message is not a well-formed delta for `lines`: a
    splice out of range or out of order, a count that does not add up."""
    body = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
    head = body[0].split(" ")
    if len(head) != 3 or not all(_COUNT.fullmatch(x) for x in head[1:]):
        raise SampleProtocolError(f"bad delta header {body[0][:80]!r}")
    n_splices, total = int(head[1]), int(head[2])
    out: list[str] = []
    at = 0  # lines of `lines` consumed so far
    i = 1
    for _ in range(n_splices):
        if i >= len(body):
            raise SampleProtocolError("delta ends before its splices do")
        f = body[i].split(" ")
        if len(f) != 4 or f[0] + " " != SPLICE or not all(_COUNT.fullmatch(x) for x in f[1:]):
            raise SampleProtocolError(f"bad splice header {body[i][:80]!r}")
        a, d, k = int(f[1]), int(f[2]), int(f[3])
        if a < at or a + d > len(lines) or i + 1 + k > len(body):
            raise SampleProtocolError(f"splice {a} {d} {k} out of range (sample of {len(lines)} lines)")
        out += lines[at:a]
        out += body[i + 1:i + 1 + k]
        at, i = a + d, i + 1 + k
    out += lines[at:]
    if i != len(body) or len(out) != total:
        raise SampleProtocolError(f"delta gives {len(out)} lines, says {total}")
    return out


_COUNT = re.compile(r"[0-9]{1,9}")


class SampleStream:
    """One sampler stream, as the console reads it: framing (messages end with the
    `@@sample-end` marker line; an empty message is a heartbeat) and the node's sample
    as last sent in full plus the deltas since, so that every message that is not a
    heartbeat yields the node's whole sample text. A new stream holds nothing: the
    node's first message on it is a full sample."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.buf = ""
        # a line longer than LINE_CAP is cut (with a mark) as it arrives: a node that
        # never ends a line fills `buf` no faster than with short lines
        self.capper = LineCapper()
        self.lines: list[str] | None = None
        self.received = 0  # characters received on the stream
        self.full = 0      # full samples among its messages
        self.deltas = 0    # deltas among them
        self.heartbeats = 0

    def feed(self, chunk: str) -> list[str | None]:
        """The messages `chunk` completes: a whole sample's text, or None for a
        heartbeat. Raises SampleProtocolError on a delta that does not apply."""
        self.received += len(chunk)
        chunk = self.capper.feed(chunk)
        self.buf += chunk
        buf = self.buf
        if SAMPLE_END not in buf[-(len(chunk) + len(SAMPLE_END) + 1):] and len(buf) <= SAMPLE_CAP:
            return []  # a sample arrives in a few chunks: frame it once it ends
        texts, self.buf = split_samples(buf)
        if len(self.buf) > SAMPLE_CAP:
            log.warning("%s: %d characters of sampler output without an end marker; dropped",
                        self.name, len(self.buf))
            self.buf = ""
        out: list[str | None] = []
        for text in texts:
            if not text:
                self.heartbeats += 1
                out.append(None)
            elif text.startswith(SAMPLE_DELTA):
                if self.lines is None:
                    raise SampleProtocolError("a delta before any full sample")
                self.lines = apply_delta(self.lines, text)
                self.deltas += 1
                out.append("\n".join(self.lines) + "\n")
            else:
                self.lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
                self.full += 1
                out.append(text)
        return out


def _down_node(node: Node, reason: str | None) -> NodeState:
    return NodeState(name=node.name, address=node.address, role=node.role, reachable=False,
                     error=reason or "unreachable", container=None, gpu=None, updated_at=time.time())


async def probe_node(session: NodeSession, profile: Profile, timeout: float | None = None) -> NodeState:
    """One sample of one node (for one-shot status)."""
    node = session.node
    if not session.connected:
        return _down_node(node, session.reason)
    try:
        r = await session.run(sampler_script(profile, 0), timeout=timeout)
    except (NodeDown, CommandTimeout, SshError) as e:
        return _down_node(node, e.message)
    lines = [ln.rstrip("\r") for ln in (r.stdout + r.stderr).splitlines()]
    # parsed in a worker thread, off the event loop: node output is untrusted, and the
    # other nodes' samples (and the console) must not wait for one node's
    gpu, container = await asyncio.to_thread(parse_sample, lines, profile)
    return NodeState(name=node.name, address=node.address, role=node.role, reachable=True,
                     error=None, container=container, gpu=gpu, updated_at=time.time())


# --------------------------------------------------------------------------- ray


# The HTTP client, the limits and the any-shape readers live in `rayapi` (the one
# client for Ray's dashboard); they are re-exported here for the probes' callers.

def _state_message(row: dict[str, Any]) -> str | None:
    """A Ray node's last error: the API's `state_message` (set when a node dies, e.g.
    "health check failed"), bounded; None when absent or not text."""
    msg = row.get("state_message")
    if not isinstance(msg, str) or not msg.strip():
        return None
    return msg.strip()[:RAY_MESSAGE_MAX]


def ray_state_from_api(nodes_doc: Any, status_doc: Any, jobs_doc: Any) -> RayState:
    """Dashboard API answers -> RayState (source "api"). Any JSON shape is accepted:
    what is not where and what Ray puts it is left out (see `_d`, `_num`)."""
    st = RayState(available=True, source="api")
    rows = _l(_d(_d(_d(nodes_doc).get("data")).get("result")).get("result"))
    lm = _d(_d(_d(_d(status_doc).get("data")).get("clusterStatus")).get("loadMetricsReport"))
    usage_by_node = _d(lm.get("usageByNode"))
    gpu = _d(lm.get("usage")).get("GPU")
    if gpu:
        st.gpus_used = _pair_first(gpu, 0.0)
    for row in rows:
        if not isinstance(row, dict):
            continue
        alive = row.get("state") == "ALIVE"
        nid = _text(row.get("node_id"))
        total = _num(_d(row.get("resources_total")).get("GPU", 0))
        used = _pair_first(_d(usage_by_node.get(nid)).get("GPU"), 0.0)
        st.nodes.append(RayNodeState(node_id=nid, address=_text(row.get("node_ip"), 100), alive=alive,
                                     gpus_total=total, gpus_used=used if alive else 0.0,
                                     is_head=row.get("is_head_node") is True,
                                     error=_state_message(row)))
        if alive:
            st.nodes_alive += 1
            st.gpus_total += total
    # dead: the addresses Ray lists no ALIVE record for (a rejoined worker's old record
    # is not a node down now)
    st.nodes_dead = sum(1 for n in st.by_address().values() if not n.alive)
    if not usage_by_node:
        st.gpus_used = sum(n.gpus_used for n in st.nodes)
    st.jobs.extend(jobs_from_api(jobs_doc))
    return st


def current_job(ray: RayState) -> JobState | None:
    """The job the console is about: the newest running/pending one, else the newest."""
    if not ray.jobs:
        return None
    active = [j for j in ray.jobs if j.status in (JobStatus.RUNNING, JobStatus.PENDING)]
    j = (active or ray.jobs)[-1]
    return JobState(id=j.id, status=j.status)


def _dashboard_host(profile: Profile) -> str:
    return dashboard_connect_host(profile.ray.dashboard_host)


async def probe_ray(session: NodeSession, profile: Profile, allow_cli: bool = True,
                    timeout: float = 5.0) -> RayState:
    """Ray as the head sees it: dashboard API through a port forward; if the
    dashboard is silent but the GCS listens, `ray status` over SSH (if `allow_cli`)."""
    if not session.connected:
        # before its first connection the head has no reason yet: it is connecting, not "unreachable: None"
        why = f"unreachable: {session.reason}" if session.reason else f"{session.state}..."
        return RayState(available=False, error=f"head {session.name} {why}", unasked=True)
    host, port = _dashboard_host(profile), profile.ray.dashboard_port
    api_error = None
    try:
        local = await session.forward_local_port(host, port)
        nodes_doc, status_doc, jobs_doc = await asyncio.gather(
            http_get_json(local, "/api/v0/nodes?detail=1", timeout),
            http_get_json(local, "/api/cluster_status", timeout),
            http_get_json(local, "/api/jobs/", timeout),
        )
        return ray_state_from_api(nodes_doc, status_doc, jobs_doc)
    except (OSError, ConnectionError, asyncio.TimeoutError, ValueError, SshError) as e:
        api_error = f"dashboard {host}:{port} on {session.name}: {str(e) or type(e).__name__}"
    gcs = f"{profile.head.address}:{profile.ray.head_port}"
    try:
        gcs_up = await session.tcp_reachable(profile.head.address, profile.ray.head_port)
    except SshError as e:
        return RayState(available=False, error=str(e), unasked=True)
    if not gcs_up:
        return RayState(available=False, error=f"Ray is not running (nothing listens on {gcs})")
    if not allow_cli:
        return RayState(available=False, error=api_error, unconfirmed=True)
    try:
        r = await session.run([profile.ray.binary, "status", f"--address={gcs}"], container=True, timeout=60)
    except (NodeDown, CommandTimeout, SshError) as e:
        return RayState(available=False, error=f"{api_error}; ray status: {e.message}", unasked=True)
    st = await asyncio.to_thread(parse_ray_status, r.stdout + r.stderr)  # off the event loop
    if not st.available:
        # the GCS listens, so Ray is there: a `ray status` that failed says nothing of it
        st.unasked = True
        if not st.error:
            st.error = api_error
    return st


# --------------------------------------------------------------------------- snapshot


async def snapshot(profile: Profile, pool: SessionPool | None = None) -> ClusterState:
    """One snapshot of every node and of Ray, concurrently (`rlconsole status`).
    Down nodes are states, not errors."""
    own = pool is None
    pool = pool or open_pool(profile)
    timeout = profile.ssh.command_timeout_s

    async def node(name: str) -> NodeState:
        # Each node is sampled as soon as its own connection is up: no barrier waiting
        # for the slowest of 64 handshakes before the first sample starts.
        sess = pool.session(name)
        await sess.wait_first_attempt()
        return await probe_node(sess, profile, timeout)

    async def head_ray() -> RayState:
        await pool.head.wait_first_attempt()
        return await probe_ray(pool.head, profile)

    try:
        pool.start()
        nodes, ray = await asyncio.gather(asyncio.gather(*(node(n.name) for n in profile.nodes)),
                                          head_ray())
        return ClusterState(profile=profile.name, simulated=profile.simulated, nodes=list(nodes), ray=ray,
                            job=current_job(ray), taken_at=time.time())
    finally:
        if own:
            await pool.close()


# --------------------------------------------------------------------------- monitor

Subscriber = Callable[[ClusterState], Any]


class ClusterMonitor:
    """Keeps a ClusterState current; notifies subscribers on change.

    `start()` opens the sessions (or uses the given pool), starts one sampler per
    node and the Ray poller. Notifications are coalesced: a change is told
    `notify_delay_s` after it (what else changes meanwhile rides along), and at most once
    per `notify_every_s` (default half the refresh interval, at most 1 s). The nodes'
    samplers drift out of phase, so without the second bound 64 nodes would mean a
    notification, and a frame of the UI, every few milliseconds; with it, one frame carries
    every node that changed in that window, and a change shows at most that much later.

    A node's sampler sends only changes, and when nothing changes a heartbeat about every
    `stale_after_s`/2 (`heartbeat_s`); a connected node that sends nothing at all
    for `stale_after_s` (default: 2.5 refresh intervals, at least STALE_AFTER_MIN_S) gets a
    liveness check: no answer drops its connection (down, then reconnect); an answer means
    its sampler is stuck (a hung card tool, a stopped shell), and the node is shown down
    with its last cards kept, stale, until its sampler speaks again.
    """

    STALE_AFTER_MIN_S = 10.0
    """The least `stale_after_s`: one sample (the card tool, `docker inspect`) may take
    seconds on a busy node, and a node is not called stale for being slow."""

    def __init__(self, profile: Profile, pool: SessionPool | None = None, refresh_s: float | None = None,
                 ray_refresh_s: float | None = None, ray_cli_every_s: float = 15.0,
                 notify_delay_s: float = 0.05, skip_unchanged: bool = True,
                 notify_every_s: float | None = None, stale_after_s: float | None = None,
                 deltas: bool = True, batch_window_s: float | None = None) -> None:
        self.profile = profile
        self.refresh_s = refresh_s or profile.monitoring.refresh_s
        self.stale_after_s = stale_after_s or max(2.5 * self.refresh_s, self.STALE_AFTER_MIN_S)
        self.deltas = deltas
        self.notify_every_s = min(1.0, self.refresh_s / 2) if notify_every_s is None else notify_every_s
        # Changed samples that arrive within this window are read in one worker-thread
        # hop; the window is a quarter of the notification bound, so a change still shows
        # within the same frame (`_read_batched`).
        self.batch_window_s = min(0.25, self.notify_every_s / 4) if batch_window_s is None else batch_window_s
        self._batch: list[_Pending] = []
        self._batch_handle: asyncio.TimerHandle | None = None
        self._batch_tasks: set[asyncio.Task[None]] = set()
        self.hops = 0
        """Worker-thread hops taken to read changed samples (`bench_watch`; tests)."""
        self._notified_at = 0.0
        # A down node is retried at least every two intervals: reconnecting is one TCP
        # connect, and "it comes back without action" should not wait out a long backoff.
        self.pool = pool or open_pool(profile, backoff_max_s=max(2.0, 2 * self.refresh_s))
        self._own_pool = pool is None
        self.ray_refresh_s = ray_refresh_s or max(self.refresh_s, 2.0)
        self.ray_cli_every_s = ray_cli_every_s
        self.notify_delay_s = notify_delay_s
        self.state = ClusterState(
            profile=profile.name, simulated=profile.simulated,
            nodes=[NodeState(name=n.name, address=n.address, role=n.role, reachable=False, error="connecting")
                   for n in profile.nodes],
        )
        self._by_name = {n.name: n for n in self.state.nodes}
        self._subs: list[Subscriber] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._wake: dict[str, asyncio.Event] = {n.name: asyncio.Event() for n in profile.nodes}
        self._last_sample: dict[str, float] = {}
        self._last_key: dict[str, str] = {}
        self._silent: set[str] = set()  # connected, answering, but their samplers say nothing
        self.received: dict[str, int] = {n.name: 0 for n in profile.nodes}
        """Characters each node's samplers have sent, over every stream (`bench_watch`)."""
        self.heartbeats = 0
        self.deltas_applied = 0
        self.skip_unchanged = skip_unchanged
        self.parsed = 0
        self._notify_handle: asyncio.TimerHandle | None = None
        self._ray_kick = asyncio.Event()
        self._ray_misses = 0
        self.ray_timeout_s = 5.0
        self._last_cli = 0.0
        self.samples = 0
        self.running = False

    # -- subscriptions -----------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """`callback(state)` on every (coalesced) change; may be async. Returns an
        unsubscribe function."""
        self._subs.append(callback)
        return lambda: self._subs.remove(callback) if callback in self._subs else None

    def _changed(self) -> None:
        if self._notify_handle is None and self.running:
            loop = asyncio.get_running_loop()
            delay = max(self.notify_delay_s, self._notified_at + self.notify_every_s - loop.time())
            self._notify_handle = loop.call_later(delay, self._notify)

    def snapshot(self) -> ClusterState:
        """The state as of now, for a subscriber to keep and to add to (the live backend
        sets the job it watches on it): a new container over the same node objects, so
        what a subscriber does to it never reaches the monitor's own state, and taking it
        costs a list copy, not a deep copy of 64 nodes' cards (nvitop's `as_snapshot`)."""
        return dataclasses.replace(self.state, nodes=list(self.state.nodes))

    def _notify(self) -> None:
        self._notify_handle = None
        with contextlib.suppress(RuntimeError):  # called directly outside a loop by tests
            self._notified_at = asyncio.get_running_loop().time()
        self.state.taken_at = time.time()
        snap = self.snapshot()
        for cb in list(self._subs):
            try:
                res = cb(snap)
                if asyncio.iscoroutine(res):
                    asyncio.ensure_future(res)
            except Exception:
                log.exception("monitor subscriber failed")

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        if self.running:
            return
        self.running = True
        for sess in self.pool.sessions.values():
            sess.on_state_change(self._on_session)
        self.pool.start()
        loop = asyncio.get_running_loop()
        for n in self.profile.nodes:
            self._tasks.append(loop.create_task(self._node_loop(self.pool.session(n.name)), name=f"sampler-{n.name}"))
        self._tasks.append(loop.create_task(self._ray_loop(), name="ray-poller"))
        self._tasks.append(loop.create_task(self._watchdog(), name="monitor-watchdog"))

    async def stop(self) -> None:
        self.running = False
        if self._notify_handle is not None:
            self._notify_handle.cancel()
            self._notify_handle = None
        if self._batch_handle is not None:
            self._batch_handle.cancel()
            self._batch_handle = None
        for *_, fut in self._batch:
            fut.cancel()
        self._batch.clear()
        for bt in list(self._batch_tasks):
            bt.cancel()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        if self._own_pool:
            await self.pool.close()

    async def __aenter__(self) -> ClusterMonitor:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def refresh_now(self) -> None:
        """Reconnect down nodes at once and poll Ray now (the user pressed a key)."""
        for s in self.pool.sessions.values():
            if not s.connected:
                s.reconnect_now()
        self._ray_kick.set()

    # -- internals ---------------------------------------------------------

    def _on_session(self, sess: NodeSession) -> None:
        ns = self._by_name.get(sess.name)
        if ns is None:
            return
        self._silent.discard(sess.name)  # a new connection, a new sampler
        if sess.state == "connected":
            ns.reachable, ns.error = True, None
        else:
            ns.reachable, ns.error = False, sess.reason or sess.state
            if sess.name == self.profile.head.name:
                self._ray_kick.set()
        ns.updated_at = time.time()
        self._wake[sess.name].set()
        self._changed()

    @property
    def heartbeat_s(self) -> int:
        """Whole seconds without a message after which a node's sampler sends a heartbeat:
        `stale_after_s`/2 less one refresh interval (the sample that notices comes up to an
        interval, a sample's own time and the clock's second later), so that a node that is
        alive is heard from about every `stale_after_s`/2, never near `stale_after_s`."""
        return max(0, int(self.stale_after_s / 2 - self.refresh_s))

    async def _node_loop(self, sess: NodeSession) -> None:
        script = sampler_script(self.profile, self.refresh_s, deltas=self.deltas, heartbeat_s=self.heartbeat_s)
        wake = self._wake[sess.name]
        while self.running:
            if not sess.connected:
                wake.clear()
                await kicked_or_timeout(wake, self.refresh_s)
                continue
            # a new stream holds no sample: the node's first message on it is a full one
            stream = SampleStream(sess.name)
            # the watchdog's clock starts with the sampler, so one that never prints is caught too
            self._last_sample[sess.name] = max(self._last_sample.get(sess.name, 0.0), time.time())
            try:
                async with contextlib.aclosing(sess.stream_text(script)) as it:  # type: ignore[type-var]
                    async for chunk in it:
                        self.received[sess.name] += len(chunk)
                        deltas = stream.deltas
                        try:
                            texts = stream.feed(chunk)
                        except SampleProtocolError as e:
                            log.warning("%s: sampler stream: %s; restarting it (a full sample first)", sess.name, e)
                            break
                        self.deltas_applied += stream.deltas - deltas
                        for text in texts:
                            if text is None:
                                self._heartbeat(sess)
                            else:
                                await self._apply_sample(sess, text)
                log.info("%s: sampler ended; restarting", sess.name)
            except NodeDown as e:
                self._mark_down(sess.name, e.message)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - keep sampling whatever happened
                log.warning("%s: sampler failed: %s", sess.name, e)
            await asyncio.sleep(min(1.0, self.refresh_s))

    def _read_sample(self, text: str, last_key: str | None, key: str | None = None) -> tuple[str | None, Any]:
        """(sample key, (cards, container) or None when the key is `last_key`): the CPU
        part of a sample, run in a worker thread so that no node's output, however odd,
        holds up the event loop (the console's keys and frames, the other nodes). `key`:
        the sample's key where the loop already computed it (a regex pass over the whole
        sample, not done twice)."""
        if key is None and self.skip_unchanged:
            key = sample_key(text)
        if key is not None and key == last_key:
            return key, None
        return key, parse_sample(text, self.profile)

    def _read_samples(self, items: list[tuple[str, str | None, str | None]]) -> list[tuple[bool, Any]]:
        """`_read_sample` over a batch, in the worker thread: (True, result) or (False,
        the exception) per sample, so that one odd sample fails its own node only."""
        out: list[tuple[bool, Any]] = []
        for text, last_key, key in items:
            try:
                out.append((True, self._read_sample(text, last_key, key)))
            except Exception as e:  # noqa: BLE001 - handed to that sample's node
                out.append((False, e))
        return out

    async def _read_batched(self, text: str, last_key: str | None,
                            key: str | None = None) -> tuple[str | None, Any]:
        """`_read_sample` in a worker thread, shared with the other nodes' changed samples
        of the next `batch_window_s`. With every card busy, each of 64 nodes' samples
        took its own hop (the executor's queue, a thread wake-up, a wake-up of the loop
        through its self-pipe): measured, the hop cost about what the parse did."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[str | None, Any]] = loop.create_future()
        self._batch.append((text, last_key, key, fut))
        if self._batch_handle is None:
            self._batch_handle = loop.call_later(self.batch_window_s, self._flush_batch)
        return await fut

    def _flush_batch(self) -> None:
        self._batch_handle = None
        batch, self._batch = self._batch, []
        if batch:
            task = asyncio.ensure_future(self._run_batch(batch))
            self._batch_tasks.add(task)
            task.add_done_callback(self._batch_tasks.discard)

    async def _run_batch(self, batch: list[_Pending]) -> None:
        self.hops += 1
        try:
            results = await asyncio.to_thread(self._read_samples, [(text, last, key) for text, last, key, _ in batch])
        except asyncio.CancelledError:  # the monitor stops
            for *_, fut in batch:
                fut.cancel()
            raise
        except Exception as e:  # noqa: BLE001 - the thread could not run: each node is told
            for *_, fut in batch:
                if not fut.done():
                    fut.set_exception(e)
            return
        for (*_, fut), (ok, value) in zip(batch, results):
            if fut.done():  # its node's loop was cancelled meanwhile
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

    async def _apply_sample(self, sess: NodeSession, text: str) -> None:
        ns = self._by_name[sess.name]
        last_key = self._last_key.get(sess.name) if ns.reachable and ns.gpu is not None else None
        key: str | None
        parsed: Any
        inline = sample_key(text) if last_key is not None and len(text) <= INLINE_KEY_CHARS else None
        if inline is not None and inline == last_key:
            # the usual sample, unchanged and a few KB: compared here; a thread hop per
            # sample was most of an idle console's CPU at 64 nodes (profiled: queue, wake-up)
            key, parsed = last_key, None
        else:
            key, parsed = await self._read_batched(text, last_key, inline)
        if not sess.connected:
            return  # dropped while the sample was read: the down state stands
        if parsed is None:
            # Same cards, same container: nothing for subscribers; only the age moves.
            ns.updated_at = self._last_sample[sess.name] = time.time()
            self.samples += 1
            self._speaks(sess)
            return
        gpu, container = parsed
        self.parsed += 1
        if key is not None:
            self._last_key[sess.name] = key
        ns.gpu, ns.container = gpu, container
        ns.reachable, ns.error = True, None
        ns.address = sess.node.address  # a Slurm node learns its address with the allocation
        self._silent.discard(sess.name)
        ns.updated_at = self._last_sample[sess.name] = time.time()
        self.samples += 1
        self._changed()

    def _heartbeat(self, sess: NodeSession) -> None:
        """The node's sampler took a sample and found nothing changed since the last it
        sent: the node's state stands, only its age moves."""
        self.heartbeats += 1
        self.samples += 1
        if not sess.connected:
            return
        self._by_name[sess.name].updated_at = self._last_sample[sess.name] = time.time()
        self._speaks(sess)

    def _speaks(self, sess: NodeSession) -> None:
        """A node the watchdog found silent (its link answering) has a sampler again."""
        if sess.name in self._silent:
            self._silent.discard(sess.name)
            ns = self._by_name[sess.name]
            ns.reachable, ns.error = True, None
            self._changed()

    def _mark_down(self, name: str, reason: str) -> None:
        ns = self._by_name[name]
        if ns.reachable or ns.error != reason:
            ns.reachable, ns.error, ns.updated_at = False, reason, time.time()
            self._changed()

    async def _watchdog(self) -> None:
        """A connected node that sends nothing (no sample, no change, no heartbeat) for
        `stale_after_s` gets a liveness check; no answer within one interval drops its
        connection (-> down, then reconnect): links that hang without closing. An answer
        means the link is fine and the node's sampler is stuck: the node is shown down
        (its last cards kept, stale) until its sampler speaks again."""
        checking: set[str] = set()

        async def check(sess: NodeSession) -> None:
            try:
                await sess.run("true", timeout=max(1.0, self.refresh_s))
            except (CommandTimeout, NodeDown, SshError):
                sess.drop(f"no answer within {max(1.0, self.refresh_s):g}s (liveness check)")
                return
            finally:
                checking.discard(sess.name)
            silent_s = time.time() - self._last_sample.get(sess.name, 0.0)
            if sess.connected and silent_s > self.stale_after_s and sess.name not in self._silent:
                self._silent.add(sess.name)
                self._mark_down(sess.name, f"its sampler sent nothing for {silent_s:.0f}s; the node answers "
                                           "over SSH (a card tool or the sampler's shell hangs?)")

        while self.running:
            await asyncio.sleep(self.refresh_s / 2)
            now = time.time()
            for sess in self.pool.sessions.values():
                last = self._last_sample.get(sess.name)
                if (sess.connected and last is not None and now - last > self.stale_after_s
                        and sess.name not in checking):
                    checking.add(sess.name)
                    asyncio.ensure_future(check(sess))

    RAY_MISSES_KEPT = 3
    """Dashboard polls in a row that may miss (while Ray's GCS still listens and the
    `ray status` fallback is not due) before the monitor says Ray is unavailable. A
    single slow answer made the watched job NOT_ON_CLUSTER for one refresh."""

    async def poll_ray(self, allow_cli: bool) -> None:
        """One Ray poll applied to the state (the poller's body; a test drives it)."""
        try:
            st = await probe_ray(self.pool.head, self.profile, allow_cli=allow_cli, timeout=self.ray_timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001
            st = RayState(available=False, error=f"ray probe failed: {e}", unasked=True)
        if st.source == "ray status" or (not st.available and allow_cli and "dashboard" in (st.error or "")):
            self._last_cli = time.monotonic()
        self._ray_misses = self._ray_misses + 1 if st.unconfirmed else 0
        if not st.available and not allow_cli and self.state.ray.source == "ray status":
            st = self.state.ray  # keep the last `ray status` answer between CLI runs
        elif st.unconfirmed and self.state.ray.available and self._ray_misses <= self.RAY_MISSES_KEPT:
            # One dashboard timeout is not "Ray lost the job": keep the last good answer
            # (its job list) until the `ray status` fallback has failed too, or the
            # dashboard has missed RAY_MISSES_KEPT polls in a row.
            log.info("dashboard miss %d kept the last Ray state: %s", self._ray_misses, st.error)
            st = self.state.ray
        if st != self.state.ray:
            self.state.ray = st
            job = current_job(st)
            if job is not None and self.state.job is not None and self.state.job.id == job.id:
                # keep step/metrics others filled in; a new object: snapshots hold the old one
                self.state.job = dataclasses.replace(self.state.job, status=job.status)
            elif job is not None or st.available:
                self.state.job = job
            self._changed()

    async def _ray_loop(self) -> None:
        while self.running:
            allow_cli = time.monotonic() - self._last_cli >= self.ray_cli_every_s
            await self.poll_ray(allow_cli)
            self._ray_kick.clear()
            await kicked_or_timeout(self._ray_kick, self.ray_refresh_s)
