"""Running the LoCoMo recall benchmark: the baselines, olav's own hybrid search, and the
experimental recipes fused by the product's fusion; results as a JSON-safe report."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from olav.bench.locomo.cache import Progress, VectorCache
from olav.bench.locomo.data import (
    CATEGORY_NAMES,
    REPRESENTATIONS,
    Conversation,
    Question,
    load_locomo,
    time_filter,
)
from olav.bench.locomo.recipes import FTS_CONFIGS, OLAV_FTS, RECIPES, Recipe
from olav.core.errors import OlavError
from olav.memory.embedders import Embedder

BASELINES = ("bm25", "vector", "langgraph", "olav")


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of the evidence ids among the first k ranked ids."""
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def fuse(rankings: Sequence[tuple[Sequence[str], float]], rrf_k: int, depth: int) -> list[str]:
    """The product's fusion (olav.memory.fusion.rrf) over the first ``depth`` ids of each
    weighted ranking, as ``MemoryStore.search`` fuses its own candidates."""
    from olav.memory.fusion import rrf

    lists = {str(i): list(r[:depth]) for i, (r, _w) in enumerate(rankings)}
    weights = {str(i): w for i, (_r, w) in enumerate(rankings)}
    return rrf(lists, k=rrf_k, weights=weights).order


def _summarise(
    rankings: Sequence[Sequence[str]], questions: Sequence[Question], ks: Sequence[int]
) -> dict[str, Any]:
    per_cat: dict[int, list[int]] = {}
    for i, q in enumerate(questions):
        per_cat.setdefault(q.category, []).append(i)

    def block(idx: Sequence[int]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(idx)}
        for k in ks:
            vals = [recall_at(rankings[i], questions[i].evidence, k) for i in idx]
            out[f"R@{k}"] = round(float(np.mean(vals)), 4) if vals else None
        return out

    return {
        "overall": block(range(len(questions))),
        "by_category": {
            f"{c} {CATEGORY_NAMES.get(c, '?')}": block(idx) for c, idx in sorted(per_cat.items())
        },
    }


# -- the run -----------------------------------------------------------------------------------


def _records(conv: Conversation, texts: Sequence[str], vectors: np.ndarray) -> list[Any]:
    from olav.memory.schema import MemoryRecord

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


