"""What an embedder's signals allow at all: the golden test half's best blocks, with floors
chosen on the test half itself.

:func:`olav.memory.golden.block.calibrate` chooses floors on the calibration half, and the
test half reports them: that is the result. This module answers another question, for the
people who decide what to try next: could *any* floors meet the targets with these margins?
Every combination of the four directive floors of the grid is replayed on the test half (the
lesson floors held), then every combination of the two lesson floors (the directive floors of
the best point held). The best points are an upper bound, fitted in sample, never a result.

It also replays the test half with every acceptable memory's margin raised by ``delta`` (the
rest left as they are) under the floors the calibration half chose: what an embedder that
puts the right memory that much nearer the request, and nothing else nearer, would give.
Both are slow (thousands of replays, about a minute), so ``olav bench golden --ceiling``,
``olav memory calibrate --ceiling`` and ``make bench`` run them, and ``make test`` does not.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

from olav.memory.golden.block import GRID, TARGETS, Recalled, _better, _score, measure
from olav.memory.policy import Floors

DIRECTIVE_FLOORS = ("directive", "directive_words", "specific", "spread")
LESSON_FLOORS = ("lesson", "lesson_words")
DELTAS = (0.01, 0.02, 0.03)  # in e5's margin unit (E5_MARGIN_SPAN spans p10-p90)


def _sweep(
    rows: Sequence[Recalled], start: Floors, names: Sequence[str], grid: dict[str, Any], budget: int
) -> list[tuple[dict[str, Any], Floors]]:
    out = []
    for values in itertools.product(*(grid[n] for n in names)):
        floors = dataclasses.replace(start, **dict(zip(names, values, strict=True)))
        out.append((measure(rows, floors, "small", budget, None), floors))
    return out


def _best(
    points: list[tuple[dict[str, Any], Floors]], key: str, need: dict[str, float]
) -> dict[str, Any] | None:
    """The point with the highest ``key`` among those that meet every bound in ``need``
    (a measure and its target: at least it, or at most it where lower is better)."""

    def ok(m: dict[str, Any]) -> bool:
        for name, bound in need.items():
            value, higher = m.get(name), TARGETS[name][1]
            if value is None or (value < bound if higher else value > bound):
                return False
        return True

    fit = [(m, f) for m, f in points if ok(m) and m.get(key) is not None]
    if not fit:
        return None
    m, f = max(fit, key=lambda p: (p[0][key], p[0]["precision"] or 0.0))
    return {"metrics": m, "floors": dataclasses.asdict(f)}


def _most(points: list[tuple[dict[str, Any], Floors]]) -> tuple[dict[str, Any], Floors]:
    """The point calibrate() would choose among these: the most targets met, and so on."""
    most = points[0]
    for point in points[1:]:
        if _better(_score(point[0]), _score(most[0])):
            most = point
    return most


def ceiling(
    rows: Sequence[Recalled], start: Floors, budget: int, scale: float = 1.0
) -> dict[str, Any]:
    """The test half's best small-tier blocks over the floor grid (stretched by ``scale``,
    the embedder's margin spread relative to e5's), chosen on the test half itself; ``start``
    (the calibrated floors) gives the floors not swept and those the margins are raised
    under."""
    from olav.memory.golden.block import scaled

    grid = scaled(GRID, scale) if scale != 1.0 else GRID
    test = [r for r in rows if r.query.split == "test"]
    directive = _sweep(test, start, DIRECTIVE_FLOORS, grid, budget)
    most = _most(directive)
    lesson = _sweep(test, most[1], LESSON_FLOORS, grid, budget)
    most = _most([most, *lesson])
    t = {k: v[0] for k, v in TARGETS.items()}
    return {
        "combinations": len(directive) + len(lesson),
        "expect_at_precision": _best(
            directive, "expect", {"precision": t["precision"], "empty": t["empty"]}
        ),
        "precision_at_expect": _best(
            directive, "precision", {"expect": t["expect"], "empty": t["empty"]}
        ),
        "lessons": _best(
            lesson,
            "lesson_kept",
            {"stray": t["stray"], "unrelated_lesson": t["unrelated_lesson"]},
        ),
        "most_targets": {
            "met": _score(most[0])[0],
            "metrics": most[0],
            "floors": dataclasses.asdict(most[1]),
        },
        "raised": raised(test, start, budget, scale),
    }


def raised(
    rows: Sequence[Recalled], floors: Floors, budget: int, scale: float = 1.0
) -> list[dict[str, Any]]:
    """The blocks under ``floors`` with every acceptable memory's margin raised by each of
    ``DELTAS`` (times ``scale``), the other candidates left as they are."""
    out = []
    for delta in DELTAS:
        bumped = [_bump(r, delta * scale) for r in rows]
        out.append({"delta": delta, **measure(bumped, floors, "small", budget, None)})
    return out


def _bump(r: Recalled, delta: float) -> Recalled:
    cands = []
    for c in r.candidates:
        margin = c.signals.margin
        if c.hit.record.id in r.query.acceptable and margin is not None:
            c = copy.copy(c)
            c.signals = dataclasses.replace(c.signals, margin=margin + delta)
        cands.append(c)
    return dataclasses.replace(r, candidates=cands)
