"""The console's own log: what it ran, where it connected, what failed.

Kept under the user's state directory so that after a bad night the user (or we) can
see exactly which remote commands ran. Secrets never reach it: a filter masks values
that look like credentials before any handler sees the record. Nor do terminal escapes:
a record quotes what nodes and SSH peers said, and the log is read with `tail` and
`less` (and mirrored on stderr with --verbose), so the same filter writes its control
characters as visible escapes (the one rule for outside text, tui/core/safetext.py).
"""

from __future__ import annotations

import logging
import os
import sys
from logging.handlers import RotatingFileHandler
from pathlib import Path

from tui.core.locations import log_path
from tui.core.safetext import shown

# The one masking rule lives in secrets.py; re-exported here for the modules that
# always imported it from the log.
from tui.core.secrets import SECRET_NAME, is_secret_name, mask_secrets  # noqa: F401


class SecretMaskingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not kill logging
            msg = str(record.msg)
        record.msg = shown(mask_secrets(msg), lines=True)
        record.args = None
        # a traceback quotes the failing call's text (urllib's error, a command line):
        # formatted here and masked, so no handler formats the raw one
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = shown(mask_secrets(record.exc_text), lines=True)
        if record.stack_info:
            record.stack_info = shown(mask_secrets(record.stack_info), lines=True)
        return True


_configured = False


def setup_logging(verbose: bool = False) -> Path | None:
    """Send the `rlconsole` logger to the state-dir log file (and stderr with --verbose).
    Never raises: a read-only home must not stop the console."""
    global _configured
    logger = logging.getLogger("rlconsole")
    logger.setLevel(logging.DEBUG)
    mask = SecretMaskingFilter()
    path: Path | None = None
    if not _configured:
        try:
            path = log_path()
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))  # born private
            fh = RotatingFileHandler(path, maxBytes=10_000_000, backupCount=3, encoding="utf-8")
            fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            fh.addFilter(mask)
            logger.addHandler(fh)
        except OSError:
            path = None
            # Without any handler, logging's "last resort" prints every warning and error
            # to stderr, unmasked, on top of the CLI's own line: each error came out twice.
            null = logging.NullHandler()
            null.addFilter(mask)
            logger.addHandler(null)
        _configured = True
    if verbose and not any(getattr(h, "_rlconsole_stderr", False) for h in logger.handlers):
        sh = logging.StreamHandler(sys.stderr)
        sh.setFormatter(logging.Formatter("rlconsole: %(name)s: %(message)s"))
        sh.addFilter(mask)
        sh._rlconsole_stderr = True  # type: ignore[attr-defined]
        logger.addHandler(sh)
    return path
