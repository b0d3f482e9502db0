"""Promote a private memory to the team: a draft that a person confirms.

A captured precedent or lesson lands in its operator's ``user:`` scope on a team table.
``olav memory promote ID`` writes a curator draft of it in the team's ``team:`` scope; only
``olav kb drafts confirm`` stores it there, like every other durable team memory (a lesson,
precedent or SQL pattern becomes expert_knowledge, which does not expire). The private row
stays where it is.
"""

from __future__ import annotations

from typing import Any

from olav.core.errors import MemoryStoreError, NotFoundError
from olav.learning.curator import CATEGORIES, DraftRequest, propose_draft, sanitise_intent
from olav.memory.store.scopes import read_by_id, team_scope


def promote(ws: Any, store: Any, memory_id: str) -> tuple[str, str]:
    """Write the draft that copies ``memory_id`` into the team scope. Returns (draft id,
    preview)."""
    team = team_scope(ws.config)
    if team is None:
        raise MemoryStoreError(
            "no team is configured, so there is no team scope to promote to",
            hint="Set memory.team in .olav/olav.yaml (for example netops)",
        )
    row = read_by_id(store, ws.config, memory_id)
    if row is None:
        raise NotFoundError(f"no memory with id {memory_id!r}", hint="See `olav memory list`")
    if row.scope == team:
        raise MemoryStoreError(f"memory {memory_id} is already in {team}")
    intent = sanitise_intent(f"team_{memory_id}")
    request = DraftRequest(
        intent=intent,
        keywords=list(row.tags),
        body=row.text,
        # a lesson, precedent or SQL pattern a person vouched for is team expertise
        category=row.category if row.category in CATEGORIES else "expert_knowledge",
        agent="core",
        scope=team,
    )
    preview = propose_draft(ws.root, request)
    return intent, preview
