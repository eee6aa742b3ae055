"""A run's post-mortem page in Markdown: its summary table, its timeline (the journal),
its diagnosis and where its log lines are. `rlconsole journal RUN --markdown` prints it,
for a ticket or a wiki page.

The journal's text came from nodes and logs (untrusted): every piece is escaped so it
reads as text, never as Markdown structure or HTML.
"""

from __future__ import annotations

import time
from pathlib import Path

from tui.core.job.journal import Entry
from tui.core.job.runs import RunSummary
from tui.core.safetext import md_code, md_text


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at is not None else "unknown"


def _hours(s: float | None) -> str:
    return f"{s / 3600:.2f} h" if s is not None else "unknown"


def _num(x: float | int | None, fmt: str = "{:.4g}") -> str:
    return fmt.format(x) if x is not None else "unknown"


def markdown(s: RunSummary, entries: list[Entry], log_path: Path | None) -> str:
    """The page. `log_path`: the run's spooled driver log (its lines are linked by number)."""
    out = [f"# Run {md_text(s.id)}", ""]
    if s.resumed_text:
        out += [f"Resumed from step {md_text(s.parent.get('step') if s.parent else '?')} of run "
                f"{md_text(s.parent.get('job_id') if s.parent else '?')}.", ""]
    steps = f"{_num(s.step, '{}')} / {_num(s.total_steps, '{}')}"
    rows = [("name", md_text(s.name) if s.name else "unknown"), ("profile", md_text(s.profile or "unknown")),
            ("status", md_text(s.status)), ("steps", steps), ("started", _when(s.started_at)),
            ("ended", _when(s.ended_at) if s.ended_at is not None else ("running" if s.status == "RUNNING" else "unknown")),
            ("wall time", _hours(s.wall_s)), ("cards", _num(s.cards, "{}")),
            ("GPU-hours", _num(s.gpu_hours, "{:.2f}")), ("last reward", _num(s.last_reward)),
            ("best reward", _num(s.best_reward)),
            ("mean throughput", _num(s.mean_throughput, "{:.0f} tokens/s per card") if s.mean_throughput else "unknown"),
            ("last checkpoint", _num(s.last_checkpoint, "step {}"))]
    out += ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    out += ["## Timeline", ""]
    if entries:
        out += ["| time | what | by |", "|---|---|---|"]
        for e in entries:
            line = e.data.get("line")
            where = f" (log line {line + 1})" if isinstance(line, int) else ""
            started = e.data.get("started_at") if e.kind == "action" else None
            if isinstance(started, (int, float)):
                where += f" (started {_when(started)})"
            out.append(f"| {_when(e.at)} | {md_text(e.kind)}: {md_text(e.message)}{where} | {md_text(e.who or '-')} |")
    else:
        out.append("No journal: no console, `watch` or CLI action recorded this run.")
    out += ["", "## Diagnosis", ""]
    found = [e for e in entries if e.kind == "alert" and e.data.get("diagnosis")]
    if found:
        e = found[-1]
        line = e.data.get("line")
        out.append(f"**{md_text(e.data['diagnosis'])}**: {md_text(e.message)}"
                   + (f" (log line {line + 1})" if isinstance(line, int) else ""))
    elif s.status == "FAILED":
        cmd = md_code(f"rlconsole diagnose {log_path or 'LOG'}")
        out.append(f"No known cause in the journal; try {cmd}.")
    else:
        out.append("None: the run did not fail with a known cause.")
    out += ["", "## Log", ""]
    if log_path is not None and log_path.exists():
        lines = sorted({e.data["line"] + 1 for e in entries if isinstance(e.data.get("line"), int)})
        out.append(f"The driver log, spooled: [{md_text(log_path.name)}]({log_path.as_uri()}); "
                   f"{md_code(f'rlconsole logs --job {s.id}')} prints it.")
        if lines:
            out.append("Lines the timeline points at: "
                       + ", ".join(f"[{n}]({log_path.as_uri()}#L{n})" for n in lines[:50]))
    else:
        out.append("No spooled driver log on this machine.")
    return "\n".join(out) + "\n"
