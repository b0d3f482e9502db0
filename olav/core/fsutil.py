"""File-system helpers shared by every layer: the one way olav replaces a file, and the
folder fsync that makes a rename durable."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

FILE_MODE = 0o644  # mkstemp makes 0600 files; the files olav writes are ordinary files


@contextmanager
def atomic_open(path: Path, mode: str = "w", *, file_mode: int = FILE_MODE) -> Iterator[IO[Any]]:
    """Write ``path`` whole or not at all: a temporary file in the same folder, fsynced,
    renamed over the target, and the folder fsynced so the rename survives a crash. Readers
    see the old file or the whole new one; an exception leaves the old file as it was. The
    file gets ``file_mode`` (a private file: 0o600, which the temporary file has from the
    start, so it is never looser)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str, *, file_mode: int = FILE_MODE) -> None:
    with atomic_open(path, "w", file_mode=file_mode) as fh:
        fh.write(text)


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` survive a crash (where the platform can)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
