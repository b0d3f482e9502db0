"""Private files: the workspace's databases, logs and exports hold every operator's
conversations and private memories, so no other user of the machine may read them.

olav never changes the process's umask: the files the agent's tools write for the user keep
the modes the user expects. Instead:

- the folders olav owns are 0700 (``.olav/``, the databases, logs and exports folders and
  ``memory.lance``). A 0700 folder puts everything inside out of other users' reach, whatever
  mode DuckDB, SQLite or lance give the files they create there (a DuckDB ``.wal``, lance's
  fragments);
- the files olav creates itself are 0600 (the audit and domain databases, ``threads.sqlite``,
  whose ``-wal`` and ``-shm`` SQLite creates with the same mode, and the log files);
- every workspace open (:func:`secure_workspace`) tightens those folders and the files in
  them, so a workspace made before this is private from its next command on.

A folder configured outside the workspace (``paths.databases: /srv/olav``) may be shared with
other programs: olav creates it 0700 when it is missing but never changes the mode of one
that exists, and there touches only the files it wrote itself. ``olav doctor`` warns about it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIR_MODE = 0o700
FILE_MODE = 0o600
_OTHERS = 0o077  # any permission for the group or for others
# the files olav writes in a folder it may share with others (paths.* set outside the
# workspace): only these are tightened there. Lock files are empty and filelock resets
# their mode on every acquire, so they are left alone.
_OURS = ("audit.duckdb", "domain.duckdb", "threads.sqlite", "calibration.json", "memory.")
_OUR_LOGS = ("olav.", "cron.")


def private_opener(path: str, flags: int) -> int:
    """An ``opener`` for :func:`open`: a new file is created 0600 and an existing one loses
    its group and other permissions (when it is ours to change)."""
    fd = os.open(path, flags, FILE_MODE)
    try:
        mode = os.fstat(fd).st_mode
        if mode & _OTHERS:
            os.fchmod(fd, stat.S_IMODE(mode) & ~_OTHERS)
    except OSError:
        pass
    return fd


def private_file(path: Path) -> None:
    """Create ``path`` empty and 0600 when it is missing (SQLite takes an empty file as a new
    database, and gives its -wal and -shm the database's mode)."""
    os.close(private_opener(str(path), os.O_WRONLY | os.O_CREAT))


def private_dir(path: Path) -> Path:
    """Create ``path`` 0700 when it is missing (its missing parents get the usual mode)."""
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=DIR_MODE, exist_ok=True)
        tighten(path)  # mkdir's mode passes through the umask, which may have left bits
    return path


def tighten(path: Path) -> bool:
    """Take the group's and others' permissions off ``path``; False when some remain (it
    is gone, or belongs to another user)."""
    try:
        mode = path.stat().st_mode
        if mode & _OTHERS:
            os.chmod(path, stat.S_IMODE(mode) & ~_OTHERS)
        return True
    except OSError:
        return False


@dataclass(frozen=True)
class Folder:
    path: Path
    owned: bool  # olav's own: its mode is olav's to set
    files: bool  # olav tightens the files in it (never an export: those are the user's)
    names: tuple[str, ...] = ()  # in a folder olav does not own: its files' name prefixes


def folders(ws: Any) -> list[Folder]:
    """The folders that must be private, and whether olav owns each: ``.olav/`` and any
    folder inside the workspace are olav's; a configured folder elsewhere may be shared."""
    root = ws.root.resolve()

    def inside(path: Path) -> bool:
        return path.resolve().is_relative_to(root)

    databases, logs = ws.databases, ws.logs
    return [
        Folder(ws.olav_dir, True, False),
        Folder(databases, inside(databases), True, () if inside(databases) else _OURS),
        Folder(ws.memory_path, True, False),  # memory.lance is olav's wherever it lies
        Folder(logs, inside(logs), True, () if inside(logs) else _OUR_LOGS),
        Folder(ws.exports, inside(ws.exports), False),
    ]


def _files(folder: Folder) -> list[Path]:
    """The files directly in ``folder`` that olav keeps private (never a folder's tree: a
    private folder already covers what is inside)."""
    if not folder.files:
        return []
    try:
        entries = list(os.scandir(folder.path))
    except OSError:
        return []
    out = []
    for entry in entries:
        if not entry.is_file(follow_symlinks=False) or entry.name.endswith(".lock"):
            continue
        if folder.owned or entry.name.startswith(folder.names):
            out.append(Path(entry.path))
    return out


def make_folders(ws: Any) -> None:
    """Create the databases, logs and exports folders 0700 where they are missing
    (``olav init``)."""
    for folder in folders(ws):
        if folder.path != ws.memory_path:
            private_dir(folder.path)


def secure_workspace(ws: Any) -> None:
    """Tighten the folders olav owns to 0700 and the files in its folders to 0600; called by
    every workspace open, where it costs a few system calls. Does nothing outside a
    workspace (no ``.olav/``)."""
    if not ws.olav_dir.is_dir():
        return
    for folder in folders(ws):
        if folder.owned and folder.path.is_dir():
            tighten(folder.path)
        for path in _files(folder):
            tighten(path)


def loose_paths(ws: Any) -> list[tuple[Path, int]]:
    """(path, mode) of each of these folders and files that the group or others can reach:
    what ``olav doctor`` warns about. Folders configured outside the workspace count too."""
    out = []
    for folder in folders(ws):
        for path in [folder.path, *_files(folder)]:
            try:
                mode = stat.S_IMODE(path.stat().st_mode)
            except OSError:
                continue
            if mode & _OTHERS:
                out.append((path, mode))
    return out
