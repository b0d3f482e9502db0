"""The golden guide-recall suite: does recall find the right guide, and does the gate hold?

A project-authored set (``data/golden``) of guides, one-line lessons (reflections), precedents
and queries in English, Chinese and both mixed, loaded into a real :class:`MemoryStore` through
the product's write paths (``import_guides`` for guides, ``upsert`` for the rest, the layout
trace_learner and capture use). Every query then goes through a :class:`Recaller` built by
``Recaller.for_config`` from the settings' defaults, exactly as AutoRecall builds it for the
agent ``ops`` (scopes ``ops`` + ``global``, hybrid search, boosts, ranking, the calibrated
reflection gates, quotas of the small tier), so the suite follows every calibration change.

The product's reflection gate (``Recaller.gate_for``): a lesson among the Recaller's hybrid
candidates passes when its squared L2 distance to the query is within the *strict* gate
(``memory.reflection_gate``), or within the *text* gate (``memory.reflection_gate_text``) when
the hybrid search's full-text ranking over ``text`` found it too (``hit.fts_rank`` is set).

What is measured:

* **top-k**: a positive query hits at k when one of its expected guides or precedents is among
  the first k non-reflection candidates in the Recaller's order. ``in block`` is the share whose
  expected memory is actually injected at the small tier (one memory per category).
* **keep**: over queries whose right answer includes a lesson, the share whose expected lesson
  is among the Recaller's candidates *and* passes the product gate (a lesson the hybrid search
  does not return at all is not kept). ``injected`` is the share where the Recaller really
  injects that lesson (the small tier takes one lesson).
* **drop**: over negative (unrelated) queries, the share where *no* lesson passes the product
  gate. ``drop (recaller)`` counts negatives for which the Recaller injected no lesson.
* **stray**: over in-domain queries that expect no lesson (a guide or precedent only), the share
  where some lesson passes the product gate all the same (``stray_injected``: is injected).
* **text-gate sweep**: keep/drop/stray with the strict gate fixed at its configured value and
  the text gate from there to 0.45, on the same candidates (the gates do not change them).
* **suggested**: the (strict, text) pair. For each strict gate from 0.20 to 0.40 the text gate
  is the middle of its sweep's plateau that maximises min(keep, drop), then keep + drop; the
  strict gate is the one that scores best that way, then lets the fewest stray lessons
  through, then is the tightest.
* **distance-only sweep** (the evidence for the strict gate): keep/drop when a lesson passes by
  distance alone, measured over every lesson (vector search, no candidate cut-off), for gates
  0.20 to 0.70 (step 0.01); its suggestion maximises min(keep, drop), ties going to the middle
  of the best plateau. No single distance reaches 85 % on both with e5: Chinese requests sit
  near Chinese lessons whatever the topic, hence the text gate.
* **dedup**: distances (query embedding of the new lesson to the stored passage, as
  ``add_reflection`` searches) of reworded duplicates and of related but distinct lessons. A
  false merge loses a lesson while a missed duplicate only repeats one, so the suggested dedup
  distance is the largest that keeps every distinct pair (else it maximises min(skipped, kept)).

``search top-k`` ranks the same queries by ``MemoryStore.search`` alone (fused relevance, before
the Recaller's confidence/decay weighting), to tell search failures from ranking ones.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from olav.errors import OlavError
from olav.memory.embedders import CachedEmbedder, Embedder

DATA = Path(__file__).parent / "data" / "golden"
AGENT = "ops"
TIER = "small"
LANGS = ("en", "zh", "mixed")
KS = (1, 3, 5)
GATE_GRID = tuple(round(0.20 + 0.01 * i, 2) for i in range(51))
STRICT_GRID = GATE_GRID[:21]  # 0.20 .. 0.40: strict gates the pair search tries
TEXT_MAX = 0.45  # the text-gate sweep runs from the strict gate to this
DEDUP_GRID = tuple(round(0.02 + 0.01 * i, 2) for i in range(39))
DEDUP_MARGIN = 0.01  # the suggested dedup distance stays this far below every distinct pair
PRECEDENTS = ("operational_event", "query_pattern")
_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]{2,}")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class GoldenQuery:
    text: str
    expect: tuple[str, ...] = ()
    lesson: str | None = None
    negative: bool = False

    @property
    def lang(self) -> str:
        return language(self.text)


@dataclass(frozen=True)
class GoldenSet:
    root: Path
    guide_files: list[Path]
    reflections: dict[str, str]
    precedents: dict[str, tuple[str, str]]  # id -> (category, text)
    queries: list[GoldenQuery]
    duplicates: list[tuple[str, str]]
    distinct: list[tuple[str, str]]


def language(text: str) -> str:
    """``zh`` (Chinese only), ``mixed`` (Chinese and Latin words) or ``en``."""
    if not _CJK.search(text):
        return "en"
    return "mixed" if _LATIN.search(text) else "zh"


def _yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise OlavError(f"{path} does not exist", hint="Point --data at a golden set folder")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        raise OlavError(f"{path} is not valid YAML", hint="Check its indentation") from None
    if not isinstance(data, dict):
        raise OlavError(f"{path} must be a YAML mapping", hint="See the files in data/golden")
    return data


def _pairs(data: dict[str, Any], key: str, path: Path) -> list[tuple[str, str]]:
    out = []
    for item in data.get(key) or []:
        ok = isinstance(item, list) and len(item) == 2
        if not (ok and all(isinstance(s, str) for s in item)):
            raise OlavError(f"{path}: every entry of {key} must be two lessons", hint=repr(item))
        out.append((item[0], item[1]))
    return out


def load_golden(root: Path = DATA) -> GoldenSet:
    """Read and cross-check a golden set; a broken reference is an :class:`OlavError`."""
    root = Path(root)
    guides = sorted((root / "guides").glob("*.guide.yaml"))
    mem = _yaml(root / "memories.yaml")
    reflections = {str(r["id"]): str(r["text"]).strip() for r in mem.get("reflections") or []}
    precedents: dict[str, tuple[str, str]] = {}
    for p in mem.get("precedents") or []:
        if p.get("category") not in PRECEDENTS:
            raise OlavError(
                f"precedent {p.get('id')!r} has category {p.get('category')!r}",
                hint="Use " + " or ".join(PRECEDENTS),
            )
        precedents[str(p["id"])] = (str(p["category"]), str(p["text"]).strip())
    queries = []
    for q in _yaml(root / "queries.yaml").get("queries") or []:
        query = GoldenQuery(
            text=str(q["q"]),
            expect=tuple(q.get("expect") or ()),
            lesson=q.get("lesson"),
            negative=bool(q.get("negative")),
        )
        if query.negative == bool(query.expect or query.lesson):
            raise OlavError(
                f"query {query.text!r} must be negative or name what it expects",
                hint="Give it expect/lesson, or negative: true",
            )
        if query.lesson is not None and query.lesson not in reflections:
            raise OlavError(f"query {query.text!r} names an unknown lesson {query.lesson!r}")
        queries.append(query)
    dedup = _yaml(root / "dedup_pairs.yaml")
    gs = GoldenSet(
        root=root,
        guide_files=guides,
        reflections=reflections,
        precedents=precedents,
        queries=queries,
        duplicates=_pairs(dedup, "duplicates", root / "dedup_pairs.yaml"),
        distinct=_pairs(dedup, "distinct", root / "dedup_pairs.yaml"),
    )
    parts = {
        "guides": gs.guide_files,
        "reflections": gs.reflections,
        "queries with a lesson": [q for q in queries if q.lesson],
        "negative queries": [q for q in queries if q.negative],
        "duplicate pairs": gs.duplicates,
        "distinct pairs": gs.distinct,
    }
    for name, items in parts.items():
        if not items:
            raise OlavError(f"the golden set under {root} has no {name}")
    return gs


def _load_store(gs: GoldenSet, store: Any) -> int:
    """Write the set through the product's paths; returns the number of guides imported."""
    from olav.memory.guides import import_guides
    from olav.memory.lessons import lesson_record
    from olav.memory.schema import MemoryRecord

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
    known = {r.id for r in store.list_rows()}
    for q in gs.queries:
        missing = [m for m in q.expect if m not in known]
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


