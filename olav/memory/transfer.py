"""JSONL export and import of memory rows, vectors included."""

from __future__ import annotations

import json
from pathlib import Path

from olav.errors import OlavError
from olav.memory.schema import MemoryRecord
from olav.memory.store import MemoryStore, UpsertResult

FORMAT = "olav-memory-export"


def export_jsonl(store: MemoryStore, path: Path) -> int:
    """Write a header line, then one row per line. Returns the number of rows."""
    rows = sorted(store.list_rows(with_vector=True), key=lambda r: r.id)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        header = {
            "format": FORMAT,
            "version": 1,
            "embedder": store.embedder.name,
            "dim": store.embedder.dim,
        }
        fh.write(json.dumps(header) + "\n")
        for rec in rows:
            fh.write(json.dumps(rec.to_json(), ensure_ascii=False) + "\n")
    tmp.replace(path)  # a crash never leaves a half-written export under the real name
    return len(rows)


def import_jsonl(store: MemoryStore, path: Path) -> UpsertResult:
    """Validate the whole file first, then write it in one upsert; a bad line writes nothing."""
    if not path.is_file():
        raise OlavError(f"{path} does not exist", hint="Pass a file written by `olav kb export`")
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise OlavError(f"{path} is empty", hint="Pass a file written by `olav kb export`")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise OlavError(
            f"{path}: line 1 is not an olav export header",
            hint="Pass a file written by `olav kb export`",
        )
    same_space = header.get("embedder") == store.embedder.name and header.get("dim") == (
        store.embedder.dim
    )
    records = []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            rec = MemoryRecord.from_json(json.loads(line))
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise OlavError(
                f"{path}: line {n} is not a memory row ({type(exc).__name__}: {exc})",
                hint="Fix or remove that line; nothing was imported",
            ) from None
        if not same_space:
            rec.vector = None  # embedded by another model: re-embed with this one
        records.append(rec)
    return store.upsert(records, restore=True)
