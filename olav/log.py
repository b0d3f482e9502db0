"""olav's logs: one rotating, line-structured file per workspace (.olav/logs/olav.log).

The reflector reads the tails of these files, so every line is one event:
``<ISO time> <LEVEL> <logger> <message>``.
"""

from __future__ import annotations

import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path

MAX_BYTES = 2 * 1024 * 1024
_configured: set[str] = set()


class RedactingFormatter(logging.Formatter):
    """Secrets never reach the log files, whatever a message or exception carries."""

    def format(self, record: logging.LogRecord) -> str:
        from olav.memory.redact import redact_text

        return redact_text(super().format(record))


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"olav.{name}")


def configure(logs_dir: Path, filename: str = "olav.log") -> Path:
    """Attach the rotating file handler once per file; returns the log path."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    path = (logs_dir / filename).resolve()
    if str(path) in _configured:
        return path
    handler = RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=3, encoding="utf-8")
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("olav")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False
    _configured.add(str(path))
    return path
