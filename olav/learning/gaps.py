"""Near misses: what the recall log says a guide's keywords are missing.

A request that reached the model with no directive, although a guide or a precedent came
within ``within`` of its relevance floor, is the commonest way a relevant memory is lost: the
request is a paraphrase that the embedder puts barely nearer the guide than generic requests
(docs/benchmark-notes.md, "Round seven"). The floors cannot be lowered for it without letting
unrelated requests in; the operator who wrote the guide can, for the words the team actually
uses, because a keyword found in a request lowers that guide's floor. ``olav memory gaps``
lists these near misses per memory, with the requests that nearly recalled it.

Lessons and episodes are left out: a lesson has its own floors and is shown with its tool
when the tool fails, and an episode is recalled on explicit cues.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

WITHIN = 0.02  # a third of e5's margin spread: the gain round seven measured as missing
SHOWN_REQUESTS = 5
_NOT_DIRECTIVES = frozenset({"reflection", "episode"})


@dataclass
class NearMiss:
    """One memory that nearly reached the model, and the requests it nearly answered."""

    memory_id: str
    category: str
    floor: float
    closest: float  # the best margin it had, for the floor beside it
    requests: list[str] = field(default_factory=list)  # newest first, each once

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.memory_id,
            "category": self.category,
            "floor": round(self.floor, 4),
            "closest_margin": round(self.closest, 4),
            "requests": self.requests,
        }


def near_misses(
    recalls: Iterable[tuple[str, str | None, str | None]], within: float = WITHIN
) -> list[NearMiss]:
    """The near misses of these recalls (query, candidates JSON, injected ids JSON, newest
    first, as the recall log holds them), the memories missed by the most requests first.
    A recall that injected any directive is not a miss. Candidates logged before the floor
    was recorded (no ``floor`` field) are skipped."""
    found: dict[str, NearMiss] = {}
    for query, cands_json, injected_json in recalls:
        cands = [c for c in json.loads(cands_json or "[]") if isinstance(c, dict)]
        category = {c.get("id"): c.get("category") for c in cands}
        injected = json.loads(injected_json or "[]")
        if any(category.get(i) not in _NOT_DIRECTIVES for i in injected):
            continue
        for c in cands:
            margin, floor = c.get("margin"), c.get("floor")
            if (
                c.get("category") in _NOT_DIRECTIVES
                or c.get("decision") != "irrelevant"
                or margin is None
                or floor is None
                or floor - margin > within
            ):
                continue
            miss = found.setdefault(c["id"], NearMiss(c["id"], c["category"], floor, margin))
            if margin > miss.closest:
                miss.closest, miss.floor = margin, floor
            if query not in miss.requests:
                miss.requests.append(query)
    return sorted(found.values(), key=lambda m: (-len(m.requests), m.floor - m.closest))
