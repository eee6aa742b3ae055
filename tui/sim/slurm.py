"""`rlconsole sim up --slurm`: the simulated nodes run by a real Slurm (Debian's slurmctld,
slurmd and munge), as `../shared/LAB.md` measured it on one machine.

* one munged (its own key and socket), one slurmctld, one slurmd per node;
* each slurmd in its own UTS + mount namespace (`unshare --uts --mount`): its host name is
  the node's (`node1`..), and a hosts file naming every node is bind-mounted on /etc/hosts
  there only; each node listens on its own loopback address (the sim's SSH node address);
* fake GPUs: `Gres=gpu:G` over character devices this module makes (`mknod c 195 N`:
  Slurm refuses plain files);
* settings that work here: proctrack/linuxproc, task/none, select/cons_tres,
  `SlurmdParameters=config_overrides`, no `CommunicationParameters=NoInAddrAny` (it hangs
  an srun started on a node), ports outside Ray's worker range (10002-19999), SlurmUser=root;
* a task's environment is the node's (its PATH with the node's `docker`, `ray` and card
  tool first): a TaskProlog prints the node's `export` lines.

Root only (munged's key, mknod, namespaces, SlurmUser=root). `stop` cancels every job of
this controller first and waits for the queue to empty (else the jobs' processes live on),
then stops each daemon by its PID.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
CTLD_ADDRESS = "127.0.0.250"
"""slurmctld's own loopback address (nodes use 127.0.0.2..201, the bastion .254)."""
PARTITION = "sim"


def requirement_problem() -> str | None:
    """Why `sim up --slurm` cannot run here, in one line; None when it can."""
    if os.geteuid() != 0:
        return ("sim up --slurm needs root (munged's key, GPU device nodes, a UTS namespace per "
                "slurmd, SlurmUser=root)")
    missing = [p for p, exe in (("slurmctld", "slurmctld"), ("slurmd", "slurmd"), ("slurm-client", "sbatch"),
                                ("munge", "munged"), ("util-linux", "unshare"))
               if not _which(exe)]
    if missing:
        return f"sim up --slurm: not installed: {', '.join(missing)} (Debian: apt-get install {' '.join(missing)})"
    return None


def _which(exe: str) -> str | None:
    return shutil.which(exe) or next((p for p in (f"/usr/sbin/{exe}", f"/sbin/{exe}") if os.access(p, os.X_OK)),
                                     None)


def client_env(conf: str | Path) -> dict[str, str]:
    env = dict(os.environ)
    env["SLURM_CONF"] = str(conf)
    return env


def _conf_text(*, sd: Path, d: Path, nodes: list[dict[str, Any]], gpus: int, ctld_port: int,
               task_prolog: Path, dev_dir: Path) -> tuple[str, str]:
    host = socket.gethostname().split(".")[0]
    lines = [
        "# written by rlconsole sim up --slurm",
        "ClusterName=rlcsim",
        f"SlurmctldHost={host}({CTLD_ADDRESS})",
        f"SlurmctldPort={ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={sd / 'munge.sock'}",
        f"StateSaveLocation={sd / 'slurm' / 'ctld'}",
        f"SlurmdSpoolDir={sd / 'slurm' / 'spool-%n'}",
        f"SlurmctldPidFile={sd / 'slurm' / 'slurmctld.pid'}",
        f"SlurmdPidFile={sd / 'slurm' / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={d / 'slurm' / 'slurmctld.log'}",
        f"SlurmdLogFile={d / 'slurm' / 'slurmd-%n.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "SlurmdParameters=config_overrides",
        "SchedulerType=sched/backfill",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "GresTypes=gpu",
        f"TaskProlog={task_prolog}",
        "KillWait=5",
        "MinJobAge=2",
        "InactiveLimit=0",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
    ]
    for n in nodes:
        lines.append(f"NodeName={n['name']} NodeAddr={n['address']} Port={n['slurmd_port']} CPUs=64 "
                     f"RealMemory=256000 Gres=gpu:{gpus} State=UNKNOWN")
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    files = f"{dev_dir}/nvidia[0-{gpus - 1}]" if gpus > 1 else f"{dev_dir}/nvidia0"
    gres = "\n".join(f"NodeName={n['name']} Name=gpu File={files}" for n in nodes)
    return "\n".join(lines) + "\n", gres + "\n"


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as lf:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, start_new_session=True)


