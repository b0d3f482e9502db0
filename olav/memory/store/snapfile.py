"""The snapshot on disk, so that a cold read-only command answers without importing lancedb.

``import lancedb`` costs 0.5-0.6 s of a cold ``olav memory search`` (its embedding registry,
the namespace client, pyarrow's dataset modules); numpy and pyarrow alone cost a fifth of it.
So ``olav memory search`` and ``olav memory why`` write the in-process snapshot of a local
table (olav.memory.store.vcache) next to the table, and the next such command reads it back when
it still holds the table's current version, and ranks in numpy exactly as the warm path
does. Full-text queries are tokenized by lancedb's native extension, loaded alone (4 ms).

A snapshot is used only when its version is the table's latest, which is read from the
names of the table's manifests (``_versions/``: LanceDB names them ``u64::MAX - version``, or
``version`` in the older scheme), without lancedb. Any write, from any process, commits a
new manifest, so a snapshot written before it is never read again; the command then opens
the table as usual (and writes a fresh snapshot after answering).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from olav.core.log import get_logger
from olav.memory.store.ftscache import FTS_TOKENIZER, Postings, analyzer
from olav.memory.store.schema import TABLE
from olav.memory.store.vcache import TEXT_COLUMNS, Snapshot

FORMAT = 1
ROWS_FILE = f"{TABLE}.snapshot.arrow"
POSTINGS_FILE = f"{TABLE}.snapshot.npz"
U64_MAX = 2**64 - 1
log = get_logger("memory.snapfile")


def latest_version(db_path: Path) -> int | None:
    """The newest committed version of the memory table under ``db_path`` (None: no table)."""
    try:
        names = os.listdir(db_path / f"{TABLE}.lance" / "_versions")
    except OSError:
        return None
    best: int | None = None
    for name in names:
        stem, _dot, ext = name.partition(".")
        if ext != "manifest" or not stem.isdigit():
            continue
        version = U64_MAX - int(stem) if len(stem) == 20 else int(stem)
        best = version if best is None else max(best, version)
    return best


def _meta(version: int, embedder: str, dim: int) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": version,
        "embedder": embedder,
        "dim": dim,
        "tokenizer": FTS_TOKENIZER,
    }


def save(db_path: Path, snap: Snapshot, embedder: str, dim: int) -> None:
    """Write ``snap`` next to the table (each file replaced atomically)."""
    import pyarrow as pa

    meta = _meta(snap.version, embedder, dim)
    arrays: dict[str, np.ndarray] = {"version": np.array([snap.version], dtype=np.int64)}
    for name in TEXT_COLUMNS:
        p = snap.postings[name]
        arrays[f"{name}.vocab"] = np.array(list(p.vocab), dtype=str)
        arrays[f"{name}.offsets"] = p.offsets
        arrays[f"{name}.docs"] = p.docs
        arrays[f"{name}.weights"] = p.weights
        arrays[f"{name}.num_docs"] = np.array([p.num_docs], dtype=np.int64)
    words = analyzer().words()
    arrays["words.raw"] = np.array(list(words), dtype=str)
    arrays["words.final"] = np.array([w or "" for w in words.values()], dtype=str)
    _replace(db_path / POSTINGS_FILE, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]

    ctx = snap.vectors["context_vector"]
    dim_ = ctx.matrix.shape[1]
    values = pa.array(ctx.matrix.reshape(-1), pa.float32())
    context_vector = pa.FixedSizeListArray.from_arrays(values, dim_, mask=pa.array(~ctx.valid))
    table = snap.rows.append_column("context_vector", context_vector)
    table = table.replace_schema_metadata({"olav.snapshot": json.dumps(meta)})

    def write_rows(f: Any) -> None:
        with pa.ipc.new_file(f, table.schema) as writer:
            writer.write_table(table)

    _replace(db_path / ROWS_FILE, write_rows)


def saved_version(db_path: Path) -> int | None:
    """The version of the snapshot on disk (None: none, or unreadable)."""
    try:
        import pyarrow as pa

        with pa.memory_map(str(db_path / ROWS_FILE)) as source:
            meta = pa.ipc.open_file(source).schema.metadata or {}
        return int(json.loads(meta.get(b"olav.snapshot", b"{}"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def _replace(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load(db_path: Path, embedder: str, dim: int, columns: Sequence[str]) -> Snapshot | None:
    """The snapshot on disk when it holds the table's latest version for this embedder."""
    version = latest_version(db_path)
    if version is None or not (db_path / ROWS_FILE).is_file():
        return None
    try:
        import pyarrow as pa

        with pa.memory_map(str(db_path / ROWS_FILE)) as source:
            table = pa.ipc.open_file(source).read_all()
        meta = json.loads((table.schema.metadata or {}).get(b"olav.snapshot", b"{}"))
        if meta != _meta(version, embedder, dim):
            return None
        with np.load(db_path / POSTINGS_FILE, allow_pickle=False) as npz:
            if int(npz["version"][0]) != version:
                return None
            postings = {}
            for name in TEXT_COLUMNS:
                vocab = npz[f"{name}.vocab"].tolist()
                postings[name] = Postings(
                    dict(zip(vocab, range(len(vocab)), strict=True)),
                    npz[f"{name}.offsets"],
                    npz[f"{name}.docs"],
                    npz[f"{name}.weights"],
                    int(npz[f"{name}.num_docs"][0]),
                )
            raw, final = npz["words.raw"].tolist(), npz["words.final"].tolist()
        analyzer().teach({r: f or None for r, f in zip(raw, final, strict=True)})
        return Snapshot.from_arrow(table, version, columns, postings=postings)
    except (OSError, ValueError, KeyError) as exc:  # a torn or foreign file: LanceDB answers
        log.debug("snapshot on disk not used: %s: %s", type(exc).__name__, exc)
        return None
