"""Lean rankings from a local LanceDB table (olav.memory.store.search and .ranking): ids only, the
filter checked on the nearest rows instead of pre-filtering the whole table, and the rows that
survive the fusion read once, by row id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import olav.memory.store.search as search
from olav.memory.store.filters import SearchFilter
from olav.memory.store.hits import fuse
from olav.memory.store.ranking import Ranking, TableRows
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from tests.helpers import EVERY_ROW, hash_store, rec

ROWS = 400
WORDS = ("router", "backup", "vlan", "disk", "queue", "token", "alert", "cron")


def _vectors(n: int) -> np.ndarray:
    v = np.random.default_rng(5).normal(size=(n, 64)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _scope(i: int) -> str:
    return "rare" if i % 50 == 0 else ("big" if i % 2 else "other")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryStore, np.ndarray]:
    """400 rows over three scopes, 8 of them 'rare', read from LanceDB (no snapshot)."""
    store = hash_store(tmp_path_factory.mktemp("lean") / "m.lance")
    vectors = _vectors(ROWS)
    store.upsert(
        [
            rec(f"r{i:03d}", f"{WORDS[i % 8]} {WORDS[i % 5]} {i}", scope=_scope(i), vector=list(v))
            for i, v in enumerate(vectors)
        ]
    )
    store.maintain(force_optimize=True)
    store.vcache.max_rows = 0  # every search goes to LanceDB
    return store, vectors


def _exact(vectors: np.ndarray, q: np.ndarray, scopes: set[str], k: int) -> list[str]:
    dist = ((vectors - q) ** 2).sum(axis=1)
    return [f"r{i:03d}" for i in np.argsort(dist) if _scope(int(i)) in scopes][:k]


def _prefiltered_fts(
    store: MemoryStore, query: str, scopes: list[str], k: int
) -> list[tuple[str, float]]:
    where = "scope IN (" + ", ".join(f"'{s}'" for s in scopes) + ")"
    q = store.table.search(query, query_type="fts", fts_columns="text").select(["id", "_score"])
    found = q.where(where, prefilter=True).limit(k).to_arrow()
    ids, scores = found.column("id").to_pylist(), found.column("_score").to_pylist()
    return list(zip(ids, scores, strict=True))


def _above_last(ranked: list[tuple[str, float]]) -> set[str]:
    """The ids scored above the last one (rows tied with it may come in any order)."""
    return {i for i, score in ranked if score > ranked[-1][1] + 1e-6}


def _queries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The LanceDB queries lean rankings make, by column."""
    made: list[str] = []
    real = search._SearchCall._query

    def spy(self: search._SearchCall, column: str) -> object:
        made.append(column)
        return real(self, column)

    monkeypatch.setattr(search._SearchCall, "_query", spy)
    return made


@pytest.mark.parametrize("scopes", [["big", "rare"], ["rare"], ["big", "other", "rare"]])
def test_a_lean_vector_ranking_is_the_exact_one_under_the_filter(
    table: tuple[MemoryStore, np.ndarray], scopes: list[str]
) -> None:
    store, vectors = table
    for j in (3, 77, 201):
        q = vectors[j] + 0.1 * _vectors(1)[0]
        hits = store.search(
            "",
            mode="vector",
            k=6,
            query_vector=q,
            filter=SearchFilter(scopes=scopes, reader=EVERYONE),
        )
        assert [h.record.id for h in hits] == _exact(vectors, q, set(scopes), 6)
        assert all(h.record.scope in scopes and h.vector is not None for h in hits)


@pytest.mark.parametrize("scopes", [["big", "other"], ["rare"]])
def test_a_lean_full_text_ranking_is_the_prefiltered_one(
    table: tuple[MemoryStore, np.ndarray], scopes: list[str]
) -> None:
    store, _ = table
    for query in ("router backup", "disk", "cron queue"):
        hits = store.search(
            query, mode="fts", k=8, filter=SearchFilter(scopes=scopes, reader=EVERYONE)
        )
        got = [(h.record.id, h.fts_score or 0.0) for h in hits]
        want = _prefiltered_fts(store, query, scopes, 8)
        assert [s for _i, s in got] == pytest.approx([s for _i, s in want], rel=1e-5)
        assert _above_last(got) == _above_last(want)
        assert all(h.record.scope in scopes for h in hits)