def run_recall(
    path: Path,
    *,
    embedder: Embedder,
    convs: Sequence[int] | None = None,
    ks: Sequence[int] = (1, 5, 10),
    experiments: bool = True,
    recipes: Sequence[Recipe] | None = None,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    collect: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every method on the chosen conversations; returns the report as a JSON-safe dict.

    ``collect``, when given, receives the raw material for further analysis: ``questions``,
    ``rankings`` (per baseline method) and ``sources`` (per experimental ranking).
    """
    from olav.memory.store import MemoryStore

    say: Progress = progress or (lambda _msg: None)
    started = time.monotonic()
    ks = sorted(set(ks))
    kmax = ks[-1]
    depth = max(3 * kmax, 30)  # candidates per ranking, as MemoryStore.search(mode="hybrid")
    conversations = load_locomo(path, convs)
    questions = [q for c in conversations for q in c.questions]
    chosen = list(recipes if recipes is not None else RECIPES) if experiments else []

    # which rankings are needed: representation -> set of kinds
    needed: dict[str, set[str]] = {}
    for recipe in chosen:
        for source, _w in recipe.sources:
            rep, kind = source.split("/", 1)
            if rep not in REPRESENTATIONS:
                raise OlavError(f"recipe {recipe.name}: unknown representation {rep!r}")
            needed.setdefault(rep, set()).add(kind)
    needed.setdefault("turn", set())
    vector_reps = {
        rep for rep, kinds in needed.items() if rep == "turn" or any("vector" in k for k in kinds)
    }

    cache = VectorCache(embedder, cache_dir, say)
    t0 = time.monotonic()
    texts = {rep: {c.sample_id: REPRESENTATIONS[rep](c) for c in conversations} for rep in needed}
    qvecs_all = cache.get([q.text for q in questions], "query")
    vectors: dict[str, dict[str, np.ndarray]] = {}
    for rep in sorted(vector_reps, key=lambda r: r != "turn"):
        flat = [t for c in conversations for t in texts[rep][c.sample_id]]
        say(f"embedding representation {rep} ({len(flat)} passages)")
        mat = cache.get(flat, "passage")
        vectors[rep], pos = {}, 0
        for c in conversations:
            vectors[rep][c.sample_id] = mat[pos : pos + len(c.turns)]
            pos += len(c.turns)
    embed_s = time.monotonic() - t0

    rankings: dict[str, list[list[str]]] = {m: [] for m in BASELINES}
    sources: dict[str, list[list[str]]] = {}
    seconds: dict[str, float] = dict.fromkeys(BASELINES, 0.0)
    source_seconds: dict[str, float] = {}
    qpos = 0
    with tempfile.TemporaryDirectory(prefix="olav-bench-") as tmp:
        for ci, conv in enumerate(conversations):
            qv = qvecs_all[qpos : qpos + len(conv.questions)]
            qpos += len(conv.questions)
            say(
                f"conversation {conv.sample_id} ({ci + 1}/{len(conversations)}): "
                f"{len(conv.turns)} turns, {len(conv.questions)} questions"
            )
            for rep in sorted(needed, key=lambda r: r != "turn"):
                vecs = vectors[rep if rep in vectors else "turn"][conv.sample_id]
                store = MemoryStore(Path(tmp) / f"c{ci}" / rep.replace("+", "_"), embedder)
                store.upsert(_records(conv, texts[rep][conv.sample_id], vecs))
                store.maintain(force_optimize=True)
                if rep == "turn":
                    _baselines(store, conv, qv, kmax, rankings, seconds)
                    _olav(Path(tmp) / f"c{ci}" / "olav", conv, qv, cache, kmax, rankings, seconds)
                    t1 = time.monotonic()
                    rankings["langgraph"].extend(
                        _langgraph_rankings(
                            conv, texts["turn"][conv.sample_id], vecs, qv, embedder.dim, kmax
                        )
                    )
                    seconds["langgraph"] += time.monotonic() - t1
                kinds = needed[rep]
                for kind in sorted(kinds, key=lambda k: (k.split("@")[0] != f"fts:{OLAV_FTS}", k)):
                    base, _, timed = kind.partition("@")
                    if base.startswith("fts:"):
                        cfg = base[4:]
                        if cfg not in FTS_CONFIGS:
                            raise OlavError(f"unknown FTS config {cfg!r}")
                        _set_fts(store, cfg)
                    out = sources.setdefault(f"{rep}/{kind}", [])
                    t1 = time.monotonic()
                    for q, vec in zip(conv.questions, qv, strict=True):
                        where = time_filter(q.text) if timed else None
                        if timed and where is None:
                            out.append([])
                            continue
                        mode = "vector" if base == "vector" else "fts"
                        hits = store.search(
                            q.text, mode=mode, k=depth, query_vector=vec, where=where
                        )
                        out.append([h.record.id for h in hits])
                    key = f"{rep}/{kind}"
                    source_seconds[key] = source_seconds.get(key, 0.0) + time.monotonic() - t1

    if collect is not None:
        collect.update(questions=questions, rankings=rankings, sources=sources, depth=depth)
    methods: dict[str, Any] = {}
    labels = {
        "bm25": "BM25 (LanceDB FTS, olav's ICU index)",
        "vector": "vector search alone",
        "langgraph": "LangGraph InMemoryStore (embedding index)",
        "olav": "olav default: dated turns with ±2 context, hybrid search (up to 6 rankings)",
    }
    for m in BASELINES:
        methods[m] = {
            "label": labels[m],
            "experimental": False,
            **_summarise(rankings[m], questions, ks),
            "search_ms_per_question": round(1000 * seconds[m] / max(len(questions), 1), 2),
        }
    for recipe in chosen:
        fused = [
            fuse([(sources[s][i], w) for s, w in recipe.sources], recipe.rrf_k, depth)
            for i in range(len(questions))
        ]
        methods[recipe.name] = {
            "label": recipe.description,
            "experimental": True,
            "sources": [{"source": s, "weight": w} for s, w in recipe.sources],
            "rrf_k": recipe.rrf_k,
            **_summarise(fused, questions, ks),
            # the searches one after another (olav's hybrid search runs its two concurrently)
            "search_ms_per_question": round(
                1000 * sum(source_seconds[s] for s, _w in recipe.sources) / max(len(questions), 1),
                2,
            ),
        }
    timed_q = sum(1 for q in questions if time_filter(q.text))
    return {
        "dataset": "locomo",
        "path": str(path),
        "conversations": [c.sample_id for c in conversations],
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "excluded_category_5": sum(c.excluded for c in conversations),
        "skipped_no_evidence": sum(c.no_evidence for c in conversations),
        "dropped_evidence_ids": [i for c in conversations for i in c.dropped_ids],
        "questions_with_time_window": timed_q,
        "embedder": embedder.name,
        "ks": list(ks),
        "candidates_per_ranking": depth,
        "methods": methods,
        "embedding": {
            "seconds": round(embed_s, 1),
            "embedded": cache.embedded,
            "reused_from_cache": cache.reused,
            "cache": str(cache_dir) if cache_dir else None,
        },
        "seconds": round(time.monotonic() - started, 1),
    }


def _baselines(
    store: Any,
    conv: Conversation,
    qv: np.ndarray,
    k: int,
    rankings: dict[str, list[list[str]]],
    seconds: dict[str, float],
) -> None:
    for mode, name in (("fts", "bm25"), ("vector", "vector")):
        t1 = time.monotonic()
        for q, vec in zip(conv.questions, qv, strict=True):
            hits = store.search(q.text, mode=mode, k=k, query_vector=vec)
            rankings[name].append([h.record.id for h in hits])
        seconds[name] += time.monotonic() - t1


def olav_records(conv: Conversation) -> list[Any]:
    """The conversation as olav stores it (olav.memory.context.conversation_records)."""
    from olav.memory.context import Utterance, conversation_records

    turns = [Utterance(t.dia_id, t.speaker, t.text, t.session, t.when) for t in conv.turns]
    return conversation_records(turns, metadata={"conversation": conv.sample_id})


def _olav(
    path: Path,
    conv: Conversation,
    qv: np.ndarray,
    cache: VectorCache,
    k: int,
    rankings: dict[str, list[list[str]]],
    seconds: dict[str, float],
) -> None:
    """olav's default: the product's records (dated text, context window, event time) and
    ``MemoryStore.search(mode="hybrid")``, with vectors from the cache."""
    from olav.memory.store import MemoryStore

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
        hits = store.search(q.text, mode="hybrid", k=k, query_vector=vec)
        rankings["olav"].append([h.record.id for h in hits])
    seconds["olav"] += time.monotonic() - t1
