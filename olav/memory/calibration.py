"""Distance thresholds calibrated per embedder.

Upstream OLAV calibrated the reflection gate (0.65) and the lesson dedup distance (0.3) on
another embedder. e5 packs its similarities into a narrow band, so the same numbers would let
every reflection through and merge unrelated lessons. Values are squared L2 distances between
unit vectors, measured by the golden guide-recall suite (``olav bench golden``,
olav/bench/golden.py): the gate maximises min(keep, drop) over its lesson and unrelated
queries; the dedup distance is the largest that keeps every related-but-distinct lesson pair.
"""

from __future__ import annotations

from typing import Any

from olav.errors import ConfigError

# embedder name prefix -> (reflection gate, gate when the lesson also matched the query's
# words, dedup distance). e5 puts any Chinese request near any Chinese lesson, so distance
# alone cannot both keep 85 % of true lessons and drop 85 % of noise; a shared word is the
# second piece of evidence that lets a lesson a little further away through.
CALIBRATED: dict[str, tuple[float, float, float]] = {
    "e5:multilingual-e5-small": (0.32, 0.36, 0.20),
}
UPSTREAM = (0.65, 0.65, 0.3)


def _value(config: Any, key: str, index: int, embedder_name: str) -> float:
    raw = str(config[key]).strip()
    if raw != "auto":
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{key} must be a number or auto, got {raw!r}") from None
    for prefix, values in CALIBRATED.items():
        if embedder_name.startswith(prefix):
            return values[index]
    return UPSTREAM[index]


def reflection_gate(config: Any, embedder_name: str) -> float:
    return _value(config, "memory.reflection_gate", 0, embedder_name)


def reflection_gate_text(config: Any, embedder_name: str) -> float:
    """The gate for a lesson that the full-text search matched as well (never below the
    distance-only gate)."""
    strict = reflection_gate(config, embedder_name)
    return max(strict, _value(config, "memory.reflection_gate_text", 1, embedder_name))


def dedup_distance(config: Any, embedder_name: str) -> float:
    return _value(config, "memory.dedup_distance", 2, embedder_name)
