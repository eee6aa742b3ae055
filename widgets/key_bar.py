"""The key bar at the bottom of the main screen.

Textual's `Footer` rebuilds one widget per key every time the active screen changes,
which made opening any dialog (help, a confirmation) cost ~80 ms on its own. The keys
of the main screen never change, so this bar renders them as one line of text, laid out
for the width it has (`fit_keys`): labels while they all fit, then bare keys for the
less essential ones, so nothing is cut at 120 columns and `?` (help) and `q` (quit) are
always on screen, even at 80.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from rich.text import Text
from textual.widgets import Static


class KeyLike(Protocol):
    """What the bar needs of a key (the app's `KeyAction` is one); the screen passes
    its keys in, so this widget knows nothing of the app's key table."""

    @property
    def key(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def footer(self) -> bool: ...

    @property
    def shown_key(self) -> str: ...


ALWAYS_LABELLED = ("question_mark", "q")
"""Keys that keep their label at every width: the way to learn the rest, and the way out."""
PALETTE = ("^p", "palette")


def _cost(key: str, label: str | None) -> int:
    """Columns one entry takes: " k " plus "label " when labelled."""
    return len(key) + 2 + (len(label) + 1 if label else 0)


def fit_keys(keys: Sequence[KeyLike], width: int) -> list[tuple[str, str | None]]:
    """The (key, label-or-None) entries to show in `width` columns.

    Full labels when everything fits. Otherwise labels go, view keys (the end of the
    table) first, then the chain keys, but `?` and `q` keep theirs; then the palette hint
    shrinks to its key, then goes; on a very narrow bar bare keys go from the end, never
    `?` or `q`."""
    shown = [k for k in keys if k.footer]
    entries: list[tuple[str, str | None]] = [(k.shown_key, k.label) for k in shown]
    keep = [k.key in ALWAYS_LABELLED for k in shown]

    def fits(es: list[tuple[str, str | None]]) -> bool:
        return sum(_cost(k, lab) for k, lab in es) <= width

    if fits(entries + [PALETTE]):
        return entries + [PALETTE]
    for i in reversed(range(len(shown))):
        if not keep[i]:
            entries[i] = (entries[i][0], None)
            labelled = any(lab for (_, lab), kept in zip(entries, keep) if lab and not kept)
            if labelled and fits(entries + [PALETTE]):
                return _with_short_labels(shown, entries, lambda es: fits(es + [PALETTE])) + [PALETTE]
    # every label but ?'s and q's gone: the chain's short ones come back before the palette hint
    entries = _with_short_labels(shown, entries, fits)
    if fits(entries + [PALETTE]):
        return entries + [PALETTE]
    if fits(entries + [(PALETTE[0], None)]):
        return entries + [(PALETTE[0], None)]
    for i in reversed(range(len(shown))):
        if fits([e for e in entries if e[0]]):
            break
        if not keep[i]:
            entries[i] = ("", None)
    return [e for e in entries if e[0]]


def _with_short_labels(shown: Sequence[KeyLike], entries: list[tuple[str, str | None]],
                       fits: Callable[[list[tuple[str, str | None]]], bool]) -> list[tuple[str, str | None]]:
    """Bare keys that have a short label (`short`: the chain's u m c r s) get it back, in
    order, while the bar still fits: at 80 columns the chain reads "u up  m model ..."."""
    for i, k in enumerate(shown):
        short = getattr(k, "short", "")
        if short and entries[i][0] and entries[i][1] is None:
            trial = entries[:i] + [(entries[i][0], short)] + entries[i + 1:]
            if fits([e for e in trial if e[0]]):
                entries = trial
    return entries


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; background: $footer-background; color: $footer-foreground; }
    """

    def __init__(self, keys: Sequence[KeyLike], **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.can_focus = False
        self.keys = keys
        self._width = -1

    def on_mount(self) -> None:
        self._relayout()

    def on_resize(self) -> None:
        self._relayout()

    def _relayout(self) -> None:
        w = self.size.width or self.app.size.width
        if w != self._width:
            self._width = w
            self.update(self._text(w))

    def _text(self, width: int) -> Text:
        key_style = self.app.theme_variables.get("footer-key-foreground", "") or "bold"
        t = Text(no_wrap=True, overflow="ellipsis")
        for key, label in fit_keys(self.keys, width):
            t.append(f" {key} ", style=f"bold {key_style}")
            if label:
                t.append(f"{label} ")
        return t
