"""Opening the memory table: the connection, the writers' lock file, creation, the schema
migration and the indexes every table carries, and the operations that replace the table
(re-embedding, with the backup it keeps). MemoryStore (olav.memory.store.table) opens its table
through these; nothing here reads or ranks rows.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from olav.core.errors import EmbeddingDimMismatchError, MemoryStoreError, NotFoundError
from olav.core.log import quiet_native_libraries
from olav.memory.store.embedders import Embedder
from olav.memory.store.ftscache import FTS_TOKENIZER
from olav.memory.store.remote import MemoryLocation, location, refuse_if_nothing_listens
from olav.memory.store.schema import META_DIM, META_EMBEDDER, TABLE, build_schema
from olav.memory.store.writes import RemoteGuards

REEMBED_TABLE = "memory_reembed"
FTS_COLUMNS = ("text", "context")
# id lookups (upsert, capture's existence check, get) and the scope/category pre-filters that
# every ranking evaluates
SCALAR_INDEXES = (("id", "btree"), ("scope", "bitmap"), ("category", "bitmap"))
VECTOR_COLUMNS = ("vector", "context_vector")
BACKUP_PREFIX = "memory_backup_"


def lock_path(memory_path: Path) -> Path:
    """The file lock that serialises every writer of the memory table at ``memory_path``
    (two processes merging the same ids made duplicates)."""
    return Path(f"{memory_path}.lock")


def connect(loc: MemoryLocation) -> Any:
    """A LanceDB connection that sees other processes' writes (at the location's refresh
    interval: zero for a local folder)."""
    import lancedb

    refuse_if_nothing_listens(loc)
    return lancedb.connect(
        loc.uri,
        read_consistency_interval=timedelta(seconds=loc.refresh_seconds),
        storage_options=loc.storage_options or None,
    )


def only_directives(loc: MemoryLocation) -> bool:
    """Whether every row of the memory table at ``loc`` came from a guide file (origin
    ``directive``): such a table can be rebuilt from the files, for another embedder say."""
    table = connect(loc).open_table(TABLE)
    return int(table.count_rows("origin != 'directive'")) == 0


def table_names(db: Any) -> list[str]:
    return list(db.list_tables().tables)


def recover_swap(db: Any, loc: MemoryLocation) -> None:
    """Finish a re-embed swap that was interrupted between its two renames."""
    tables = table_names(db)
    if TABLE not in tables and REEMBED_TABLE in tables and not loc.remote:
        os.rename(loc.path / f"{REEMBED_TABLE}.lance", loc.path / f"{TABLE}.lance")


def open_or_create(db: Any, embedder: Embedder, schema: pa.Schema, allow_destructive: bool) -> Any:
    """The memory table, created when missing and migrated to the current schema; refuses
    a table made with another embedder (dropped instead only with ``allow_destructive``)."""
    if TABLE not in table_names(db):
        return create(db, TABLE, schema)
    table = db.open_table(TABLE)
    meta = table.schema.metadata or {}
    stored = meta.get(META_EMBEDDER, b"?").decode()
    stored_dim = int(meta.get(META_DIM, b"0").decode() or 0)
    if stored != embedder.name or stored_dim != embedder.dim:
        if not allow_destructive:
            raise EmbeddingDimMismatchError(
                stored=stored,
                stored_dim=stored_dim,
                configured=embedder.name,
                configured_dim=embedder.dim,
            )
        db.drop_table(TABLE)
        return create(db, TABLE, schema)
    migrate(table, embedder.dim)
    ensure_fts(table)
    ensure_scalar(table)
    return table


def migrate(table: Any, dim: int) -> None:
    """Schema 1 -> 2: add the context columns (empty) and event_at (= created_at). Each
    step is one commit, so a migration cut short resumes where it stopped."""
    names = set(table.schema.names)
    if "context" not in names:
        table.add_columns(
            [
                pa.field("context", pa.string()),
                pa.field("context_vector", pa.list_(pa.float32(), dim)),
            ]
        )
    if "event_at" not in names:
        table.add_columns({"event_at": "created_at"})


def create(db: Any, name: str, schema: pa.Schema) -> Any:
    table = db.create_table(name, schema=schema)
    ensure_fts(table)
    ensure_scalar(table)
    return table


def reembed(
    path: Path | MemoryLocation,
    embedder: Embedder,
    *,
    progress: Callable[[int, int], None] | None = None,
    batch: int = 64,
) -> tuple[int, str]:
    """Rebuild the memory table at ``path`` with ``embedder``.

    The new table is built beside the old one and swapped in only when complete; the old one
    is kept as ``memory_backup_<timestamp>``. Returns (rows, backup name).
    """
    quiet_native_libraries()
    import lancedb
    from filelock import FileLock

    loc = location(path)
    if loc.remote:  # writers wait for the write lease, held here for up to an hour
        guards = RemoteGuards(loc, timeout=120)
        with guards.maintenance(), guards.write(ttl=3600):
            db = lancedb.connect(loc.uri, storage_options=loc.storage_options or None)
            return _reembed_locked(loc.path, db, embedder, progress, batch)
    with FileLock(str(lock_path(loc.path)), timeout=120):
        return _reembed_locked(loc.path, lancedb.connect(loc.uri), embedder, progress, batch)


def _reembed_locked(
    path: Path,
    db: Any,
    embedder: Embedder,
    progress: Callable[[int, int], None] | None,
    batch: int,
) -> tuple[int, str]:
    tables = list(db.list_tables().tables)
    remote = "://" in str(db.uri)
    if TABLE not in tables and REEMBED_TABLE in tables and not remote:  # a cut swap
        os.rename(path / f"{REEMBED_TABLE}.lance", path / f"{TABLE}.lance")
        tables = list(db.list_tables().tables)
    if TABLE not in tables:
        raise MemoryStoreError(f"there is no memory table under {path}", hint="Run `olav init`")
    old = db.open_table(TABLE)
    total = old.count_rows()
    schema = build_schema(embedder.dim, embedder.name)
    if REEMBED_TABLE in tables:
        db.drop_table(REEMBED_TABLE)  # leftovers of an interrupted attempt
    new = db.create_table(REEMBED_TABLE, schema=schema)
    have = set(old.schema.names)  # a schema-1 table has no context columns yet
    cols = [f.name for f in schema if f.name not in VECTOR_COLUMNS and f.name in have]
    rows = old.search().select(cols).limit(max(total, 1)).to_list() if total else []
    done = 0
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        for row in chunk:
            row.setdefault("context", None)
            row.setdefault("event_at", row.get("created_at"))
        texts = [r["text"] for r in chunk]
        contexts = [(j, r["context"]) for j, r in enumerate(chunk) if r["context"]]
        vecs = embedder.embed_passages(texts + [c for _j, c in contexts])
        for row, vec in zip(chunk, vecs[: len(chunk)], strict=True):
            row["vector"] = [float(x) for x in vec]
            row["context_vector"] = None
        for (j, _c), vec in zip(contexts, vecs[len(chunk) :], strict=True):
            chunk[j]["context_vector"] = [float(x) for x in vec]
        new.add(pa.Table.from_pylist(chunk, schema=schema), on_bad_vectors="null")
        done += len(chunk)
        if progress:
            progress(done, total)
    ensure_fts(new)
    ensure_scalar(new)
    if new.count_rows() != total:
        raise MemoryStoreError("re-embedding lost rows; the original table is untouched")
    backup = BACKUP_PREFIX + datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    if remote:
        return total, _swap_remote(db, old, new, backup)
    n = 1
    while (path / f"{backup}.lance").exists():  # two re-embeds within one second
        n += 1
        backup = BACKUP_PREFIX + datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"_{n}"
    os.rename(path / f"{TABLE}.lance", path / f"{backup}.lance")
    os.rename(path / f"{REEMBED_TABLE}.lance", path / f"{TABLE}.lance")
    return total, backup


def _swap_remote(db: Any, old: Any, new: Any, backup: str) -> str:
    """Object storage cannot rename a table: keep a copy of the old rows as the backup, then
    overwrite the live table with the new rows in one commit (readers see the old table or
    the new one), and rebuild its indexes."""
    db.create_table(backup, old.to_arrow(), on_bad_vectors="null")  # null = no context
    table = db.create_table(TABLE, new.to_arrow(), mode="overwrite", on_bad_vectors="null")
    ensure_fts(table)
    ensure_scalar(table)
    db.drop_table(REEMBED_TABLE)
    return backup


def ensure_fts(table: Any) -> None:
    """Create the full-text indexes that are missing, and rebuild any made with an older
    tokenizer (an index migration)."""
    from lancedb.index import FTS

    found: dict[str, str] = {}
    for idx in table.list_indices():
        if str(idx.index_type) == "FTS" and idx.columns:
            details = getattr(idx, "index_details", None) or {}
            found[idx.columns[0]] = details.get("base_tokenizer", FTS_TOKENIZER)
    for column in FTS_COLUMNS:
        if found.get(column) != FTS_TOKENIZER:
            table.create_index(column, config=FTS(base_tokenizer=FTS_TOKENIZER), replace=True)


def ensure_scalar(table: Any) -> None:
    """Create the scalar indexes (SCALAR_INDEXES) that are missing."""
    have = {idx.columns[0] for idx in table.list_indices() if idx.columns}
    for column, kind in SCALAR_INDEXES:
        if column not in have:
            table.create_index(column, config=scalar_config(kind))


def scalar_config(kind: str) -> Any:
    from lancedb.index import Bitmap, BTree

    return BTree() if kind == "btree" else Bitmap()


def drop_backup(path: Path | MemoryLocation, name: str) -> None:
    if not name.startswith(BACKUP_PREFIX) or "/" in name:
        raise MemoryStoreError(f"{name!r} is not a memory backup")
    loc = location(path)
    if loc.remote:
        import lancedb

        db = lancedb.connect(loc.uri, storage_options=loc.storage_options or None)
        if name not in db.list_tables().tables:
            raise NotFoundError(f"no backup named {name}", hint="See `olav kb backups`")
        db.drop_table(name)
        return
    target = loc.path / f"{name}.lance"
    if not target.is_dir():
        raise NotFoundError(f"no backup named {name}", hint="See `olav kb backups`")
    shutil.rmtree(target)
