"""Vectors computed ahead of time, keyed by embedder id and text hash.

olav ships the vectors of its template guides (``make template-vectors`` writes them), so
``olav init`` does not embed 30 guides on the spot. A vector is used only when the embedder
that made it is the configured one and the text it was made from is exactly the text to be
embedded now: an edited guide hashes differently and is embedded again, never served stale.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from olav.core.fsutil import atomic_write_bytes
from olav.memory.store.embedders import Embedder, EmbedderProxy
from olav.memory.store.schema import MemoryRecord


def text_key(text: str) -> str:
    """The hash a precomputed vector is filed under."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def vectors_file(folder: Path, embedder_name: str, stem: str = "template-vectors") -> Path:
    """Where the vectors made by ``embedder_name`` are kept in ``folder`` (``stem``: which
    texts they are of; the golden set's are ``vectors``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", embedder_name.lower()).strip("-")
    return Path(folder) / f"{stem}-{slug}.npz"


def save_vectors(path: Path, embedder_name: str, texts: Sequence[str], vectors: np.ndarray) -> None:
    """Write the vectors of ``texts`` (rows in the same order), sorted by hash so that the
    file only changes when a text or the embedder does."""
    keys = [text_key(t) for t in texts]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    buf = io.BytesIO()
    np.savez_compressed(
        buf,
        embedder=np.array(embedder_name),
        keys=np.array([keys[i] for i in order]),
        vectors=np.asarray(vectors, dtype=np.float32)[order],
    )
    atomic_write_bytes(path, buf.getvalue())


def load_vectors(path: Path, embedder_name: str, dim: int) -> dict[str, np.ndarray]:
    """{text hash: vector} from ``path`` when it was made by ``embedder_name`` with ``dim``
    dimensions; empty otherwise (missing, unreadable or another embedder's file)."""
    try:
        with np.load(path) as data:
            if str(data["embedder"]) != embedder_name or data["vectors"].shape[1:] != (dim,):
                return {}
            return dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
    except (OSError, KeyError, ValueError):
        return {}


def fill_known(records: Iterable[MemoryRecord], known: Mapping[str, np.ndarray]) -> int:
    """Give records without a vector the precomputed one of their exact text; returns how
    many were filled (the rest are embedded by the store as usual)."""
    filled = 0
    for rec in records:
        if rec.vector is None and known:
            vec = known.get(text_key(rec.text))
            if vec is not None:
                rec.vector = vec.tolist()
                filled += 1
    return filled


def embed_missing(
    embedder: Any,
    records: Sequence[MemoryRecord],
    *,
    batch: int = 64,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Embed the texts and contexts that have no vector yet, in one stream of batches;
    ``progress(n)`` after each batch with the records it finished. A context that is empty
    or equals the text is dropped (the memory has no surroundings of its own)."""
    todo: list[tuple[MemoryRecord, str, str]] = []
    for rec in records:
        if rec.context is not None and (not rec.context.strip() or rec.context == rec.text):
            rec.context, rec.context_vector = None, None
        if rec.vector is None:
            todo.append((rec, "vector", rec.text))
        if rec.context is not None and rec.context_vector is None:
            todo.append((rec, "context_vector", rec.context))
    last = {id(rec): j for j, (rec, _c, _t) in enumerate(todo)}  # its last text to embed
    if progress and len(records) > len(last):
        progress(len(records) - len(last))
    for i in range(0, len(todo), batch):
        chunk = todo[i : i + batch]
        vecs = embedder.embed_passages([text for _r, _c, text in chunk])
        for (rec, column, _t), vec in zip(chunk, vecs, strict=True):
            setattr(rec, column, vec.tolist())
        if progress:
            progress(sum(1 for j, (rec, _c, _t) in enumerate(chunk, i) if last[id(rec)] == j))


def query_key(text: str) -> str:
    """The hash a precomputed *query* vector is filed under: apart from the passage of the
    same text, which models such as e5 embed differently."""
    return text_key("\x00query\x00" + text)


class KnownVectors(EmbedderProxy):
    """An embedder that answers from vectors made ahead of time ({text_key: vector} for
    passages, {query_key: vector} for queries) and embeds every other text with ``inner``.
    ``served`` and ``embedded`` count texts of each kind, so a caller can tell that a shipped
    file went stale (texts it lacks are embedded, never answered wrongly)."""

    def __init__(self, inner: Embedder, known: Mapping[str, np.ndarray]) -> None:
        super().__init__(inner)
        self.known = known
        self.served = 0
        self.embedded = 0

    def embed_query(self, text: str) -> np.ndarray:
        vec = self.known.get(query_key(text))
        if vec is None:
            self.embedded += 1
            return self.inner.embed_query(text)
        self.served += 1
        return np.array(vec, dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        rows: list[np.ndarray | None] = [self.known.get(text_key(t)) for t in texts]
        todo = [i for i, row in enumerate(rows) if row is None]
        self.served += len(texts) - len(todo)
        self.embedded += len(todo)
        if todo:
            for i, vec in zip(
                todo, self.inner.embed_passages([texts[i] for i in todo]), strict=True
            ):
                rows[i] = vec
        if not rows:
            return self.inner.embed_passages([])
        return np.vstack([np.asarray(r, dtype=np.float32) for r in rows])


class RecordingEmbedder(EmbedderProxy):
    """Embeds with ``inner`` and keeps every vector it made, filed as :class:`KnownVectors`
    reads them: how a file of vectors for a fixed set of texts is written."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.made: dict[str, np.ndarray] = {}

    def embed_query(self, text: str) -> np.ndarray:
        vec = self.inner.embed_query(text)
        self.made[query_key(text)] = np.asarray(vec, dtype=np.float32)
        return vec

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        vecs = self.inner.embed_passages(texts)
        for text, vec in zip(texts, vecs, strict=True):
            self.made[text_key(text)] = np.asarray(vec, dtype=np.float32)
        return vecs


def save_keyed(path: Path, embedder_name: str, vectors: Mapping[str, np.ndarray]) -> None:
    """Write {key: vector} (as :class:`RecordingEmbedder` made them), sorted by key."""
    keys = sorted(vectors)
    buf = io.BytesIO()
    np.savez_compressed(
        buf,
        embedder=np.array(embedder_name),
        keys=np.array(keys),
        vectors=np.vstack([vectors[k] for k in keys]).astype(np.float32),
    )
    atomic_write_bytes(path, buf.getvalue())
