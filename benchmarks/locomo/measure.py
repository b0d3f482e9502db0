"""Measuring one conversation: every baseline, olav's own hybrid search, and each ranking the
experimental recipes fuse, with the time each search took."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.locomo.cache import LocomoVectors
from benchmarks.locomo.data import Conversation
from benchmarks.locomo.recipes import FTS_CONFIGS, STORE_FTS
from olav.core.errors import OlavError
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.timeq import query_period

BASELINES = ("bm25", "vector", "langgraph", "olav")
WHOLE = SearchFilter(reader=EVERYONE)
"""Every live row: a conversation's table is the benchmark's own."""


@dataclass
class Corpus:
    """Every representation the run needs: its texts and vectors per conversation, and the
    kinds of ranking (``vector``, ``fts:<config>``, ``...@time``) asked of it."""

    needed: dict[str, set[str]]
    texts: dict[str, dict[str, list[str]]]
    vectors: dict[str, dict[str, np.ndarray]]


@dataclass
class Measured:
    """The rankings per question, and the seconds their searches took."""

    rankings: dict[str, list[list[str]]] = field(default_factory=lambda: {m: [] for m in BASELINES})
    sources: dict[str, list[list[str]]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(BASELINES, 0.0))
    source_seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class Measurer:
    """Runs every search of a conversation into ``out``: ``kmax`` hits per baseline question,
    ``depth`` candidates per ranking a recipe fuses."""

    cache: LocomoVectors
    corpus: Corpus
    kmax: int
    depth: int
    out: Measured = field(default_factory=Measured)

    def conversation(self, where: Path, conv: Conversation, qv: np.ndarray) -> None:
        from olav.memory.store.table import MemoryStore

        for rep in sorted(self.corpus.needed, key=lambda r: r != "turn"):
            vectors = self.corpus.vectors
            vecs = vectors[rep if rep in vectors else "turn"][conv.sample_id]
            store = MemoryStore(where / rep.replace("+", "_"), self.cache.embedder)
            store.upsert(_records(conv, self.corpus.texts[rep][conv.sample_id], vecs))
            store.maintain(force_optimize=True)
            if rep == "turn":
                self._baselines(store, conv, qv)
                self._olav(where / "olav", conv, qv)
                self._langgraph(conv, vecs, qv)
            self._sources(store, rep, conv, qv)

    def _baselines(self, store: Any, conv: Conversation, qv: np.ndarray) -> None:
        for mode, name in (("fts", "bm25"), ("vector", "vector")):
            t1 = time.monotonic()
            for q, vec in zip(conv.questions, qv, strict=True):
                hits = store.search(q.text, mode=mode, k=self.kmax, query_vector=vec, filter=WHOLE)
                self.out.rankings[name].append([h.record.id for h in hits])
            self.out.seconds[name] += time.monotonic() - t1

    def _langgraph(self, conv: Conversation, vecs: np.ndarray, qv: np.ndarray) -> None:
        t1 = time.monotonic()
        texts = self.corpus.texts["turn"][conv.sample_id]
        dim = self.cache.embedder.dim
        found = _langgraph_rankings(conv, texts, vecs, qv, dim, self.kmax)
        self.out.rankings["langgraph"].extend(found)
        self.out.seconds["langgraph"] += time.monotonic() - t1

    def _sources(self, store: Any, rep: str, conv: Conversation, qv: np.ndarray) -> None:
        """The rankings of one representation that the recipes fuse."""
        kinds = self.corpus.needed[rep]
        for kind in sorted(kinds, key=lambda k: (k.split("@")[0] != f"fts:{STORE_FTS}", k)):
            base, _, timed = kind.partition("@")
            if base.startswith("fts:"):
                cfg = base[4:]
                if cfg not in FTS_CONFIGS:
                    raise OlavError(f"unknown FTS config {cfg!r}")
                _set_fts(store, cfg)
            key = f"{rep}/{kind}"
            out = self.out.sources.setdefault(key, [])
            t1 = time.monotonic()
            for q, vec in zip(conv.questions, qv, strict=True):
                created = query_period(q.text) if timed else None
                if timed and created is None:
                    out.append([])
                    continue
                mode = "vector" if base == "vector" else "fts"
                hits = store.search(
                    q.text,
                    mode=mode,
                    k=self.depth,
                    query_vector=vec,
                    filter=SearchFilter(created=created, reader=EVERYONE),
                )
                out.append([h.record.id for h in hits])
            seconds = self.out.source_seconds
            seconds[key] = seconds.get(key, 0.0) + time.monotonic() - t1

    def _olav(self, path: Path, conv: Conversation, qv: np.ndarray) -> None:
        """olav's default: the product's records (dated text, context window, event time) and
        ``MemoryStore.search(mode="hybrid")``, with vectors from the cache."""
        from olav.memory.store.table import MemoryStore

        cache = self.cache
        records = olav_records(conv)
        texts = cache.get([r.text for r in records], "passage")
        with_ctx = [r for r in records if r.context]
        contexts = cache.get([str(r.context) for r in with_ctx], "passage")
        for r, v in zip(records, texts, strict=True):
            r.vector = [float(x) for x in v]
        for r, v in zip(with_ctx, contexts, strict=True):
            r.context_vector = [float(x) for x in v]
        store = MemoryStore(path, cache.embedder)
        store.upsert(records)
        store.maintain(force_optimize=True)
        t1 = time.monotonic()
        for q, vec in zip(conv.questions, qv, strict=True):
            hits = store.search(q.text, mode="hybrid", k=self.kmax, query_vector=vec, filter=WHOLE)
            self.out.rankings["olav"].append([h.record.id for h in hits])
        self.out.seconds["olav"] += time.monotonic() - t1


def olav_records(conv: Conversation) -> list[Any]:
    """The conversation as olav stores it (olav.memory.ingest.context.conversation_records)."""
    from olav.memory.ingest.context import Utterance, conversation_records

    turns = [Utterance(t.dia_id, t.speaker, t.text, t.session, t.when) for t in conv.turns]
    return conversation_records(turns, metadata={"conversation": conv.sample_id})


def _records(conv: Conversation, texts: Sequence[str], vectors: np.ndarray) -> list[Any]:
    from olav.memory.store.schema import MemoryRecord

    fallback = datetime(2000, 1, 1, tzinfo=UTC)
    return [
        MemoryRecord(
            id=t.dia_id,
            text=text,
            category="fact",
            scope="global",
            origin="user",
            metadata={
                "conversation": conv.sample_id,
                "dia_id": t.dia_id,
                "speaker": t.speaker,
                "session": t.session,
                "session_date": t.date_label,
            },
            created_at=t.when or fallback,
            updated_at=t.when or fallback,
            vector=[float(x) for x in vec],
        )
        for t, text, vec in zip(conv.turns, texts, vectors, strict=True)
    ]


def _set_fts(store: Any, config: str) -> None:
    from lancedb.index import FTS

    store.table.create_index("text", config=FTS(**FTS_CONFIGS[config]), replace=True)


def _langgraph_rankings(
    conv: Conversation,
    texts: Sequence[str],
    vectors: np.ndarray,
    qvecs: np.ndarray,
    dim: int,
    k: int,
) -> list[list[str]]:
    """LangGraph's InMemoryStore with an embedding index over the same vectors.

    The index gets a LangChain ``Embeddings`` object wrapping the same embedder: documents are
    embedded as passages and questions as queries, exactly as olav does. (A bare
    ``list[str] -> list[list[float]]`` function would embed the questions as passages too.)
    """
    from langchain_core.embeddings import Embeddings
    from langgraph.store.memory import InMemoryStore

    by_text = {t: v for t, v in zip(texts, vectors, strict=True)}
    by_query = {q.text: v for q, v in zip(conv.questions, qvecs, strict=True)}

    class SameVectors(Embeddings):
        def embed_documents(self, docs: list[str]) -> list[list[float]]:
            return [by_text[d].tolist() for d in docs]

        def embed_query(self, text: str) -> list[float]:
            return list(by_query[text].tolist())

    store = InMemoryStore(index={"embed": SameVectors(), "dims": dim, "fields": ["text"]})
    ns = ("locomo", conv.sample_id)
    for t, text in zip(conv.turns, texts, strict=True):
        store.put(ns, t.dia_id, {"text": text, "session_date": t.date_label})
    return [[item.key for item in store.search(ns, query=q.text, limit=k)] for q in conv.questions]
