"""Near misses: the requests the recall log says a guide should have answered.

A request that reached the model with no directive, although a guide or a precedent came
within ``within`` of its relevance floor, is the commonest way a relevant memory is lost: the
request is a paraphrase that the embedder puts barely nearer the guide than generic requests
(docs/benchmark-notes.md, "Round seven"). The floors cannot be lowered for it without letting
unrelated requests in; the operator who wrote the guide can, for the words the team actually
uses, because a keyword found in a request lowers that guide's floor. ``olav memory gaps``
lists these requests, each with the few guides and precedents that came nearest, so the
operator can tell which one should have answered it.

Lessons and episodes are left out: a lesson has its own floors and is shown with its tool
when the tool fails, and an episode is recalled on explicit cues.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

WITHIN = 0.02  # a third of e5's margin spread: the gain round seven measured as missing
NEAREST = 3  # guides shown a request
_NOT_DIRECTIVES = frozenset({"reflection", "episode"})


@dataclass
class Near:
    """A guide or precedent that came within reach of its floor."""

    memory_id: str
    category: str
    margin: float
    floor: float

    @property
    def gap(self) -> float:
        return self.floor - self.margin


@dataclass
class NearMiss:
    """A request that got no directive, how often it was made, and what came nearest."""

    request: str
    times: int = 0
    near: list[Near] = field(default_factory=list)  # the smallest gap first

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "times": self.times,
            "near": [
                {
                    "id": n.memory_id,
                    "category": n.category,
                    "margin": round(n.margin, 4),
                    "floor": round(n.floor, 4),
                }
                for n in self.near
            ],
        }


def near_misses(
    recalls: Iterable[tuple[str, str | None, str | None]], within: float = WITHIN
) -> list[NearMiss]:
    """The near misses of these recalls (query, candidates JSON, injected ids JSON, newest
    first, as the recall log holds them): the requests made most often first, then those
    nearest to a floor. A recall that injected any directive is not a miss. Candidates
    logged before the floor was recorded (no ``floor`` field) are skipped."""
    found: dict[str, NearMiss] = {}
    for query, cands_json, injected_json in recalls:
        cands = [c for c in json.loads(cands_json or "[]") if isinstance(c, dict)]
        category = {c.get("id"): c.get("category") for c in cands}
        injected = json.loads(injected_json or "[]")
        if any(category.get(i) not in _NOT_DIRECTIVES for i in injected):
            continue
        near = sorted((n for n in _dropped(cands) if n.gap <= within), key=lambda n: n.gap)
        if not near:
            continue
        miss = found.setdefault(query, NearMiss(query, near=near[:NEAREST]))
        miss.times += 1
    return sorted(found.values(), key=lambda m: (-m.times, m.near[0].gap))


def _dropped(cands: list[dict[str, Any]]) -> Iterable[Near]:
    """The guides and precedents dropped under their floor (by margin, not by words)."""
    for c in cands:
        margin, floor = c.get("margin"), c.get("floor")
        if (
            c.get("category") not in _NOT_DIRECTIVES
            and c.get("decision") == "irrelevant"
            and isinstance(margin, int | float)
            and isinstance(floor, int | float)
        ):
            yield Near(str(c.get("id")), str(c.get("category")), float(margin), float(floor))