def _distance_rates(dists: dict[str, list[Any]], gate: float) -> dict[str, float | None]:
    """Keep/drop when a lesson passes by distance alone (the distance-only sweep)."""
    return {
        "keep": _rate([d <= gate for d in dists["lesson"]]),
        "drop": _rate([d > gate for d in dists["negative"]]),
    }


def _position(ids: Sequence[str], expect: Sequence[str]) -> int | None:
    return next((i for i, rid in enumerate(ids, 1) if rid in expect), None)


def _recall_pass(
    store: Any, gs: GoldenSet, recaller: Any, *, search: bool = False
) -> list[dict[str, Any]]:
    """Recall every query as AutoRecall does; with ``search``, also rank by the search alone
    and locate each expected memory in the whole table (for the miss analysis)."""
    total = store.count()
    rows = []
    for q in gs.queries:
        res = recaller.recall(q.text, dry_run=True)
        ids = [c.hit.record.id for c in res.candidates if c.hit.record.category != "reflection"]
        lessons = [
            c.hit
            for c in res.candidates
            if c.hit.record.category == "reflection" and c.hit.distance is not None
        ]
        injected = res.injected_ids
        row: dict[str, Any] = {
            "query": q.text,
            "lang": q.lang,
            "rank": _position(ids, q.expect),
            "top": ids[:3],
            "in_block": any(m in injected for m in q.expect),
            "lessons_injected": [i for i in injected if i in gs.reflections],
            # every lesson among the candidates: (id, distance, found by the full-text search)
            "lesson_candidates": [
                (h.record.id, float(h.distance), h.fts_rank is not None) for h in lessons
            ],
            # the product's gate, as the Recaller applies it
            "lessons_passed": [
                h.record.id for h in lessons if float(h.distance) <= recaller.gate_for(h)
            ],
            "ms": round(res.latency_ms, 2),
        }
        if search and q.expect:
            hits = [
                h
                for h in store.search(q.text, mode="hybrid", scopes=recaller.scopes, k=total)
                if h.record.category != "reflection"
            ]
            pos = _position([h.record.id for h in hits], q.expect)
            hit = hits[pos - 1] if pos else None
            row |= {
                "search_rank": pos,
                "vector_rank": hit.vector_rank if hit else None,
                "fts_rank": hit.fts_rank if hit else None,
                "distance": round(hit.distance, 4) if hit and hit.distance is not None else None,
            }
        rows.append(row)
    return rows


