"""The `docker` a simulated node sees: one shared private dockerd, per-node names.

The sim runs ONE private dockerd for all its nodes (one daemon per node would cost
N x ~50 MB and N start-ups). Each node must still see its own container under the
profile's name (`train-rl`), as on a real cluster where every host has its own
Docker. This wrapper (installed as `<node>/bin/docker`, first on the node's PATH)
maps names: on node2, `docker create --name train-rl ...` creates `train-rl-node2`,
`docker inspect train-rl` inspects `train-rl-node2` and prints it back as `train-rl`,
`docker ps` lists only node2's containers.

`docker exec NAME CMD...` is the one command that is not passed to the daemon: the
sim's image is a tiny rootfs with no Python or Ray (no registry is reachable, so it
cannot be a real training image), so the command runs on the node itself, in the
node's PID namespace, after the wrapper has checked with the daemon that the container
exists and is running (and fails with Docker's own messages otherwise). What it starts
carries the container's id in its environment (`RLCONSOLE_SIM_CONTAINER`, as the sim's
own runtime marks its processes, tui/sim/simdocker.py), so that `stop`, `kill`, `rm -f`
and `restart` take those processes along, as they take a real container's: Ray started
in the container dies with it, and a Ray that outlived `docker rm -f` (the sim before)
made a test of the product's recovery prove nothing. Lifecycle and state (create, start,
stop, rm, inspect, ps) are real Docker. Where this machine cannot
start `--privileged` containers (a sandbox missing capabilities; checked once at sim
up) the flag is dropped from `create`/`run`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

LABEL = "rlconsole.sim.node"

# Global options of the docker CLI that take a value.
_GLOBAL_WITH_VALUE = {"-H", "--host", "--context", "-c", "--config", "-l", "--log-level",
                      "--tlscacert", "--tlscert", "--tlskey"}
# Options of `docker exec` that take a value.
_EXEC_WITH_VALUE = {"-e", "--env", "--env-file", "-u", "--user", "-w", "--workdir", "--detach-keys"}
# Subcommands whose positional arguments are container names.
_NAME_ARGS = {"start", "stop", "restart", "kill", "rm", "pause", "unpause", "wait", "logs",
              "top", "port", "inspect", "stats", "update", "rename", "attach", "diff", "export"}
MARKER_ENV = "RLCONSOLE_SIM_CONTAINER"
"""The environment entry naming the container a process was started in: simdocker's
MARKER_ENV (tests/test_sim.py holds them equal), written out so that `docker exec`, which
the product runs for every command in a container, does not import that module."""
_TAKES_PROCESSES = {"stop", "kill", "rm", "restart"}
"""Subcommands after which the container's processes are gone (`kill` with SIGKILL,
`rm` with -f: without them Docker refuses a running container and nothing changes)."""

# Options of the subcommands above that take a value, per subcommand: one letter means
# different things (`inspect -f FORMAT`, but `rm -f` forces and `logs -f` follows; `stop
# -t SECONDS`, but `logs -t` adds timestamps). One set for all made `rm -f NAME` read NAME
# as -f's value: the name went unmapped and the node's container stayed.
_OPT_WITH_VALUE: dict[str, set[str]] = {
    "inspect": {"-f", "--format", "--type"},
    "stats": {"--format"},
    "stop": {"-t", "--time", "-s", "--signal"},
    "restart": {"-t", "--time", "-s", "--signal"},
    "kill": {"-s", "--signal"},
    "logs": {"-n", "--tail", "--since", "--until"},
    "start": {"--detach-keys"},
    "attach": {"--detach-keys"},
    "export": {"-o", "--output"},
    "update": {"-c", "--cpu-shares", "-m", "--memory", "--cpus", "--cpuset-cpus", "--restart",
               "--memory-swap", "--memory-reservation", "--pids-limit", "--blkio-weight"},
}


class Wrapper:
    def __init__(self, node: str, real: str, host: str, config_dir: str | None = None,
                 privileged: bool = True) -> None:
        self.node = node
        self.privileged = privileged
        self.real = real
        self.env = dict(os.environ)
        self.env["DOCKER_HOST"] = host
        if config_dir:
            self.env["DOCKER_CONFIG"] = config_dir

    def mapped(self, name: str) -> str:
        if name.startswith("-") or len(name) == 64 and all(c in "0123456789abcdef" for c in name):
            return name  # an option, or a full container ID
        return f"{name}-{self.node}"

    def _run(self, args: list[str], names: dict[str, str] | None = None, capture: bool = True) -> int:
        """Run the real CLI; with `names`, print its output with the node names mapped
        back to the profile's names."""
        if not capture:
            os.execve(self.real, [self.real, *args], self.env)
        p = subprocess.run([self.real, *args], env=self.env, capture_output=True)
        out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        for real_name, shown in (names or {}).items():
            out = out.replace(real_name, shown)
            err = err.replace(real_name, shown)
        sys.stdout.write(out)
        sys.stderr.write(err)
        sys.stdout.flush()
        return p.returncode

    def main(self, argv: list[str]) -> int:
        i = 0
        while i < len(argv) and argv[i].startswith("-"):
            opt = argv[i].split("=", 1)[0]
            i += 2 if (opt in _GLOBAL_WITH_VALUE and "=" not in argv[i]) else 1
        globals_, rest = argv[:i], argv[i:]
        globals_ = [g for g in globals_ if g not in ("-H", "--host") and not g.startswith(("-H=", "--host="))]
        if not rest:
            return self._run(globals_ + rest, capture=False)
        sub, args = rest[0], rest[1:]
        if sub == "container" and args:
            sub, args = args[0], args[1:]
            if sub == "ls":
                sub = "ps"
        if sub in ("create", "run"):
            return self._create(sub, args)
        if sub == "exec":
            return self._exec(args)
        if sub == "ps":
            return self._ps(args)
        if sub == "events":
            return self._events(args)
        if sub in _NAME_ARGS:
            out, names = [], {}
            j = 0
            while j < len(args):
                a = args[j]
                if a.startswith("-"):
                    out.append(a)
                    if a.split("=", 1)[0] in _OPT_WITH_VALUE.get(sub, set()) and "=" not in a and j + 1 < len(args):
                        out.append(args[j + 1])
                        j += 1
                else:
                    m = self.mapped(a)
                    names[m] = a
                    out.append(m)
                j += 1
            streaming = sub in ("logs", "attach", "stats", "wait") and any(a in ("-f", "--follow") for a in args)
            ids = self._ids(list(names)) if sub in _TAKES_PROCESSES and self._kills(sub, out) else []
            rc = self._run([sub, *out], names, capture=not streaming)
            if rc == 0 and ids:
                self._take_processes(ids)
            return rc
        return self._run([sub, *args], capture=False)

    def _events(self, args: list[str]) -> int:
        """`docker events`, its `container=NAME` filters mapped to this node's container
        (the console's sampler watches the profile's container so). Without a container
        filter it would show every node's events: it is given this node's label."""
        out, has_container = [], False
        j = 0
        while j < len(args):
            a = args[j]
            key, eq, val = a.partition("=")
            if key in ("-f", "--filter"):
                value = val if eq else (args[j + 1] if j + 1 < len(args) else "")
                j += 0 if eq else 1
                fkey, _, fval = value.partition("=")
                if fkey == "container":
                    value = f"container={self.mapped(fval)}"
                    has_container = True
                out += ["--filter", value]
            else:
                out.append(a)
            j += 1
        if not has_container:
            out += ["--filter", f"label={LABEL}={self.node}"]
        return self._run(["events", *out], capture=False)

    @staticmethod
    def _kills(sub: str, args: list[str]) -> bool:
        """Whether `sub args` ends the container's processes when it succeeds."""
        if sub == "rm":
            return any(a in ("-f", "--force") for a in args)
        if sub == "kill":
            sig = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-s", "--signal")),
                       next((a.split("=", 1)[1] for a in args if a.startswith("--signal=")), "KILL"))
            return sig.upper().removeprefix("SIG") in ("KILL", "9")
        return True

    def _ids(self, names: list[str]) -> list[str]:
        """The full ids of the (node-mapped) containers, before they may be removed."""
        if not names:
            return []
        p = subprocess.run([self.real, "inspect", "--type", "container", "--format", "{{.Id}}", *names],
                           env=self.env, capture_output=True, text=True)
        return [i for i in p.stdout.split() if len(i) == 64]

    @staticmethod
    def _take_processes(ids: list[str]) -> None:
        """SIGKILL what `docker exec` started in these containers (and its descendants)."""
        from tui.sim.simdocker import kill_container_members

        for cid in ids:
            kill_container_members(cid)

    def _create(self, sub: str, args: list[str]) -> int:
        out, names = [], {}
        j = 0
        while j < len(args):
            a = args[j]
            if a == "--name" and j + 1 < len(args):
                names[self.mapped(args[j + 1])] = args[j + 1]
                out += ["--name", self.mapped(args[j + 1])]
                j += 2
                continue
            if a in ("--privileged", "--privileged=true") and not self.privileged:
                pass  # this machine cannot start privileged containers (see dockerd.privileged_works)
            elif a.startswith("--name="):
                n = a.split("=", 1)[1]
                names[self.mapped(n)] = n
                out.append(f"--name={self.mapped(n)}")
            else:
                out.append(a)
            j += 1
        return self._run([sub, "--label", f"{LABEL}={self.node}", *out], names)

    def _ps(self, args: list[str]) -> int:
        p = subprocess.run([self.real, "ps", "-a", "--filter", f"label={LABEL}={self.node}",
                            "--format", "{{.Names}}"], env=self.env, capture_output=True, text=True)
        names = {n: n[: -len(self.node) - 1] for n in p.stdout.split() if n.endswith(f"-{self.node}")}
        return self._run(["ps", "--filter", f"label={LABEL}={self.node}", *args], names)

    def _exec(self, args: list[str]) -> int:
        env: dict[str, str] = {}
        workdir = None
        detach = False
        j = 0
        while j < len(args) and args[j].startswith("-"):
            a = args[j]
            opt, eq, val = a.partition("=")
            if opt in _EXEC_WITH_VALUE:
                if not eq:
                    j += 1
                    val = args[j] if j < len(args) else ""
                if opt in ("-e", "--env"):
                    k, _, v = val.partition("=")
                    env[k] = v if _ else os.environ.get(k, "")
                elif opt in ("-w", "--workdir"):
                    workdir = val
            elif opt in ("-d", "--detach") or (len(a) > 2 and a[1] != "-" and "d" in a[1:]):
                detach = True
            j += 1
        if j >= len(args):
            sys.stderr.write('"docker exec" requires at least 2 arguments.\n')
            return 1
        name, cmd = args[j], args[j + 1:]
        if not cmd:
            sys.stderr.write('"docker exec" requires at least 2 arguments.\n')
            return 1
        p = subprocess.run([self.real, "inspect", "--type", "container", self.mapped(name)],
                           env=self.env, capture_output=True, text=True)
        if p.returncode != 0:
            err = p.stderr.replace(self.mapped(name), name)
            if "No such" in err:
                err = f"Error: No such container: {name}\n"
            sys.stderr.write(err)
            return 1
        try:
            info = json.loads(p.stdout)[0]
            running = info["State"]["Running"] and not info["State"].get("Paused")
            cid = info["Id"]
        except (ValueError, KeyError, IndexError):
            running, cid = False, name
        if not running:
            sys.stderr.write(f"Error response from daemon: Container {cid} is not running\n")
            return 1
        run_env = dict(os.environ)
        run_env.update(env)
        run_env[MARKER_ENV] = cid
        # The container's "/" (Docker's default working dir) is, for a command run on the
        # node itself, the node's home: never the caller's cwd (srun's, a checkout), where a
        # Hydra app would leave its outputs/.
        workdir = workdir or os.environ.get("HOME") or "/"
        if workdir:
            try:
                os.chdir(workdir)
            except OSError:
                sys.stderr.write(f"OCI runtime exec failed: chdir to cwd (\"{workdir}\") set in config.json failed: "
                                 "no such file or directory: unknown\n")
                return 126
        if detach:
            subprocess.Popen(cmd, env=run_env, start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return 0
        try:
            os.execvpe(cmd[0], cmd, run_env)
        except FileNotFoundError:
            sys.stderr.write(f'OCI runtime exec failed: exec failed: unable to start container process: exec: '
                             f'"{cmd[0]}": executable file not found in $PATH: unknown\n')
            return 126
        return 0  # not reached


def main(node: str, real: str, host: str, config_dir: str | None = None, privileged: bool = True) -> int:
    return Wrapper(node, real, host, config_dir, privileged).main(sys.argv[1:])


def wrapper_script(node: str, real: str, host: str, config_dir: str, privileged: bool, python: str,
                   repo_root: str) -> str:
    """The node's `docker`: sh for the hot path (`docker inspect --type container
    NAME`, run by the telemetry sampler every refresh), this module for the rest. A
    Python start per sample per node would cost more than the sample itself."""
    return f"""#!/bin/sh
# This node's docker (rlconsole sim): the sim's private dockerd, container names mapped
# to NAME-{node}. See tui/sim/dockerwrap.py.
export DOCKER_HOST='{host}' DOCKER_CONFIG='{config_dir}'
if [ "$#" -eq 4 ] && [ "$1" = inspect ] && [ "$2" = --type ] && [ "$3" = container ]; then
  case "$4" in
    *[!A-Za-z0-9_-]*|'') ;;
    *)
      out=$('{real}' inspect --type container "$4-{node}" 2>&1); rc=$?
      printf '%s\\n' "$out" | sed "s/$4-{node}/$4/g"
      exit $rc ;;
  esac
fi
exec '{python}' -IS -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from tui.sim.dockerwrap import main; sys.exit(main(*sys.argv.pop(1).split("|"), privileged=sys.argv.pop(1) == "1"))' '{repo_root}' '{node}|{real}|{host}|{config_dir}' '{1 if privileged else 0}' "$@"
"""  # noqa: E501 - one exec line of a generated shell script