def test_the_prefilter_runs_only_when_too_few_near_rows_pass(
    table: tuple[MemoryStore, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, vectors = table
    made = _queries(monkeypatch)
    store.search(
        "",
        mode="vector",
        k=5,
        query_vector=vectors[1],
        filter=SearchFilter(["big"], reader=EVERYONE),
    )
    assert made == ["vector"]  # half the rows pass: the nearest 10 hold 5 of them
    made.clear()
    hits = store.search(
        "",
        mode="vector",
        k=5,
        query_vector=vectors[1],
        filter=SearchFilter(["rare"], reader=EVERYONE),
    )
    assert made == ["vector", "vector"]  # 8 rows pass in 400: ranked again, pre-filtered
    assert [h.record.id for h in hits] == _exact(vectors, vectors[1], {"rare"}, 5)


def test_hybrid_reads_the_kept_rows_in_one_take(
    table: tuple[MemoryStore, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, vectors = table
    takes: list[int] = []
    real = TableRows.records

    def spy(self: TableRows, positions: list[int], with_vector: bool) -> object:
        takes.append(len(positions))
        return real(self, positions, with_vector)

    monkeypatch.setattr(TableRows, "records", spy)
    hits = store.search("router backup", k=7, query_vector=vectors[9], filter=EVERY_ROW)
    assert takes == [7] and len(hits) == 7
    first = next(h for h in hits if h.record.id == "r009")  # the query's own vector
    assert first.vector_rank == 1 and first.distance == pytest.approx(0.0, abs=1e-4)
    # a hit found only by full text gets its distance from the vector read with it
    fts_only = [h for h in hits if h.vector_rank is None]
    for h in fts_only:
        assert h.distance == pytest.approx(float(((h.vector - vectors[9]) ** 2).sum()), 1e-4)


def _ranked(store: MemoryStore, q: np.ndarray, k: int) -> tuple[Ranking, TableRows]:
    rows = TableRows(store.table, store.columns(False))
    result = (
        store.table.search(q, vector_column_name="vector")
        .select({"id": "id", "noctx": "context IS NULL", "_distance": "_distance"})
        .with_row_id(True)
        .limit(k)
        .to_arrow()
    )
    return Ranking.from_lean(result, rows, k, with_vector=True), rows


def test_rows_moved_or_deleted_after_ranking_are_read_by_id_or_dropped(tmp_path: Path) -> None:
    """Another process compacts the table (row addresses change) and deletes a row between
    the ranking and the read: the moved rows are read by id, the deleted one is dropped."""
    store = hash_store(tmp_path / "m.lance")
    vectors = _vectors(60)
    for start in range(0, 60, 20):  # three fragments, so compaction moves rows
        store.upsert(
            [
                rec(f"r{i:03d}", f"row {i}", vector=list(vectors[i]))
                for i in range(start, start + 20)
            ]
        )
    ranking, rows = _ranked(store, vectors[45], 15)  # more than LanceDB's usual limit of 10
    assert ranking.ids[0] == "r045"
    other = hash_store(store.path)
    other.delete(ids=[ranking.ids[1]])
    other.maintain(force_optimize=True)
    gone = ranking.ids[1]
    hits = fuse({"vector": ranking}, 15, vectors[45], rrf_k=20, with_context=False)
    assert [h.record.id for h in hits] == [i for i in ranking.ids if i != gone]
    assert all(h.vector is not None and h.record.text.startswith("row ") for h in hits)
    found, _vecs = rows.records(ranking.positions, True)
    assert [r and r["id"] for r in found] == [i if i != gone else None for i in ranking.ids]
