"""The key bar at the bottom of the main screen.

Textual's `Footer` rebuilds one widget per key every time the active screen changes,
which made opening any dialog (help, a confirmation) cost ~80 ms on its own. The keys
of the main screen never change, so this bar renders them once as one line of text.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tui.commands import KEYS


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; background: $footer-background; color: $footer-foreground; }
    """

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.can_focus = False

    def on_mount(self) -> None:
        self.update(self._text())

    def _text(self) -> Text:
        key_style = self.app.theme_variables.get("footer-key-foreground", "") or "bold"
        t = Text(no_wrap=True, overflow="ellipsis")
        for k in KEYS:
            if not k.footer:
                continue
            t.append(f" {k.shown_key} ", style=f"bold {key_style}")
            t.append(f"{k.label} ")
        t.append(" ^p ", style=f"bold {key_style}")
        t.append("palette")
        return t
