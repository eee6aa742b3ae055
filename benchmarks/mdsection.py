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
