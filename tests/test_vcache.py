"""The in-process vector snapshot (olav.memory.store.vcache): same answers as LanceDB, and any
write, from any process, retires it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE, Reader
from olav.memory.store.table import MemoryStore
from olav.memory.store.timeq import Period
from tests.helpers import EVERY_ROW, write_from_another_process
from tests.vcache_support import rows as _rows
from tests.vcache_support import unit_vector as _unit


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "memory.lance", HashEmbedder("hash-64"))
    s.upsert(_rows(240))
    return s


SEARCHES = [
    SearchFilter(scopes=["netops", "global"], categories=["fact", "usage_guide"], reader=EVERYONE),
    SearchFilter(reader=EVERYONE),
    SearchFilter(scopes=["coder"], include_invalid=True, reader=EVERYONE),
    SearchFilter(
        period=Period(datetime(2026, 4, 1, tzinfo=UTC), datetime(2026, 5, 1, tzinfo=UTC)),
        reader=EVERYONE,
    ),
    SearchFilter(categories=["fact"], period=Period(months=(4,)), reader=EVERYONE),
    # an operator's read rule: other operators' private rows and other teams' rows hidden
    SearchFilter(reader=Reader("user:alice", "team:netops")),
    SearchFilter(categories=["fact"], reader=Reader("user:bob", None)),
    # the rule on named scopes (recall's read): the names it may not read are dropped
    SearchFilter(scopes=["netops", "user:alice", "user:bob"], reader=Reader("user:alice", None)),
]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_the_snapshot_ranks_as_lancedb_does(store: MemoryStore, mode: str) -> None:
    nrng = np.random.default_rng(1)
    queries = [
        (q, np.asarray(_unit(nrng), dtype=np.float32))
        for q in ("router backup config", "备份 路由器", "disk alert cpu")
    ]
    # LanceDB's full-text scores use its index's statistics; with every row indexed they are
    # those of the table, which the snapshot uses (olav.memory.store.ftscache)
    store.maintain(force_optimize=True)
    store.vcache.max_rows = 0  # LanceDB answers every ranking
    expected = [
        [
            (h.record.id, h.distance, h.ranks)
            for h in store.search(q, mode=mode, k=12, query_vector=qv, filter=f)
        ]
        for q, qv in queries
        for f in SEARCHES
    ]
    store.vcache.wait(60)
    assert store.vcache.served == 0 and store.vcache.snapshot is None
    store.vcache.max_rows = 20000
    assert store.vcache.refresh(store.table) is not None
    got = [
        [
            (h.record.id, h.distance, h.ranks)
            for h in store.search(q, mode=mode, k=12, query_vector=qv, filter=f)
        ]
        for q, qv in queries
        for f in SEARCHES
    ]
    assert store.vcache.served > 0
    assert sum(len(e) for e in expected) > 100
    for want, have in zip(expected, got, strict=True):
        assert [i for i, _d, _r in have] == [i for i, _d, _r in want], (want, have)
        assert [r for _i, _d, r in have] == [r for _i, _d, r in want]
        for (_i, dw, _r), (_j, dh, _s) in zip(want, have, strict=True):
            assert dh == pytest.approx(dw, abs=1e-4)


def test_a_write_from_another_process_retires_the_snapshot(store: MemoryStore) -> None:
    query = "zebra firmware quarantine"
    store.vcache.refresh(store.table)
    before = store.search(query, mode="vector", k=3, filter=EVERY_ROW)
    assert store.vcache.served == 1 and "fresh" not in [h.record.id for h in before]
    write_from_another_process(store.path, query)

    after = store.search(query, mode="vector", k=3, filter=EVERY_ROW)
    assert after[0].record.id == "fresh"
    assert store.vcache.served == 1, "the stale snapshot must not answer"
    store.vcache.wait(60)  # the second search at the new version started a fresh load
    again = store.search(query, mode="vector", k=3, filter=EVERY_ROW)
    assert store.vcache.served == 2 and again[0].record.id == "fresh"


def test_a_table_over_the_limit_is_never_copied(store: MemoryStore) -> None:
    store.vcache.max_rows = 100
    assert store.vcache.refresh(store.table) is None
    store.search("router", mode="vector", filter=EVERY_ROW)
    store.search("router", mode="vector", filter=EVERY_ROW)
    store.vcache.wait(60)
    store.search("router", mode="vector", filter=EVERY_ROW)
    assert store.vcache.served == 0 and store.vcache.snapshot is None


@pytest.mark.parametrize("mode", ["fts", "hybrid"])
def test_snapshot_hits_carry_the_rows_and_vectors_lancedb_returns(
    store: MemoryStore, mode: str
) -> None:
    """A snapshot ranking holds row positions; the fused top rows are built from the
    snapshot itself, and must equal what LanceDB's result rows give."""
    store.maintain(force_optimize=True)
    qv = np.asarray(_unit(np.random.default_rng(3)), dtype=np.float32)
    only = SearchFilter(scopes=["netops", "global", "user:alice"], reader=EVERYONE)

    def hits() -> list[tuple]:
        found = store.search("router backup 路由器", mode=mode, k=15, query_vector=qv, filter=only)
        return [
            (
                h.record.to_json(),
                h.score,
                h.fts_score,
                None if h.vector is None else h.vector.tolist(),
            )
            for h in found
        ]

    store.vcache.max_rows = 0  # LanceDB answers every ranking
    expected = hits()
    store.vcache.wait(60)
    store.vcache.max_rows = 20000
    assert store.vcache.refresh(store.table) is not None
    served = store.vcache.served
    got = hits()
    assert store.vcache.served > served and len(expected) == 15
    assert [g[0] for g in got] == [e[0] for e in expected]
    assert [g[1] for g in got] == [e[1] for e in expected]
    for (_r, _s, fw, vw), (_q, _t, fh, vh) in zip(expected, got, strict=True):
        assert (fh is None) == (fw is None) and (fh or 0) == pytest.approx(fw or 0, rel=1e-5)
        assert vh == vw  # None in fts mode, else the row's own vector
