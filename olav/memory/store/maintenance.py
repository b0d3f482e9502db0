"""Keeping the memory table fast: index folding, compaction and the ANN indexes.

MemoryStore.maintain takes the maintenance lock (or lease) and calls ``optimize`` here; the
functions read and change only the LanceDB table they are given.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any, Protocol

from olav.memory.store.connection import VECTOR_COLUMNS, ensure_fts, ensure_scalar

# more data fragments than this (each append or bump writes one) slows every search down;
# maintain() compacts them
MAX_FRAGMENTS = 8
# With an ANN index, compaction cannot merge fragments indexed in different index segments,
# so each optimize() leaves one more fragment behind; rebuilding the vector index puts every
# row in one segment again. maintain() does that by itself below this many rows (seconds);
# above it, `olav memory gc` (and the gc cron job) does, or maintain() once the stuck
# fragments pass stuck_limit().
REBUILD_ROWS = 20000
# The ANN index of both vector columns. IVF_SQ rather than IVF_HNSW_SQ (built before issue
# 15's fifth round): at 100k rows it builds in seconds instead of a minute and a half, its
# first query loads about 50 MB less, and with the probing below its recall@10 is higher at
# the same speed. A table still holding an IVF_HNSW_SQ index is searched as it is; maintain()
# replaces that index when it may rebuild one (below REBUILD_ROWS, or a full pass: gc).
ANN_INDEX_TYPE = "IvfSq"  # as list_indices() names it
# Partitions every ANN query searches. LanceDB searches more, up to all of them, only when
# these leave fewer than the query's limit among the rows its pre-filter keeps (a rare scope
# spread over many partitions), so a scope's search still fills k rows.
MIN_PROBES = 20
# Table versions older than this are removed by every optimize() of maintain(). Nothing in
# olav reads an old version (a reader asks for the latest on every query), and each fold of
# a write into the indexes of a big table leaves one (3.5 MB at 100k rows, index files), so
# LanceDB's default of 7 days let a busy 100k-row table grow by gigabytes in a week.
RETENTION = timedelta(hours=1)


def index_state(table: Any) -> dict[str, Any]:
    """The indexes by role: fts and context_fts (full text), vector and context_vector."""
    state: dict[str, Any] = dict.fromkeys(("fts", "vector", "context_fts", "context_vector"))
    roles = {"text": "fts", "context": "context_fts"}
    for idx in table.list_indices():
        stats = table.index_stats(idx.name)
        entry = {
            "name": idx.name,
            "type": str(idx.index_type),
            "indexed": getattr(stats, "num_indexed_rows", None),
            "unindexed": getattr(stats, "num_unindexed_rows", None),
        }
        column = idx.columns[0] if idx.columns else ""
        state[roles.get(column, column)] = entry
    return state


def stuck_limit(rows: int) -> int:
    """Fragments a table of ``rows`` rows (REBUILD_ROWS or more) may keep stuck behind its
    index segments before maintain() rebuilds its vector index without waiting for gc: one
    MAX_FRAGMENTS per REBUILD_ROWS rows. Each write folded into the indexes leaves one, and
    each makes every search slower (22 to 34 ms over 40 writes at 100,000 rows); a rebuild
    takes about 5 s there, so it costs about what the writes' own folding does."""
    return MAX_FRAGMENTS * max(1, rows // REBUILD_ROWS)


def ann_config() -> Any:
    """The index config both vector columns get (ANN_INDEX_TYPE)."""
    from lancedb.index import IvfSq

    return IvfSq(distance_type="l2")


def probe(query: Any) -> Any:
    """Set a LanceDB vector query's probing (MIN_PROBES, then as many more as it takes to
    fill the limit). Without an ANN index LanceDB ignores it: the search is exact."""
    return query.minimum_nprobes(MIN_PROBES).maximum_nprobes(0)


def outdated(state: dict[str, Any]) -> list[str]:
    """The vector columns whose ANN index is not ANN_INDEX_TYPE (an IVF_HNSW_SQ one, from
    before issue 15's fifth round)."""
    return [
        c for c in VECTOR_COLUMNS if state[c] is not None and state[c]["type"] != ANN_INDEX_TYPE
    ]


def fragments(table: Any) -> int:
    """Data fragments of the table (cheap: read from the manifest)."""
    stats = table.stats()
    frag = stats.get("fragment_stats") if isinstance(stats, dict) else None
    return int((frag or {}).get("num_fragments") or 0)


def optimize(
    table: Any, *, ann_threshold: int, force_optimize: bool = False, full: bool = False
) -> tuple[dict[str, Any], int]:
    """One maintenance pass, under the caller's maintenance lock. Returns what was done and
    the fragments left behind."""
    done: dict[str, Any] = {"optimized": False, "ann_built": False, "rebuilt": False}
    ensure_fts(table)
    ensure_scalar(table)
    state = index_state(table)
    unindexed = max((state[role] or {}).get("unindexed") or 0 for role in ("fts", "context_fts"))
    fragmented = fragments(table) > MAX_FRAGMENTS
    if fragmented or (unindexed and (force_optimize or unindexed >= 256)):
        table.optimize(cleanup_older_than=RETENTION)  # compacts, folds new rows into indexes
        done["optimized"] = True
    if state["vector"] is None and table.count_rows() >= ann_threshold:
        table.create_index("vector", config=ann_config())
        done["ann_built"] = True
    if state["context_vector"] is None and table.count_rows("context IS NOT NULL") >= ann_threshold:
        table.create_index("context_vector", config=ann_config())
        done["ann_built"] = True
    # rebuild the vector indexes: when fragments are stuck behind the index segments, or when
    # an index is of an older type; both in seconds below REBUILD_ROWS, else on a full pass
    left = fragments(table)
    vector_indexes = [c for c in VECTOR_COLUMNS if state[c] is not None]
    rebuild = vector_indexes if left > MAX_FRAGMENTS else outdated(state)
    rows = table.count_rows()
    if rebuild and (full or rows < REBUILD_ROWS or left > stuck_limit(rows)):
        for column in rebuild:
            table.create_index(column, config=ann_config(), replace=True)
        table.optimize(cleanup_older_than=RETENTION)
        done["rebuilt"] = True
    return done, fragments(table)


class MaintainedTable(Protocol):
    """What maintenance reads of its store: the table (opened on first use), whether it is
    remote, its maintenance lock, the vector snapshot and the ANN threshold."""

    ann_threshold: int
    vcache: Any

    @property
    def table(self) -> Any: ...

    @property
    def remote(self) -> Any: ...

    def maintenance_lock(self) -> AbstractContextManager[Any]: ...


class Maintenance:
    """A store's maintenance, a part of :class:`~olav.memory.store.table.MemoryStore`: its
    indexes, fragments and compaction, and what the last :meth:`maintain` left behind."""

    def __init__(self, store: MaintainedTable) -> None:
        self.store = store
        self._fragment_floor = 0  # fragments the last maintain() left behind, if stuck
        self._maintained_version: int | None = None  # the table version maintain() left

    def index_state(self) -> dict[str, Any]:
        """The indexes by role: fts and context_fts (full text), vector and context_vector."""
        return index_state(self.store.table)

    def fragments(self) -> int:
        """Data fragments of the table (cheap: read from the manifest)."""
        return fragments(self.store.table)

    def lancedb_answers(self) -> bool:
        """More rows than the in-process snapshot holds (olav.memory.store.vcache): LanceDB
        answers every search of this table."""
        return bool(self.store.table.count_rows() > self.store.vcache.max_rows)

    def needs_maintenance(self) -> bool:
        """More fragments than MAX_FRAGMENTS, or MAX_FRAGMENTS more than the last maintain()
        could not compact away (a big table waiting for `olav memory gc`); or, on a table
        LanceDB answers, any write since the last maintain(). There, rows outside the vector
        index are searched exactly beside it, and LanceDB then reads the full vectors of
        every candidate of the index to merge the two: 5 ms more a search at 100k rows,
        against 0.1 s once to fold them in (docs/benchmark-notes.md)."""
        if self.fragments() > self._fragment_floor + MAX_FRAGMENTS:
            return True
        return self.store.table.version != self._maintained_version and self.lancedb_answers()

    def refresh_snapshot(self) -> None:
        """Reload the in-process vector snapshot from the table as it is now, so that the
        next search finds it current (after a run's writes)."""
        self.store.vcache.refresh(self.store.table)

    def maintain(self, *, force_optimize: bool = False, full: bool = False) -> dict[str, Any]:
        """Fold new rows into the indexes, compact fragments and build the ANN indexes past
        the threshold. When compaction is stuck behind the ANN index segments, rebuild the
        vector indexes (always with ``full``, otherwise only below REBUILD_ROWS rows). On a
        table LanceDB answers, every new row is folded in (see needs_maintenance)."""
        remote = self.store.remote
        if remote is not None and not remote.maintaining():
            from olav.memory.store.remote import LeaseHeldError

            try:
                with self.store.maintenance_lock():
                    return self.maintain(force_optimize=force_optimize, full=full)
            except LeaseHeldError:  # another machine is maintaining the table right now
                skipped = {"optimized": False, "ann_built": False, "rebuilt": False}
                return {**skipped, "skipped": "lease held"}
        with self.store.maintenance_lock():
            done, left = optimize(
                self.store.table,
                ann_threshold=self.store.ann_threshold,
                force_optimize=force_optimize or self.lancedb_answers(),
                full=full,
            )
            self._fragment_floor = left if left > MAX_FRAGMENTS else 0
            self._maintained_version = self.store.table.version
        return done
