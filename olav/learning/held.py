"""Captures waiting for a person (issue 53: memories earn their place): what olav's runs and
external clients wrote without anyone's yes, listed beside the drafts (``olav kb drafts``, the
console's Drafts page) and confirmed or rejected there. See olav.memory.store.schema.PENDING
and olav.memory.ingest.capture."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from olav.memory.store.schema import PENDING_EXTERNAL

CAPTURE = "capture"  # the PendingItem kind of a pending row
MAX_HELD = 200  # the newest pending rows listed; older ones wait on (and expire by category)


def held_rows(store: Any, reader: Any) -> list[Any]:
    """The pending rows ``reader`` may read, newest first."""
    from olav.memory.store.filters import SearchFilter

    held = SearchFilter(reader=reader, pending=True, include_invalid=True)
    return list(store.rows(held, limit=MAX_HELD))


def held_item(rec: Any, item_type: Any) -> Any:
    """``rec`` as a pending item (``item_type``: olav.learning.drafts.PendingItem)."""
    source = "an external client's report" if rec.superseded_by == PENDING_EXTERNAL else "a run"
    flat = " ".join(str(rec.text).split())
    summary = f"{rec.category} from {source}: {flat[:70]}"
    made = rec.created_at or datetime.now(UTC)
    return item_type(rec.id, CAPTURE, summary, made, True, Path(rec.id))


def held_text(rec: Any) -> str:
    """What confirming ``rec`` would let recall inject, and where it came from."""
    source = (
        "an external client's report over MCP (only a person confirms it)"
        if rec.superseded_by == PENDING_EXTERNAL
        else f"run {rec.metadata.get('run_id')} (a later completed run doing the same confirms it)"
    )
    return f"{rec.category} in {rec.scope}, captured from {source}:\n\n{rec.text}"