def _passed(row: dict[str, Any], strict: float, text: float) -> set[str]:
    """The lessons of a recall row that pass the product rule with these two gates."""
    return {
        rid
        for rid, dist, matched in row["lesson_candidates"]
        if dist <= (max(strict, text) if matched else strict)
    }


def _kinds(
    gs: GoldenSet, rows: list[dict[str, Any]], passed: Callable[[dict[str, Any]], Collection[str]]
) -> dict[str, float | None]:
    """keep / drop / stray for the lessons that ``passed`` lets through on each row."""
    keep, drop, stray = [], [], []
    for q, row in zip(gs.queries, rows, strict=True):
        got = passed(row)
        if q.lesson:
            keep.append(q.lesson in got)
        elif q.negative:
            drop.append(not got)
        else:
            stray.append(bool(got))
    return {"keep": _rate(keep), "drop": _rate(drop), "stray": _rate(stray)}


def product_gate(
    gs: GoldenSet, rows: list[dict[str, Any]], strict: float, text: float
) -> dict[str, Any]:
    """Keep/drop/stray of the product rule on recall rows, with what the Recaller injected."""
    injected = _kinds(gs, rows, lambda r: r["lessons_injected"])
    in_domain = [
        (q.lang, bool(row["lessons_passed"]))
        for q, row in zip(gs.queries, rows, strict=True)
        if q.expect and not q.lesson
    ]
    return {
        "threshold": strict,
        "text_threshold": text,
        **_kinds(gs, rows, lambda r: r["lessons_passed"]),
        "injected": injected["keep"],
        "drop_recaller": injected["drop"],
        "stray_injected": injected["stray"],
        "stray_by_language": {
            lang: _rate([got for q_lang, got in in_domain if q_lang == lang]) for lang in LANGS
        },
    }


