"""The policy as a value: :class:`MemoryPolicy` (every parameter of memory's four decisions,
typed, with where each came from), its :class:`Floors`, and :data:`DEFAULTS`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from olav.memory.store.schema import CATEGORIES


@dataclass(frozen=True)
class Floors:
    """Margins a memory needs to count as relevant (see the module docstring)."""

    directive: float  # any memory but a lesson, on its margin alone
    directive_words: float  # ... when the request names it in words
    specific: float  # any memory, a lesson too, named in specific words
    lesson: float
    lesson_words: float  # a lesson the full-text search matched too
    spread: float  # memories more than this below the best one are left out

    @classmethod
    def off(cls) -> Floors:
        """No relevance floor (the nearest memories are taken, as upstream did)."""
        inf = float("inf")
        return cls(-inf, -inf, -inf, -inf, -inf, inf)


TIERS = ("small", "medium", "large")
# what a new row does to a live one of its category and scope that it contradicts (the same
# subject, or nearer than dedup.supersede): supersede it (the old one is retired and kept for
# history), keep both (logged), keep both and send the pair for review (logged, and the new
# row names the old ones in metadata.review), or do not compare at all
CONFLICT_MODES = ("supersede", "keep_both", "review", "off")
UNBOUNDED = "unbounded"
POLICY_KEY = "memory.policy"
DEFAULT_SOURCE = "default"


def read_only(data: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(data))


def _default_quotas() -> Mapping[str, int]:
    # ceilings per category: how many relevant memories of a kind may share one block; the
    # categories listed here are the ones recall searches (episodes only on a cue)
    return read_only(
        {
            "usage_guide": 3,
            "expert_knowledge": 3,
            "query_pattern": 2,
            "format_guide": 1,
            "reflection": 1,
            "fact": 2,
            "preference": 1,
            "decision": 1,
            "operational_event": 2,
            "topology": 1,
            "document": 2,
            "episode": 1,
        }
    )


def _default_ttl() -> Mapping[str, timedelta | None]:
    # None: until the row is invalidated, superseded or deleted. Precedents
    # (operational_event) and SQL (query_pattern) stay: a replayed call has the same id, so
    # an expiry would drop a precedent that is still in use
    return read_only({c: (timedelta(days=30) if c == "reflection" else None) for c in CATEGORIES})


def _default_floors() -> Mapping[str, Floors]:
    # floors key prefix (olav.memory.recall.calibration.floors_key) -> floors: directive, directive
    # named in words, in specific words, lesson, lesson with a full-text match, spread below
    # the best memory; chosen on the calibration half of the golden suite
    return read_only(
        {
            "e5:multilingual-e5-small": Floors(0.03, 0.01, -0.02, 0.04, 0.03, 0.005),
            "e5:multilingual-e5-small+use-m3": Floors(0.03, 0.01, -0.02, 0.04, 0.04, 0.005),
        }
    )


@dataclass(frozen=True)
class MemoryPolicy:
    """The parameters of every memory decision. Build it with :func:`policy_for`; the
    field defaults are olav's defaults (:data:`DEFAULTS`)."""

    # -- routing: what a request looks at --------------------------------------------------
    quotas: Mapping[str, int] = field(default_factory=_default_quotas)
    tier_totals: Mapping[str, int] = field(
        default_factory=lambda: read_only({"small": 3, "medium": 5, "large": 13})
    )
    token_budget: int = 1000  # memory.token_budget
    episode_share: float = 0.25  # an earlier-session summary takes at most this of the budget
    candidates: int = 40  # hybrid-search candidates each request is decided on
    recent_episodes: int = 2  # the latest episodes a "last time" request adds
    tool_lessons: int = 2  # lessons naming a tool shown with its error
    # ties between equally ranked memories: earlier origins first
    origin_order: tuple[str, ...] = ("user", "directive", "document", "config", "agent", "audit")
    # -- relevance ---------------------------------------------------------------------------
    relevance: str = "auto"  # memory.relevance: auto | off | manual (then ``floors``)
    floors: Floors | None = None  # the floors memory.relevance sets by hand
    calibrated_floors: Mapping[str, Floors] = field(default_factory=_default_floors)
    second_opinion: str = "auto"  # memory.second_opinion
    # the second look (a reranker, the chat model as judge; both off unless configured): a
    # margin this near its floor is a close call for the judge (memory.judge_band; margin
    # units, e5's margins span about 0.06 from p10 to p90), at most this many per judge call,
    # and the reranker's accept/reject floors until `olav memory calibrate` measures it
    judge_band: float = 0.01
    judge_close_calls: int = 6
    rerank_uncalibrated: tuple[float, float] = (0.9, 0.02)
    # -- write decisions -------------------------------------------------------------------
    write_verbs: frozenset[str] = frozenset(
        {
            "register",
            "deploy",
            "push",
            "save",
            "destroy",
            "write",
            "record",
            "emit",
            "export",
            "ingest",
            "stop",
            "create",
            "update",
            "delete",
            "exec",
        }
    )
    # olav's own memory tools write memory themselves; capturing them would only echo it
    never_capture: frozenset[str] = frozenset(
        {
            "record_reflection",
            "commit_to_memory",
            "propose_memory_draft",
            "propose_guide_draft",
            "draft_code_fix",
        }
    )
    confidence: Mapping[str, float] = field(
        default_factory=lambda: read_only(
            {
                "operational_event": 0.5,
                "query_pattern": 0.6,
                "reflection": 0.6,
                "episode": 0.7,
                "document": 0.9,  # documents and conversations imported by `olav kb import`
            }
        )
    )
    episode_every_turns: int = 10
    # what olav wrote by itself earns its place: each run it was injected into that went wrong
    # multiplies its confidence by bad_run_weight, and after suppress_after_bad_runs such runs
    # (or one correction by the person) it is suppressed (olav.memory.lifecycle.outcomes)
    suppress_after_bad_runs: int = 2
    bad_run_weight: float = 0.5
    # a new lesson this close (squared L2) to a live one is skipped: memory.dedup_distance,
    # None = calibrated for the embedder (by name prefix), else the upstream distance
    lesson_dedup: float | None = None
    calibrated_dedup: Mapping[str, float] = field(
        default_factory=lambda: read_only({"e5:multilingual-e5-small": 0.20})
    )
    upstream_dedup: float = 0.3
    # a new fact/preference/decision this close to a live one conflicts with it
    supersede_distance: float = 0.20
    # -- conflicts ---------------------------------------------------------------------------
    conflicts: Mapping[str, str] = field(
        default_factory=lambda: read_only(
            {
                c: ("supersede" if c in ("fact", "preference", "decision") else "off")
                for c in CATEGORIES
            }
        )
    )
    # -- lifecycle ---------------------------------------------------------------------------
    ttl: Mapping[str, timedelta | None] = field(default_factory=_default_ttl)
    half_life_days: float = 30.0  # memory.half_life_days; 0 = no decay
    category_half_life: Mapping[str, float] = field(default_factory=lambda: read_only({}))
    no_decay_origins: frozenset[str] = frozenset({"user", "document"})
    # gc logs a row as decayed once its weight falls below this (lifecycle log only)
    decayed_below: float = 0.5
    capacity: Mapping[str, int | None] = field(
        default_factory=lambda: read_only(dict.fromkeys(CATEGORIES))
    )
    # never moved to the archive, whatever a capacity says (pinned rows neither)
    never_archived: frozenset[str] = frozenset({"usage_guide", "format_guide"})
    # where each value came from: "quotas.reflection" -> "default" | "<olav.yaml>: key" | ...
    sources: Mapping[str, str] = field(default_factory=lambda: read_only({}), compare=False)

    # -- what the decision points ask ----------------------------------------------------------

    def quota(self, category: str) -> int:
        return self.quotas.get(category, 0)

    def tier_total(self, tier: str) -> int:
        return self.tier_totals.get(tier, self.tier_totals["small"])

    def episode_cap(self, token_budget: int) -> int:
        """The tokens an episode may take of a block of ``token_budget``."""
        return int(token_budget * self.episode_share)

    def origin_rank(self, origin: str) -> int:
        try:
            return self.origin_order.index(origin)
        except ValueError:
            return 9

    def half_life(self, category: str) -> float:
        return self.category_half_life.get(category, self.half_life_days)

    def expiry_for(self, category: str, now: datetime | None = None) -> datetime | None:
        """When a memory of ``category`` written ``now`` expires (None: never)."""
        ttl = self.ttl.get(category)
        return None if ttl is None else (now or datetime.now(UTC)) + ttl

    def is_write_tool(self, name: str) -> bool:
        if name in self.never_capture:
            return False
        return any(part in self.write_verbs for part in name.lower().split("_"))

    def confidence_of(self, category: str) -> float:
        return self.confidence.get(category, 0.5)

    def bounded(self) -> bool:
        """Whether any category has a capacity (else nothing is ever archived)."""
        return any(v is not None for v in self.capacity.values())

    def conflict_mode(self, category: str) -> str:
        return self.conflicts.get(category, "off")

    def dedup_for(self, embedder_name: str) -> float:
        """The lesson dedup distance for this embedder."""
        if self.lesson_dedup is not None:
            return self.lesson_dedup
        for prefix, value in self.calibrated_dedup.items():
            if embedder_name.startswith(prefix):
                return value
        return self.upstream_dedup

    def default_floors(self, floors_key: str) -> Floors | None:
        """olav's floors for this floors key: the entry whose name is the longest prefix of
        it, so "e5:…+use-m3" never takes plain e5's."""
        found = [p for p in self.calibrated_floors if floors_key.startswith(p)]
        return self.calibrated_floors[max(found, key=len)] if found else None

    def floors_for(
        self, floors_key: str, workspace: Mapping[str, Floors] | None = None
    ) -> tuple[Floors | None, str]:
        """The floors recall uses for ``floors_key`` and where they come from: the floors
        ``memory.relevance`` sets, none when it is ``off``, else those calibrated in the
        workspace (``workspace``: calibration.json's entries), else olav's defaults."""
        if self.relevance == "off":
            return None, self.source("relevance")
        if self.floors is not None:
            return self.floors, self.source("relevance")
        if workspace is not None and floors_key in workspace:
            return workspace[floors_key], "calibration file"
        found = self.default_floors(floors_key)
        return found, DEFAULT_SOURCE if found is not None else "none calibrated"

    def source(self, name: str) -> str:
        return self.sources.get(name, DEFAULT_SOURCE)

    def to_json(self) -> dict[str, Any]:
        """Every value, JSON-safe (durations in days, floors as mappings)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name != "sources":
                out[f.name] = _plain(getattr(self, f.name))
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Floors):
        return dataclasses.asdict(value)
    if isinstance(value, timedelta):
        return value.total_seconds() / 86400
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    return value


DEFAULTS = MemoryPolicy()
FLOOR_FIELDS = tuple(f.name for f in dataclasses.fields(Floors))


# -- building a policy from the configuration ------------------------------------------------
