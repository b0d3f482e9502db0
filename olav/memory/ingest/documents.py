"""Documents in memory.

A document is stored in two tracks:

- **chunks**: about 500 tokens each, category ``document``, split at Markdown headings and
  paragraphs, each one prefixed with its heading path so that it is found on its own;
- **summary**: one ``usage_guide`` row that says the document exists, what it covers (its first
  paragraph and heading outline, no LLM needed) and how to read the details.

Every row of one document shares the id prefix ``doc_<hash>_`` where the hash comes from a stable
key (the file path, or the curator's agent and intent). Re-importing replaces the rows: unchanged
chunks are not re-embedded, changed ones are updated, and chunks past the new end are deleted.

Chunking is :mod:`olav.memory.ingest.chunking`; diagrams (category ``topology``) are
:mod:`olav.memory.ingest.diagrams`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from olav.core.errors import OlavError
from olav.memory.ingest.chunking import (
    CHUNK_TOKENS,
    Chunk,
    chunk_text,
    document_title,
    split_long,
    summarise,
)
from olav.memory.lifecycle.ops import Actor
from olav.memory.policy import DEFAULTS
from olav.memory.store.schema import MemoryRecord

DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
MAX_FILE_BYTES = 5 * 1024 * 1024


# -- files -----------------------------------------------------------------------------------


def read_text_file(path: Path, suffixes: Sequence[str]) -> str:
    """Read a UTF-8 document or diagram file, with a fix hint for every way it can fail."""
    if not path.is_file():
        raise OlavError(f"{path} does not exist", hint="Pass the path of a file")
    if path.suffix.lower() not in suffixes:
        raise OlavError(
            f"{path.name}: unsupported file type {path.suffix or '(none)'}",
            hint="Supported here: " + ", ".join(suffixes),
        )
    if path.stat().st_size > MAX_FILE_BYTES:
        raise OlavError(
            f"{path} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB",
            hint="Split it into smaller documents",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise OlavError(f"{path} is not UTF-8 text", hint="Convert it to UTF-8") from None
    if not text.strip():
        raise OlavError(f"{path} is empty", hint="Pass a file with content")
    return text


def slug(text: str, *, fallback: str = "document") -> str:
    clean = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")[:48]
    return clean or fallback


def document_key_for_file(path: Path, base: Path) -> str:
    """Stable key of a file: its path relative to the workspace, or its absolute path."""
    resolved = path.resolve()
    try:
        return "file:" + resolved.relative_to(base.resolve()).as_posix()
    except ValueError:
        return "file:" + resolved.as_posix()


def doc_id(key: str) -> str:
    return "doc_" + hashlib.sha256(key.encode()).hexdigest()[:12]


# -- writing ---------------------------------------------------------------------------------


@dataclass
class DocumentImport:
    doc_id: str
    title: str
    summary_id: str
    chunk_ids: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "title": self.title,
            "summary_id": self.summary_id,
            "chunks": len(self.chunk_ids),
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "removed": len(self.removed),
        }


def _hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class DocumentSpec:
    """One document to store: its text, the key its row ids derive from, and how it is named
    and scoped. ``chunks`` are caller-provided pieces (a curator draft); without them the text
    is chunked at headings and paragraphs."""

    text: str
    key: str
    title: str
    intent: str
    agent: str = "core"
    scope: str = "global"
    keywords: Sequence[str] = ()
    source: str | None = None
    chunks: Sequence[str] | None = None
    origin: str = "document"


def document_records(
    doc: DocumentSpec, *, max_tokens: int = CHUNK_TOKENS
) -> tuple[list[MemoryRecord], MemoryRecord]:
    """The chunk rows and the summary guide row of one document (not written yet). A piece the
    caller gave that is over the budget is split further."""
    if doc.chunks:
        pieces = [
            Chunk(0, p, "")
            for c in doc.chunks
            if c.strip()
            for p in split_long(c.strip(), max_tokens)
        ]
        parts = [Chunk(i, c.text, c.section) for i, c in enumerate(pieces)]
    else:
        parts = chunk_text(doc.text, max_tokens=max_tokens)
    if not parts:
        raise OlavError(
            f"document {doc.title!r} has no text to store", hint="Pass a non-empty file"
        )
    words = [k for k in doc.keywords if k.strip()]
    records = [_chunk_record(doc, c, len(parts), [*words[:6], "document"]) for c in parts]
    return records, _summary_record(doc, parts, words)


def _doc_record(
    doc: DocumentSpec, suffix: str, text: str, category: str, tags: list[str], meta: dict[str, Any]
) -> MemoryRecord:
    """A row of ``doc`` (id ``<doc id>_<suffix>``): its scope, origin and confidence."""
    base = doc_id(doc.key)
    return MemoryRecord(
        id=f"{base}_{suffix}",
        text=text,
        category=category,
        scope=doc.scope,
        origin=doc.origin,
        confidence=DEFAULTS.confidence_of("document"),
        tags=tags,
        metadata={"doc_id": base, **meta},
    )


def _chunk_record(doc: DocumentSpec, c: Chunk, n_parts: int, tags: list[str]) -> MemoryRecord:
    label = " › ".join(x for x in (doc.title, c.section) if x)
    meta = {
        "intent": f"{doc.intent} #{c.index + 1}/{n_parts}",
        "title": doc.title,
        "section": c.section,
        "chunk": c.index,
        "chunks": n_parts,
        "source": doc.source or doc.key,
        "body": f"{label}\n{c.text}",
        "hash": _hash(label, c.text, doc.scope),
    }
    return _doc_record(doc, f"{c.index:04d}", f"{label}\n{c.text}", "document", tags, meta)


def _summary_record(doc: DocumentSpec, parts: list[Chunk], words: list[str]) -> MemoryRecord:
    """The usage_guide row that says the document exists and how to read its details."""
    text = doc.text or "\n\n".join(c.text for c in parts)
    body = summarise(doc.title, text, n_chunks=len(parts), source=doc.source)
    summary_words = [*words] or [doc.intent.replace("_", " "), doc.title]
    intent = doc.intent
    meta = {
        "intent": intent,
        "agent": doc.agent,
        "title": doc.title,
        "keywords": summary_words,
        "source": doc.source or doc.key,
        "chunks": len(parts),
        "body": body,
        "track": "summary",
        "hash": _hash(body, ",".join(summary_words), doc.scope, doc.agent),
    }
    head = f"{intent.replace('_', ' ')} ({intent})\n{', '.join(summary_words)}"
    tags = [doc.agent, *summary_words[:6]]
    return _doc_record(doc, "summary", f"{head}\n\n{body}", "usage_guide", tags, meta)


def write_document(
    store: Any,
    records: list[MemoryRecord],
    summary: MemoryRecord,
    *,
    progress: Callable[[int], None] | None = None,
    batch: int = 16,
) -> DocumentImport:
    """Upsert the rows of one document and delete its chunks that no longer exist.

    Rows whose content hash is unchanged are skipped (no re-embedding). ``progress(n)`` is called
    as rows are written, ``len(records) + 1`` in total.
    """
    from olav.memory.store.sql import sql_str

    base = str(summary.metadata["doc_id"])
    prefix = base + "_"
    existing = {
        r.id: r
        for r in store.list_rows(where=f"id LIKE {sql_str(prefix + '%')}")
        if r.id.startswith(prefix)
    }
    result = DocumentImport(
        doc_id=base,
        title=str(summary.metadata.get("title", "")),
        summary_id=summary.id,
        chunk_ids=[r.id for r in records],
    )
    todo: list[MemoryRecord] = []
    for rec in [summary, *records]:
        old = existing.get(rec.id)
        if old is not None and old.metadata.get("hash") == rec.metadata.get("hash"):
            result.unchanged.append(rec.id)
        else:
            todo.append(rec)
            (result.updated if old is not None else result.added).append(rec.id)
    skipped = len(records) + 1 - len(todo)
    if progress and skipped:
        progress(skipped)
    for i in range(0, len(todo), batch):
        part = todo[i : i + batch]
        store.upsert(part)
        if progress:
            progress(len(part))
    keep = {summary.id, *result.chunk_ids}
    stale = sorted(set(existing) - keep)
    if stale:
        store.delete(ids=stale)
        result.removed = stale
    if todo or stale:
        store.maintain(force_optimize=True)  # fold the new rows into the full-text index now
    return result


@dataclass(frozen=True)
class ImportProgress:
    """Where an import reports: ``total(n)`` once, the rows it will write; then
    ``advance(k)`` as they are written."""

    total: Callable[[int], None]
    advance: Callable[[int], None]


def import_document_file(
    store: Any,
    path: Path,
    *,
    base: Path,
    agent: str = "core",
    scope: str | None = None,
    progress: ImportProgress | None = None,
    actor: Actor | None = None,
) -> DocumentImport:
    """Import a ``.md`` or ``.txt`` file: chunks plus a summary guide, replacing an earlier
    import of the same path. Its keywords are its title and its file name. ``actor``: who
    imports it, and where its ``import`` event goes (olav.memory.lifecycle.ops.Actor)."""
    text = read_text_file(path, DOCUMENT_SUFFIXES)
    key = document_key_for_file(path, base)
    source = key.removeprefix("file:")
    title = document_title(text, path.stem)
    intent = "doc_" + slug(path.stem)
    words = [title, path.stem.replace("_", " ").replace("-", " ")]
    spec = DocumentSpec(
        text,
        key=key,
        title=title,
        intent=intent,
        agent=agent,
        scope=scope or ("global" if agent == "core" else agent),
        keywords=words,
        source=source,
    )
    records, summary = document_records(spec)
    if progress is not None:
        progress.total(len(records) + 1)
    doc = write_document(
        store, records, summary, progress=None if progress is None else progress.advance
    )
    if actor is not None:
        actor.record(doc.summary_id, "import", {"file": str(path), **doc.to_json()})
    return doc
