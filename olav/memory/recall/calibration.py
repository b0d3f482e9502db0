"""Numbers calibrated per embedder: the relevance floors and the lesson dedup distance.

Upstream OLAV's fixed distances (0.65 for lessons, 0.3 for dedup) came from another embedder.
e5 packs its similarities into a narrow band, so olav decides relevance on margins against a
background of generic requests instead (olav.memory.recall.relevance). The floors were chosen on
the calibration half of the golden suite (``olav bench golden``, olav/memory/golden/suite.py) and
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
from olav.memory.policy import DEFAULTS, FLOOR_FIELDS, Floors, policy_for
from olav.memory.policy import parse_floors as parse_floors  # the memory.relevance syntax

# the numbers themselves are the policy's (olav.memory.policy: calibrated_floors,
# calibrated_dedup); this module reads and writes the workspace's own calibration.
# floors measured in this workspace by `olav memory calibrate`, keyed by embedder name, beside
# the table: another embedder finds no entry, so an embedder change never inherits floors
WORKSPACE_FILE = "calibration.json"
REFERENCE_KEY = "e5:multilingual-e5-small"  # whose floors a new calibration starts from
TESTS_ONLY = "hash:"  # the hash embedder has no semantics: no floor can mean anything
FIELDS = FLOOR_FIELDS


def reference_floors() -> Floors:
    """Where a new calibration starts: olav's floors for the bundled e5."""
    found = DEFAULTS.default_floors(REFERENCE_KEY)
    assert found is not None
    return found


def calibrated_floors(embedder_name: str) -> Floors | None:
    """olav's floors for this floors key (olav.memory.recall.lesson_encoder.floors_key): the entry
    whose name is the longest prefix of it, so "e5:…+use-m3" never takes plain e5's."""
    return DEFAULTS.default_floors(embedder_name)


def floors_key(config: Any, embedder_name: str) -> str:
    """The name this workspace's floors are kept under: the embedder's, with the second
    opinion's when it decides lessons too (olav.memory.recall.lesson_encoder)."""
    from olav.memory.recall import lesson_encoder

    return lesson_encoder.floors_key(embedder_name, lesson_encoder.wanted(config))


def relevance_floors(
    config: Any, embedder_name: str, workspace_dir: Path | None = None
) -> Floors | None:
    """The floors for this embedder, or None when relevance is off and the nearest memories
    count, as upstream did: ``memory.relevance`` is ``off``, or it is ``auto`` and nobody has
    calibrated this embedder, neither olav (``CALIBRATED_FLOORS``) nor this workspace
    (``olav memory calibrate``, read from ``workspace_dir``). Floors carry over badly between
    embedders (their similarity scales differ), and a floor that is too high silently empties
    every block, so an uncalibrated embedder gets none; ``olav doctor`` says so."""
    return floors_and_source(config, embedder_name, workspace_dir)[0]


def floors_and_source(
    config: Any, embedder_name: str, workspace_dir: Path | None = None
) -> tuple[Floors | None, str]:
    """:func:`relevance_floors` and where they come from (``olav memory policy``)."""
    policy = policy_for(config)
    key = floors_key(config, embedder_name)
    workspace = None
    if policy.relevance == "auto" and workspace_dir is not None:
        workspace = read_workspace_calibration(workspace_dir)
    floors, source = policy.floors_for(key, workspace)
    if source == "calibration file" and workspace_dir is not None:
        source = str(workspace_dir / WORKSPACE_FILE)
    return floors, source


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


def dedup_distance(config: Any, embedder_name: str) -> float:
    """The lesson dedup distance for this embedder (``MemoryPolicy.dedup_for``)."""
    return policy_for(config).dedup_for(embedder_name)