def text_sweep(gs: GoldenSet, rows: list[dict[str, Any]], strict: float) -> list[dict[str, Any]]:
    """Keep/drop/stray for text gates from ``strict`` to 0.45, the strict gate fixed."""
    grid = [t for t in GATE_GRID if strict <= t <= max(TEXT_MAX, strict + 0.05)] or [strict]
    return [
        {"threshold": t, **_kinds(gs, rows, partial(_passed, strict=strict, text=t))} for t in grid
    ]


def suggest_gates(gs: GoldenSet, rows: list[dict[str, Any]]) -> tuple[float, float]:
    """The (strict, text) pair for these recall rows. For each strict gate (0.20 to 0.40) the
    text gate is the middle of the text-gate plateau that maximises min(keep, drop), then
    keep + drop (as :func:`choose`); the strict gate is the one whose best text gate scores
    highest that way, then lets the fewest stray lessons through, then is the tightest."""
    best: tuple[tuple[float, ...], float, float] | None = None
    for strict in STRICT_GRID:
        sweep = text_sweep(gs, rows, strict)
        text = choose(sweep, "keep", "drop")
        r = _kinds(gs, rows, partial(_passed, strict=strict, text=text))
        keep, drop = r["keep"] or 0.0, r["drop"] or 0.0
        key = (min(keep, drop), keep + drop, -(r["stray"] or 0.0), -strict)
        if best is None or key > best[0]:
            best = (key, strict, text)
    assert best is not None
    return best[1], best[2]


CASES = {
    "lost": "lesson not kept",
    "outranked": "lesson kept, not injected",
    "noise": "unrelated, gets a lesson",
}


