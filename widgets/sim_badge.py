"""A label that cannot be missed when the cluster is the simulator: numbers from a
simulated cluster must never be mistaken for a real run's."""

from __future__ import annotations

from textual.widgets import Static


class SimBadge(Static):
    DEFAULT_CSS = """
    SimBadge { width: auto; height: 1; padding: 0 1; background: $warning; color: $text; text-style: bold; }
    SimBadge.-hidden { display: none; }
    """

    def __init__(self, simulated: bool, **kw) -> None:
        super().__init__("SIMULATED", **kw)
        self.set_class(not simulated, "-hidden")


class ReadOnlyBadge(Static):
    """READ-ONLY in the header row: whoever was handed the console sees at once that its
    keys cannot change the cluster (and why the action keys are missing)."""

    DEFAULT_CSS = """
    ReadOnlyBadge { width: auto; height: 1; padding: 0 1; background: $primary; color: $text; text-style: bold; }
    ReadOnlyBadge.-hidden { display: none; }
    """

    def __init__(self, read_only: bool, **kw) -> None:
        super().__init__("READ-ONLY", **kw)
        self.set_class(not read_only, "-hidden")
