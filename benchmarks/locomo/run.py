"""Running the LoCoMo recall benchmark: the baselines, olav's own hybrid search, and the
experimental recipes fused by the product's fusion; results as a JSON-safe report."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.locomo.cache import LocomoVectors, Progress
from benchmarks.locomo.data import REPRESENTATIONS, Conversation, Question, load_locomo, time_filter
from benchmarks.locomo.measure import BASELINES, Corpus, Measured, Measurer
from benchmarks.locomo.recipes import RECIPES, Recipe
from benchmarks.locomo.scoring import fuse, summarise
from olav.core.errors import OlavError
from olav.memory.store.embedders import Embedder

LABELS = {
    "bm25": "BM25 (LanceDB FTS, olav's ICU index)",
    "vector": "vector search alone",
    "langgraph": "LangGraph InMemoryStore (embedding index)",
    "olav": "olav default: dated turns with ±2 context, hybrid search (up to 6 rankings)",
}


@dataclass(frozen=True)
class RecallRun:
    """What to run: the conversations (all when None), the k of R@k, the experimental recipes
    (``RECIPES`` when None; none without ``experiments``) and the embedding cache folder."""

    convs: Sequence[int] | None = None
    ks: Sequence[int] = (1, 5, 10)
    experiments: bool = True
    recipes: Sequence[Recipe] | None = None
    cache_dir: Path | None = None


def run_recall(
    path: Path,
    *,
    embedder: Embedder,
    run: RecallRun | None = None,
    progress: Progress | None = None,
    collect: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every method on the chosen conversations; returns the report as a JSON-safe dict.

    ``collect``, when given, receives the raw material for further analysis: ``questions``,
    ``rankings`` (per baseline method) and ``sources`` (per experimental ranking).
    """
    opts = run or RecallRun()
    say: Progress = progress or (lambda _msg: None)
    started = time.monotonic()
    ks = sorted(set(opts.ks))
    kmax = ks[-1]
    depth = max(3 * kmax, 30)  # candidates per ranking, as MemoryStore.search(mode="hybrid")
    conversations = load_locomo(path, opts.convs)
    questions = [q for c in conversations for q in c.questions]
    chosen = list(opts.recipes if opts.recipes is not None else RECIPES) if opts.experiments else []

    cache = LocomoVectors(embedder, opts.cache_dir, say)
    t0 = time.monotonic()
    corpus, qvecs_all = _corpus(conversations, _needed(chosen), cache, say)
    embed_s = time.monotonic() - t0

    measurer = Measurer(cache, corpus, kmax, depth)
    qpos = 0
    with tempfile.TemporaryDirectory(prefix="olav-bench-") as tmp:
        for ci, conv in enumerate(conversations):
            qv = qvecs_all[qpos : qpos + len(conv.questions)]
            qpos += len(conv.questions)
            say(
                f"conversation {conv.sample_id} ({ci + 1}/{len(conversations)}): "
                f"{len(conv.turns)} turns, {len(conv.questions)} questions"
            )
            measurer.conversation(Path(tmp) / f"c{ci}", conv, qv)
    out = measurer.out
    if collect is not None:
        collect.update(questions=questions, rankings=out.rankings, sources=out.sources, depth=depth)
    return {
        "dataset": "locomo",
        "path": str(path),
        **_data_facts(conversations, questions),
        "embedder": embedder.name,
        "ks": list(ks),
        "candidates_per_ranking": depth,
        "methods": _methods(out, chosen, questions, ks, depth),
        "embedding": {
            "seconds": round(embed_s, 1),
            "embedded": cache.embedded,
            "reused_from_cache": cache.reused,
            "cache": str(opts.cache_dir) if opts.cache_dir else None,
        },
        "seconds": round(time.monotonic() - started, 1),
    }


def _needed(chosen: Sequence[Recipe]) -> dict[str, set[str]]:
    """Which rankings the recipes fuse: representation -> kinds of ranking."""
    needed: dict[str, set[str]] = {}
    for recipe in chosen:
        for source, _w in recipe.sources:
            rep, kind = source.split("/", 1)
            if rep not in REPRESENTATIONS:
                raise OlavError(f"recipe {recipe.name}: unknown representation {rep!r}")
            needed.setdefault(rep, set()).add(kind)
    needed.setdefault("turn", set())
    return needed


def _corpus(
    conversations: Sequence[Conversation],
    needed: dict[str, set[str]],
    cache: LocomoVectors,
    say: Progress,
) -> tuple[Corpus, np.ndarray]:
    """The texts of every needed representation, embedded once, and the questions' vectors."""
    texts = {rep: {c.sample_id: REPRESENTATIONS[rep](c) for c in conversations} for rep in needed}
    questions = [q.text for c in conversations for q in c.questions]
    qvecs = cache.get(questions, "query")
    vectors: dict[str, dict[str, np.ndarray]] = {}
    vector_reps = {
        rep for rep, kinds in needed.items() if rep == "turn" or any("vector" in k for k in kinds)
    }
    for rep in sorted(vector_reps, key=lambda r: r != "turn"):
        flat = [t for c in conversations for t in texts[rep][c.sample_id]]
        say(f"embedding representation {rep} ({len(flat)} passages)")
        mat = cache.get(flat, "passage")
        vectors[rep], pos = {}, 0
        for c in conversations:
            vectors[rep][c.sample_id] = mat[pos : pos + len(c.turns)]
            pos += len(c.turns)
    return Corpus(needed, texts, vectors), qvecs


def _methods(
    out: Measured,
    chosen: Sequence[Recipe],
    questions: Sequence[Question],
    ks: Sequence[int],
    depth: int,
) -> dict[str, Any]:
    per_question = max(len(questions), 1)
    methods: dict[str, Any] = {}
    for m in BASELINES:
        methods[m] = {
            "label": LABELS[m],
            "experimental": False,
            **summarise(out.rankings[m], questions, ks),
            "search_ms_per_question": round(1000 * out.seconds[m] / per_question, 2),
        }
    for recipe in chosen:
        fused = [
            fuse([(out.sources[s][i], w) for s, w in recipe.sources], recipe.rrf_k, depth)
            for i in range(len(questions))
        ]
        # the searches one after another (olav's hybrid search runs its two concurrently)
        seconds = sum(out.source_seconds[s] for s, _w in recipe.sources)
        methods[recipe.name] = {
            "label": recipe.description,
            "experimental": True,
            "sources": [{"source": s, "weight": w} for s, w in recipe.sources],
            "rrf_k": recipe.rrf_k,
            **summarise(fused, questions, ks),
            "search_ms_per_question": round(1000 * seconds / per_question, 2),
        }
    return methods


def _data_facts(
    conversations: Sequence[Conversation], questions: Sequence[Question]
) -> dict[str, Any]:
    return {
        "conversations": [c.sample_id for c in conversations],
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "excluded_category_5": sum(c.excluded for c in conversations),
        "skipped_no_evidence": sum(c.no_evidence for c in conversations),
        "dropped_evidence_ids": [i for c in conversations for i in c.dropped_ids],
        "questions_with_time_window": sum(1 for q in questions if time_filter(q.text)),
    }
