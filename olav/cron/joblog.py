"""The cron log: one ``key=value`` line per event in ``<logs>/cron.log`` (rotated), redacted."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from olav.core.config import Workspace
from olav.core.log import PrivateFileHandler
from olav.core.redact import redact_text

LOG_FILE = "cron.log"


def _value(value: Any) -> str:
    text = "null" if value is None else str(value)
    if text and not re.search(r'[\s"=\\]', text):
        return text
    return json.dumps(text, ensure_ascii=False)


def kv(event: str, **fields: Any) -> str:
    """A one-line ``event=... key=value`` record (values with spaces are JSON-quoted)."""
    return " ".join([f"event={event}", *(f"{k}={_value(v)}" for k, v in fields.items())])


class _LineFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(datefmt="%Y-%m-%dT%H:%M:%S%z")

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if not message.startswith("event="):
            message = f"event=log logger={record.name} message={_value(message)}"
        line = f"ts={self.formatTime(record, self.datefmt)} level={record.levelname} {message}"
        if record.exc_info:
            line += " traceback=" + _value(self.formatException(record.exc_info))
        return redact_text(line)  # a job's error may quote a token or a connection string


@contextmanager
def cron_logger(ws: Workspace, *, stderr: bool = False) -> Iterator[logging.Logger]:
    """The ``olav.cron`` logger writing one-line records to ``<logs>/cron.log`` (rotated)."""
    ws.logs.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("olav.cron")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    formatter = _LineFormatter()
    handlers: list[logging.Handler] = [
        PrivateFileHandler(ws.logs / LOG_FILE, maxBytes=2_000_000, backupCount=3, encoding="utf-8")
    ]
    if stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    aps = logging.getLogger("apscheduler")
    for handler in handlers:
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        if stderr:  # the daemon: APScheduler's own warnings (missed runs...) go there too
            aps.addHandler(handler)
    if stderr:
        aps.setLevel(logging.WARNING)
    try:
        yield logger
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
            aps.removeHandler(handler)
            handler.close()
