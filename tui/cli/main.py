"""`rlconsole`: the command line, one face of the core (the TUI is the other).

Every subcommand loads the profile through the same loader and reports problems as one
line on stderr with a documented exit status (0 done, 1 failed, 2 bad profile/usage).
Heavy modules (Textual, asyncssh, ray, tbparse) are imported inside the subcommand that
needs them, so `rlconsole render` or `check --static` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Callable, NoReturn

from tui.cli.completion import SHELLS
from tui.cli.serve import DEFAULT_PORT as SERVE_PORT
from tui.core.errors import RlconsoleError, UsageError

log = logging.getLogger("rlconsole.cli")


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its message to one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"rlconsole: {message} (see `rlconsole --help`)\n")


def _sim_profile_fallback() -> str | None:
    try:
        from tui.sim.cluster import running_profile
    except ImportError:
        return None
    try:
        p = running_profile()
    except Exception:  # noqa: BLE001 - a broken sim state must not break profile lookup
        return None
    return str(p) if p else None


def _load(args: argparse.Namespace):  # -> Profile
    from tui.core.profile import load_profile, resolve_profile

    spec = getattr(args, "profile", None)
    path = resolve_profile(spec, _sim_profile_fallback)
    prof = load_profile(path)
    if getattr(args, "read_only", False):
        from dataclasses import replace

        prof = replace(prof, console=replace(prof.console, read_only=True))
    log.info("profile %s (%s)%s", prof.name, prof.path, " read-only" if prof.console.read_only else "")
    from tui.core.profile import cwd_profile_warning

    warning = cwd_profile_warning(prof, found=path, spec=spec or os.environ.get("RLCONSOLE_PROFILE"))
    if getattr(args, "no_profile_commands", False):
        # a served tab's console: `serve` asked (or not) and ran without them; a tab has no
        # terminal to ask at, and the file it is given is the resolved one (a link's target)
        if prof.notify.to or prof.ssh.config is not None:
            prof = _without_local_commands(prof)
    elif warning is not None:
        prof = _gate_cwd_profile(args, prof, warning)
    return prof


def _without_local_commands(prof: Any) -> Any:
    from dataclasses import replace

    return replace(prof, notify=replace(prof.notify, to=[]), ssh=replace(prof.ssh, config=None))


def _gate_cwd_profile(args: argparse.Namespace, prof: Any, warning: str) -> Any:
    """A profile from the current directory that runs local commands (`notify.to`,
    `ssh.config`: `cwd_profile_warning`) has them used only once the person says so:
    `--trust-profile`, or `y` to the question at a terminal. Otherwise (headless, or not
    `y`) the run goes on without them: no notify target, no ssh.config (the user's own
    ~/.ssh/config applies), and the warning says so and how to use them. Said once either
    way (stderr, and an alert in the console)."""
    from tui.core.safetext import shown

    trusted = bool(getattr(args, "trust_profile", False))
    asked = answered = False
    if not trusted and sys.stdin.isatty() and sys.stderr.isatty():
        sys.stderr.write(f"rlconsole: warning: {shown(warning, lines=True)}\n"
                         "use its local commands for this run? [y/N] ")
        sys.stderr.flush()
        asked = True
        trusted = answered = sys.stdin.readline().strip().lower() in ("y", "yes")
    if trusted:
        text = f"{warning} (used: {'answered y' if answered else '--trust-profile'})"
    else:
        prof = _without_local_commands(prof)
        text = (f"{warning}. Not used for this run (nothing it names runs or is posted to); "
                "pass --trust-profile, or answer y at a terminal, to use them")
    args.profile_commands = "trusted" if trusted else "dropped"  # (what `serve` hands its tabs)
    if asked:  # the question said it on stderr: the console's alert still shows it
        args.notices = [*getattr(args, "notices", []), text]
    else:
        _notice(args, text)
    return prof


# --------------------------------------------------------------------------- commands


def cmd_render(args: argparse.Namespace) -> int:
    from tui.core.render import render

    job = render(_load(args))
    if not args.show_secrets:  # the job's env goes to a terminal, a paste, a ticket...
        job = job.masked()
    if args.json:
        print(json.dumps(job.to_json(), indent=2))
    else:
        sys.stdout.write(job.to_text())
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from tui.cli.status import run_status

    return run_status(_load(args), json=args.json)


def cmd_check(args: argparse.Namespace) -> int:
    from tui.cli.check import run_check_cli

    return run_check_cli(_load(args), as_json=args.json, static=args.static)


def cmd_action(args: argparse.Namespace) -> int:
    from tui.cli.actions import run_action_cli

    return run_action_cli(_load(args), args)


def cmd_logs(args: argparse.Namespace) -> int:
    from tui.cli.logs import run_logs

    return run_logs(_load(args), job_id=args.job, follow=args.follow, tail=args.tail)


def cmd_metrics(args: argparse.Namespace) -> int:
    from tui.cli.metrics import MetricsSourceError, load_metrics, spool_log_for_job, write_csv, write_json

    try:
        if (args.source is None) == (not args.job):
            raise UsageError("metrics: give a SOURCE (log file or TensorBoard dir) or --job ID (local spool)")
        if args.key and len(args.job or []) < 2:
            raise UsageError("metrics: --key picks the columns of two or more --job runs side by side")
        if args.job and len(args.job) > 1:
            from tui.core.job.compare import side_by_side

            for job in args.job:
                spool_log_for_job(job)  # the one rule for a typed id, and a clear line if nothing is spooled
            rows = side_by_side(args.job, args.key or ())
        else:
            rows = load_metrics(args.source if not args.job else spool_log_for_job(args.job[0]))
    except FileNotFoundError as e:
        raise UsageError(str(e) if str(e) else f"{args.source}: not found") from None
    except MetricsSourceError as e:
        raise UsageError(str(e)) from None
    if not rows:
        print(f"rlconsole: no steps found in {args.source or ', '.join(args.job)} (no VeRL step lines, file-logger records "
              "or TensorBoard scalars)", file=sys.stderr)
    if args.csv:
        write_csv(rows, sys.stdout)
    else:
        write_json(rows, sys.stdout)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from tui.cli.runs import run_runs

    return run_runs(_load(args), as_json=args.json, sort=args.sort)


def cmd_journal(args: argparse.Namespace) -> int:
    from tui.cli.journal import run_journal

    fmt = "json" if args.json else "markdown" if args.markdown else "text"
    return run_journal(_load(args), args.run, fmt)


def cmd_diagnose(args: argparse.Namespace) -> int:
    from tui.cli.diagnose import run_diagnose

    return run_diagnose(args.log, as_json=args.json)


def cmd_sim(args: argparse.Namespace) -> int:
    from tui.sim import cluster

    if args.sim_cmd == "up":
        path = cluster.sim_up(args.nodes, args.gpus, replay_gpu=args.replay_gpu, bastion=args.bastion,
                              sshd=args.sshd, verl=args.verl, slurm=args.slurm,
                              notice=lambda t: print(f"rlconsole: warning: {t}", file=sys.stderr))
        print(path)
        return 0
    if args.sim_cmd in ("stop-node", "start-node"):
        if not args.node:
            raise UsageError(f"sim {args.sim_cmd} needs a node name (e.g. node2)")
        cluster.sim_node(args.sim_cmd.split("-")[0], args.node)
        print(f"{args.node}: SSH server {'stopped' if args.sim_cmd == 'stop-node' else 'started'}")
        return 0
    if args.sim_cmd == "fault":
        from tui.sim import faults

        if args.list or not args.node:
            if not args.list:
                raise UsageError("sim fault needs a KIND, `clear` or --list")
            print(faults.fault_list_text(), end="")
            return 0
        if args.node == "clear":
            done = faults.clear_faults()
            print("\n".join(done) if done else "no fault was planted")
            return 0
        body = faults.plant_fault(args.node, node=args.fault_node, at_step=args.at_step, card=args.card)
        where = f" on {body['node']}" if body["node"] else ""
        when = f" from step {body['at_step']}" if body["at_step"] else " at the next step"
        print(f"fault {body['kind']} planted{where}{when}; undo: rlconsole sim fault clear")
        return 0
    if args.sim_cmd == "down":
        stopped = cluster.sim_down()
        print("simulated cluster stopped" if stopped else "no simulated cluster was running")
        return 0
    st = cluster.sim_status()
    print(json.dumps(st.to_json(), indent=2) if args.json else st.to_text())
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from tui.core.importer import import_script, render_profile, summary
    from tui.core.profile import load_profile_text

    res = import_script(args.script, hostfile=args.hostfile, name=args.name,
                        keep_dropped=args.keep_dropped,
                        home=args.home or os.environ.get("HOME") or "/root")
    text = render_profile(res)
    out = args.output
    load_profile_text(text, out or "<imported profile>")  # never write a profile that does not load
    if out and out != "-":
        if Path(out).exists() and not args.force:
            raise UsageError(f"{out} exists; pass --force to replace it")
        Path(out).write_text(text, encoding="utf-8")
        sys.stderr.write(summary(res, out))
    else:
        sys.stdout.write(text)
        sys.stderr.write(summary(res, None))
    return 0


def cmd_tui(args: argparse.Namespace) -> int:
    from tui.cli.console import run_app

    prof = _load(args)
    return run_app(prof, bell=False if getattr(args, "no_bell", False) else None,
                   notices=list(getattr(args, "notices", [])))


def cmd_watch(args: argparse.Namespace) -> int:
    from tui.cli.watch import run_watch

    return run_watch(_load(args), args.notify, args.level)


def cmd_serve(args: argparse.Namespace) -> int:
    from tui.cli.serve import run_serve

    prof = _load(args)
    return run_serve(prof, host=args.host, port=args.port, allow_remote=args.allow_remote,
                     allow_actions=args.allow_actions, profile_commands=getattr(args, "profile_commands", None))


def cmd_profiles(args: argparse.Namespace) -> int:
    """Every profile `--profile NAME` can find, and where; the first of a name wins."""
    from tui.core.profile import available_profiles, profile_search_dirs

    found = list(available_profiles())
    if args.names:
        for name, _ in found:
            print(name)
        return 0
    for name, path in found:
        print(f"{name:<32} {path}")
    if not found:
        print("no profiles found", file=sys.stderr)
    print("searched, in order: " + ", ".join(str(d) for d in profile_search_dirs()), file=sys.stderr)
    return 0


def cmd_completion(args: argparse.Namespace) -> int:
    from tui.cli.completion import script

    sys.stdout.write(script(args.shell, build_parser()))
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rlconsole")
    except PackageNotFoundError:  # run from a checkout without installing
        return "unknown (not installed)"


def cmd_demo(args: argparse.Namespace) -> int:
    from tui.cli.console import run_demo

    return run_demo(nodes=args.nodes, gpus=args.gpus, bell=False if getattr(args, "no_bell", False) else None)


# --------------------------------------------------------------------------- parser


EPILOG = """\
examples:
  rlconsole demo                                  the console on a simulated 4 x 8 cluster
  rlconsole --read-only -P my-run                 the console for a colleague: watch only
  rlconsole render -P qwen3-8b-grpo-32gpu         what submit would run; changes nothing
  rlconsole check --static -P my-run              preflight without opening a connection
  rlconsole status --json | jq .job               one snapshot for scripts
  rlconsole submit -P my-run --yes                headless actions need --yes
  rlconsole metrics runs/tb/ --csv > metrics.csv  TensorBoard dir or VeRL log -> CSV
  rlconsole diagnose run.log                      why a run died, from a saved log
  rlconsole runs --json                           every run: steps, GPU-hours, resumed from
  rlconsole journal --markdown > postmortem.md    the last run's timeline as a page

