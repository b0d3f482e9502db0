"""AutoRecall's selection logic: which memories reach the model for a query, and why.

The steps (docs/architecture.md): hybrid search with scope/expiry/invalidation pre-filters;
the relevance decision for every candidate (olav.memory.recall.relevance); a snake_case keyword
boost; per-category ceilings, the model tier's total and a token budget; rendering;
``access_count`` bumps. Framework-free, so the chat middleware, ``olav memory why`` and the
benchmarks all share it. Episodes are recalled only when the request asks about an earlier
session ("last time", "上次").
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from olav.core.log import get_logger
from olav.memory.lifecycle.decay import decay_weight, rank_factor
from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.recall import learned, lesson_encoder
from olav.memory.recall.block import memory_body, render_block
from olav.memory.recall.episodes import TEMPORAL, recent_episodes
from olav.memory.recall.relevance import (
    Background,
    Floors,
    QueryWords,
    Signals,
    decide,
    keyword_hits,
    keywords_of,
    language,
    specific_keywords,
)
from olav.memory.store.filters import SearchFilter
from olav.memory.store.hits import Hit
from olav.memory.store.scopes import Reader
from olav.memory.store.table import MemoryStore
from olav.memory.store.token_counts import estimate_tokens
from olav.memory.store.writer import shared_writer

SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
log = get_logger("memory.recall")


@dataclass
class Candidate:
    hit: Hit
    boosted: bool = False
    # injected | irrelevant | weaker | over_quota | over_total | over_budget
    decision: str = "candidate"
    decay: float = 1.0
    rank_score: float = 0.0
    tokens: int = 0
    signals: Signals = field(default_factory=Signals)

    def to_json(self) -> dict[str, Any]:
        r = self.hit.record
        return {
            "id": r.id,
            "category": r.category,
            "scope": r.scope,
            "distance": None if self.hit.distance is None else round(self.hit.distance, 4),
            "fts_score": None if self.hit.fts_score is None else round(self.hit.fts_score, 3),
            "score": round(self.hit.score, 5),
            "confidence": round(r.confidence, 3),
            "decay": round(self.decay, 3),
            "rank_score": round(self.rank_score, 6),
            "tokens": self.tokens,
            "boosted": self.boosted,
            "decision": self.decision,
            **self.signals.to_json(),
        }


BRIEF_CANDIDATE = ("id", "category", "decision", "reason", "margin")
"""A candidate's fields in a brief recall JSON (:meth:`RecallResult.to_json`)."""


@dataclass
class RecallResult:
    query: str
    agent: str
    tier: str
    candidates: list[Candidate] = field(default_factory=list)
    block: str = ""
    latency_ms: float = 0.0
    # the reranker's and the judge's part (olav.memory.recall.rerank_judge); None: neither is on
    look: Any = None

    @property
    def notes(self) -> list[str]:
        """Why a reranker or judge left the decision to the floors (one line each)."""
        return list(self.look.notes or []) if self.look is not None else []

    @property
    def injected(self) -> list[Candidate]:
        return [c for c in self.candidates if c.decision == "injected"]

    @property
    def injected_ids(self) -> list[str]:
        return [c.hit.record.id for c in self.injected]

    def to_json(self, *, brief: bool = False) -> dict[str, Any]:
        """The one JSON of a recall explained (`olav memory why --json`, the console's Why,
        ``/why`` in chat, MCP's recall tool): every candidate with its decision, what is
        injected, the block, and, only with a reranker or judge, the second look (its setup,
        latency and verdicts). ``brief``: each candidate by its id, category, decision, reason
        and margin alone (an MCP client's model reads it: its context is small)."""
        candidates = [c.to_json() for c in self.candidates]
        if brief:
            candidates = [{key: c[key] for key in BRIEF_CANDIDATE} for c in candidates]
        out: dict[str, Any] = {
            "query": self.query,
            "agent": self.agent,
            "tier": self.tier,
            "candidates": candidates,
            "injected": self.injected_ids,
            "block": self.block,
        }
        if self.look is not None:
            out["second_look"] = {**self.look.setup, **self.look.to_json()}
        return out


@dataclass(frozen=True, slots=True)
class RecallOptions:
    """How a Recaller selects: the model ``tier``, the ``token_budget`` of the block,
    whether injected memories get their access count bumped (``bump_access``), the scopes
    read besides the agent's and ``global`` (``extra_scopes``: the operator's user: scope and
    the team's), the ``policy`` every other number comes from (olav.memory.policy), and
    whether recall runs at all (``enabled`` False: every recall finds nothing, as in the
    memory-off arm of ``olav bench steer``; capture and the memory tools are unchanged)."""

    tier: str = "small"
    token_budget: int = 1000
    bump_access: bool = True
    extra_scopes: tuple[str, ...] = ()
    policy: MemoryPolicy = DEFAULTS
    enabled: bool = True


