"""Each benchmark owns one section of BENCHMARKS.md, between `<!-- bench:NAME -->` and
`<!-- /bench:NAME -->`; writing one never touches the others."""

from __future__ import annotations

from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def write_section(name: str, body: str, heading: str | None = None, path: Path = BENCHMARKS_MD) -> None:
    """Replace the text between the section's markers; append the section (under
    `heading`) when the file does not have it yet."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if start in text and end in text:
        a = text.index(start) + len(start)
        b = text.index(end)
        text = text[:a] + "\n" + body.strip("\n") + "\n" + text[b:]
    else:
        text = text.rstrip("\n") + f"\n\n## {heading or name}\n{start}\n{body.strip()}\n{end}\n"
    path.write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- summary

SUMMARY_JSON = Path(__file__).resolve().parent / "summary.json"
SUMMARY_COLUMNS = ("figure", "baseline", "rlconsole", "ratio", "target", "met")


def record_summary(bench: str, rows: list[dict[str, str]], path: Path = BENCHMARKS_MD) -> None:
    """Keep `bench`'s rows of the one table BENCHMARKS.md opens with (figure, baseline,
    rlconsole, ratio, target, met or not), and re-render that table. Rows live in
    benchmarks/summary.json so each benchmark, run alone, updates only its own rows."""
    import json

    data = json.loads(SUMMARY_JSON.read_text(encoding="utf-8")) if SUMMARY_JSON.exists() else {}
    data[bench] = [{k: str(r.get(k, "")) for k in SUMMARY_COLUMNS} for r in rows]
    SUMMARY_JSON.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    lines = ["| figure | baseline | rlconsole | ratio | target | met |", "|---|---:|---:|---:|---:|---|"]
    for name in sorted(data):
        for r in data[name]:
            lines.append("| " + " | ".join(r[k] or "-" for k in SUMMARY_COLUMNS) + f" |")
    body = "\n".join(lines) + ("\n\nEach row is written by the benchmark named in its figure "
                               "(`python benchmarks/run_all.py` runs them all); sections below give the detail.")
    start, end = "<!-- bench:summary -->", "<!-- /bench:summary -->"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if start not in text:
        i = text.find("\n## ")
        block = f"\n## Summary\n{start}\n{end}\n"
        text = text + block if i < 0 else text[:i] + "\n" + block + text[i:]
        path.write_text(text, encoding="utf-8")
    write_section("summary", body, path=path)
