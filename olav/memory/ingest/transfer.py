"""JSONL export and import of memory rows, vectors included."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from olav.core.errors import OlavError
from olav.core.fsutil import atomic_open
from olav.memory.store.filters import BY_ID, SearchFilter
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import EVERYONE, Reader
from olav.memory.store.table import MemoryStore, UpsertResult

FORMAT = "olav-memory-export"


def _finite(v: list[float] | None) -> list[float] | None:
    if v is not None and not all(math.isfinite(x) for x in v):
        raise ValueError("vector holds NaN or infinite values")
    return v


class ExportRow(BaseModel):
    """One exported row, strictly typed: a wrong type is a clear error, never a crash."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1)
    text: str
    category: str
    scope: str = "global"
    metadata: dict[str, Any] = {}
    origin: str = "agent"
    confidence: float = 0.5
    tags: list[str] = []
    created_at: str | None = None
    updated_at: str | None = None
    expires_at: str | None = None
    invalidated_at: str | None = None
    superseded_by: str | None = None
    access_count: int = Field(default=0, ge=0)
    context: str | None = None  # schema 2 (exports of version 1 have neither)
    event_at: str | None = None
    vector: Annotated[list[float] | None, AfterValidator(_finite)] = None
    context_vector: Annotated[list[float] | None, AfterValidator(_finite)] = None

    @field_validator("created_at", "updated_at", "expires_at", "invalidated_at", "event_at")
    @classmethod
    def _iso(cls, v: str | None) -> str | None:
        if v is not None:
            datetime.fromisoformat(v)  # raises ValueError with the bad value
        return v

    @field_validator("confidence", mode="before")
    @classmethod
    def _conf(cls, v: object) -> object:
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def export_jsonl(store: MemoryStore, path: Path, *, reader: Reader = EVERYONE) -> int:
    """Write a header line, then one row per line, by id: every row ``reader`` may read, in
    any state (``olav kb export`` passes the operator's; a backup, EVERYONE). Returns the
    number of rows."""
    chosen = SearchFilter(reader=reader, include_invalid=True)
    rows = store.rows(chosen, order=BY_ID, with_vector=True)
    with atomic_open(path) as fh:  # a crash never leaves a half-written export
        header = {
            "format": FORMAT,
            "version": 2,
            "embedder": store.embedder.name,
            "dim": store.embedder.dim,
        }
        fh.write(json.dumps(header) + "\n")
        for rec in rows:
            fh.write(json.dumps(rec.to_json(), ensure_ascii=False) + "\n")
    return len(rows)


def import_jsonl(store: MemoryStore, path: Path) -> UpsertResult:
    """Validate the whole file first, then write it in one upsert; a bad line writes nothing."""
    if not path.is_file():
        raise OlavError(f"{path} does not exist", hint="Pass a file written by `olav kb export`")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise OlavError(
            f"{path} is not UTF-8 text", hint="Pass a file written by `olav kb export`"
        ) from None
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
            rec = MemoryRecord.from_json(ExportRow.model_validate(json.loads(line)).model_dump())
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(row)"
            raise OlavError(
                f"{path}: line {n}: field '{field}': {err['msg']}",
                hint="Fix or remove that line; nothing was imported",
            ) from None
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise OlavError(
                f"{path}: line {n} is not a memory row ({type(exc).__name__}: {exc})",
                hint="Fix or remove that line; nothing was imported",
            ) from None
        if not same_space:
            # embedded by another model: re-embed with this one
            rec.vector = rec.context_vector = None
        records.append(rec)
    return store.upsert(records, restore=True)
