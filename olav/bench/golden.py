"""The golden suite: does the right memory reach the model, and nothing else?

A project-authored set (``data/golden``) of guides, one-line lessons (reflections), precedents
and requests in English, Chinese and both mixed, loaded into a real :class:`MemoryStore`
through the product's write paths (``import_guides`` for guides, ``upsert`` for the rest, the
layout trace_learner and capture use). Every request then goes through a :class:`Recaller`
built by ``Recaller.for_config`` from the settings' defaults, exactly as AutoRecall builds it
for the agent ``ops`` (scopes ``ops`` + ``global``, hybrid search, the relevance decision,
ceilings, the tier's total and the token budget), so the suite follows every calibration
change.

The requests are of four kinds: they expect a guide or precedent, or a lesson (or both);
they are in-domain but no stored memory answers them (``nomatch``); or they are unrelated
(``negative``). Each names the memories that are acceptable in its block. Every request has
an id, and a hash of the id puts it in the calibration half or the test half, so adding
requests never moves old ones.

What is measured (olav.bench.golden_block): the block itself, per half, tier and language:
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
import hashlib
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from olav.bench.golden_block import (
    GRID,
    LANGS,
    TARGETS,
    TIERS,
    Recalled,
    block_misses,
    calibrate,
    margin_scale,
    measure,
    replay,
    report_blocks,
    scaled,
)
from olav.core.errors import OlavError
from olav.memory.embedders import CachedEmbedder, Embedder
from olav.memory.relevance import Floors, language

DATA = Path(__file__).parent / "data" / "golden"
AGENT = "ops"
TIER = "small"
KS = (1, 3, 5)
DEDUP_GRID = tuple(round(0.02 + 0.01 * i, 2) for i in range(39))
DEDUP_MARGIN = 0.01  # the suggested dedup distance stays this far below every distinct pair
PRECEDENTS = ("operational_event", "query_pattern")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class GoldenQuery:
    text: str
    expect: tuple[str, ...] = ()
    lesson: str | None = None
    negative: bool = False
    id: str = ""
    accept: tuple[str, ...] = ()  # also acceptable in the block (beyond expect and lesson)
    nomatch: bool = False  # in-domain, but no stored memory is needed

    @property
    def lang(self) -> str:
        return language(self.text)

    @property
    def split(self) -> str:
        """``cal`` or ``test``: fixed by the id, so adding queries never moves old ones."""
        return split_of(self.id or self.text)

    @property
    def acceptable(self) -> frozenset[str]:
        """Every memory that may appear in this query's block."""
        return frozenset((*self.expect, *self.accept, *([self.lesson] if self.lesson else [])))


def split_of(key: str) -> str:
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return "cal" if digest[0] % 2 == 0 else "test"


@dataclass(frozen=True)
class GoldenSet:
    root: Path
    guide_files: list[Path]
    reflections: dict[str, str]
    precedents: dict[str, tuple[str, str]]  # id -> (category, text)
    queries: list[GoldenQuery]
    duplicates: list[tuple[str, str]]
    distinct: list[tuple[str, str]]


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


