"""``*.guide.yaml``: validation and import into memory as usage_guide / format_guide rows."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, StrictInt, ValidationError, field_validator

from olav.core import yamltext
from olav.core.errors import GuideError
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.sql import sql_in
from olav.memory.store.table import MemoryStore
from olav.memory.store.textvectors import embed_missing, fill_known

GUIDE_GLOB = "*.guide.yaml"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")
_SCOPE = re.compile(r"^(global|[a-z0-9][a-z0-9_\-]*|team:[a-z0-9][a-z0-9_\-]*)$")
MAX_GUIDE_BYTES = 256 * 1024
TIER_CONFIDENCE = {"vendor": 0.9, "platform": 0.9, "team": 0.95, "user": 1.0}


class Guide(BaseModel):
    """The schema of a ``*.guide.yaml`` file. Unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    intent: str
    agent: str
    keywords: list[str]
    body: str
    schema_version: StrictInt = 1
    category: Literal["usage_guide", "format_guide"] = "usage_guide"
    source_tier: Literal["vendor", "platform", "team", "user"] = "platform"
    priority: StrictInt = 50
    related: list[str] = []
    scope: str | None = None

    @field_validator("intent", "agent")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("use lowercase letters, digits, '_' or '-' (e.g. backup_router)")
        return v

    @field_validator("keywords")
    @classmethod
    def _keywords(cls, v: list[str]) -> list[str]:
        cleaned = [k.strip() for k in v if k and k.strip()]
        if not cleaned:
            raise ValueError("must be a non-empty list of words that should retrieve this guide")
        return cleaned

    @field_validator("body")
    @classmethod
    def _body(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v

    @field_validator("scope")
    @classmethod
    def _scope(cls, v: str | None) -> str | None:
        if v is not None and not _SCOPE.match(v):
            raise ValueError("use global, an agent name, or team:<id> (letters, digits, _ or -)")
        return v

    @field_validator("priority")
    @classmethod
    def _priority(cls, v: int) -> int:
        if not 0 <= v <= 100:
            raise ValueError("must be between 0 and 100")
        return v

    @field_validator("schema_version")
    @classmethod
    def _version(cls, v: int) -> int:
        if v != 1:
            raise ValueError("only schema_version 1 is supported")
        return v

    @property
    def id(self) -> str:
        return f"guide_{self.agent}_{self.intent}"

    @property
    def resolved_scope(self) -> str:
        if self.scope:
            return self.scope
        return "global" if self.agent == "core" else self.agent

    def embed_text(self) -> str:
        """What is embedded and full-text indexed: intent + keywords + body."""
        words = self.intent.replace("_", " ")
        return f"{words} ({self.intent})\n{', '.join(self.keywords)}\n\n{self.body}"

    def content_hash(self) -> str:
        payload = json.dumps(self.model_dump(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def load_guide(path: Path) -> Guide:
    """Parse and validate one guide file, or raise :class:`GuideError` naming file and field."""
    shown = str(path)
    size = path.stat().st_size
    if size > MAX_GUIDE_BYTES:
        raise GuideError(
            shown,
            "(file)",
            f"is {size // 1024} KiB; a guide must stay under "
            f"{MAX_GUIDE_BYTES // 1024} KiB (split it, or import it as a document)",
        )
    try:
        data = yamltext.safe_load(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        raise GuideError(shown, "(file)", "is not UTF-8 text") from None
    except RecursionError:
        raise GuideError(shown, "(file)", "is nested too deeply to be a guide") from None
    except yaml.YAMLError as exc:
        if "nesting depth" in str(getattr(exc, "problem", "")):  # libyaml's limit
            raise GuideError(shown, "(file)", "is nested too deeply to be a guide") from None
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(file)"
        raise GuideError(shown, where, "is not valid YAML; check indentation and quoting") from None
    if not isinstance(data, dict):
        raise GuideError(
            shown, "(file)", "must be a YAML mapping with intent, agent, keywords, body"
        )
    try:
        guide = Guide.model_validate(data)
    except RecursionError:
        raise GuideError(shown, "(file)", "is nested too deeply to be a guide") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(file)"
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "is required"
        elif err["type"] == "extra_forbidden":
            msg = "is not a guide field (allowed: " + ", ".join(Guide.model_fields) + ")"
        raise GuideError(shown, loc, msg) from None
    return guide


def guide_record(guide: Guide, source: str) -> MemoryRecord:
    return MemoryRecord(
        id=guide.id,
        text=guide.embed_text(),
        category=guide.category,
        scope=guide.resolved_scope,
        origin="directive",
        confidence=TIER_CONFIDENCE[guide.source_tier],
        tags=[guide.agent, *guide.keywords[:8]],
        metadata={
            "intent": guide.intent,
            "agent": guide.agent,
            "keywords": guide.keywords,
            "body": guide.body,
            "source": source,
            "source_tier": guide.source_tier,
            "priority": guide.priority,
            "related": guide.related,
            "hash": guide.content_hash(),
        },
    )


@dataclass
class ImportSummary:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    errors: list[GuideError] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "pruned": len(self.pruned),
            "errors": [e.one_line() for e in self.errors],
        }


def find_guides(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(GUIDE_GLOB) if ".olav" not in p.parts and p.is_file())


def import_guides(
    store: MemoryStore,
    files: Iterable[Path],
    *,
    base: Path,
    prune_under: Path | None = None,
    progress: Callable[[int], None] | None = None,
    known_vectors: Mapping[str, np.ndarray] | None = None,
) -> ImportSummary:
    """Import guide files. Unchanged guides write nothing; changed ones update their row.

    ``known_vectors`` ({text hash: vector}, see olav.memory.store.textvectors) spares embedding
    guides whose exact text was embedded ahead of time by the same embedder.
    Rows of guides whose file lies under ``prune_under`` but no longer exists are pruned.
    A malformed file is reported in ``errors`` and the others still import. Rows that came
    from users are never touched: only ``origin='directive'`` guide rows are pruned.
    """
    files = list(files)
    summary = ImportSummary()
    records = _load_records(files, base, summary)
    existing = {
        r.id: r for r in store.list_rows(where="origin = 'directive' AND id LIKE 'guide_%'")
    }
    changed = _changed(records, existing, summary)
    if known_vectors:
        fill_known(changed, known_vectors)
    if progress:
        progress(len(files) - len(changed))  # done: nothing of theirs to write
    embed_missing(store.embedder, changed, progress=progress)
    store.upsert(changed)

    if prune_under is not None:
        _prune(store, existing, records, _relative(prune_under, base).rstrip("/"), base, summary)
    if changed or summary.pruned:
        store.maintain(force_optimize=True)  # fold the new rows into the FTS index now
    return summary


def _load_records(files: list[Path], base: Path, summary: ImportSummary) -> dict[str, MemoryRecord]:
    """Each readable guide's record by guide id; malformed files and second guides for the
    same agent and intent go to ``summary.errors``."""
    records: dict[str, MemoryRecord] = {}
    seen_sources: dict[str, str] = {}
    for path in files:
        source = _relative(path, base)
        try:
            guide = load_guide(path)
        except GuideError as err:
            err.path = source
            summary.errors.append(GuideError(source, err.field, err.problem))
            continue
        if guide.id in seen_sources:
            summary.errors.append(
                GuideError(
                    source,
                    "intent",
                    f"duplicates {seen_sources[guide.id]} (same agent and intent)",
                )
            )
            continue
        seen_sources[guide.id] = source
        records[guide.id] = guide_record(guide, source)
    return records


def _changed(
    records: dict[str, MemoryRecord], existing: dict[str, MemoryRecord], summary: ImportSummary
) -> list[MemoryRecord]:
    """The records to write: new guides and changed ones (text, source, or invalidated);
    each guide is counted in ``summary`` as added, updated or unchanged."""
    changed = []
    for gid, rec in records.items():
        old = existing.get(gid)
        if (
            old is not None
            and old.metadata.get("hash") == rec.metadata["hash"]
            and old.metadata.get("source") == rec.metadata["source"]
            and old.invalidated_at is None
        ):
            summary.unchanged.append(gid)
            continue
        (summary.updated if old is not None else summary.added).append(gid)
        changed.append(rec)
    return changed


def _prune(
    store: MemoryStore,
    existing: dict[str, MemoryRecord],
    records: dict[str, MemoryRecord],
    prefix: str,
    base: Path,
    summary: ImportSummary,
) -> None:
    """Delete the guide rows under ``prefix`` whose file is gone."""
    stale = [
        gid
        for gid, rec in existing.items()
        if gid not in records
        and _under(str(rec.metadata.get("source", "")), prefix)
        and not (base / str(rec.metadata.get("source", ""))).exists()
    ]
    if stale:
        store.delete(where=sql_in("id", stale) + " AND origin = 'directive'")
        summary.pruned.extend(stale)


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path.resolve())


def _under(source: str, prefix: str) -> bool:
    return prefix in ("", ".") or source == prefix or source.startswith(prefix + "/")
