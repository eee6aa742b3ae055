"""The command-line faces of rlconsole: one module per sub-command family, all built on
the core (`tui.core`), none of it imported by the core."""

from tui.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