def _query(q: dict[str, Any], reflections: dict[str, str]) -> GoldenQuery:
    query = GoldenQuery(
        text=str(q["q"]),
        expect=tuple(q.get("expect") or ()),
        lesson=q.get("lesson"),
        negative=bool(q.get("negative")),
        id=str(q.get("id") or ""),
        accept=tuple(q.get("accept") or ()),
        nomatch=bool(q.get("nomatch")),
    )
    kinds = [bool(query.expect or query.lesson), query.negative, query.nomatch]
    if sum(kinds) != 1 or (query.negative and query.accept):
        raise OlavError(
            f"query {query.text!r} must be exactly one of: expects a memory, negative, nomatch",
            hint="Give it expect/lesson, or negative: true (no accept), or nomatch: true",
        )
    if query.lesson is not None and query.lesson not in reflections:
        raise OlavError(f"query {query.text!r} names an unknown lesson {query.lesson!r}")
    return query


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
    queries = [_query(q, reflections) for q in _yaml(root / "queries.yaml").get("queries") or []]
    ids = [q.id for q in queries if q.id]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise OlavError(f"query id {dup!r} is used twice", hint="Give every query its own id")
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
    total = store.count()
    out = []
    for r in rows:
        q = r.query
        if not q.expect:
            continue
        ids = [c.hit.record.id for c in r.candidates if c.hit.record.category != "reflection"]
        hits = [
            h
            for h in store.search(q.text, mode="hybrid", scopes=scopes, k=total)
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
) -> dict[str, Any]:
    """Run the golden suite with ``embedder``. The Recaller is built by
    ``Recaller.for_config`` from the settings' defaults, so the floors are the product's
    calibrated ones for that embedder (``olav.memory.calibration``); ``relevance`` measures
    other floors (the ``memory.relevance`` syntax). The suggested floors are chosen on the
    calibration half and reported on the test half beside the configured ones. With
    ``fresh``, an embedder that has no floors yet is calibrated too (``olav memory
    calibrate``): its margins are measured and the grid is stretched to their scale."""
    from olav.core.settings import SETTINGS
    from olav.memory import calibration
    from olav.memory.recall import Recaller
    from olav.memory.store import MemoryStore

    say = progress or (lambda _msg: None)
    started = time.perf_counter()
    settings: dict[str, Any] = {s.key: s.default for s in SETTINGS}
    for key, value in (("memory.relevance", relevance), ("memory.dedup_distance", dedup)):
        if value is not None:
            settings[key] = str(value)
    gs = load_golden(data)
    emb = CachedEmbedder(embedder, size=4096)
    budget = settings["memory.token_budget"]
    with tempfile.TemporaryDirectory(prefix="olav-golden-") as tmp:
        say("embedding the golden set")
        store = MemoryStore(Path(tmp) / "memory.lance", emb, rrf_k=settings["memory.rrf_k"])
        guides = _load_store(gs, store)
        load_s = time.perf_counter() - started
        say("recalling every query")
        recaller = Recaller.for_config(store, settings, agent=AGENT, tier=TIER)
        configured = recaller.floors or Floors.off()
        if fresh and not recaller.relevance_on:  # measure the margins it gives
            start = {**settings, "memory.relevance": floors_string(calibration.REFERENCE)}
            recaller = Recaller.for_config(store, start, agent=AGENT, tier=TIER)
        rows, ms = _recall_all(store, gs, recaller)
        retrieval = _retrieval(store, rows, recaller.scopes)
    _check_replay(rows, recaller.floors or Floors.off(), budget)
    say("calibrating the floors on the calibration half")
    suggested, scale = _suggest(rows, recaller, configured, emb.name, budget)
    floors = configured
    say("measuring dedup distances")
    dedup_report = _dedup(gs, emb, calibration.dedup_distance(settings, emb.name))
    return {
        "embedder": emb.name,
        "agent": AGENT,
        "rrf_k": settings["memory.rrf_k"],
        "token_budget": budget,
        "relevance_on": configured != Floors.off(),
        "margin_scale": round(scale, 3),
        "counts": _counts(gs, guides),
        "retrieval": retrieval,
        "floors": {"configured": _asdict(floors), "suggested": _asdict(suggested)},
        "blocks": {
            "configured": report_blocks(rows, floors, budget),
            "suggested": report_blocks(rows, suggested, budget),
            # no floor at all, as olav injected before the relevance decision
            "off": measure(rows, Floors.off(), TIER, budget, "test"),
        },
        "targets": {k: {"target": t, "higher": h} for k, (t, h) in TARGETS.items()},
        "misses": block_misses(rows, floors, budget),
        "dedup": dedup_report,
        "seconds": {
            "load": round(load_s, 2),
            "total": round(time.perf_counter() - started, 2),
            "recall_ms_per_query": round(statistics.mean(ms), 2) if ms else None,
        },
    }


def _suggest(
    rows: Sequence[Recalled], recaller: Any, configured: Floors, embedder: str, budget: int
) -> tuple[Floors, float]:
    """The floors the calibration half suggests, and the margin scale they were searched on:
    e5's grid for the embedders olav ships floors for, the grid stretched to this embedder's
    margins for any other."""
    from olav.memory import calibration

    if not recaller.relevance_on:
        return configured, 1.0
    builtin = calibration.calibrated_floors(embedder) is not None
    scale = 1.0 if builtin else margin_scale(rows)
    start = recaller.floors
    if configured == Floors.off():  # nothing configured: start from e5's floors, stretched
        start = Floors(**scaled(dataclasses.asdict(calibration.REFERENCE), scale))
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
                hint="olav.bench.golden_block.replay must apply what Recaller.recall does",
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


# -- tables: one set of rows, written as Markdown here and as rich tables by the CLI ----------

Rows = tuple[list[str], list[list[str]]]  # header, rows


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def floors_label(f: dict[str, Any]) -> str:
    """``0.03 (0.0 with words, 0.0 with specific words) · lessons ... · spread 0.005``."""
    spread = "none" if f["spread"] is None or math.isinf(f["spread"]) else f["spread"]
    return (
        f"{f['directive']} ({f['directive_words']} with words, {f['specific']} with "
        f"specific words) · lessons {f['lesson']} ({f['lesson_words']} with a full-text "
        f"match) · spread {spread}"
    )


MEASURES = (
    ("expect", "expected in block"),
    ("precision", "block precision"),
    ("empty", "unrelated: empty block"),
    ("nomatch_clean", "no-match: clean block"),
    ("stray", "in-domain: stray lesson"),
    ("unrelated_lesson", "unrelated: lesson"),
    ("lesson_kept", "expected lesson kept"),
)


def summary_line(report: dict[str, Any]) -> str:
    c = report["counts"]
    return (
        f"Golden suite, embedder `{report['embedder']}`: {c['guides']} guides, "
        f"{c['reflections']} lessons, {c['precedents']} precedents; {c['queries']} queries "
        f"({c['positive']} expect a guide or precedent, {c['lesson']} a lesson, "
        f"{c['nomatch']} in-domain with no memory that applies, {c['negative']} unrelated), "
        f"split by id into a calibration half ({c['split']['cal']}) and a test half "
        f"({c['split']['test']}). Recall as AutoRecall runs it for agent `{report['agent']}`, "
        f"token budget {report['token_budget']}."
    )


