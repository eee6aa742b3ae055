"""A yes/no modal that names exactly what will happen.

Destructive keys (`x` stop job, `X` stop Ray, convert --force) cost hours if pressed by
mistake, so they ask first, and the question is the concrete action ("stop job
raysubmit_... at step 812; last checkpoint at step 800"), never "Are you sure?". Cancel
has the focus, so a stray Enter does nothing.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tui.core.safetext import shown


class ConfirmationModal(ModalScreen[bool]):
    """Dismisses with True (confirm) or False (cancel, Escape, n)."""

    DEFAULT_CSS = """
    ConfirmationModal { align: center middle; background: $background; }
    ConfirmationModal > Vertical {
        width: 72; max-width: 95%; height: auto; padding: 1 2;
        border: thick $error 60%; background: $panel;
    }
    ConfirmationModal.-safe > Vertical { border: thick $primary 60%; }
    ConfirmationModal #confirm-title { text-style: bold; margin-bottom: 1; }
    ConfirmationModal #confirm-message { margin-bottom: 1; }
    ConfirmationModal Horizontal { height: auto; align-horizontal: right; }
    ConfirmationModal Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("escape,n", "cancel", "Cancel"),
        Binding("y", "confirm", "Confirm"),
    ]

    def __init__(self, title: str, message: str, confirm_label: str = "Confirm",
                 cancel_label: str = "Cancel", destructive: bool = True) -> None:
        super().__init__()
        # a question may name a running job (its id from Ray's dashboard) or quote a check:
        # the one rule for outside text (tui/core/safetext.py)
        self.title_text = shown(title)
        self.message = shown(message, lines=True)
        self.confirm_label = confirm_label
        self.cancel_label = cancel_label
        self.set_class(not destructive, "-safe")
        self.destructive = destructive

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, id="confirm-title", markup=False)
            yield Static(self.message, id="confirm-message", markup=False)
            with Horizontal():
                yield Button(f"{self.cancel_label} (n)", id="cancel")
                yield Button(f"{self.confirm_label} (y)", id="confirm",
                             variant="error" if self.destructive else "primary")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#confirm")
    def action_confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)
