"""Issue 36 major 8 in a real terminal: the graph screen's `:` step-range prompt was
drawn under the key bar (two bottom docks), so what the user typed was invisible. Under
tmux, on the StaticBackend, the typed range is on the screen."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.test_tui_tmux import PROFILE, ROOT, Tmux, tmux  # noqa: F401 - the fixture

WIDTH, HEIGHT = 120, 40


def test_the_step_range_prompt_is_visible_as_typed(tmux: Tmux, tmp_path: Path) -> None:  # noqa: F811
    env = {"RLCONSOLE_STATIC_BACKEND": "1", "RLCONSOLE_STATE_DIR": str(tmp_path / "state"),
           "RLCONSOLE_CONFIG_DIR": str(tmp_path / "config"), "TERM": "xterm-256color", "LANG": "C.UTF-8",
           "PYTHONPATH": str(ROOT)}
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    profile = tmp_path / "seed-on-loopback.yaml"
    seen: dict[str, str] = {}
    profile.write_text(re.sub(r"\b10\.10\.\d+\.\d+\b",
                              lambda m: seen.setdefault(m.group(0), f"127.0.0.{len(seen) + 2}"),
                              PROFILE.read_text()))
    cmd = f"env -u COLUMNS -u LINES {exports} {sys.executable} -m tui.cli --profile {profile}"
    tmux.run("new-session", "-d", "-s", "main", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(ROOT), cmd)
    tmux.wait(lambda s: "node125" in s and "Quit" in s, "the main screen", timeout=60)
    tmux.keys("g")
    tmux.wait(lambda s: "Scalars (" in s and "export CSV" in s, "the graph screen", timeout=60)
    tmux.keys(":")
    # the prompt itself (its placeholder) is drawn, above the key bar
    tmux.wait(lambda s: "step range FROM:TO" in s, "the prompt", timeout=60)
    tmux.keys("-l", "700:760")
    screen = tmux.wait(lambda s: "700:760" in s, "the typed range on screen", timeout=60)
    lines = screen.rstrip("\n").splitlines()
    prompt = next(i for i, ln in enumerate(lines) if "700:760" in ln)
    assert "export CSV" in "\n".join(lines[prompt + 1:]), "the key bar stays under the prompt"
    tmux.keys("Enter")
    tmux.wait(lambda s: "steps 700:760" in s, "the range applied", timeout=60)
    tmux.keys("Escape")
    tmux.keys("q")
