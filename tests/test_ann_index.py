"""The ANN vector index past memory.ann_threshold: IVF_SQ, its probing, and tables that
still hold the IVF_HNSW_SQ index built before (olav.memory.store.maintenance)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import olav.memory.store.maintenance as maintenance
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.search import SearchTuning
from olav.memory.store.table import MemoryStore
from tests.helpers import EVERY_ROW, hash_store, rec

ROWS = 3000
RARE = 15  # rows of scope 'rare', one every ROWS // RARE rows: spread over the partitions


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, 64)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _partitioned() -> object:
    """ann_config() with 16 partitions: LanceDB's default gives 3,000 rows one partition,
    where every probe count searches all of it."""
    from lancedb.index import IvfSq

    return IvfSq(distance_type="l2", num_partitions=16)


def _indexed(path: Path) -> tuple[MemoryStore, np.ndarray]:
    store = hash_store(path, tuning=SearchTuning(ann_threshold=1000))
    vectors = _unit(np.random.default_rng(7), ROWS)
    step = ROWS // RARE
    store.upsert(
        [
            rec(f"r{i}", f"row {i}", scope="rare" if i % step == 0 else "big", vector=list(v))
            for i, v in enumerate(vectors)
        ]
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(maintenance, "ann_config", _partitioned)
        assert store.maintain(force_optimize=True)["ann_built"]
    return store, vectors


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryStore, np.ndarray]:
    return _indexed(tmp_path_factory.mktemp("ann") / "m.lance")


def test_the_index_is_ivf_sq(indexed: tuple[MemoryStore, np.ndarray]) -> None:
    store, _ = indexed
    assert store.index_state()["vector"]["type"] == maintenance.ANN_INDEX_TYPE == "IvfSq"


@pytest.mark.parametrize("min_probes", [1, maintenance.MIN_PROBES])
def test_a_rare_scope_fills_k_from_every_partition(
    indexed: tuple[MemoryStore, np.ndarray], min_probes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 15 'rare' rows lie in many partitions and the query is near none of them: the
    first probes hold few of them, and LanceDB probes on until k rows are found."""
    store, vectors = indexed
    monkeypatch.setattr(maintenance, "MIN_PROBES", min_probes)
    step = ROWS // RARE
    rare = {f"r{i}" for i in range(0, ROWS, step)}
    for j in (1, 2, 3):
        q = vectors[j]  # a 'big' row: its partition holds at most one 'rare' row
        for mode in ("vector", "hybrid"):
            hits = store.search(
                "",
                mode=mode,
                filter=SearchFilter(scopes=["rare"], reader=EVERYONE),
                k=RARE,
                query_vector=q,
            )
            assert {h.record.id for h in hits} == rare, (mode, j, min_probes)


def test_a_fixed_probe_count_would_lose_rows(indexed: tuple[MemoryStore, np.ndarray]) -> None:
    """What the probing above guards against: one fixed probe misses most 'rare' rows."""
    store, vectors = indexed
    q = store.table.search(vectors[1], vector_column_name="vector").where(
        "scope = 'rare'", prefilter=True
    )
    assert len(q.nprobes(1).limit(RARE).to_arrow()) < RARE
    assert len(maintenance.probe(q.limit(RARE)).to_arrow()) == RARE


