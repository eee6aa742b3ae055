"""Errors the CLI turns into one line on stderr and an exit status, never a traceback."""

from __future__ import annotations


class RlconsoleError(Exception):
    """Base for errors meant for the user. `exit_code` is what the CLI exits with."""

    exit_code = 1


class UsageError(RlconsoleError):
    exit_code = 2


class ProfileError(RlconsoleError):
    """A profile is wrong. Formats as `file:line: key.path: message`."""

    exit_code = 2

    def __init__(self, file: str, line: int | None, key: str | None, message: str) -> None:
        self.file = file
        self.line = line
        self.key = key
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file if not self.line else f"{self.file}:{self.line}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ActionError(RlconsoleError):
    """An action step failed; `node` and `output_tail` say where and what it printed."""

    exit_code = 1

    def __init__(self, message: str, node: str | None = None, output_tail: str = "") -> None:
        self.node = node
        self.message = message
        self.output_tail = output_tail
        super().__init__(str(self))

    def __str__(self) -> str:
        tail = " ".join(self.output_tail.strip().splitlines()[-3:])
        where = f"{self.node}: " if self.node else ""
        return f"{where}{self.message}" + (f" -- {tail}" if tail else "")