class Recaller:
    """Selects and renders memories for one agent. One instance per agent is cheap."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        agent: str,
        options: RecallOptions = RecallOptions(),
        floors: Floors | None = None,
        background: Background | None = None,
        audit: Any = None,
        lesson_margins: lesson_encoder.LessonMargins | None = None,
        second_look: Any = None,
        model: learned.Model | None = None,
    ) -> None:
        self.store = store
        self.agent = agent
        # the operator's user: scope and the team's (olav.memory.store.scopes); never another's
        self.extra_scopes = options.extra_scopes
        self.enabled = options.enabled
        self.tier = options.tier
        self.token_budget = options.token_budget
        # no floors: every candidate counts as relevant ("off", uncalibrated embedders);
        # floors without a background: words alone decide (the background could not load)
        self.floors = floors
        self.background = background
        # a second encoder's margin for lessons (olav.memory.recall.lesson_encoder); None: e5 alone
        self.lesson_margins = lesson_margins
        # a reranker and the chat model as judge (olav.memory.recall.rerank_judge.SecondLook)
        self.second_look = second_look
        # the learned decision for guides (olav.memory.recall.learned); None: the floors
        self.model = model if floors is not None and background is not None else None
        self.policy = options.policy
        self.audit = audit
        self.bump = options.bump_access
        self._pending: list[Any] = []
        self._hits: dict[str, int] = {}  # access-count bumps not written yet

    @classmethod
    def for_config(
        cls,
        store: MemoryStore,
        config: Any,
        *,
        agent: str,
        tier: str,
        audit: Any = None,
        judge_model: Any = None,
        enabled: bool = True,
    ) -> Recaller:
        """A Recaller with the workspace's memory settings and calibrated floors, and the
        reranker and judge they ask for (``judge_model``: the chat model for verdicts,
        :func:`olav.llm.models.verdict_model`; without it, no judge)."""
        from olav.memory.policy import policy_for
        from olav.memory.recall import rerank_judge
        from olav.memory.recall.calibration import relevance_floors
        from olav.memory.store.scopes import personal_scopes

        policy = policy_for(config)
        floors = relevance_floors(config, store.embedder.name, store.path.parent)
        background = None if floors is None else _background(store)
        margins = None
        if floors is not None and background is not None and lesson_encoder.wanted(config):
            margins = lesson_encoder.margins_for(store.path.parent / "cache")
        options = RecallOptions(
            tier=tier,
            token_budget=policy.token_budget,
            extra_scopes=personal_scopes(config),
            policy=policy,
            enabled=enabled,
        )
        model = None
        if learned.wanted(config):
            model = learned.model_for(store.embedder.name, second=margins is not None)
        look = None
        if floors is not None:  # relevance off: the nearest memories, nothing to overrule
            look = rerank_judge.for_config(config, store.path.parent, judge_model)
        return cls(
            store,
            agent=agent,
            options=options,
            floors=floors,
            background=background,
            audit=audit,
            lesson_margins=margins,
            second_look=look,
            model=model,
        )

    @property
    def relevance_on(self) -> bool:
        return self.floors is not None

    @property
    def scopes(self) -> list[str]:
        own = [self.agent, "global"] if self.agent != "global" else ["global"]
        return own + [s for s in self.extra_scopes if s not in own]

    def recall(
        self,
        query: str,
        *,
        run_id: str | None = None,
        dry_run: bool = False,
        search_mode: str = "hybrid",
    ) -> RecallResult:
        """Select and render the memories for ``query``. ``search_mode="fts"`` recalls by
        full text alone (no embedding): the degraded path when the embedder or the vector
        index fails."""
        started = time.perf_counter()
        result = RecallResult(query=query, agent=self.agent, tier=self.tier)
        if not self.enabled:
            return result
        if not query.strip():
            return result
        query = recall_text(query)
        if self.lesson_margins is not None:  # its encoding of the request overlaps e5's, search's
            self.lesson_margins.opinion.prefetch(query)
        temporal = bool(TEMPORAL.search(query))
        # episodes answer "what did we do last time"; other requests never get them
        quotas = self.policy.quotas
        categories = [c for c, n in quotas.items() if n > 0 and (temporal or c != "episode")]
        hits = self.store.search(
            query,
            mode=search_mode,
            k=self.policy.candidates,
            filter=SearchFilter(
                scopes=self.scopes, categories=categories, reader=Reader.owning(self.scopes)
            ),
        )
        if temporal:  # "last time": the latest episodes, whatever their wording
            have = {h.record.id for h in hits}
            recent = recent_episodes(self.store, self.scopes, self.policy.recent_episodes)
            hits += [Hit(r, score=0.0) for r in recent if r.id not in have]
        cands = self._candidates(query, hits)
        if self.second_look is not None and self.floors is not None and cands:
            result.look = self.second_look.look(query, cands)
        self._select(cands)
        result.candidates = cands
        result.block = render_block([c.hit for c in cands if c.decision == "injected"])
        result.latency_ms = (time.perf_counter() - started) * 1000
        if not dry_run and self.bump:
            for rid in result.injected_ids:
                self._hits[rid] = self._hits.get(rid, 0) + 1
        if not dry_run and self.audit is not None:
            # the recall log leaves the hot path: it overlaps the model call
            self._pending.append(
                shared_writer().submit("recall log", self.audit.recall, run_id, self.agent, result)
            )
            if result.look is not None:  # the reranker's and judge's latency and verdicts
                detail = {"agent": self.agent, **result.look.to_json()}
                self._pending.append(
                    shared_writer().submit(
                        "second look", self.audit.event, run_id, "recall_second_look", detail
                    )
                )
        return result

    def _candidates(self, query: str, hits: list[Hit]) -> list[Candidate]:
        """Every hit with its relevance signals, in the order the block would take them."""
        idents = set(SNAKE.findall(query))
        words = QueryWords.of(query)
        lang = language(query)
        levels = self._levels(hits, lang)
        seconds = self._second_margins(query, lang, [h for h in hits if h.record.id in levels])
        cands = []
        for h in hits:
            weight = decay_weight(h.record, policy=self.policy)
            c = Candidate(
                h,
                boosted=bool(idents) and any(i in h.record.text for i in idents),
                decay=weight,
                rank_score=h.score * rank_factor(h.record, weight),
                tokens=estimate_tokens(memory_body(h)),
                signals=self._signals(words, h, levels.get(h.record.id), seconds.get(h.record.id)),
            )
            if h.record.category == "episode":  # asked for by the cue, newest first
                c.boosted, c.signals.relevant = True, True
                c.signals.reason = "the request asks about an earlier session"
            cands.append(c)
        if self.model is not None:  # the guides' decision
            learned.decide_candidates(self.model, query, lang, cands, self.lesson_margins)
        cands.sort(key=lambda c: _order(c, self.policy))
        return cands

    def _levels(self, hits: list[Hit], lang: str) -> dict[str, float]:
        """Background level, among generic requests in the request's language ``lang``, of
        every hit that came with its vector (one matrix product)."""
        with_vec = [(h, h.vector) for h in hits if h.vector is not None and h.distance is not None]
        if self.background is None or not with_vec:
            return {}
        import numpy as np

        levels = self.background.level(np.vstack([v for _, v in with_vec]), lang)
        return {h.record.id: float(v) for (h, _), v in zip(with_vec, levels, strict=True)}

    def _second_margins(self, query: str, lang: str, hits: list[Hit]) -> dict[str, float]:
        """The second opinion's margin of every lesson among ``hits`` (one encoding of the
        request; each lesson's text is encoded once per process)."""
        lessons = [h for h in hits if h.record.category == "reflection"]
        if self.lesson_margins is None or not lessons:
            return {}
        got = self.lesson_margins.margins(query, lang, [h.record.text for h in lessons])
        if got is None:
            return {}
        return {h.record.id: float(m) for h, m in zip(lessons, got, strict=True)}

    def _signals(
        self, words: QueryWords, hit: Hit, level: float | None, second: float | None
    ) -> Signals:
        found = keyword_hits(words, keywords_of(hit.record))
        sig = Signals(
            level=level,
            keywords=found,
            specific=specific_keywords(found, words),
            agree=hit.vector_rank == 1 and hit.fts_rank == 1,
            text_match=hit.fts_rank is not None,
        )
        if self.floors is None:  # relevance off: the nearest memories count
            sig.relevant, sig.reason = True, "relevance off"
            return sig
        if level is not None and hit.distance is not None:
            sig.margin = 1.0 - hit.distance / 2.0 - level  # cosine of unit vectors, minus level
            if second is not None:  # a lesson: the mean with the second opinion's margin
                sig.second = second
                sig.margin = (sig.margin + second) / 2.0
        return decide(sig, lesson=hit.record.category == "reflection", floors=self.floors)

    def tool_lessons(self, tool: str) -> list[tuple[str, str]]:
        """(id, text) of the live lessons this agent may read that name ``tool``: shown with
        that tool's error (olav.runtime.toolguard), where a lesson about using it applies."""
        from olav.memory.recall.lessons import lessons_naming

        found = lessons_naming(self.store, tool, self.scopes, limit=self.policy.tool_lessons)
        return [(r.id, r.text) for r in found]

    def flush(self, *, bumps: bool = True, wait: bool = True) -> None:
        """With ``bumps``, queue the access-count bumps gathered so far as one table write
        (a chat session does so every few runs and at its end: each write adds a table
        fragment, and fragments slow every search). With ``wait``, wait for this Recaller's
        queued writes (recall log and bumps); a chat run does not, its exit does."""
        hits, self._hits = (self._hits, {}) if bumps else ({}, self._hits)
        if hits:
            self._pending.append(
                shared_writer().submit("access-count bumps", self.store.bump_access, hits)
            )
        if not wait:
            self._pending = [f for f in self._pending if not f.done()]
            return
        pending, self._pending = self._pending, []
        for fut in pending:
            fut.result()

    def _select(self, cands: list[Candidate]) -> None:
        floors = self.floors or Floors.off()
        select(
            cands, tier=self.tier, token_budget=self.token_budget, floors=floors, policy=self.policy
        )


