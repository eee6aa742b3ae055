"""The console's own log: what it ran, where it connected, what failed.

Kept under the user's state directory so that after a bad night the user (or we) can
see exactly which remote commands ran. Secrets never reach it: a filter masks values
that look like credentials before any handler sees the record.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from logging.handlers import RotatingFileHandler
from pathlib import Path

SECRET_NAME = r"[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY)[A-Z0-9_]*"
_SECRET_PATTERNS = [
    # NAME=value, NAME: value, "NAME": "value", NAME='quoted value', where NAME looks like a credential
    re.compile(rf"(?i)\b({SECRET_NAME})(\s*[=:]\s*|\"\s*:\s*\")('[^']*'|\"[^\"]*\"|[^\s\"',}}]+)"),
    re.compile(r"(?i)(authorization:\s*(?:bearer|basic)\s+)(\S+)"),
    re.compile(r"(?i)(--(?:password|token|secret)[= ])(\S+)"),
]
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says its value is a credential."""
    return re.fullmatch(SECRET_NAME, name, re.IGNORECASE) is not None


def mask_secrets(text: str) -> str:
    """Replace credential values with `***`, keeping the names so the log stays useful.
    The one masking rule for everything rlconsole writes: the log filter and the SSH
    layer's audit lines both use it."""
    text = _PEM.sub("-----PRIVATE KEY (masked)-----", text)
    for pat in _SECRET_PATTERNS:
        if pat.groups == 3:
            text = pat.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)
        else:
            text = pat.sub(lambda m: f"{m.group(1)}***", text)
    return text


class SecretMaskingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a bad format string must not kill logging
            msg = str(record.msg)
        record.msg = mask_secrets(msg)
        record.args = None
        return True


def state_dir() -> Path:
    """Where rlconsole keeps its log, run history and sim state for this user."""
    from platformdirs import user_state_dir

    d = Path(os.environ.get("RLCONSOLE_STATE_DIR") or user_state_dir("rlconsole"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def log_path() -> Path:
    return state_dir() / "rlconsole.log"


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
            fh = RotatingFileHandler(path, maxBytes=10_000_000, backupCount=3, encoding="utf-8")
            fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            fh.addFilter(mask)
            logger.addHandler(fh)
        except OSError:
            path = None
        _configured = True
    if verbose and not any(getattr(h, "_rlconsole_stderr", False) for h in logger.handlers):
        sh = logging.StreamHandler(sys.stderr)
        sh.setFormatter(logging.Formatter("rlconsole: %(name)s: %(message)s"))
        sh.addFilter(mask)
        sh._rlconsole_stderr = True  # type: ignore[attr-defined]
        logger.addHandler(sh)
    return path
