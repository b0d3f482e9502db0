"""Where an export goes: a file written atomically or a stream (:class:`JsonlSink`), and
what was written (:class:`ExportSummary`)."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from olav.core.errors import OlavError


@dataclass(slots=True)
class ExportSummary:
    format: str
    exported: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    files: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    reasoning_unpaired: int = 0  # with --reasoning: runs whose reasoning no message got

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "exported": self.exported,
            "skipped": sum(self.skipped.values()),
            "skipped_by_reason": dict(self.skipped.most_common()),
            "files": self.files,
            "reasoning_unpaired": self.reasoning_unpaired,
            "seconds": round(self.seconds, 3),
        }

    def one_line(self) -> str:
        n = sum(self.skipped.values())
        skipped = f"skipped {n}" + (
            ": " + ", ".join(f"{k} {v}" for k, v in self.skipped.most_common()) if n else ""
        )
        if len(self.files) == 1:
            f = self.files[0]
            where = "stdout" if f["path"] == "-" else f["path"]
            text = f"exported {_count(self.exported, 'run')} to {where} ({self.format}), {skipped}"
        else:
            sides = ", ".join(
                f"{f['role']} {_count(f['runs'], 'run')} of {_count(f['threads'], 'thread')} "
                f"in {f['path']}"
                for f in self.files
            )
            text = f"exported {_count(self.exported, 'run')} ({self.format}): {sides}; {skipped}"
        if self.reasoning_unpaired:
            text += (
                f"; the reasoning of {_count(self.reasoning_unpaired, 'run')} could not be "
                "placed on its messages and was left out"
            )
        return text


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class JsonlSink:
    """A destination written through a temp file beside it and renamed at the end, so that
    a reader never sees half a file; or a stream (stdout), written as it goes."""

    def __init__(self, target: Path | IO[str], role: str = "") -> None:
        self.role = role
        self.runs = 0
        self.groups: set[str] = set()
        self.path: Path | None = None
        self._tmp: Path | None = None
        if isinstance(target, Path):
            self.path = target
            if target.is_dir():
                raise OlavError(f"cannot write {target}: it is a folder", hint="Pass a file name")
            if not target.parent.is_dir():
                raise OlavError(
                    f"cannot write {target}: {target.parent} is not a folder",
                    hint="Create the folder, or pass -o - for stdout",
                )
            self._tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            self.stream: IO[str] = self._tmp.open("w", encoding="utf-8")
        else:
            self.stream = target

    def write(self, line: dict[str, Any], group: str) -> None:
        self.stream.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        self.runs += 1
        self.groups.add(group)

    def commit(self) -> None:
        if self._tmp is not None and self.path is not None:
            self.stream.close()
            self._tmp.replace(self.path)
            self._tmp = None
        else:
            self.stream.flush()

    def abort(self) -> None:
        if self._tmp is not None:
            self.stream.close()
            self._tmp.unlink(missing_ok=True)
            self._tmp = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": str(self.path) if self.path else "-",
            "runs": self.runs,
            "threads": len(self.groups),
        }
        if self.role:
            out["role"] = self.role
        return out
