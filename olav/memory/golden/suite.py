"""The golden suite: does the right memory reach the model, and nothing else?

A project-authored set (``olav/memory/golden/data``) of guides, one-line lessons (reflections),
precedents and requests in English, Chinese and both mixed, loaded into a real :class:`MemoryStore`
through the product's write paths (``import_guides`` for guides, ``upsert`` for the rest, the layout
trace_learner and capture use). Every request then goes through a :class:`Recaller` built by
``Recaller.for_config`` from the settings' defaults, exactly as AutoRecall builds it for the agent
``ops`` (scopes ``ops`` + ``global``, hybrid search, the relevance decision, ceilings, the tier's
total and the token budget), so the suite follows every calibration change.

The requests are of four kinds: they expect a guide or precedent, or a lesson (or both);
they are in-domain but no stored memory answers them (``nomatch``); or they are unrelated
(``negative``). Each names the memories that are acceptable in its block. Every request has
an id, and a hash of the id puts it in the calibration half or the test half, so adding
requests never moves old ones.

What is measured (olav.memory.golden.block): the block itself, per half, tier and language:
the expected memory in it, its precision, empty blocks for unrelated requests, stray
lessons, kept lessons, tokens. The floors that the calibration half suggests are reported on
the test half beside the configured ones, and the same half with no floor at all shows what
the decision buys. ``ranking`` locates the expected memory among the Recaller's candidates
and in the search alone, to tell search failures from decision ones. ``dedup`` measures the
distances of reworded duplicate lessons and of related but distinct ones (a false merge
loses a lesson while a missed duplicate only repeats one, so the suggested dedup distance is
the largest that keeps every distinct pair apart).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from olav.core.errors import OlavError
from olav.memory.golden.block import (
    GRID,
    LANGS,
    TARGETS,
    Recalled,
    block_misses,
    calibrate,
    embedder_alone,
    margin_scale,
    measure,
    replay,
    report_blocks,
    scaled,
)
from olav.memory.golden.dataset import DATA, GoldenSet, load_golden
from olav.memory.policy import Floors
from olav.memory.store.embedders import CachedEmbedder, Embedder
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE, Reader
from olav.memory.store.textvectors import (
    KnownVectors,
    RecordingEmbedder,
    load_vectors,
    save_keyed,
    vectors_file,
)

AGENT = "ops"
TIER = "small"
KS = (1, 3, 5)
DEDUP_GRID = tuple(round(0.02 + 0.01 * i, 2) for i in range(39))
DEDUP_MARGIN = 0.01  # the suggested dedup distance stays this far below every distinct pair
Progress = Callable[[str], None]


def _load_store(gs: GoldenSet, store: Any) -> int:
    """Write the set through the product's paths; returns the number of guides imported."""
    from olav.memory.ingest.guides import import_guides
    from olav.memory.recall.lessons import lesson_record
    from olav.memory.store.schema import MemoryRecord

    summary = import_guides(store, gs.guide_files, base=gs.root)
    if summary.errors:
        raise OlavError(f"golden guide import failed: {summary.errors[0].one_line()}")
    records = [lesson_record(rid, text, "trace_learner") for rid, text in gs.reflections.items()]
    records += [
        MemoryRecord(
            id=pid,
            text=text,
            category=cat,
            scope=AGENT,
            origin="agent",
            confidence=0.6 if cat == "query_pattern" else 0.5,
            metadata={"agent": AGENT},
        )
        for pid, (cat, text) in gs.precedents.items()
    ]
    store.upsert(records)
    store.maintain(force_optimize=True)
    every = SearchFilter(reader=EVERYONE, include_invalid=True)
    known = set(store.values(["id"], every).column("id").to_pylist())
    for q in gs.queries:
        missing = [m for m in q.acceptable if m not in known]
        if missing:
            raise OlavError(f"query {q.text!r} expects unknown memories {missing}")
    return len(summary.added)


def _rate(hits: Sequence[bool]) -> float | None:
    return round(sum(hits) / len(hits), 3) if hits else None


