"""What reaches the model: the golden suite measured on the block, not on the search.

Every query is recalled once through the product's :class:`Recaller` (hybrid search, the
relevance signals of every candidate). The block is then *replayed* for other floors and tiers
with the product's own :func:`~olav.memory.recall.relevance.decide` and
:func:`~olav.memory.recall.recaller.select`, so calibration sweeps cost no extra search.

Measures, per split, language and tier (each over the queries it applies to):

* ``expect``: an expected guide or precedent is in the block;
* ``precision``: injected memories that are in the query's acceptable set (every injection
  for an unrelated request counts against it);
* ``empty``: unrelated requests that get no block at all;
* ``nomatch_clean``: in-domain requests that no memory answers, whose block holds nothing
  outside their acceptable set;
* ``stray``: in-domain requests that expect no lesson but get one outside their acceptable set;
* ``unrelated_lesson``: unrelated requests that get a lesson;
* ``lesson_kept``: requests whose expected lesson is in the block;
* ``tokens``: mean block tokens.

The floors are chosen on the calibration half only (:func:`calibrate`), and the test half is
what the targets are read from.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from olav.memory.policy import Floors
from olav.memory.recall.recaller import Candidate, render_block, select
from olav.memory.recall.relevance import decide
from olav.memory.store.token_counts import estimate_tokens

T = TypeVar("T")

SPLITS = ("cal", "test")
LANGS = ("en", "zh", "mixed")
TIERS = ("small", "medium", "large")
# measure -> (target, higher is better); the targets for the test half, small tier
TARGETS: dict[str, tuple[float, bool]] = {
    "expect": (0.92, True),
    "precision": (0.85, True),
    "empty": (0.90, True),
    "stray": (0.10, False),
    "unrelated_lesson": (0.03, False),
    "lesson_kept": (0.90, True),
}
# the values calibrate() tries for each floor
GRID: dict[str, tuple[float, ...]] = {
    "directive": (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06),
    "directive_words": (-0.02, -0.01, 0.0, 0.01, 0.02, 0.03),
    "specific": (-0.06, -0.05, -0.04, -0.03, -0.02, -0.01, 0.0),
    "lesson": (0.03, 0.04, 0.05, 0.06, math.inf),
    "lesson_words": (0.0, 0.01, 0.02, 0.03, 0.04, 0.05),
    "spread": (0.005, 0.01, 0.02, 0.03, 0.05, math.inf),
}
PASSES = 2
# p90 - p10 of the candidates' margins with the bundled e5: the unit GRID is written in
E5_MARGIN_SPAN = 0.062


@dataclasses.dataclass
class Recalled:
    """One golden query and the Recaller's candidates for it (decisions to be replayed)."""

    query: Any  # GoldenQuery
    candidates: list[Candidate]
    relevance_on: bool


def _copy(obj: T) -> T:
    """A shallow copy of a plain dataclass (copy.copy's generic protocol made calibrating
    spend most of its time copying: the grid replays every block thousands of times)."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new


def replay(r: Recalled, floors: Floors, tier: str, budget: int) -> list[Candidate]:
    """The block the product would inject for these floors and this tier."""
    cands = []
    for c in r.candidates:  # copies: the recorded decisions stay as recalled
        sig = _copy(c.signals)
        # a guide the learned model decided keeps its verdict: floors decide the rest
        if r.relevance_on and c.hit.record.category != "episode" and sig.p is None:
            decide(sig, lesson=c.hit.record.category == "reflection", floors=floors)
        cand = _copy(c)
        cand.signals, cand.decision = sig, "candidate"
        cands.append(cand)
    select(cands, tier=tier, token_budget=budget, floors=floors)
    return [c for c in cands if c.decision == "injected"]


def without_second_opinion(rows: Sequence[Recalled]) -> list[Recalled]:
    """The same candidates as the embedder alone judges them: a lesson's margin back to the
    embedder's own (the mean with olav.memory.recall.lesson_encoder undone)."""
    out = []
    for r in rows:
        cands = []
        for c in r.candidates:
            cand = _copy(c)
            if c.signals.second is not None:
                sig = _copy(c.signals)
                sig.margin, sig.second = c.signals.own_margin, None
                cand.signals = sig
            cands.append(cand)
        out.append(dataclasses.replace(r, candidates=cands))
    return out


def embedder_alone(
    rows: Sequence[Recalled], settings: dict[str, Any], embedder: str, budget: int
) -> dict[str, Any] | None:
    """The test half, small tier, as the embedder alone decides it with its own floors: what
    the second opinion on lessons adds."""
    from olav.memory.recall import calibration

    floors = calibration.relevance_floors({**settings, "memory.second_opinion": "off"}, embedder)
    if floors is None:
        return None
    return measure(without_second_opinion(rows), floors, "small", budget, "test")