def test_ordinary_queries_find_what_exact_search_finds(
    indexed: tuple[MemoryStore, np.ndarray],
) -> None:
    store, vectors = indexed
    rng = np.random.default_rng(11)
    big = [i for i in range(ROWS) if i % (ROWS // RARE)]
    overlap = []
    for i in rng.choice(big, size=20, replace=False):
        q = vectors[i] + 0.05 * _unit(rng, 1)[0]
        hits = store.search(
            "",
            mode="vector",
            filter=SearchFilter(scopes=["big"], reader=EVERYONE),
            k=10,
            query_vector=q,
        )
        ids = [h.record.id for h in hits]
        assert len(ids) == 10 and f"r{i}" in ids
        dist = ((vectors[big] - q) ** 2).sum(axis=1)
        exact = {f"r{big[j]}" for j in np.argsort(dist)[:10]}
        overlap.append(len(exact & set(ids)) / 10)
    assert np.mean(overlap) >= 0.6, overlap


def _old_index(store: MemoryStore) -> None:
    """Give the table the IVF_HNSW_SQ index maintain() built before IVF_SQ."""
    from lancedb.index import IvfHnswSq

    config = IvfHnswSq(distance_type="l2", num_partitions=16)
    store.table.create_index("vector", config=config, replace=True)
    assert store.index_state()["vector"]["type"] == "IvfHnswSq"


def test_maintain_replaces_an_old_ivf_hnsw_sq_index(tmp_path: Path) -> None:
    store, vectors = _indexed(tmp_path / "m.lance")
    _old_index(store)
    hits = store.search(
        "",
        mode="vector",
        filter=SearchFilter(scopes=["rare"], reader=EVERYONE),
        k=RARE,
        query_vector=vectors[1],
    )
    assert len(hits) == RARE  # still searched as it is
    done = store.maintain()
    assert done["rebuilt"] and not done["ann_built"]
    assert store.index_state()["vector"]["type"] == "IvfSq"
    assert not store.maintain()["rebuilt"]  # once
    hits = store.search("", mode="vector", k=1, query_vector=vectors[5], filter=EVERY_ROW)
    assert hits[0].record.id == "r5"


def test_a_big_table_keeps_its_old_index_until_gc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, vectors = _indexed(tmp_path / "m.lance")
    _old_index(store)
    monkeypatch.setattr(maintenance, "REBUILD_ROWS", 100)  # this table counts as big
    assert not store.maintain()["rebuilt"]
    assert store.index_state()["vector"]["type"] == "IvfHnswSq"
    hits = store.search(
        "",
        mode="hybrid",
        filter=SearchFilter(scopes=["rare"], reader=EVERYONE),
        k=RARE,
        query_vector=vectors[2],
    )
    assert len(hits) == RARE
    from olav.memory.lifecycle.decay import gc

    gc(store)  # the full pass of `olav memory gc` and the nightly job
    assert store.index_state()["vector"]["type"] == "IvfSq"
    assert store.size() == ROWS


def test_a_table_lancedb_answers_folds_every_write_into_its_indexes(tmp_path: Path) -> None:
    """Past the snapshot's size, rows outside the vector index make every vector search read
    the full vectors of the index's candidates: one write is reason enough to maintain."""
    store, vectors = _indexed(tmp_path / "m.lance")
    assert not store.needs_maintenance()  # the snapshot answers a table this small
    store.bump_access(["r5", "r6"])  # rewrites two rows, outside the indexes
    assert not store.needs_maintenance()
    store.vcache.max_rows = 1000  # now the table is past it
    assert store.needs_maintenance()
    assert store.index_state()["vector"]["unindexed"] == 2
    assert store.maintain()["optimized"]
    state = store.index_state()
    assert state["vector"]["unindexed"] == 0 and state["fts"]["unindexed"] == 0
    assert not store.needs_maintenance()
    hits = store.search("", mode="vector", k=1, query_vector=vectors[6], filter=EVERY_ROW)
    assert hits[0].record.id == "r6" and hits[0].record.access_count == 1


def test_a_big_table_rebuilds_once_its_stuck_fragments_pass_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folding each write into the indexes leaves a fragment behind; a big table does not
    wait for gc past stuck_limit (here 3,000 rows / 1,000 × 2 = 6 fragments)."""
    store, vectors = _indexed(tmp_path / "m.lance")
    monkeypatch.setattr(maintenance, "REBUILD_ROWS", 1000)
    monkeypatch.setattr(maintenance, "MAX_FRAGMENTS", 2)
    store.vcache.max_rows = 1000  # LanceDB answers: every write is folded in
    assert maintenance.stuck_limit(store.size()) == 6
    seen = []
    for i in range(12):
        store.bump_access([f"r{i}"])
        done = store.maintain()
        seen.append((store.fragments(), done["rebuilt"]))
        if done["rebuilt"]:
            break
    assert seen[-1] == (1, True), seen  # one fragment again, in one index segment
    assert all(f <= 7 for f, _ in seen), seen
    hits = store.search("", mode="vector", k=1, query_vector=vectors[3], filter=EVERY_ROW)
    assert hits[0].record.id == "r3" and hits[0].record.access_count == 1


def test_maintain_removes_old_table_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each fold of a write into a big table's indexes leaves a version of its index files;
    maintain() removes versions older than RETENTION, so the folder does not grow with them."""
    import datetime

    store, vectors = _indexed(tmp_path / "m.lance")
    store.vcache.max_rows = 1000
    monkeypatch.setattr(maintenance, "RETENTION", datetime.timedelta(milliseconds=1))
    sizes = []
    for i in range(4):
        store.bump_access([f"r{i}"])
        assert store.maintain()["optimized"]
        assert len(store.table.list_versions()) <= 2  # the latest, and perhaps the one before
        sizes.append(sum(f.stat().st_size for f in store.path.rglob("*") if f.is_file()))
    assert sizes[-1] <= sizes[0] * 1.05, sizes
    assert (
        store.search("", mode="vector", k=1, query_vector=vectors[2], filter=EVERY_ROW)[0].record.id
        == "r2"
    )