def target_rows(report: dict[str, Any]) -> Rows:
    conf = report["blocks"]["configured"]["test"]["small"]
    sugg = report["blocks"]["suggested"]["test"]["small"]
    names = dict(MEASURES)
    rows = []
    for key, t in report["targets"].items():
        value = conf[key]
        met = value is not None and (value >= t["target"] if t["higher"] else value <= t["target"])
        sign = "≥" if t["higher"] else "≤"
        target = f"{sign} {_pct(t['target'])}"
        verdict = "yes" if met else "**no**"
        rows.append([names[key], _pct(value), _pct(sugg[key]), target, verdict])
    head = ["measure (test half, small tier)", "configured floors", "suggested floors"]
    return [*head, "target", "met"], rows


def block_rows(blocks: dict[str, Any], split: str) -> Rows:
    part = blocks[split]
    labelled = [(f"{tier} tier, all", part[tier]) for tier in TIERS]
    labelled += [(f"small tier, {lang}", m) for lang, m in part["by_language"].items()]
    rows = [
        [label, str(m["n"]), *(_pct(m[key]) for key, _ in MEASURES), str(m["tokens"])]
        for label, m in labelled
    ]
    return [f"{split} half", "n", *(name for _, name in MEASURES), "tokens"], rows


def miss_rows(misses: list[dict[str, Any]]) -> Rows:
    rows = []
    for m in misses:
        want = "; ".join(
            f"{e['id']}: " + (e.get("reason") or "not a candidate") for e in m["expected"]
        )
        injected, wrong = ", ".join(m["injected"]) or "-", ", ".join(m["wrong"]) or "-"
        rows.append([m["query"], m["kind"], injected, wrong, want or "-"])
    return ["query", "kind", "injected", "not acceptable", "expected: why not"], rows


def retrieval_rows(ret: dict[str, Any]) -> Rows:
    keys = ("top1", "top3", "top5", "search_top1", "search_top3")
    rows = [
        [name, str(b["n"]), *(_pct(b[k]) for k in keys)]
        for name, b in [("all", ret["overall"]), *ret["by_language"].items()]
    ]
    return ["queries", "n", "top-1", "top-3", "top-5", "search only: top-1", "top-3"], rows


def dedup_rows(d: dict[str, Any]) -> tuple[Rows, Rows]:
    spread = [
        [name, *(str(d[name][k]) for k in ("n", "min", "median", "max"))]
        for name in ("duplicates", "distinct")
    ]
    chosen = [
        [f"{d[n]['threshold']} ({n})", _pct(d[n]["skipped"]), _pct(d[n]["kept"])]
        for n in ("configured", "suggested")
    ]
    return (
        (["pairs", "n", "min", "median", "max"], spread),
        (["dedup distance", "duplicates skipped", "distinct kept"], chosen),
    )


def _off_line(report: dict[str, Any]) -> str:
    off = report["blocks"]["off"]
    return (
        "With no floor (the nearest memories, as before the relevance decision), the same "
        f"test half gets: expected in block {_pct(off['expect'])}, block precision "
        f"{_pct(off['precision'])}, unrelated requests with an empty block {_pct(off['empty'])}, "
        f"stray lessons {_pct(off['stray'])}, unrelated requests with a lesson "
        f"{_pct(off['unrelated_lesson'])}, {off['tokens']} tokens a block."
    )


def _md(table: Rows) -> list[str]:
    head, rows = table
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def markdown_golden(report: dict[str, Any]) -> str:
    """The report as Markdown tables (for docs/benchmarks.md)."""
    f = report["floors"]
    out = [
        summary_line(report),
        "",
        f"Configured floors: {floors_label(f['configured'])}. Floors the calibration half "
        f"suggests: {floors_label(f['suggested'])}.",
        "",
        *_md(target_rows(report)),
        "",
        _off_line(report),
        "",
        "The block per tier and language, configured floors:",
        "",
        *_md(block_rows(report["blocks"]["configured"], "test")),
        "",
        *_md(block_rows(report["blocks"]["configured"], "cal")),
    ]
    if report["misses"]:
        out += [
            "",
            "Test-half queries whose small-tier block falls short (why the expected memory "
            "was left out):",
            "",
            *_md(miss_rows(report["misses"])),
        ]
    spread, chosen = dedup_rows(report["dedup"])
    out += [
        "",
        "Ranking before the relevance decision (queries with an expected guide or precedent): "
        "its position among the Recaller's candidates, and in the search alone.",
        "",
        *_md(retrieval_rows(report["retrieval"])),
        "",
        "Lesson dedup distance (the new lesson as a query against the stored one, as "
        "add_reflection searches):",
        "",
        *_md(spread),
        "",
        *_md(chosen),
    ]
    return "\n".join(out) + "\n"