def _spread(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {
        "n": len(values),
        "min": round(min(values), 4),
        "median": round(statistics.median(values), 4),
        "max": round(max(values), 4),
    }


def choose(sweep: Sequence[dict[str, Any]], a: str, b: str) -> float:
    """The threshold maximising min(a, b), then a + b; ties go to the plateau's middle."""

    def key(row: dict[str, Any]) -> tuple[float, float]:
        return (min(row[a], row[b]), row[a] + row[b])

    best = max(key(r) for r in sweep)
    tied = [r["threshold"] for r in sweep if key(r) == best]
    return round((tied[0] + tied[-1]) / 2, 3)


def _position(ids: Sequence[str], expect: Sequence[str]) -> int | None:
    return next((i for i, rid in enumerate(ids, 1) if rid in expect), None)


def _recall_all(store: Any, gs: GoldenSet, recaller: Any) -> tuple[list[Recalled], list[float]]:
    """Every query through the product's Recaller once (its candidates keep their signals)."""
    rows, ms = [], []
    on = recaller.relevance_on
    for q in gs.queries:
        res = recaller.recall(q.text, dry_run=True)
        rows.append(Recalled(q, res.candidates, on))
        ms.append(res.latency_ms)
    return rows, ms


def _retrieval(store: Any, rows: Sequence[Recalled], scopes: list[str]) -> dict[str, Any]:
    """Where the expected guide or precedent ranks: in the Recaller's order (before the
    relevance decision) and in the search alone, with its vector and full-text rank."""
    total = store.size()
    out = []
    for r in rows:
        q = r.query
        if not q.expect:
            continue
        ids = [c.hit.record.id for c in r.candidates if c.hit.record.category != "reflection"]
        hits = [
            h
            for h in store.search(
                q.text,
                mode="hybrid",
                k=total,
                filter=SearchFilter(scopes=scopes, reader=Reader.owning(scopes)),
            )
            if h.record.category != "reflection"
        ]
        pos = _position([h.record.id for h in hits], q.expect)
        hit = hits[pos - 1] if pos else None
        out.append(
            {
                "query": q.text,
                "lang": q.lang,
                "rank": _position(ids, q.expect),
                "top": ids[:3],
                "search_rank": pos,
                "vector_rank": hit.vector_rank if hit else None,
                "fts_rank": hit.fts_rank if hit else None,
            }
        )

    def at(rank: int | None, k: int) -> bool:
        return rank is not None and rank <= k

    def block(sel: list[dict[str, Any]]) -> dict[str, Any]:
        res: dict[str, Any] = {"n": len(sel)}
        for k in KS:
            res[f"top{k}"] = _rate([at(x["rank"], k) for x in sel])
        for k in KS:
            res[f"search_top{k}"] = _rate([at(x["search_rank"], k) for x in sel])
        return res

    return {
        "overall": block(out),
        "by_language": {lang: block([x for x in out if x["lang"] == lang]) for lang in LANGS},
        "misses": [x for x in out if not at(x["rank"], 3)],
    }


def _dedup(gs: GoldenSet, embedder: Embedder, configured: float) -> dict[str, Any]:
    import numpy as np

    firsts = sorted({a for a, _ in [*gs.duplicates, *gs.distinct]})
    stored = dict(zip(firsts, embedder.embed_passages(firsts), strict=True))

    def dists(pairs: list[tuple[str, str]]) -> list[float]:
        out = []
        for old, new in pairs:
            diff = embedder.embed_query(new) - stored[old]
            out.append(float(np.dot(diff, diff)))
        return out

    dup, dis = dists(gs.duplicates), dists(gs.distinct)

    def at(t: float) -> dict[str, Any]:
        return {
            "threshold": t,
            "skipped": _rate([d <= t for d in dup]),
            "kept": _rate([d > t for d in dis]),
        }

    sweep = [at(t) for t in DEDUP_GRID]
    safe = [t for t in DEDUP_GRID if all(d > t + DEDUP_MARGIN for d in dis)]
    chosen = max(safe) if safe else choose(sweep, "skipped", "kept")
    return {
        "duplicates": _spread(dup),
        "distinct": _spread(dis),
        "separable": bool(dup and dis and max(dup) < min(dis)),
        "configured": at(configured),
        "suggested": at(chosen),
        "sweep": sweep,
    }


def run_golden(
    embedder: Embedder,
    *,
    data: Path = DATA,
    relevance: str | None = None,
    dedup: float | None = None,
    progress: Progress | None = None,
    fresh: bool = False,
    ceiling: bool = False,
    shipped: bool = True,
) -> dict[str, Any]:
    """Run the golden suite with ``embedder``. The Recaller is built by
    ``Recaller.for_config`` from the settings' defaults, so the floors are the product's
    calibrated ones for that embedder (``olav.memory.recall.calibration``); ``relevance`` measures
    other floors (the ``memory.relevance`` syntax). The suggested floors are chosen on the
    calibration half and reported on the test half beside the configured ones. With
    ``fresh``, an embedder that has no floors yet is calibrated too (``olav memory
    calibrate``): its margins are measured and the grid is stretched to their scale. With
    ``ceiling``, the report also says what any floors could reach on the test half
    (:mod:`olav.memory.golden.ceiling`, about a minute more). The vectors shipped for this
    set and embedder (:func:`shipped_vectors`) spare embedding its texts; ``shipped=False``
    embeds every one (``make golden-vectors`` does, to write them)."""
    from olav.memory.recall import calibration
    from olav.memory.store.search import SearchTuning
    from olav.memory.store.table import MemoryStore

    say = progress or (lambda _msg: None)
    started = time.perf_counter()
    settings = _settings(relevance, dedup)
    gs = load_golden(data)
    known = shipped_vectors(embedder, data) if shipped else None
    emb = CachedEmbedder(KnownVectors(embedder, known) if known else embedder, size=4096)
    budget = settings["memory.token_budget"]
    with tempfile.TemporaryDirectory(prefix="olav-golden-") as tmp:
        say("embedding the golden set")
        store = MemoryStore(
            Path(tmp) / "memory.lance", emb, tuning=SearchTuning(rrf_k=settings["memory.rrf_k"])
        )
        guides = _load_store(gs, store)
        load_s = time.perf_counter() - started
        say("recalling every query")
        recaller, configured = _recaller(store, settings, fresh)
        rows, ms = _recall_all(store, gs, recaller)
        retrieval = _retrieval(store, rows, recaller.scopes)
    _check_replay(rows, recaller.floors or Floors.off(), budget)
    alone = embedder_alone(rows, settings, emb.name, budget) if recaller.lesson_margins else None
    say("calibrating the floors on the calibration half")
    key = calibration.floors_key(settings, emb.name)
    suggested, scale = _suggest(rows, recaller, configured, key, budget)
    bound = None
    if ceiling and recaller.relevance_on:
        from olav.memory.golden.ceiling import ceiling as best_blocks

        say("replaying the test half for every combination of floors")
        bound = best_blocks(rows, suggested, budget, scale)
    say("measuring dedup distances")
    dedup_report = _dedup(gs, emb, calibration.dedup_distance(settings, emb.name))
    return {
        "embedder": emb.name,
        "floors_key": key,
        "second_opinion": recaller.lesson_margins is not None,
        "agent": AGENT,
        "rrf_k": settings["memory.rrf_k"],
        "token_budget": budget,
        "relevance_on": configured != Floors.off(),
        "margin_scale": round(scale, 3),
        "counts": _counts(gs, guides),
        "retrieval": retrieval,
        "floors": {"configured": _asdict(configured), "suggested": _asdict(suggested)},
        "blocks": {**_blocks(rows, configured, suggested, budget), "alone": alone},
        "targets": {k: {"target": t, "higher": h} for k, (t, h) in TARGETS.items()},
        "misses": block_misses(rows, configured, budget),
        "ceiling": bound,
        "dedup": dedup_report,
        "seconds": _seconds(load_s, started, ms),
    }


def vectors_path(data: Path, embedder_name: str) -> Path:
    """Where the vectors of the golden set at ``data`` made by ``embedder_name`` are kept."""
    return vectors_file(data, embedder_name, stem="vectors")


def shipped_vectors(embedder: Embedder, data: Path = DATA) -> dict[str, Any]:
    """{key: vector} of the set's passages and queries made ahead of time by ``embedder``
    (olav ships e5's: the suite's 600 texts took 16 s to embed on two cores, which every
    ``olav memory calibrate`` paid); empty for any other embedder or a set without them. A
    text that is not in the file (an edited set) is embedded as usual, never served stale."""
    return load_vectors(vectors_path(data, embedder.name), embedder.name, embedder.dim)


def write_vectors(embedder: Embedder, data: Path = DATA) -> Path:
    """Run the suite once embedding everything, and keep every vector it made."""
    recorder = RecordingEmbedder(embedder)
    run_golden(recorder, data=data, shipped=False)
    path = vectors_path(data, embedder.name)
    save_keyed(path, embedder.name, recorder.made)
    return path


def _settings(relevance: str | None, dedup: float | None) -> dict[str, Any]:
    """The settings' defaults, with the relevance floors and dedup distance measured."""
    from olav.core.settings import SETTINGS

    settings: dict[str, Any] = {s.key: s.default for s in SETTINGS}
    for key, value in (("memory.relevance", relevance), ("memory.dedup_distance", dedup)):
        if value is not None:
            settings[key] = str(value)
    return settings


def _recaller(store: Any, settings: dict[str, Any], fresh: bool) -> tuple[Any, Floors]:
    """The Recaller the suite measures and the floors configured for its embedder. With
    ``fresh`` and no floors yet, it recalls with the reference floors to measure margins."""
    from olav.memory.recall import calibration
    from olav.memory.recall.recaller import Recaller

    recaller = Recaller.for_config(store, settings, agent=AGENT, tier=TIER)
    configured = recaller.floors or Floors.off()
    if fresh and not recaller.relevance_on:  # measure the margins it gives
        start = {**settings, "memory.relevance": floors_string(calibration.reference_floors())}
        recaller = Recaller.for_config(store, start, agent=AGENT, tier=TIER)
    return recaller, configured


def _blocks(
    rows: Sequence[Recalled], configured: Floors, suggested: Floors, budget: int
) -> dict[str, Any]:
    return {
        "configured": report_blocks(rows, configured, budget),
        "suggested": report_blocks(rows, suggested, budget),
        # no floor at all, as olav injected before the relevance decision
        "off": measure(rows, Floors.off(), TIER, budget, "test"),
    }


def _seconds(load_s: float, started: float, ms: list[float]) -> dict[str, Any]:
    return {
        "load": round(load_s, 2),
        "total": round(time.perf_counter() - started, 2),
        "recall_ms_per_query": round(statistics.mean(ms), 2) if ms else None,
    }


def _suggest(
    rows: Sequence[Recalled], recaller: Any, configured: Floors, embedder: str, budget: int
) -> tuple[Floors, float]:
    """The floors the calibration half suggests, and the margin scale they were searched on:
    e5's grid for the embedders olav ships floors for, the grid stretched to this embedder's
    margins for any other."""
    from olav.memory.recall import calibration

    if not recaller.relevance_on:
        return configured, 1.0
    builtin = calibration.calibrated_floors(embedder) is not None
    scale = 1.0 if builtin else margin_scale(rows)
    start = recaller.floors
    if configured == Floors.off():  # nothing configured: start from e5's floors, stretched
        start = Floors(**scaled(dataclasses.asdict(calibration.reference_floors()), scale))
    return calibrate(rows, start, budget, scaled(GRID, scale)), scale


def floors_string(floors: Floors) -> str:
    """Floors in the ``memory.relevance`` syntax."""
    return ",".join(f"{v:g}" for v in dataclasses.astuple(floors))


def _check_replay(rows: Sequence[Recalled], floors: Any, budget: int) -> None:
    """The calibration replays blocks; they must be the blocks the Recaller injected."""
    for r in rows:
        own = [c.hit.record.id for c in r.candidates if c.decision == "injected"]
        again = [c.hit.record.id for c in replay(r, floors, TIER, budget)]
        if own != again:
            raise OlavError(
                f"the replayed block for {r.query.text!r} differs from the Recaller's: "
                f"{again} != {own}",
                hint="olav.memory.golden.block.replay must apply what Recaller.recall does",
            )


def _asdict(floors: Any) -> dict[str, float | None]:
    """Floors as JSON (an infinite spread is ``None``: no spread limit)."""
    return {k: (None if math.isinf(v) else v) for k, v in dataclasses.asdict(floors).items()}


def _counts(gs: GoldenSet, guides: int) -> dict[str, Any]:
    qs = gs.queries
    return {
        "guides": guides,
        "reflections": len(gs.reflections),
        "precedents": len(gs.precedents),
        "queries": len(qs),
        "positive": sum(1 for q in qs if q.expect),
        "lesson": sum(1 for q in qs if q.lesson),
        "negative": sum(1 for q in qs if q.negative),
        "nomatch": sum(1 for q in qs if q.nomatch),
        "split": {s: sum(1 for q in qs if q.split == s) for s in ("cal", "test")},
        "by_language": {lang: sum(1 for q in qs if q.lang == lang) for lang in LANGS},
        "duplicate_pairs": len(gs.duplicates),
        "distinct_pairs": len(gs.distinct),
    }
