"""Scoring a ranking against a question's evidence, and fusing rankings the way the product
does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.locomo.data import CATEGORY_NAMES, Question


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of the evidence ids among the first k ranked ids."""
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def fuse(rankings: Sequence[tuple[Sequence[str], float]], rrf_k: int, depth: int) -> list[str]:
    """The product's fusion (olav.memory.store.fusion.rrf) over the first ``depth`` ids of each
    weighted ranking, as ``MemoryStore.search`` fuses its own candidates."""
    from olav.memory.store.fusion import rrf

    lists = {str(i): list(r[:depth]) for i, (r, _w) in enumerate(rankings)}
    weights = {str(i): w for i, (_r, w) in enumerate(rankings)}
    return rrf(lists, k=rrf_k, weights=weights).order


def summarise(
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
