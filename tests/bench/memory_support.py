"""What the memory-layer benchmarks share (not a test module): the embedding width, an
ANN threshold that is never reached, and recall against the exact ranking."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tests.bench.support import K

DIM = 384
NEVER = 10**12  # an ann_threshold that is never reached


def recall_at_k(
    returned: Sequence[int], matrix: np.ndarray, q: np.ndarray, k: int = K, eps: float = 1e-4
) -> float:
    """Share of the returned rows that are within the exact k-th best distance (tie-safe)."""
    scores = matrix @ q
    kth = np.partition(-scores, k - 1)[k - 1]  # minus the k-th best inner product
    good = sum(1 for i in returned[:k] if -scores[i] <= kth + eps)
    return good / k