RECALL_EDGE = 1000  # characters of a long request's start and end that recall reads


def recall_text(query: str) -> str:
    """What recall reads of a request: all of it, or of a long one (a pasted config, a log)
    its start and its end, where people put what they ask for ("summarise this: …", "…
    what is wrong here?"). The paste itself is the model's to read, not memory's to search:
    searched whole, its every word is a keyword and its every term a full-text clause."""
    if len(query) <= 2 * RECALL_EDGE + 100:
        return query
    return f"{query[:RECALL_EDGE]} … {query[-RECALL_EDGE:]}"


def _background(store: MemoryStore) -> Background | None:
    """The background for the store's embedder, cached beside the table; None when it cannot
    be had (a remote embedder that is down): then words alone decide relevance."""
    from olav.memory.recall.relevance import load_background

    try:
        return load_background(store.embedder, store.path.parent / "cache")
    except Exception as exc:  # memory degrades, the agent keeps working
        log.warning(
            "relevance background unavailable (%s: %s); words alone decide", type(exc).__name__, exc
        )
        return None


def _order(c: Candidate, policy: MemoryPolicy) -> tuple[Any, ...]:
    """snake_case matches and asked-for episodes (newest first) lead; then the memories whose
    own keywords the request uses, most matched first (a guide written for the request is not
    crowded out of its quota by one that only lies near it); then fused relevance weighted by
    confidence and decay; origin breaks ties (``policy.origin_order``)."""
    rec = c.hit.record
    newest = rec.created_at.timestamp() if rec.category == "episode" and rec.created_at else 0.0
    if c.signals.p is not None:  # a guide the learned model decided: by its probability
        return (not c.boosted, 0, -newest, -1.0 - c.signals.p, policy.origin_rank(rec.origin))
    worded = len(c.signals.keywords)
    return (not c.boosted, -worded, -newest, -c.rank_score, policy.origin_rank(rec.origin))