def _gate_cases(gs: GoldenSet, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where the gate goes wrong: lesson queries whose lesson is not kept (``lost``) or kept
    but not injected (``outranked``: the small tier takes one lesson), and unrelated queries
    that get a lesson (``noise``: the nearest that passes)."""
    out = []
    for q, row in zip(gs.queries, rows, strict=True):
        cands = {rid: (dist, matched) for rid, dist, matched in row["lesson_candidates"]}
        passed = row["lessons_passed"]
        if q.lesson and q.lesson not in row["lessons_injected"]:
            case, rid = ("outranked" if q.lesson in passed else "lost"), q.lesson
        elif q.negative and passed:
            case, rid = "noise", min(passed, key=lambda i: cands[i][0])
        else:
            continue
        dist, matched = cands.get(rid, (None, False))
        out.append(
            {
                "query": q.text,
                "case": case,
                "lesson": rid,
                "distance": None if dist is None else round(dist, 4),  # None: no candidate
                "text_match": matched,
                "injected": row["lessons_injected"],
            }
        )
    return out


def _retrieval(gs: GoldenSet, rows: list[dict[str, Any]]) -> dict[str, Any]:
    def at(rank: int | None, k: int) -> bool:
        return rank is not None and rank <= k

    def block(sel: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(sel)}
        for k in KS:
            out[f"top{k}"] = _rate([at(r["rank"], k) for r in sel])
        out["in_block"] = _rate([r["in_block"] for r in sel])
        for k in KS:
            out[f"search_top{k}"] = _rate([at(r.get("search_rank"), k) for r in sel])
        return out

    pos = [r for q, r in zip(gs.queries, rows, strict=True) if q.expect]
    keys = ("query", "lang", "rank", "search_rank", "vector_rank", "fts_rank", "distance", "top")
    return {
        "overall": block(pos),
        "by_language": {lang: block([r for r in pos if r["lang"] == lang]) for lang in LANGS},
        "misses": [{k: r.get(k) for k in keys} for r in pos if not at(r["rank"], 3)],
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
    gate: float | None = None,
    gate_text: float | None = None,
    dedup: float | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the golden suite with ``embedder``. The Recaller is built by
    ``Recaller.for_config`` from the settings' defaults, so ``gate``/``gate_text``/``dedup``
    default to the product's calibrated values for that embedder (``olav.memory.calibration``);
    pass them to measure other values."""
    from olav.memory import calibration
    from olav.memory.recall import Recaller
    from olav.memory.store import MemoryStore
    from olav.settings import SETTINGS

    say = progress or (lambda _msg: None)
    started = time.perf_counter()
    settings: dict[str, Any] = {s.key: s.default for s in SETTINGS}
    for key, value in (
        ("memory.reflection_gate", gate),
        ("memory.reflection_gate_text", gate_text),
        ("memory.dedup_distance", dedup),
    ):
        if value is not None:
            settings[key] = str(value)
    gs = load_golden(data)
    emb = CachedEmbedder(embedder, size=4096)
    dedup_cfg = calibration.dedup_distance(settings, emb.name)
    with tempfile.TemporaryDirectory(prefix="olav-golden-") as tmp:
        say("embedding the golden set")
        store = MemoryStore(Path(tmp) / "memory.lance", emb, rrf_k=settings["memory.rrf_k"])
        guides = _load_store(gs, store)
        load_s = time.perf_counter() - started
        say("measuring reflection distances")
        dists: dict[str, list[Any]] = {"lesson": [], "negative": []}
        nearest: list[dict[str, Any]] = []
        for q in gs.queries:
            hits = store.search(
                q.text,
                mode="vector",
                scopes=[AGENT, "global"],
                categories=["reflection"],
                k=len(gs.reflections),
            )
            by_id = {h.record.id: float(h.distance or 0.0) for h in hits}
            if q.lesson:
                dists["lesson"].append(by_id[q.lesson])
            if q.negative:
                near = min(hits, key=lambda h: float(h.distance or 0.0))
                dists["negative"].append(float(near.distance or 0.0))
                nearest.append(
                    {"query": q.text, "lesson": near.record.id, "distance": near.distance}
                )
        sweep = [{"threshold": t, **_distance_rates(dists, t)} for t in GATE_GRID]
        say("recalling every query")
        recaller = Recaller.for_config(store, settings, agent=AGENT, tier=TIER)
        strict, text = recaller.reflection_gate, recaller.reflection_gate_text
        rows = _recall_pass(store, gs, recaller, search=True)
        s_strict, s_text = suggest_gates(gs, rows)
        if (s_strict, s_text) == (strict, text):
            s_rows = rows
        else:
            alt = settings | {
                "memory.reflection_gate": str(s_strict),
                "memory.reflection_gate_text": str(s_text),
            }
            s_rows = _recall_pass(
                store, gs, Recaller.for_config(store, alt, agent=AGENT, tier=TIER)
            )
    say("measuring dedup distances")
    dedup_report = _dedup(gs, emb, dedup_cfg)
    ms = [r["ms"] for r in rows]
    chosen = choose(sweep, "keep", "drop")
    gate_report = {
        "rule": "a lesson passes within threshold, or within text_threshold when the "
        "full-text search matched it too",
        "configured": product_gate(gs, rows, strict, text),
        "suggested": product_gate(gs, s_rows, s_strict, s_text),
        "distance_only": {
            "configured": {"threshold": strict, **_distance_rates(dists, strict)},
            "suggested": {"threshold": chosen, **_distance_rates(dists, chosen)},
        },
        "text_sweep": text_sweep(gs, rows, strict),
        "misses": _gate_cases(gs, rows),
        "lesson_distance": _spread(dists["lesson"]),
        "negative_nearest": _spread(dists["negative"]),
        "closest_negatives": sorted(nearest, key=lambda n: n["distance"])[:5],
        "sweep": sweep,
    }
    for row in (*rows, *s_rows):
        for key in ("lesson_candidates", "lessons_passed"):
            row.pop(key, None)
    return {
        "embedder": emb.name,
        "agent": AGENT,
        "tier": TIER,
        "rrf_k": settings["memory.rrf_k"],
        "counts": {
            "guides": guides,
            "reflections": len(gs.reflections),
            "precedents": len(gs.precedents),
            "queries": len(gs.queries),
            "positive": sum(1 for q in gs.queries if q.expect),
            "lesson": sum(1 for q in gs.queries if q.lesson),
            "negative": sum(1 for q in gs.queries if q.negative),
            "in_domain_no_lesson": sum(1 for q in gs.queries if q.expect and not q.lesson),
            "by_language": {
                lang: sum(1 for q in gs.queries if q.lang == lang and not q.negative)
                for lang in LANGS
            },
            "duplicate_pairs": len(gs.duplicates),
            "distinct_pairs": len(gs.distinct),
        },
        "retrieval": _retrieval(gs, rows),
        "gate": gate_report,
        "dedup": dedup_report,
        "seconds": {
            "load": round(load_s, 2),
            "total": round(time.perf_counter() - started, 2),
            "recall_ms_per_query": round(statistics.mean(ms), 2) if ms else None,
        },
    }


# -- Markdown ----------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def gate_label(r: dict[str, Any]) -> str:
    """``0.32 / text 0.36``: a product gate pair."""
    return f"{r['threshold']} / text {r['text_threshold']}"


def markdown_golden(report: dict[str, Any]) -> str:
    """The report as Markdown tables (for docs/benchmarks.md)."""
    c = report["counts"]
    out = [
        f"Golden guide-recall suite, embedder `{report['embedder']}`: {c['guides']} guides, "
        f"{c['reflections']} lessons, {c['precedents']} precedents; {c['queries']} queries "
        f"({c['positive']} with an expected guide or precedent, {c['lesson']} with an expected "
        f"lesson, {c['negative']} unrelated). Recall as AutoRecall runs it for agent "
        f"`{report['agent']}`, tier {report['tier']}, RRF k={report['rrf_k']}.",
        "",
        "| queries | n | top-1 | top-3 | top-5 | in block (small tier) "
        "| search only: top-1 | top-3 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ret = report["retrieval"]
    for name, b in [("all", ret["overall"]), *ret["by_language"].items()]:
        out.append(
            f"| {name} | {b['n']} | {_pct(b['top1'])} | {_pct(b['top3'])} | {_pct(b['top5'])} "
            f"| {_pct(b['in_block'])} | {_pct(b['search_top1'])} | {_pct(b['search_top3'])} |"
        )
    g = report["gate"]
    cfg, dist = g["configured"], g["distance_only"]
    out += [
        "",
        "Reflection gate as the product applies it (squared L2): a lesson among the Recaller's "
        "hybrid candidates passes within the strict gate, or within the text gate when the "
        "full-text search matched it too. keep: the expected lesson passes; injected: the "
        "Recaller injects it; drop: no lesson passes for an unrelated query; drop (recaller): "
        "the Recaller injects none; stray: a lesson passes for an in-domain query that expects "
        f"none ({c['in_domain_no_lesson']} queries).",
        "",
        "| gate (strict / text) | keep | injected | drop | drop (recaller) | stray |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("configured", "suggested"):
        r = g[name]
        out.append(
            f"| {gate_label(r)} ({name}) | {_pct(r['keep'])} | {_pct(r['injected'])} "
            f"| {_pct(r['drop'])} | {_pct(r['drop_recaller'])} | {_pct(r['stray'])} |"
        )
    for name in ("configured", "suggested"):
        r = dist[name]
        out.append(
            f"| {r['threshold']}, distance only ({name}) | {_pct(r['keep'])} | - "
            f"| {_pct(r['drop'])} | - | - |"
        )
    stray = ", ".join(f"{k} {_pct(v)}" for k, v in cfg["stray_by_language"].items())
    out += [
        "",
        f"Stray lessons at the configured gate by language: {stray}.",
        "",
        f"Text gate with the strict gate at {cfg['threshold']}:",
        "",
        "| text gate | keep | drop | stray |",
        "|---|---|---|---|",
    ]
    for r in g["text_sweep"]:
        bold = "**" if r["threshold"] == cfg["text_threshold"] else ""
        out.append(
            f"| {bold}{r['threshold']:.2f}{bold} | {_pct(r['keep'])} | {_pct(r['drop'])} "
            f"| {_pct(r['stray'])} |"
        )
    ld, nn = g["lesson_distance"], g["negative_nearest"]
    marked = {dist["configured"]["threshold"], dist["suggested"]["threshold"]}
    out += [
        "",
        f"Distance alone, over every lesson: expected lesson distance {ld['min']}-{ld['max']} "
        f"(median {ld['median']}); nearest lesson of an unrelated query {nn['min']}-{nn['max']} "
        f"(median {nn['median']}).",
        "",
        "| gate | keep | drop |",
        "|---|---|---|",
    ]
    for r in g["sweep"]:
        if round(r["threshold"] * 100) % 4 == 0 or r["threshold"] in marked:
            out.append(f"| {r['threshold']:.2f} | {_pct(r['keep'])} | {_pct(r['drop'])} |")
    if g["misses"]:
        out += [
            "",
            f"Gate misses at {gate_label(cfg)} (the lesson's distance and full-text match; "
            "`-`: not among the Recaller's candidates):",
            "",
            "| query | case | lesson | distance | text match | injected |",
            "|---|---|---|---|---|---|",
        ]
        for x in g["misses"]:
            d = "-" if x["distance"] is None else x["distance"]
            match = "yes" if x["text_match"] else "no"
            shown = ", ".join(x["injected"]) or "-"
            out.append(
                f"| {x['query']} | {CASES[x['case']]} | {x['lesson']} | {d} | {match} | {shown} |"
            )
    d = report["dedup"]
    out += [
        "",
        "Lesson dedup distance (the new lesson as a query against the stored one, as "
        "add_reflection searches):",
        "",
        "| pairs | n | min | median | max |",
        "|---|---|---|---|---|",
    ]
    for name in ("duplicates", "distinct"):
        s = d[name]
        out.append(f"| {name} | {s['n']} | {s['min']} | {s['median']} | {s['max']} |")
    out += ["", "| dedup distance | duplicates skipped | distinct kept |", "|---|---|---|"]
    for name in ("configured", "suggested"):
        r = d[name]
        out.append(f"| {r['threshold']} ({name}) | {_pct(r['skipped'])} | {_pct(r['kept'])} |")
    misses = ret["misses"]
    if misses:
        out += [
            "",
            "Positive queries outside the top 3 (rank in recall / in search alone; vector and "
            "full-text rank of the expected memory):",
            "",
            "| query | recall | search | vector | fts | top 3 |",
            "|---|---|---|---|---|---|",
        ]
        for m in misses:
            cells = [m[k] for k in ("rank", "search_rank", "vector_rank", "fts_rank")]
            shown = " | ".join("-" if v is None else str(v) for v in cells)
            out.append(f"| {m['query']} | {shown} | {', '.join(m['top'])} |")
    return "\n".join(out) + "\n"
