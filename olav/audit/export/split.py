"""The train/test split: by thread, seeded, so that the same seed and threads give the same
split."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def _score(group: str, seed: int) -> float:
    digest = hashlib.sha256(f"{seed}:{group}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_groups(groups: Iterable[str], share: float, seed: int) -> set[str]:
    """The groups (threads) that go to the test file: ``share`` of them (rounded, at least
    one and never all while there are two or more), the ones whose seeded hash is lowest,
    so that the same seed and threads give the same split; a single group stays in train."""
    unique = sorted(set(groups))
    if share <= 0 or len(unique) < 2:
        return set()
    ranked = sorted(unique, key=lambda g: (_score(g, seed), g))
    n = min(max(round(share * len(ranked)), 1), len(ranked) - 1)
    return set(ranked[:n])


def split_test_path(path: Path) -> Path:
    """Where the test half of a split goes: ``.test`` before the suffix (``runs.jsonl`` ->
    ``runs.test.jsonl``; ``runs`` -> ``runs.test``)."""
    if path.suffix:
        return path.with_name(f"{path.stem}.test{path.suffix}")
    return path.with_name(f"{path.name}.test")
