"""Numbers calibrated per embedder: the relevance floors and the lesson dedup distance.

Upstream OLAV's fixed distances (0.65 for lessons, 0.3 for dedup) came from another embedder.
e5 packs its similarities into a narrow band, so olav decides relevance on margins against a
background of generic requests instead (olav.memory.relevance). The floors were chosen on
the calibration half of the golden suite (``olav bench golden``, olav/bench/golden.py) and
are reported on its test half in docs/benchmarks.md. The dedup distance (squared L2) is the
largest that keeps every related-but-distinct lesson pair of the suite apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from olav.core.errors import ConfigError
from olav.memory.relevance import Floors

# embedder name prefix -> floors: directive, directive named in words, in specific words,
# lesson, lesson with a full-text match, spread below the best memory
CALIBRATED_FLOORS: dict[str, Floors] = {
    "e5:multilingual-e5-small": Floors(0.03, 0.0, -0.04, 0.03, 0.02, 0.005),
}
DEDUP: dict[str, float] = {"e5:multilingual-e5-small": 0.20}
UPSTREAM_DEDUP = 0.3
TESTS_ONLY = "hash:"
FIELDS = tuple(
    f.name for f in dataclasses.fields(Floors)
)  # the hash embedder has no semantics: no floor can mean anything


def calibrated_floors(embedder_name: str) -> Floors | None:
    return next((f for p, f in CALIBRATED_FLOORS.items() if embedder_name.startswith(p)), None)


def relevance_floors(config: Any, embedder_name: str) -> Floors | None:
    """The floors for this embedder, or None when relevance is off and the nearest memories
    count, as upstream did: ``memory.relevance`` is ``off``, or it is ``auto`` and nobody has
    calibrated this embedder. Floors carry over badly between embedders (their similarity
    scales differ), and a floor that is too high silently empties every block, so an
    uncalibrated embedder gets none until ``memory.relevance`` names them; ``olav doctor``
    says so."""
    raw = str(config["memory.relevance"]).strip().lower()
    if raw == "off":
        return None
    if raw != "auto":
        return parse_floors(raw)
    return calibrated_floors(embedder_name)


def parse_floors(raw: str) -> Floors:
    """``"0.03,0,-0.04,0.03,0.02,0.005"``: directive, directive named in words, in specific
    words, lesson, lesson with words, spread."""
    try:
        values = [float(v) for v in raw.split(",")]
    except ValueError:
        values = []
    if len(values) != len(FIELDS):
        raise ConfigError(
            f"memory.relevance must be auto, off or {len(FIELDS)} comma-separated numbers "
            f"({', '.join(FIELDS)}), got {raw!r}",
            hint="e.g. 0.03,0,-0.04,0.03,0.02,0.005 (see docs/configuration.md)",
        )
    return Floors(*values)


def dedup_distance(config: Any, embedder_name: str) -> float:
    raw = str(config["memory.dedup_distance"]).strip()
    if raw != "auto":
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(
                f"memory.dedup_distance must be a number or auto, got {raw!r}"
            ) from None
    for prefix, value in DEDUP.items():
        if embedder_name.startswith(prefix):
            return value
    return UPSTREAM_DEDUP
