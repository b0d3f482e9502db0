"""The one memory table: its columns, categories and the record type."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from olav.core.errors import MemoryStoreError

# 2 added context, context_vector and event_at (old tables gain them when opened)
SCHEMA_VERSION = 2
TABLE = "memory"

CATEGORIES = (
    "usage_guide",
    "expert_knowledge",
    "operational_event",
    "reflection",
    "query_pattern",
    "format_guide",
    "fact",
    "decision",
    "preference",
    "audit",
    "topology",
    "document",
    "episode",
)
GUIDE_CATEGORIES = ("usage_guide", "format_guide")
"""The categories whose rows come from a YAML guide: edited in their file, never in place."""
ORIGINS = ("agent", "document", "user", "audit", "directive", "config")
# a retired row held back as possible prompt injection carries ``superseded_by`` =
# QUARANTINE + its reason (olav.memory.ingest.injection, olav.memory.lifecycle.ops)
QUARANTINE = "quarantine:"
# a retired row that no person has confirmed yet carries ``superseded_by`` = PENDING + how it
# was written: a capture of olav's own run (PENDING_RUN) or an external client's report over
# MCP (PENDING_EXTERNAL). Recall never reads it; a person's yes (olav kb drafts, the console)
# or, for a run's capture only, the same action in a later completed run brings it in
# (olav.memory.ingest.capture).
PENDING = "pending:"
PENDING_RUN = PENDING + "run"
PENDING_EXTERNAL = PENDING + "external"

# How long a memory of each category lives, and every other memory decision: see
# olav.memory.policy (MemoryPolicy.ttl, MemoryPolicy.expiry_for).

META_EMBEDDER = b"olav.embedder"
META_DIM = b"olav.dim"
META_VERSION = b"olav.schema_version"

TS = pa.timestamp("us", tz="UTC")


def build_schema(dim: int, embedder: str) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            pa.field("category", pa.string(), nullable=False),
            pa.field("scope", pa.string(), nullable=False),
            pa.field("metadata", pa.string()),
            pa.field("origin", pa.string()),
            pa.field("confidence", pa.float32()),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("created_at", TS),
            pa.field("updated_at", TS),
            pa.field("expires_at", TS),
            pa.field("invalidated_at", TS),
            pa.field("superseded_by", pa.string()),
            pa.field("access_count", pa.int64()),
            # schema 2: the memory with its surroundings (sequential memories only), and when
            # the remembered thing happened (defaults to created_at)
            pa.field("context", pa.string()),
            pa.field("context_vector", pa.list_(pa.float32(), dim)),
            pa.field("event_at", TS),
        ],
        metadata={
            META_EMBEDDER: embedder.encode(),
            META_DIM: str(dim).encode(),
            META_VERSION: str(SCHEMA_VERSION).encode(),
        },
    )


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class MemoryRecord:
    """One row of the memory table. ``vector`` is filled by the store when it is None."""

    id: str
    text: str
    category: str
    scope: str = "global"
    metadata: dict[str, Any] = field(default_factory=dict)
    origin: str = "agent"
    confidence: float = 0.5
    tags: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    expires_at: datetime | None = None
    invalidated_at: datetime | None = None
    superseded_by: str | None = None
    access_count: int = 0
    context: str | None = None
    event_at: datetime | None = None
    vector: list[float] | None = None
    context_vector: list[float] | None = None

    @property
    def quarantined(self) -> bool:
        """Held back from recall as possible prompt injection (``olav memory quarantine``)."""
        return str(self.superseded_by or "").startswith(QUARANTINE)

    @property
    def pending(self) -> bool:
        """Written without a person and not confirmed yet: kept out of recall (PENDING)."""
        return str(self.superseded_by or "").startswith(PENDING)

    def to_row(self) -> dict[str, Any]:
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        row["metadata"] = json.dumps(self.metadata, ensure_ascii=False, sort_keys=True)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MemoryRecord:
        # computed once: this runs for every recalled candidate
        known = _FIELDS if cls is MemoryRecord else {f.name for f in fields(cls)}
        data = {k: v for k, v in row.items() if k in known}
        meta = data.get("metadata")
        data["metadata"] = json.loads(meta) if meta else {}
        data["tags"] = list(data.get("tags") or [])
        for key in ("vector", "context_vector"):
            if data.get(key) is not None:
                data[key] = [float(x) for x in data[key]]
        data["access_count"] = int(data.get("access_count") or 0)
        conf = data.get("confidence")
        data["confidence"] = round(float(conf), 6) if conf is not None else 0.5
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (times as ISO 8601), used by --json output and kb export."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for key, val in out.items():
            if isinstance(val, datetime):
                out[key] = val.isoformat()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemoryRecord:
        data = dict(data)
        for key in ("created_at", "updated_at", "expires_at", "invalidated_at", "event_at"):
            if data.get(key):
                data[key] = datetime.fromisoformat(data[key])
        return cls(**data)


_FIELDS = frozenset(f.name for f in fields(MemoryRecord))


def validate(rec: MemoryRecord, dim: int, embedder: str) -> None:
    """Raise MemoryStoreError when ``rec`` cannot be written to a ``dim``-d table of
    ``embedder``."""
    if not rec.id:
        raise MemoryStoreError("a memory record needs a non-empty id")
    if rec.category not in CATEGORIES:
        raise MemoryStoreError(
            f"unknown category {rec.category!r} for memory {rec.id}",
            hint="Use one of: " + ", ".join(CATEGORIES),
        )
    if rec.origin not in ORIGINS:
        raise MemoryStoreError(
            f"unknown origin {rec.origin!r} for memory {rec.id}",
            hint="Use one of: " + ", ".join(ORIGINS),
        )
    if not rec.scope or not rec.scope.strip() or rec.scope != rec.scope.strip():
        raise MemoryStoreError(
            f"memory {rec.id} needs a scope, got {rec.scope!r}",
            hint="Use global, an agent name or team:<id>, without spaces around it",
        )
    if not 0.0 <= rec.confidence <= 1.0:
        raise MemoryStoreError(f"confidence of memory {rec.id} must be within 0.0 and 1.0")
    for vec in (rec.vector, rec.context_vector):
        if vec is not None and not math.isfinite(sum(vec)):
            # checked here because writes turn bad vectors into nulls (see upsert)
            raise MemoryStoreError(f"memory {rec.id} has a vector with NaN or infinity")
        if vec is not None and len(vec) != dim:
            raise MemoryStoreError(
                f"memory {rec.id} has a {len(vec)}-d vector; the table is {dim}-d ({embedder})",
                hint="Re-embed it (omit the vector) or import into a workspace with the "
                "same embedder",
            )
