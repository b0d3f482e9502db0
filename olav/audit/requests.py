"""The audit of requests, off the request path: one ``http_request`` event per request
(operator, route template, status, latency), written in batches by a background thread."""

from __future__ import annotations

import json
import queue
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from olav.audit.events import HTTP_REQUEST_EVENT
from olav.core.log import get_logger

log = get_logger("serve")  # the server's log: its requests are what it audits


class RequestAudit:
    """One ``http_request`` event per request, written in batches by a background thread: one
    connection and one insert per batch (a connection per row costs tens of milliseconds, more
    than a request). The queue is bounded: when the audit falls behind (its disk stalls), a
    request never waits for it; the rows that did not fit are counted, and one event says how
    many were lost."""

    BATCH = 500
    QUEUE = 20_000

    def __init__(self, path: Any) -> None:
        self.path = path
        self._queue: queue.Queue[tuple[datetime, dict[str, Any]] | None] = queue.Queue(
            maxsize=self.QUEUE
        )
        self.dropped = 0
        self._reported = 0
        self._warned = False
        self._thread = threading.Thread(target=self._loop, name="olav-serve-audit", daemon=True)
        self._thread.start()

    def record(self, entry: dict[str, Any]) -> None:
        try:
            self._queue.put_nowait((datetime.now(UTC), entry))
        except queue.Full:
            self.dropped += 1

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            closing = False
            while len(batch) < self.BATCH:
                try:
                    more = self._queue.get(timeout=0.2)
                except queue.Empty:
                    break
                if more is None:
                    closing = True
                    break
                batch.append(more)
            self._write(batch)
            if closing:
                return

    def _write(self, batch: list[tuple[datetime, dict[str, Any]]]) -> None:
        from olav.audit.db import connect, insert_rows
        from olav.core.redact import redact

        rows = [
            [uuid.uuid4().hex, None, HTTP_REQUEST_EVENT, json.dumps(redact(entry), default=str), at]
            for at, entry in batch
        ]
        lost = self.dropped - self._reported
        if lost:  # the requests the full queue could not take, said once per gap
            self._reported += lost
            detail = json.dumps({"dropped": lost, "queue": self.QUEUE})
            rows.append([uuid.uuid4().hex, None, "http_audit_dropped", detail, datetime.now(UTC)])
        try:
            with connect(self.path) as con:
                insert_rows(con, "INSERT INTO events (id, run_id, kind, detail, created_at)", rows)
        except Exception as exc:  # the audit never takes the server down
            if not self._warned:
                self._warned = True
                log.warning("request audit write failed (%s); continuing", exc)

    def close(self) -> None:
        try:
            self._queue.put(None, timeout=10)
        except queue.Full:  # the writer is stuck: it is a daemon, the process ends anyway
            return
        self._thread.join(timeout=10)
