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
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from olav.core.errors import ConfigError
from olav.core.fsutil import atomic_write_text
from olav.core.log import get_logger
from olav.memory.relevance import Floors

# embedder name prefix -> floors: directive, directive named in words, in specific words,
# lesson, lesson with a full-text match, spread below the best memory
CALIBRATED_FLOORS: dict[str, Floors] = {
    "e5:multilingual-e5-small": Floors(0.03, 0.01, -0.02, 0.04, 0.03, 0.005),
    "e5:multilingual-e5-small+use-m3": Floors(0.03, 0.01, -0.02, 0.04, 0.04, 0.005),
}
REFERENCE = CALIBRATED_FLOORS["e5:multilingual-e5-small"]  # where a new calibration starts
# floors measured in this workspace by `olav memory calibrate`, keyed by embedder name, beside
# the table: another embedder finds no entry, so an embedder change never inherits floors
WORKSPACE_FILE = "calibration.json"
DEDUP: dict[str, float] = {"e5:multilingual-e5-small": 0.20}
UPSTREAM_DEDUP = 0.3
TESTS_ONLY = "hash:"
FIELDS = tuple(
    f.name for f in dataclasses.fields(Floors)
)  # the hash embedder has no semantics: no floor can mean anything


def calibrated_floors(embedder_name: str) -> Floors | None:
    """olav's floors for this floors key (olav.memory.second_opinion.floors_key): the entry
    whose name is the longest prefix of it, so "e5:…+use-m3" never takes plain e5's."""
    found = [p for p in CALIBRATED_FLOORS if embedder_name.startswith(p)]
    return CALIBRATED_FLOORS[max(found, key=len)] if found else None


def floors_key(config: Any, embedder_name: str) -> str:
    """The name this workspace's floors are kept under: the embedder's, with the second
    opinion's when it decides lessons too (olav.memory.second_opinion)."""
    from olav.memory import second_opinion

    return second_opinion.floors_key(embedder_name, second_opinion.wanted(config))


def relevance_floors(
    config: Any, embedder_name: str, workspace_dir: Path | None = None
) -> Floors | None:
    """The floors for this embedder, or None when relevance is off and the nearest memories
    count, as upstream did: ``memory.relevance`` is ``off``, or it is ``auto`` and nobody has
    calibrated this embedder, neither olav (``CALIBRATED_FLOORS``) nor this workspace
    (``olav memory calibrate``, read from ``workspace_dir``). Floors carry over badly between
    embedders (their similarity scales differ), and a floor that is too high silently empties
    every block, so an uncalibrated embedder gets none; ``olav doctor`` says so."""
    raw = str(config["memory.relevance"]).strip().lower()
    if raw == "off":
        return None
    if raw != "auto":
        return parse_floors(raw)
    key = floors_key(config, embedder_name)
    if workspace_dir is not None:
        entry = read_workspace_calibration(workspace_dir).get(key)
        if entry is not None:
            return entry
    return calibrated_floors(key)


def read_workspace_calibration(directory: Path, *, strict: bool = False) -> dict[str, Floors]:
    """The floors ``olav memory calibrate`` saved in ``directory``, by embedder name. An
    unreadable file counts as empty (recall must not fail on it; a warning is logged), unless
    ``strict``, as ``olav doctor`` reads it: then it is a one-line error."""
    path = directory / WORKSPACE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {name: Floors(**e["floors"]) for name, e in data["embedders"].items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if strict:
            raise ConfigError(
                f"{path} is not a calibration olav wrote ({type(exc).__name__}: {exc})",
                hint="Delete it and run `olav memory calibrate` again",
            ) from None
        get_logger("memory.calibration").warning("ignoring unreadable %s: %s", path, exc)
        return {}


def save_workspace_calibration(
    directory: Path, embedder_name: str, floors: Floors, measured: dict[str, Any]
) -> Path:
    """Record the floors for one embedder (the others' entries stay), with what they measured."""
    path = directory / WORKSPACE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = dict(data["embedders"])
    except (OSError, ValueError, KeyError, TypeError):
        entries = {}
    entries[embedder_name] = {
        "floors": dataclasses.asdict(floors),
        "calibrated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "measured": measured,
    }
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"embedders": entries}, indent=2) + "\n")
    return path


def forget_workspace_calibration(directory: Path, embedder_name: str) -> bool:
    """Drop one embedder's floors; True when there were some."""
    path = directory / WORKSPACE_FILE
    entries = read_workspace_calibration(directory, strict=True)
    if embedder_name not in entries:
        return False
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["embedders"][embedder_name]
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")
    return True


def parse_floors(raw: str) -> Floors:
    """``"0.03,0,-0.02,0.04,0.03,0.005"``: directive, directive named in words, in specific
    words, lesson, lesson with words, spread."""
    try:
        values = [float(v) for v in raw.split(",")]
    except ValueError:
        values = []
    if len(values) != len(FIELDS):
        raise ConfigError(
            f"memory.relevance must be auto, off or {len(FIELDS)} comma-separated numbers "
            f"({', '.join(FIELDS)}), got {raw!r}",
            hint="e.g. 0.03,0,-0.02,0.04,0.03,0.005 (see docs/configuration.md)",
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