def _rate(values: Sequence[bool]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def block_metrics(blocks: Iterable[tuple[Any, list[Candidate]]]) -> dict[str, Any]:
    """The measures above over (query, injected candidates) pairs."""
    got: dict[str, list[bool]] = {k: [] for k in (*TARGETS, "nomatch_clean")}
    tokens: list[int] = []
    n = 0
    for q, block in blocks:
        n += 1
        ids = {c.hit.record.id for c in block}
        lessons = {c.hit.record.id for c in block if c.hit.record.category == "reflection"}
        tokens.append(estimate_tokens(render_block([c.hit for c in block])) if block else 0)
        got["precision"] += [i in q.acceptable for i in ids]
        if q.expect:
            got["expect"].append(bool(ids & set(q.expect)))
        if q.negative:
            got["empty"].append(not block)
            got["unrelated_lesson"].append(bool(lessons))
        else:
            if q.lesson:
                got["lesson_kept"].append(q.lesson in lessons)
            else:
                got["stray"].append(bool(lessons - q.acceptable))
        if q.nomatch:
            got["nomatch_clean"].append(not ids - q.acceptable)
    out: dict[str, Any] = {k: _rate(v) for k, v in got.items()}
    out["tokens"] = round(sum(tokens) / len(tokens), 1) if tokens else None
    out["n"] = n
    return out


def slack(metrics: dict[str, Any]) -> dict[str, float]:
    """How far each measure is past its target (negative: short of it)."""
    out = {}
    for key, (target, higher) in TARGETS.items():
        value = metrics.get(key)
        if value is not None:
            out[key] = round(value - target if higher else target - value, 3)
    return out


NOISE = 0.01  # slack differences smaller than this are ties (see calibrate)


def _better(a: tuple[int, float, float], b: tuple[int, float, float]) -> bool:
    """Whether score ``a`` beats ``b`` by more than noise: more targets met, else a worst
    slack larger by NOISE, else (worst slacks within NOISE) a total larger by NOISE."""
    if a[0] != b[0]:
        return a[0] > b[0]
    if abs(a[1] - b[1]) > NOISE:
        return a[1] > b[1]
    return a[2] > b[2] + NOISE


def _score(metrics: dict[str, Any]) -> tuple[int, float, float]:
    s = slack(metrics)
    if not s:
        return (0, 0.0, 0.0)
    return (sum(v >= 0 for v in s.values()), min(s.values()), sum(s.values()))


def measure(
    rows: Sequence[Recalled], floors: Floors, tier: str, budget: int, split: str | None
) -> dict[str, Any]:
    chosen = [r for r in rows if split is None or r.query.split == split]
    return block_metrics((r.query, replay(r, floors, tier, budget)) for r in chosen)


def margin_scale(rows: Sequence[Recalled]) -> float:
    """How widely this embedder spreads its margins, relative to e5 (1.0): the p90 - p10 of
    every candidate's margin over ``E5_MARGIN_SPAN``. Another embedder's similarities live on
    another scale, so the grid of floors is stretched by this before calibrating it."""
    import numpy as np

    margins = [m for r in rows for c in r.candidates if (m := c.signals.margin) is not None]
    if len(margins) < 20:
        return 1.0
    p10, p90 = np.percentile(margins, [10, 90])
    return max(float(p90 - p10), 1e-6) / E5_MARGIN_SPAN


def scaled(values: dict[str, Any], scale: float) -> dict[str, Any]:
    """Floors or grid values in another embedder's unit (an infinite value stays so)."""

    def one(v: float) -> float:
        return v if math.isinf(v) else round(v * scale, 4)

    return {
        k: tuple(one(x) for x in v) if isinstance(v, tuple) else one(v) for k, v in values.items()
    }


def calibrate(
    rows: Sequence[Recalled],
    start: Floors,
    budget: int,
    grid: dict[str, tuple[float, ...]] | None = None,
) -> Floors:
    """The floors that best meet the targets on the calibration half at the small tier.
    Best means the most targets met, then the largest worst slack, then the largest total
    slack: a target that can be met is never traded for a few points of one that cannot
    (the worst slack alone once gave up the stray-lesson target for lessons kept). The search is
    coordinate-wise: each floor in turn takes the best of its grid values (``GRID`` unless
    given), the others held, and the round is repeated. A value replaces the current one only
    when it is better by more than ``NOISE`` (one or two requests of the half): a near tie
    keeps the floor that was there, so adding a few requests does not move the floors."""
    cal = [r for r in rows if r.query.split == "cal"]

    def score(f: Floors) -> tuple[int, float, float]:
        return _score(measure(cal, f, "small", budget, None))

    floors, best = start, score(start)
    for _ in range(PASSES):
        for name, values in (grid or GRID).items():
            for value in values:
                trial = dataclasses.replace(floors, **{name: value})
                got = score(trial)
                if _better(got, best):
                    floors, best = trial, got
    return floors


def report_blocks(rows: Sequence[Recalled], floors: Floors, budget: int) -> dict[str, Any]:
    """Measures per split × tier, and per language for the small tier."""
    out: dict[str, Any] = {}
    for split in SPLITS:
        part = [r for r in rows if r.query.split == split]
        out[split] = {tier: measure(part, floors, tier, budget, None) for tier in TIERS}
        out[split]["by_language"] = {
            lang: measure([r for r in part if r.query.lang == lang], floors, "small", budget, None)
            for lang in LANGS
        }
    return out


def block_misses(rows: Sequence[Recalled], floors: Floors, budget: int) -> list[dict[str, Any]]:
    """Test-half queries whose small-tier block falls short: an expected memory missing,
    a memory outside the acceptable set, or a stray lesson."""
    out = []
    for r in rows:
        q = r.query
        if q.split != "test":
            continue
        block = replay(r, floors, "small", budget)
        ids = [c.hit.record.id for c in block]
        wrong = [i for i in ids if i not in q.acceptable]
        missing = bool(q.expect) and not set(ids) & set(q.expect)
        lost = q.lesson is not None and q.lesson not in ids
        if not (wrong or missing or lost):
            continue
        want = q.expect or ((q.lesson,) if q.lesson else ())
        found = {c.hit.record.id: c for c in r.candidates}
        out.append(
            {
                "query": q.text,
                "kind": "unrelated" if q.negative else "no match" if q.nomatch else "in domain",
                "injected": ids,
                "wrong": wrong,
                "expected": [
                    {"id": i, **(found[i].signals.to_json() if i in found else {})} for i in want
                ],
            }
        )
    return out
