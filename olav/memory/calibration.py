"""Distance thresholds calibrated per embedder.

Upstream OLAV calibrated the reflection gate (0.65) and the lesson dedup distance (0.3) on
another embedder. e5 packs its similarities into a narrow band, so the same numbers would let
every reflection through and merge unrelated lessons. Values are squared L2 distances between
unit vectors; how they were measured is in docs/benchmarks.md.
"""

from __future__ import annotations

from typing import Any

from olav.errors import ConfigError

# embedder name prefix -> (reflection gate, dedup distance)
CALIBRATED: dict[str, tuple[float, float]] = {
    "e5:multilingual-e5-small": (0.38, 0.15),
}
UPSTREAM = (0.65, 0.3)


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


def dedup_distance(config: Any, embedder_name: str) -> float:
    return _value(config, "memory.dedup_distance", 1, embedder_name)
