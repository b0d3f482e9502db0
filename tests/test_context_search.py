"""Schema 2: context windows, event times, the extra hybrid rankings and the migration."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from olav.core.errors import MemoryStoreError
from olav.memory.ingest.context import neighbour_windows
from olav.memory.recall.recaller import Recaller, RecallOptions
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import META_DIM, META_EMBEDDER, build_schema
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.search import SearchTuning
from olav.memory.store.table import MAX_FRAGMENTS, MemoryStore, reembed
from olav.memory.store.timeq import query_period
from tests.helpers import EVERY_ROW, hash_store, rec

NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)


def d(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


# -- periods named in a query -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "inside", "outside"),
    [
        ("What did Caroline do on 8 May 2023?", d(2023, 5, 12), d(2023, 5, 7)),
        ("what happened on May 8th, 2023", d(2023, 5, 8), d(2023, 5, 17)),
        ("incidents from 2024-02-03", d(2024, 2, 3, 23), d(2024, 2, 2)),
        ("2023年5月8日 的变更", d(2023, 5, 9), d(2023, 5, 1)),
        ("changes in June 2023", d(2023, 7, 20), d(2023, 8, 1)),
        ("2023年12月的备份", d(2024, 1, 5), d(2023, 11, 30)),
        ("trips in 2022", d(2023, 1, 31), d(2023, 2, 1)),
        ("昨天 备份失败了吗", d(2026, 11, 29, 9), d(2026, 11, 27)),
        ("what broke last week", d(2026, 11, 20), d(2026, 11, 28)),
        ("上个月的告警", d(2026, 10, 15), d(2026, 11, 20)),
        ("the deploy 3 days ago", d(2026, 11, 27, 10), d(2026, 11, 29, 12)),
    ],
)
def test_query_period_windows(query: str, inside: datetime, outside: datetime) -> None:
    period = query_period(query, now=NOW)
    assert period is not None
    assert period.contains(inside)
    assert not period.contains(outside)


def test_month_without_year_matches_any_year_and_may_the_verb_is_no_month() -> None:
    period = query_period("what did she paint in June?", now=NOW)
    assert period is not None and period.months == (6, 7)
    assert period.contains(d(2019, 7, 3)) and not period.contains(d(2019, 8, 1))
    assert query_period("you may restart the router now", now=NOW) is None
    assert query_period("restart nginx on web-01", now=NOW) is None
    assert query_period("on February 30, 2023", now=NOW) is None  # no such day


# -- context windows ----------------------------------------------------------------------------


def test_neighbour_windows_stay_in_their_group_and_keep_the_centre() -> None:
    texts = ["a1", "a2", "a3", "b1", "b2"]
    wins = neighbour_windows(texts, groups=[1, 1, 1, 2, 2], before=2, after=2)
    assert wins[0] == "a1\na2\na3"
    assert wins[2] == "a1\na2\na3"
    assert wins[3] == "b1\nb2"
    dated = neighbour_windows(texts, groups=[1, 1, 1, 2, 2], headers=["[1 May]"] * 5, after=0)
    assert dated[1] == "[1 May]\na1\na2"
    long = ["x" * 50, "centre", "y" * 50]
    trimmed = neighbour_windows(long, max_chars=70)
    assert "centre" in trimmed[1] and len(trimmed[1]) <= 70 + 1
    with pytest.raises(ValueError, match="groups"):
        neighbour_windows(texts, groups=[1])


# -- the store ----------------------------------------------------------------------------------


def turns_store(path: Path, *, with_context: bool) -> MemoryStore:
    store = hash_store(path)
    texts = [
        "We need a new cable for the core switch in rack four.",
        "Which one, the blue or the grey?",
        "Yes, the blue one.",
        "Fine, I will order it tomorrow.",
        "Lunch was great today.",
    ]
    wins = neighbour_windows(texts, before=2, after=2)
    store.upsert(
        [rec(f"t{i}", t, context=wins[i] if with_context else None) for i, t in enumerate(texts)]
        + [rec("g1", "Always label a switch port before you patch a new cable into it.")]
    )
    store.maintain(force_optimize=True)
    return store


def test_context_rankings_find_a_turn_by_its_surroundings(tmp_path: Path) -> None:
    plain = turns_store(tmp_path / "plain", with_context=False)
    hits = plain.search("core switch cable", k=10, filter=EVERY_ROW)
    assert "t2" not in {h.record.id for h in hits if h.fts_rank}  # its words miss the query
    assert all(set(h.ranks) <= {"vector", "fts"} for h in hits)

    ctx = turns_store(tmp_path / "ctx", with_context=True)
    hits = ctx.search("core switch cable", k=10, filter=EVERY_ROW)
    by_id = {h.record.id: h for h in hits}
    assert "context_fts" in by_id["t2"].ranks
    assert by_id["t2"].distance is not None  # a distance over its own text, for the gates
    stored = ctx.read("t2", EVERYONE, with_vector=True)
    assert stored is not None and stored.context_vector is not None
    assert not np.allclose(stored.vector, stored.context_vector)  # type: ignore[arg-type]


def test_a_memory_without_context_counts_its_text_twice(tmp_path: Path) -> None:
    store = turns_store(tmp_path / "m", with_context=True)
    hits = store.search("label the switch port", k=10, filter=EVERY_ROW)
    guide = next(h for h in hits if h.record.id == "g1")
    assert guide.record.context is None and set(guide.ranks) <= {"vector", "fts"}
    kk = store.rrf_k
    assert guide.score == pytest.approx(2 * sum(1 / (kk + r) for r in guide.ranks.values()))
    assert hits[0].record.id == "g1"


def test_context_equal_to_text_is_not_stored_and_edits_reembed_it(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m")
    store.upsert([rec("a", "same words", context="same words"), rec("b", "x", context="x y z")])
    a = store.read("a", EVERYONE, with_vector=True)
    assert a is not None and a.context is None and a.context_vector is None
    before = store.read("b", EVERYONE, with_vector=True)
    store.update("b", context="something else entirely")
    after = store.read("b", EVERYONE, with_vector=True)
    assert before is not None and after is not None
    assert not np.allclose(before.context_vector, after.context_vector)  # type: ignore[arg-type]


def test_a_named_period_adds_time_rankings_on_event_at(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m")
    store.upsert(
        [
            rec("may", "router firmware upgraded on the edge", event_at=d(2023, 5, 10)),
            rec("sep", "router firmware upgraded on the edge", event_at=d(2023, 9, 10)),
            rec("now", "router firmware upgraded at the edge site"),
        ]
    )
    store.maintain(force_optimize=True)
    hits = store.search("router firmware upgrade in May 2023", k=3, filter=EVERY_ROW)
    assert hits[0].record.id == "may"
    assert "time_vector" in hits[0].ranks and "time_fts" in hits[0].ranks
    assert all("time_vector" not in h.ranks for h in hits[1:])
    untimed = store.search(
        "router firmware upgrade in May 2023",
        k=3,
        filter=SearchFilter(time_aware=False, reader=EVERYONE),
    )
    assert all(set(h.ranks) <= {"vector", "fts"} for h in untimed)
    fresh = store.read("now", EVERYONE)
    assert fresh is not None and fresh.event_at == fresh.created_at  # the default


def test_nan_vectors_are_refused_before_any_write(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m")
    with pytest.raises(MemoryStoreError, match="NaN"):
        store.upsert([rec("a", "x", vector=[float("nan")] * 64)])
    with pytest.raises(MemoryStoreError, match="NaN"):
        store.insert_new([rec("b", "y", context="y z", context_vector=[float("inf")] * 64)])
    assert store.size() == 0


def test_a_schema_1_table_is_migrated_in_place_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "m"
    first = hash_store(path)
    first.upsert([rec("a", "backup the router config"), rec("b", "rotate api keys")])
    created = {r.id: r.created_at for r in first.list_rows()}
    # rebuild it as schema 1: the same rows without the three new columns
    name = first.embedder.name
    old_fields = [f for f in build_schema(64, name) if f.name not in NEW_COLUMNS]
    v1 = pa.schema(old_fields, metadata={META_EMBEDDER: name.encode(), META_DIM: b"64"})
    rows = first.table.search().select([f.name for f in old_fields]).to_arrow()
    db = lancedb.connect(str(path))
    db.drop_table("memory")
    db.create_table("memory", data=rows.cast(v1), schema=v1)
    assert "context" not in db.open_table("memory").schema.names

    store = hash_store(path)
    assert {"context", "context_vector", "event_at"} <= set(store.table.schema.names)
    assert store.size() == 2
    for r in store.list_rows():
        assert r.event_at == created[r.id] and r.context is None
    assert store.index_state()["context_fts"] is not None
    store.upsert([rec("c", "Yes, that one.", context="the router config backup\nYes, that one.")])
    store.maintain(force_optimize=True)
    assert [h.record.id for h in store.search("router config backup", k=3, filter=EVERY_ROW)][
        :1
    ] == ["a"]
    assert "c" in {h.record.id for h in store.search("router config backup", k=3, filter=EVERY_ROW)}


NEW_COLUMNS = ("context", "context_vector", "event_at")


def test_reembed_keeps_the_context_and_embeds_it_again(tmp_path: Path) -> None:
    path = tmp_path / "m"
    store = hash_store(path)
    store.upsert([rec("a", "alpha", context="before\nalpha\nafter"), rec("b", "beta")])
    rows, _backup = reembed(path, hash_store(tmp_path / "probe", dim=32).embedder)
    assert rows == 2
    again = MemoryStore(path, hash_store(tmp_path / "probe2", dim=32).embedder)
    a = again.read("a", EVERYONE, with_vector=True)
    b = again.read("b", EVERYONE, with_vector=True)
    assert a is not None and a.context == "before\nalpha\nafter"
    assert a.context_vector is not None and len(a.context_vector) == 32
    assert b is not None and b.context_vector is None and b.event_at == b.created_at


# -- keeping the table fast: scalar indexes, batched bumps, compaction ---------------------------


def test_scalar_indexes_exist_on_new_and_reopened_tables(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m")
    state = store.index_state()
    assert all(state.get(col) is not None for col in ("id", "scope", "category"))
    store.table.drop_index(state["scope"]["name"])
    assert hash_store(tmp_path / "m").index_state().get("scope") is not None


def test_many_small_writes_are_compacted_by_maintain(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m")
    for i in range(MAX_FRAGMENTS + 3):
        store.insert_new([rec(f"r{i}", "a zebra crossed" if i == 7 else f"event number {i}")])
    assert store.fragments() > MAX_FRAGMENTS and store.needs_maintenance()
    assert store.maintain()["optimized"]
    assert not store.needs_maintenance()
    assert store.size() == MAX_FRAGMENTS + 3
    assert (
        store.search("zebra", mode="fts", k=1, filter=EVERY_ROW)[0].record.id == "r7"
    )  # indexed after compaction


def test_recall_bumps_are_written_once_per_flush(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m")
    store.upsert([rec("g", "restart the nginx service", category="usage_guide")])
    recaller = Recaller(store, agent="global", options=RecallOptions(tier="large"))
    for _ in range(3):
        assert recaller.recall("restart nginx").injected_ids == ["g"]
    before = store.table.version
    assert store.read("g", EVERYONE).access_count == 0  # type: ignore[union-attr]
    recaller.flush()
    assert store.read("g", EVERYONE).access_count == 3  # type: ignore[union-attr]
    assert store.table.version == before + 1  # one write for the three recalls
    recaller.recall("restart nginx", dry_run=True)
    recaller.flush()
    assert store.read("g", EVERYONE).access_count == 3  # type: ignore[union-attr]


def test_maintain_rebuilds_an_ann_index_that_blocks_compaction(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m", tuning=SearchTuning(ann_threshold=300))
    store.upsert([rec(f"r{i}", f"row {i}") for i in range(400)])
    assert store.maintain(force_optimize=True)["ann_built"]
    rebuilt = False
    for i in range(40):  # each optimize leaves a fragment behind while the index is segmented
        store.bump_access([f"r{i}", f"r{i + 50}"])
        if store.needs_maintenance():
            rebuilt = store.maintain()["rebuilt"] or rebuilt
    assert rebuilt
    assert store.fragments() <= MAX_FRAGMENTS + 1
    assert store.size() == 400 and store.read("r3", EVERYONE).access_count == 1  # type: ignore[union-attr]
    assert store.search("row 7", mode="vector", k=1, filter=EVERY_ROW)[0].record.id == "r7"


def test_a_big_table_waits_for_gc_instead_of_optimizing_after_every_run(tmp_path: Path) -> None:
    import olav.memory.store.maintenance as store_module

    store = hash_store(tmp_path / "m", tuning=SearchTuning(ann_threshold=300))
    store.upsert([rec(f"r{i}", f"row {i}") for i in range(400)])
    store.maintain(force_optimize=True)
    old = store_module.REBUILD_ROWS
    store_module.REBUILD_ROWS = 100  # this table counts as big: no rebuild inside maintain()
    try:
        optimized = 0
        for i in range(60):
            store.bump_access([f"r{i}"])
            if store.needs_maintenance():
                optimized += 1
                assert not store.maintain()["rebuilt"]
        assert store.fragments() > MAX_FRAGMENTS  # stuck behind the ANN segments
        assert optimized < 30  # not after every write once stuck
    finally:
        store_module.REBUILD_ROWS = old
    from olav.memory.lifecycle.decay import gc

    gc(store)  # what `olav memory gc` and the nightly job do
    assert store.fragments() <= 2 and not store.needs_maintenance()
    assert store.size() == 400


def test_export_import_keeps_context_and_event_time(tmp_path: Path) -> None:
    from olav.memory.ingest.transfer import export_jsonl, import_jsonl

    src = hash_store(tmp_path / "a")
    src.upsert([rec("t", "Yes.", context="Ready?\nYes.", event_at=d(2024, 5, 8))])
    dump = tmp_path / "m.jsonl"
    export_jsonl(src, dump)
    dst = hash_store(tmp_path / "b")
    import_jsonl(dst, dump)
    a, b = src.read("t", EVERYONE, with_vector=True), dst.read("t", EVERYONE, with_vector=True)
    assert a is not None and b is not None
    assert (b.context, b.event_at) == ("Ready?\nYes.", d(2024, 5, 8))
    assert b.context_vector == a.context_vector
