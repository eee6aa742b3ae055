"""Header badges that cannot be missed: SIMULATED (numbers from a simulated cluster must
never be mistaken for a real run's) and READ-ONLY (whoever was handed the console sees at
once that its keys cannot change the cluster, and why the action keys are missing)."""

from __future__ import annotations

from textual.widgets import Static


class Badge(Static):
    """One bold word in the header row, hidden when its condition does not hold."""

    TEXT = ""

    def __init__(self, shown: bool, **kw) -> None:
        super().__init__(self.TEXT, **kw)
        self.set_class(not shown, "-hidden")


class SimBadge(Badge):
    TEXT = "SIMULATED"
    DEFAULT_CSS = """
    SimBadge { width: auto; height: 1; padding: 0 1; background: $warning; color: $text; text-style: bold; }
    SimBadge.-hidden { display: none; }
    """


class ReadOnlyBadge(Badge):
    TEXT = "READ-ONLY"
    DEFAULT_CSS = """
    ReadOnlyBadge { width: auto; height: 1; padding: 0 1; background: $primary; color: $text; text-style: bold; }
    ReadOnlyBadge.-hidden { display: none; }
    """
