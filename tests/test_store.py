from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from olav.core.errors import EmbeddingDimMismatchError, MemoryStoreError
from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import now
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.search import SearchTuning
from olav.memory.store.table import MemoryStore, drop_backup, reembed
from tests.helpers import EVERY_ROW, hash_store, rec


def test_upsert_is_idempotent_and_keeps_access_count_and_created_at(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    first = store.upsert([rec("a", "router backup"), rec("b", "delete user")])
    assert sorted(first.added) == ["a", "b"]
    store.bump_access(["a"])
    store.bump_access(["a"])
    created = store.read("a", EVERYONE).created_at  # type: ignore[union-attr]
    second = store.upsert([rec("a", "router backup, revised")])
    assert second.updated == ["a"] and not second.added
    row = store.read("a", EVERYONE)
    assert row is not None
    assert row.access_count == 2
    assert row.created_at == created
    assert row.text == "router backup, revised"
    assert store.size() == 2


def test_update_reembeds_and_delete_by_predicate(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert([rec("a", "alpha"), rec("b", "beta", scope="netops"), rec("c", "gamma")])
    before = store.read("a", EVERYONE, with_vector=True)
    store.update("a", text="completely different words")
    after = store.read("a", EVERYONE, with_vector=True)
    assert before is not None and after is not None
    assert not np.allclose(before.vector, after.vector)  # type: ignore[arg-type]
    assert store.delete(where="scope = 'netops'") == 1
    assert store.read("b", EVERYONE) is None
    assert store.delete(ids=["a", "zzz"]) == 1
    assert [r.id for r in store.list_rows()] == ["c"]


def test_invalid_record_is_rejected_before_anything_is_written(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    with pytest.raises(MemoryStoreError, match="unknown category 'facts'"):
        store.upsert([rec("ok", "fine"), rec("bad", "x", category="facts")])
    with pytest.raises(MemoryStoreError, match="8-d vector"):
        store.upsert([rec("v", "x", vector=[0.1] * 8)])
    assert store.size() == 0


def test_search_modes_report_distance_fts_score_and_fused_score(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert(
        [
            rec("r1", "backup the router configuration nightly"),
            rec("r2", "rotate the api credentials"),
            rec("r3", "router interface errors on uplink"),
        ]
    )
    store.maintain(force_optimize=True)
    hybrid = store.search("router backup", mode="hybrid", k=3, filter=EVERY_ROW)
    assert hybrid[0].record.id == "r1"
    top = hybrid[0]
    assert top.distance is not None and top.fts_score is not None
    kk = store.rrf_k
    expected = 1 / (kk + top.vector_rank) + 1 / (kk + top.fts_rank)  # type: ignore[operator]
    assert top.score == pytest.approx(expected)
    assert all(h.distance is not None for h in hybrid)  # FTS-only hits get distances too
    vec = store.search("router backup", mode="vector", k=2, filter=EVERY_ROW)
    assert len(vec) == 2 and all(h.fts_score is None for h in vec)
    fts = store.search("credentials", mode="fts", k=5, filter=EVERY_ROW)
    assert [h.record.id for h in fts] == ["r2"]
    with pytest.raises(MemoryStoreError, match="unknown search mode"):
        store.search("x", mode="semantic", filter=EVERY_ROW)


def test_selective_prefilter_still_fills_k(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    noise = [rec(f"n{i}", f"router backup config item {i}", scope="other") for i in range(300)]
    wanted = [rec(f"w{i}", f"unrelated words {i}", scope="netops") for i in range(6)]
    store.upsert(noise + wanted)
    for mode in ("vector", "hybrid"):
        hits = store.search(
            "router backup config",
            mode=mode,
            k=5,
            filter=SearchFilter(scopes=["netops"], reader=EVERYONE),
        )
        assert len(hits) == 5, mode
        assert {h.record.scope for h in hits} == {"netops"}


def test_expired_and_invalidated_rows_are_never_returned(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert(
        [
            rec("live", "snapshot lesson one"),
            rec("expired", "snapshot lesson two", expires_at=now() - timedelta(seconds=5)),
            rec("future", "snapshot lesson three", expires_at=now() + timedelta(days=1)),
            rec("invalid", "snapshot lesson four", invalidated_at=now()),
        ]
    )
    for mode in ("vector", "fts", "hybrid"):
        ids = {
            h.record.id for h in store.search("snapshot lesson", mode=mode, k=10, filter=EVERY_ROW)
        }
        assert ids == {"live", "future"}, mode
    everything = store.search(
        "snapshot lesson", k=10, filter=SearchFilter(include_invalid=True, reader=EVERYONE)
    )
    assert len(everything) == 4


def test_fts_finds_chinese_substring_words_with_icu(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert([rec("zh", "备份路由器配置"), rec("en", "delete a user account")])
    store.maintain(force_optimize=True)
    hits = store.search("备份", mode="fts", k=5, filter=EVERY_ROW)
    assert [h.record.id for h in hits] == ["zh"]


def test_row_written_after_index_build_is_found_by_fts(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert([rec("old", "existing row about switches")])
    store.maintain(force_optimize=True)
    assert store.index_state()["fts"]["unindexed"] == 0
    store.upsert([rec("new", "freshly written zebra firmware note")])
    hits = store.search("zebra firmware", mode="fts", k=5, filter=EVERY_ROW)
    assert [h.record.id for h in hits] == ["new"]


def test_hostile_queries_do_not_crash(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert([rec("a", 'it\'s a "quoted" (weird) AND OR NOT text: *')])
    for q in ["", "'", "' OR 1=1 --", '"unterminated', "AND", "a:b", "*", "(((", "\x00"]:
        store.search(q, k=3, filter=EVERY_ROW)
    hits = store.search("x", k=3, filter=SearchFilter(scopes=["it's"], reader=EVERYONE))
    assert hits == []


def test_dimension_or_model_mismatch_fails_and_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "m.lance"
    store = hash_store(path, dim=64)
    store.upsert([rec("a", "keep me")])
    with pytest.raises(EmbeddingDimMismatchError) as err:
        hash_store(path, dim=32)
    msg = str(err.value)
    assert "hash:hash-64 (64-d)" in msg and "hash:hash-32 (32-d)" in msg
    assert "olav kb re-embed" in msg
    assert hash_store(path, dim=64).read("a", EVERYONE) is not None  # nothing was dropped


def test_destructive_migration_only_when_explicitly_allowed(tmp_path: Path) -> None:
    path = tmp_path / "m.lance"
    hash_store(path, dim=64).upsert([rec("a", "gone after opt-in")])
    store = MemoryStore(path, HashEmbedder("hash-32"), allow_destructive=True)
    assert store.size() == 0
    assert store.embedder.dim == 32


def test_reembed_swaps_in_complete_table_and_keeps_backup(tmp_path: Path) -> None:
    path = tmp_path / "m.lance"
    old = hash_store(path, dim=64)
    old.upsert([rec(f"r{i}", f"memory token{i}") for i in range(70)])
    old.bump_access(["r1"])
    seen: list[tuple[int, int]] = []
    rows, backup = reembed(path, HashEmbedder("hash-32"), progress=lambda d, t: seen.append((d, t)))
    assert rows == 70 and seen[-1] == (70, 70) and len(seen) == 2
    new = hash_store(path, dim=32)
    assert new.size() == 70
    assert new.read("r1", EVERYONE).access_count == 1  # type: ignore[union-attr]
    assert new.search("token5", mode="fts", k=1, filter=EVERY_ROW)[0].record.id == "r5"
    assert new.backups() == [backup]
    drop_backup(path, backup)
    assert new.backups() == []


def test_interrupted_swap_is_recovered_on_open(tmp_path: Path) -> None:
    path = tmp_path / "m.lance"
    hash_store(path, dim=64).upsert([rec("a", "x")])
    reembed(path, HashEmbedder("hash-32"))
    # simulate a crash between the two renames: the new table is still under its build name
    (path / "memory.lance").rename(path / "memory_reembed.lance")
    store = hash_store(path, dim=32)
    assert store.read("a", EVERYONE) is not None


def test_ann_index_is_built_past_the_threshold(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance", tuning=SearchTuning(ann_threshold=600))
    rng = np.random.default_rng(0)
    rows = []
    for i in range(500):
        v = rng.normal(size=64).astype(np.float32)
        rows.append(rec(f"r{i}", f"row {i}", vector=list(v / np.linalg.norm(v))))
    store.upsert(rows)
    assert store.maintain()["ann_built"] is False
    store.upsert([rec(f"x{i}", f"extra {i}") for i in range(120)])
    assert store.maintain()["ann_built"] is True
    assert store.index_state()["vector"] is not None
    q = np.asarray(rows[7].vector, dtype=np.float32)
    assert (
        store.search("", mode="vector", k=1, query_vector=q, filter=EVERY_ROW)[0].record.id == "r7"
    )