environment:
  RLCONSOLE_PROFILE         the profile when --profile is not given
  RLCONSOLE_CONFIG_DIR      user config dir (profiles/, diagnosis.yaml); default
                            $XDG_CONFIG_HOME/rlconsole
  RLCONSOLE_STATE_DIR       state dir (debug log, run history, log spool); default
                            $XDG_STATE_HOME/rlconsole
  RLCONSOLE_SIM_DIR         the simulated cluster's state dir; default
                            $XDG_STATE_HOME/rlconsole/sim
  RLCONSOLE_STATIC_BACKEND  1: the console shows fixed demo data, no cluster
  NO_COLOR                  set: no colour in command output

exit status: 0 done, 1 a check or action failed, 2 bad profile or usage.
"""


def build_parser() -> argparse.ArgumentParser:
    # Each global flag in its own parent parser: the top level takes them all (`rlconsole
    # --read-only -P run`), a subcommand only those that do something there, so that its
    # `--help` lists no flag it would ignore.
    # SUPPRESS: an option given before the subcommand must not be reset by the
    # subcommand's own default (`rlconsole --profile P status` == `status --profile P`).
    profile_flag = _Parser(add_help=False)
    profile_flag.add_argument("--profile", "-P", metavar="P", default=argparse.SUPPRESS,
                              help="profile path or name (./profiles, user config dir, packaged)")
    profile_flag.add_argument("--trust-profile", action="store_true", default=argparse.SUPPRESS,
                              help="a profile from the current directory may run its local commands "
                                   "(notify.to, ssh.config) without the question")
    profile_flag.add_argument("--no-profile-commands", action="store_true", default=argparse.SUPPRESS,
                              help="a profile from the current directory: run without its local commands "
                                   "(notify.to, ssh.config), no question (serve hands it to its tabs)")
    verbose_flag = _Parser(add_help=False)
    verbose_flag.add_argument("--verbose", "-v", action="store_true", default=argparse.SUPPRESS,
                              help="mirror the debug log on stderr")
    bell_flag = _Parser(add_help=False)
    bell_flag.add_argument("--no-bell", action="store_true", default=argparse.SUPPRESS,
                           help="the console: no terminal bell on error alerts (profile: console.bell)")
    read_only_flag = _Parser(add_help=False)
    read_only_flag.add_argument("--read-only", action="store_true", default=argparse.SUPPRESS,
                                help="watch only: keys and actions that change the cluster are refused "
                                     "(profile: console.read_only)")
    common = [profile_flag, verbose_flag, bell_flag, read_only_flag]
    PROFILE = (profile_flag,)
    READ_ONLY = (profile_flag, read_only_flag)

    p = _Parser(prog="rlconsole", parents=common,
                description="Bring up and watch a multi-node VeRL run on a Ray cluster.",
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"rlconsole {_version()}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str,
            flags: tuple[_Parser, ...] = ()) -> argparse.ArgumentParser:
        """A subcommand with --verbose and the global `flags` that apply to it."""
        sp = sub.add_parser(name, parents=[*flags, verbose_flag], help=help, description=help)
        sp.set_defaults(fn=fn)
        return sp

    sp = add("render", cmd_render, "print exactly what submit would run; changes nothing", PROFILE)
    sp.add_argument("--json", action="store_true", help="entrypoint, overrides and runtime env as JSON")
    sp.add_argument("--show-secrets", action="store_true",
                    help="print credentials (*TOKEN*, *KEY*, *SECRET*, *PASSWORD*, URL passwords) in clear; "
                         "masked as *** by default")

    sp = add("status", cmd_status, "one-shot snapshot of nodes, cards, containers, Ray, job", PROFILE)
    sp.add_argument("--json", action="store_true", help="the snapshot as JSON (the README documents its fields)")

    from tui.core.actions.registry import ACTION_TABLE

    specs = {a.name: a for a in ACTION_TABLE}
    sp = add("check", cmd_check, specs["check"].help, PROFILE)
    sp.add_argument("--json", action="store_true", help="results as JSON")
    sp.add_argument("--static", action="store_true", help="only checks that open no connection")

    for spec in ACTION_TABLE:
        if spec.name == "check":
            continue  # its own sub-command above: it prints results, not progress
        name = spec.name
        sp = add(name, cmd_action, spec.help, READ_ONLY)  # read-only: the action is refused
        sp.add_argument("--yes", "-y", action="store_true", help="do not ask; needed headless")
        sp.add_argument("--json", action="store_true", help="print progress events as JSON lines")
        for o in spec.options:  # the action table declares them: the flags and the runner's options agree
            if o.metavar:
                sp.add_argument(o.flag, metavar=o.metavar, help=o.help)
            else:
                sp.add_argument(o.flag, action="store_true", help=o.help)

    sp = add("logs", cmd_logs, "print the job's driver log", PROFILE)
    sp.add_argument("--job", metavar="ID", help="the Ray submission id (default: the running or last job)")
    sp.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until interrupted")
    sp.add_argument("--tail", "-n", type=int, metavar="N",
                    help="print only the last N lines (then follow with -f)")

    sp = add("metrics", cmd_metrics, "step metrics from a VeRL log file or a TensorBoard run dir")
    sp.add_argument("source", metavar="SOURCE", nargs="?",
                    help="a VeRL log file, a file-logger JSONL file, or a TensorBoard run directory or event file")
    sp.add_argument("--job", metavar="ID", action="append",
                    help="read the job's locally spooled driver log instead (no SSH); twice or more: the runs "
                         "side by side, columns JOB:KEY, each run stitched onto the run it resumed")
    sp.add_argument("--key", metavar="KEY", action="append",
                    help="with two or more --job: only this metric (repeatable), e.g. critic/score/mean")
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="(default) a list of {step, metrics}")
    g.add_argument("--csv", action="store_true", help="one row per step, one column per metric")

    sp = add("runs", cmd_runs, "every run of the profile from the local history and spools (no SSH): "
                               "status, steps, wall time, GPU-hours, rewards, resume links", PROFILE)
    sp.add_argument("--json", action="store_true", help="a list of runs; unknown figures null and named in `unknown`")
    sp.add_argument("--sort", metavar="BY",
                    help="order: started (oldest first), or a figure biggest first, runs without it last: "
                         "reward, best, gpu-hours, wall, throughput, steps")

    sp = add("journal", cmd_journal, "what happened to a run: actions, alerts, state changes, checkpoints "
                                     "(local, no SSH)", PROFILE)
    sp.add_argument("run", metavar="RUN", nargs="?", help="the Ray submission id (default: the profile's last run)")
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="the entries as JSON lines (the README documents the fields)")
    g.add_argument("--markdown", action="store_true",
                   help="a post-mortem page: summary table, timeline, diagnosis, links to the log lines")

    sp = add("diagnose", cmd_diagnose, "name the cause of a failed run from a saved log (driver log, "
                                       "`ray job logs` output, a pasted excerpt)")
    sp.epilog = "example: ray job logs raysubmit_XYZ > run.log; rlconsole diagnose run.log"
    sp.add_argument("log", metavar="LOG", help="the log file; - reads stdin")
    sp.add_argument("--json", action="store_true",
                    help='{"id", "title", "fix", "line" (1-based), "also"}; id and line null when nothing known')

    sp = add("import", cmd_import, "turn a VeRL launch script (+ hostfile) into a profile; runs nothing")
    sp.add_argument("script", metavar="SCRIPT", help="the launch script (bash); it is read, never run")
    sp.add_argument("--hostfile", metavar="FILE", help="one host per line, `host slots=N` or `ip gpus`")
    sp.add_argument("--name", metavar="NAME", help="the profile's name (default: the script's)")
    sp.add_argument("-o", "--output", metavar="PROFILE.yaml", help="write here (default: stdout)")
    sp.add_argument("--keep-dropped", action="store_true",
                    help="keep the overrides bash drops after a comment/blank line in a continuation")
    sp.add_argument("--home", metavar="DIR", help="what $HOME and ~ expand to (default: yours)")
    sp.add_argument("--force", action="store_true", help="replace an existing -o file")

    sp = add("sim", cmd_sim, "the simulated cluster in the background")
    sp.add_argument("sim_cmd", choices=["up", "down", "status", "stop-node", "start-node", "fault"],
                    help="stop-node/start-node NAME: take one node's SSH server down or back up; "
                         "fault KIND|clear: make the running job fail as a real one does (fault --list)")
    sp.add_argument("node", nargs="?", help="for stop-node/start-node: the node; for fault: KIND or clear")
    sp.add_argument("--node", dest="fault_node", metavar="NODE",
                    help="`sim fault`: the node it hits (default: the last node)")
    sp.add_argument("--at-step", type=int, metavar="S", help="`sim fault`: from step S on (default: the next step)")
    sp.add_argument("--card", type=int, metavar="C", help="`sim fault`: the card it hits (oom, card-hot, card-mem-lost)")
    sp.add_argument("--list", action="store_true", help="`sim fault --list`: the fault kinds")
    sp.add_argument("--nodes", type=int, default=4, help="simulated nodes (default 4; up to 200)")
    sp.add_argument("--gpus", type=int, default=8, help="cards per node (default 8)")
    sp.add_argument("--replay-gpu", metavar="FILE", help="every node's card tool prints FILE")
    sp.add_argument("--json", action="store_true", help="`sim status` as JSON")
    sp.add_argument("--bastion", action="store_true",
                    help="`sim up`: add a jump host; nodes accept SSH only from it (profile ssh.jump)")
    sp.add_argument("--sshd", choices=["builtin", "openssh"], default="builtin",
                    help="`sim up`: the nodes' SSH server: the built-in one (default) or OpenSSH's sshd, "
                         "one per node (needs openssh-server)")
    sp.add_argument("--slurm", action="store_true",
                    help="`sim up`: the nodes run by a real Slurm (slurmctld + one slurmd a node; root, and "
                         "Debian's slurmctld slurmd slurm-client munge); writes a Slurm profile")
    sp.add_argument("--verl", metavar="VERSION",
                    help="`sim up`: the VeRL release whose config the simulated trainer composes "
                         "(its wheel from the package index, cached; default 0.7.0)")

    sp = add("watch", cmd_watch, "follow the job headless: one line per alert and job state change, "
                                 "notifications for alerts", PROFILE)
    sp.epilog = ("example: rlconsole watch -P my-run --notify https://hooks.example.org/rl "
                 "--notify 'mail -s rlconsole me@example.org' --level error")
    sp.add_argument("--notify", action="append", metavar="URL|CMD",
                    help="webhook URL (JSON POST) or command (JSON on stdin); repeatable; "
                         "default: the profile's notify.to")
    sp.add_argument("--level", choices=["info", "warning", "error"],
                    help="least severe alert to send (default: notify.level, else warning)")

    sp = add("serve", cmd_serve, "the console in a browser (textual-serve): read-only, loopback, "
                                 "behind a random access token", READ_ONLY)
    sp.epilog = (f"example: rlconsole serve -P my-run --port {SERVE_PORT}, then on the laptop "
                 f"`ssh -L {SERVE_PORT}:127.0.0.1:{SERVE_PORT} head` and open the printed URL")
    sp.add_argument("--port", type=int, default=SERVE_PORT, metavar="N",
                    help=f"TCP port (default {SERVE_PORT}; 0: any free port, printed)")
    sp.add_argument("--host", default="127.0.0.1", metavar="ADDR",
                    help="address to listen on (default 127.0.0.1; others need --allow-remote)")
    sp.add_argument("--allow-remote", action="store_true",
                    help="allow a non-loopback --host (plain HTTP: prefer an SSH tunnel)")
    sp.add_argument("--allow-actions", action="store_true",
                    help="the served console may change the cluster (default: read-only)")

    sp = add("profiles", cmd_profiles, "list the profiles --profile NAME can find, and where")
    sp.add_argument("--names", action="store_true", help="names only, one a line (for shell completion)")

    sp = add("completion", cmd_completion, "print a shell completion script")
    sp.add_argument("shell", choices=list(SHELLS),
                    help="e.g. `rlconsole completion bash > ~/.local/share/bash-completion/completions/rlconsole`")

    sp = add("demo", cmd_demo, "start the simulated cluster and open the console on it", (bell_flag,))
    sp.add_argument("--nodes", type=int, default=4, help="simulated nodes (default 4)")
    sp.add_argument("--gpus", type=int, default=8, help="cards per node (default 8)")
    return p


def _notice(args: argparse.Namespace, text: str) -> None:
    """A warning said once at start: one line on stderr now, and an alert in the
    console (`cmd_tui` hands `args.notices` to it: its screen hides stderr). It may name a
    file of a repository just cloned: printed through the one rule for outside text."""
    from tui.core.safetext import shown

    print(f"rlconsole: warning: {shown(text, lines=True)}", file=sys.stderr)
    if not hasattr(args, "notices"):
        args.notices = []
    args.notices.append(text)


def _startup_notices() -> list[str]:
    """Tighten what an older version left readable to others under rlconsole's own
    dirs (state, spool, config), and say so; the next start finds nothing to say."""
    from tui.core.locations import tighten_permissions, tightened_message

    try:
        text = tightened_message(tighten_permissions())
    except OSError as e:  # a read-only or odd home must not stop the start
        log.info("tighten permissions: %s", e)
        return []
    if text is None:
        return []
    print(f"rlconsole: {text}", file=sys.stderr)
    return [text]


def main(argv: list[str] | None = None) -> int:
    # Files this process creates are private from creation (0700 dirs, 0600 files): the
    # state dir holds logs of what ran where, spools of job logs, the run history. A
    # chmod after creation would leave a window, and miss files made by libraries.
    os.umask(0o077)
    parser = build_parser()
    args = parser.parse_args(argv)
    from tui.core.debuglog import mask_secrets, setup_logging

    args.notices = _startup_notices()
    setup_logging(verbose=getattr(args, "verbose", False))
    fn = getattr(args, "fn", cmd_tui)
    log.info("command: %s", " ".join(sys.argv[1:] if argv is None else argv))
    try:
        return fn(args)
    except RlconsoleError as e:
        log.error("%s", e)
        # an error may quote a node or a peer (an SSH server's disconnect text): the one rule
        from tui.core.safetext import shown

        print(shown(mask_secrets(f"rlconsole: {e}" if not hasattr(e, "file") else str(e)), lines=True), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("rlconsole: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