def start(*, d: Path, sd: Path, nodes: list[dict[str, Any]], gpus: int, node_envs: dict[str, dict[str, str]],
          ports: list[int], timeout: float = 60.0) -> dict[str, Any]:
    """Start munged, slurmctld and one slurmd per node; return what `stop` needs (PIDs,
    the config's path). `nodes`: [{name, address}], `ports`: 1 + len(nodes) free ports.
    Raises RuntimeError with the daemons' own words when the nodes do not come up idle."""
    problem = requirement_problem()
    if problem:
        raise RuntimeError(problem)
    (d / "slurm").mkdir(parents=True, exist_ok=True)
    for sub in ("ctld", "dev"):
        (sd / "slurm" / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(sd, 0o700)
    rec: dict[str, Any] = {"conf": str(d / "slurm" / "slurm.conf"), "pids": {}, "partition": PARTITION}
    nodes = [dict(n, slurmd_port=ports[1 + i]) for i, n in enumerate(nodes)]
    for n in nodes:
        (sd / "slurm" / f"spool-{n['name']}").mkdir(exist_ok=True)
    rec["nodes"] = [{"name": n["name"], "address": n["address"]} for n in nodes]
    dev_dir = sd / "slurm" / "dev"
    for i in range(gpus):
        dev = dev_dir / f"nvidia{i}"
        if not dev.exists():
            os.mknod(dev, 0o666 | 0o020000, os.makedev(195, i))  # S_IFCHR
    # every node's environment for its tasks (srun): the TaskProlog prints it
    for n in nodes:
        env_file = d / "nodes" / n["name"] / "task.env"
        env_file.write_text("".join(f"export {k}={v}\n" for k, v in node_envs[n["name"]].items()))
    prolog = d / "slurm" / "task_prolog.sh"
    prolog.write_text(f'#!/bin/sh\ncat "{d}/nodes/$SLURMD_NODENAME/task.env" 2>/dev/null\nexit 0\n')
    prolog.chmod(0o755)
    hosts = d / "slurm" / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"{n['address']} {n['name']}\n" for n in nodes)
                     + f"{CTLD_ADDRESS} {socket.gethostname().split('.')[0]}\n")
    conf, gres = _conf_text(sd=sd, d=d, nodes=nodes, gpus=gpus, ctld_port=ports[0], task_prolog=prolog,
                            dev_dir=dev_dir)
    Path(rec["conf"]).write_text(conf)
    (d / "slurm" / "gres.conf").write_text(gres)
    # munge: a key of its own, a socket in the sim's short dir
    key = d / "slurm" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    munged = _spawn([_which("munged") or "munged", "--foreground", "--force", f"--key-file={key}",
                     f"--socket={sd / 'munge.sock'}", f"--pid-file={sd / 'slurm' / 'munged.pid'}",
                     f"--seed-file={sd / 'slurm' / 'munged.seed'}", f"--log-file={d / 'slurm' / 'munged.log'}"],
                    d / "slurm" / "munged.out")
    rec["pids"]["munged"] = munged.pid
    _wait_for(lambda: (sd / "munge.sock").exists(), 10, "munged did not create its socket",
              d / "slurm" / "munged.log", munged)
    ctld = _spawn([_which("slurmctld") or "slurmctld", "-D", "-i", "-f", rec["conf"]], d / "slurm" / "slurmctld.out")
    rec["pids"]["slurmctld"] = ctld.pid
    rec["pids"]["slurmd"] = {}
    for n in nodes:
        script = (f"hostname {n['name']} && mount --bind {hosts} /etc/hosts && "
                  f"exec {_which('slurmd') or 'slurmd'} -D -N {n['name']} -f {rec['conf']}")
        p = _spawn(["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", script],
                   d / "slurm" / f"slurmd-{n['name']}.out")
        rec["pids"]["slurmd"][n["name"]] = p.pid
    env = client_env(rec["conf"])

    def idle() -> bool:
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, env=env, timeout=10)
        states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
        return r.returncode == 0 and len(states) == len(nodes) and all(s == "idle" for s in states.values())

    _wait_for(idle, timeout, "the Slurm nodes did not become idle", d / "slurm" / "slurmctld.log", ctld)
    return rec


def _wait_for(cond: Any, timeout: float, what: str, log_path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            if cond():
                return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = ""
    with contextlib.suppress(OSError):
        tail = " | ".join(log_path.read_text(errors="replace").strip().splitlines()[-4:])
    raise RuntimeError(f"{what} (log {log_path}: {tail or 'empty'})")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            return False
    return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stop_pid(pid: int | None, expect: str, grace: float = 5.0) -> None:
    """SIGTERM the daemon with this PID when its command line is still `expect`'s, then
    SIGKILL after `grace`."""
    if not pid or not _alive(pid) or expect not in _cmdline(pid):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def cancel_all(conf: str, timeout: float = 30.0) -> list[str]:
    """Cancel every job of this (private) controller and wait for its queue to empty;
    returns the job ids still listed at the end (empty when it emptied)."""
    env = client_env(conf)
    left: list[str] = []
    deadline = time.monotonic() + timeout
    sent: set[str] = set()
    while time.monotonic() < deadline:
        try:
            r = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=env, timeout=10)
        except (subprocess.SubprocessError, OSError):
            return left
        if r.returncode != 0:  # the controller is gone: nothing left to cancel
            return []
        left = r.stdout.split()
        if not left:
            return []
        new = [j for j in left if j not in sent]
        if new:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run(["scancel", *new], capture_output=True, env=env, timeout=10)
            sent.update(new)
        time.sleep(0.2)
    return left


def stop(rec: dict[str, Any] | None) -> None:
    """Cancel the jobs, wait for the queue to empty, then stop slurmd, slurmctld, munged by PID."""
    if not rec:
        return
    pids = rec.get("pids") or {}
    if rec.get("conf") and pids.get("slurmctld") and _alive(int(pids["slurmctld"])):
        cancel_all(rec["conf"])
    for pid in (pids.get("slurmd") or {}).values():
        _stop_pid(int(pid), "slurmd")
    _stop_pid(pids.get("slurmctld"), "slurmctld")
    _stop_pid(pids.get("munged"), "munged")