def select(
    cands: list[Candidate],
    *,
    tier: str,
    token_budget: int,
    floors: Floors,
    policy: MemoryPolicy = DEFAULTS,
) -> None:
    """Decide every candidate, in order: relevant at all; not far below the best relevant
    memory of its kind (lessons apart); within its category's ceiling (``policy.quotas``),
    the tier's total and the token budget. Pure, so the benchmarks can replay other floors
    on the same hits."""
    # the best margin of each kind (lessons apart) among the memories that match at least n
    # of the request's words in their own keywords: a memory is weaker only than one with as
    # much word evidence as its own, never than one that merely lies nearer in vector space
    best: dict[tuple[bool, int], float] = {}
    for c in cands:
        m = c.signals.margin
        if c.signals.relevant and m is not None and c.signals.p is None:
            lesson = c.hit.record.category == "reflection"
            for worded in range(len(c.signals.keywords) + 1):
                best[lesson, worded] = max(best.get((lesson, worded), m), m)
    total_cap = policy.tier_total(tier)
    used: dict[str, int] = {}
    tokens = estimate_tokens(render_block([]) or "<relevant-memories></relevant-memories>") + 40
    episode_cap = policy.episode_cap(token_budget)
    taken = 0
    for c in cands:
        rec, m = c.hit.record, c.signals.margin
        cost = c.tokens + 12
        if not c.signals.relevant:
            c.decision = "irrelevant"
        elif (
            m is not None
            and not c.signals.vouched  # the reranker or the judge said it applies
            and c.signals.p is None  # the learned model weighed the others already
            and m < best[rec.category == "reflection", len(c.signals.keywords)] - floors.spread
        ):
            c.decision = "weaker"
        elif used.get(rec.category, 0) >= policy.quota(rec.category):
            c.decision = "over_quota"
        elif taken >= total_cap:
            c.decision = "over_total"
        elif (tokens + cost > token_budget and taken > 0) or (
            rec.category == "episode" and cost > episode_cap
        ):
            c.decision = "over_budget"
        else:
            c.decision = "injected"
            used[rec.category] = used.get(rec.category, 0) + 1
            tokens += cost
            taken += 1
