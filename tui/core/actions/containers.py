"""`containers` (seed 3.1): the profile's container exists and runs on every node.

Idempotent by construction: each node's container state is read first (`docker
inspect`), and only the missing step is done (create, start, unpause). A container
running another image is reported and left alone: replacing it would kill whatever
runs in it, and that is the user's call, not the console's.
"""

from __future__ import annotations

from typing import AsyncIterator

from tui.core.actions.base import EventQueue, Remote, docker_argv, gather_nodes
from tui.core.actions.events import ActionEvent
from tui.core.parsers.docker import parse_docker_inspect
from tui.core.profile import Node, Profile

NAME = "containers"


def create_argv(profile: Profile) -> list[str]:
    """`docker create` exactly as the seed writes it, from the profile's options."""
    c = profile.container
    argv = docker_argv(profile, "create")
    if c.create.privileged:
        argv.append("--privileged")
    for k, v in c.create.env.items():
        argv += ["--env", f"{k}={v}"]
    if c.create.network:
        argv += ["--net", c.create.network]
    for vol in c.create.volumes:
        argv += ["-v", vol]
    argv += [*c.create.extra_args, "--name", c.name, c.image, *c.create.command]
    return argv


def _images_match(want: str, have: str | None) -> bool:
    if have is None:
        return True  # inspect did not say: do not accuse the container of anything
    if want == have:
        return True
    # docker may report `name:latest` for `name`, or the reverse
    strip = lambda s: s[:-7] if s.endswith(":latest") else s
    return strip(want) == strip(have)


async def _one(profile: Profile, remote: Remote, node: Node, q: EventQueue, failures: list[str]) -> None:
    c = profile.container

    def ev(kind: str, msg: str, status: str | None = None) -> None:
        q.put(ActionEvent(NAME, kind, msg, node=node.name, status=status))  # type: ignore[arg-type]

    ok, why = remote.reachable(node.name)
    if not ok:
        ev("fail", f"unreachable: {why}", "failed")
        failures.append(node.name)
        return
    ev("node", "inspecting", "running")
    r = await remote.run(node.name, docker_argv(profile, "inspect", "--type", "container", c.name))
    st = parse_docker_inspect(r.output, c.name, r.rc)
    if st.status in ("unavailable", "unknown"):
        ev("fail", f"cannot ask Docker: {st.error or r.tail(1)}", "failed")
        failures.append(node.name)
        return
    if st.status != "absent" and not _images_match(c.image, st.image):
        ev("fail", f"container {c.name} runs image {st.image}, the profile says {c.image}; "
                   "left alone (remove it yourself if it should go)", "failed")
        failures.append(node.name)
        return
    did = []
    if st.status == "absent":
        ev("output", "$ " + " ".join(create_argv(profile)))
        r = await remote.run(node.name, create_argv(profile), timeout=300)
        if not r.ok:
            ev("fail", f"docker create failed (exit {r.rc}): {r.tail(2)}", "failed")
            failures.append(node.name)
            return
        did.append("created")
        st.status = "created"
    if st.status == "paused":
        r = await remote.run(node.name, docker_argv(profile, "unpause", c.name))
        if not r.ok:
            ev("fail", f"docker unpause failed: {r.tail(2)}", "failed")
            failures.append(node.name)
            return
        did.append("unpaused")
    elif st.status in ("created", "exited", "dead", "restarting"):
        r = await remote.run(node.name, docker_argv(profile, "start", c.name), timeout=120)
        if not r.ok:
            ev("fail", f"docker start failed (exit {r.rc}): {r.tail(2)}", "failed")
            failures.append(node.name)
            return
        did.append("started")
    if did:
        for cmd in c.after_start:
            r = await remote.run(node.name, docker_argv(profile, "exec", c.name, "sh", "-c", cmd), timeout=120)
            if not r.ok:
                ev("warn", f"`{cmd}` in {c.name} failed (exit {r.rc}): {r.tail(1)}")
            else:
                did.append(f"ran `{cmd}`")
        ev("node", ", ".join(did), "ok")
    else:
        ev("node", f"already running ({st.image or c.image})", "skipped")


async def containers(profile: Profile, remote: Remote) -> AsyncIterator[ActionEvent]:
    yield ActionEvent(NAME, "start", f"container {profile.container.name} on {len(profile.nodes)} nodes")
    if profile.container.access == "direct":
        yield ActionEvent(NAME, "skip", "the SSH endpoints are the containers (access: direct): nothing to create")
        return
    q = EventQueue()
    failures: list[str] = []
    skipped: list[str] = []

    async def run_all() -> None:
        await gather_nodes(profile.nodes, lambda n: _one(profile, remote, n, q, failures))

    async for ev in q.drain_while(run_all()):
        if ev.status == "skipped" and ev.node:
            skipped.append(ev.node)
        yield ev
    if failures:
        yield ActionEvent(NAME, "fail", f"failed on {', '.join(sorted(failures))}")
    elif len(skipped) == len(profile.nodes):
        yield ActionEvent(NAME, "skip", "already running on every node; nothing changed")
    else:
        yield ActionEvent(NAME, "done", f"{profile.container.name} running on every node")
