from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from olav.memory.lifecycle.conflicts import history, remember
from olav.memory.lifecycle.decay import decay_weight, gc
from olav.memory.lifecycle.ops import Actor, edit, forget, pin
from olav.memory.recall.recaller import Recaller, RecallOptions
from olav.memory.store.scopes import EVERYONE
from tests.helpers import EVERY_ROW, hash_store, rec

OLD = datetime.now(UTC) - timedelta(days=90)


def test_decay_halves_with_age_spares_user_rows_and_slows_with_use() -> None:
    fresh = rec("a", "x", origin="agent", updated_at=datetime.now(UTC))
    old = rec("b", "x", origin="agent", updated_at=OLD)
    used = rec("c", "x", origin="agent", updated_at=OLD, access_count=20)
    user = rec("d", "x", origin="user", updated_at=OLD)
    pinned = rec("e", "x", origin="agent", updated_at=OLD, metadata={"pinned": True})
    assert decay_weight(fresh) > 0.99
    assert abs(decay_weight(old) - 0.5**3) < 1e-4
    assert decay_weight(old) < decay_weight(used) < 1.0
    assert decay_weight(user) == 1.0 and decay_weight(pinned) == 1.0


def test_decay_orders_equally_relevant_memories_by_age(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert(
        [
            rec(
                "old",
                "restart the snmp agent on the switch",
                category="expert_knowledge",
                updated_at=OLD,
            ),
            rec(
                "new",
                "restart the snmp agent on the switch!",
                category="expert_knowledge",
                updated_at=datetime.now(UTC),
            ),
        ]
    )
    recaller = Recaller(store, agent="x", options=RecallOptions(tier="large", bump_access=False))
    result = recaller.recall("restart the snmp agent on the switch", dry_run=True)
    assert [c.hit.record.id for c in result.candidates][:2] == ["new", "old"]
    pin(store, "old", Actor())
    result = recaller.recall("restart the snmp agent on the switch", dry_run=True)
    assert result.candidates[0].hit.record.id == "old"  # pinned: confidence 1.0, no decay


def test_supersede_chain_recalls_only_the_new_value(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    r1 = rec(
        "fact_r1_lo_v1",
        "R1 loopback is 10.255.1.1",
        origin="user",
        metadata={"subject": "r1_loopback"},
    )
    r2 = rec(
        "fact_r1_lo_v2",
        "R1 loopback is 10.255.9.9",
        origin="user",
        metadata={"subject": "r1_loopback"},
    )
    assert remember(store, r1, near_distance=0.0).action == "added"
    res = remember(store, r2, near_distance=0.0)
    assert res.action == "superseded" and res.replaced == ["fact_r1_lo_v1"]
    hits = [h.record.id for h in store.search("R1 loopback", k=5, filter=EVERY_ROW)]
    assert hits == ["fact_r1_lo_v2"]
    old = store.read("fact_r1_lo_v1", EVERYONE)
    assert old is not None and old.superseded_by == "fact_r1_lo_v2" and old.invalidated_at
    assert [r.id for r in history(store, "fact_r1_lo_v2")] == ["fact_r1_lo_v1", "fact_r1_lo_v2"]
    assert [r.id for r in history(store, "fact_r1_lo_v1")] == ["fact_r1_lo_v1", "fact_r1_lo_v2"]


def test_near_duplicates_are_merged_not_stored_twice(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    remember(
        store,
        rec("p1", "Reports use Markdown tables.", category="preference", confidence=0.7),
        near_distance=0.1,
    )
    res = remember(
        store,
        rec("p2", "reports use markdown tables", category="preference", confidence=0.9),
        near_distance=0.1,
    )
    assert res.action == "merged" and res.memory_id == "p1"
    assert store.size() == 1 and store.read("p1", EVERYONE).confidence == 0.9  # type: ignore[union-attr]


def test_ttl_expiry_and_gc_keep_counts_consistent(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    past = datetime.now(UTC) - timedelta(seconds=1)
    store.upsert(
        [
            rec("keep", "lasting"),
            rec("gone1", "temp one", expires_at=past),
            rec("gone2", "temp two", expires_at=past),
            rec("later", "temp three", expires_at=datetime.now(UTC) + timedelta(days=1)),
        ]
    )
    assert {h.record.id for h in store.search("temp", mode="fts", k=10, filter=EVERY_ROW)} == {
        "later"
    }
    report = gc(store)
    assert (report.rows_before, report.expired_purged, report.rows_after) == (4, 2, 2)
    assert {r.id for r in store.list_rows()} == {"keep", "later"}
    assert store.search("lasting", mode="fts", k=1, filter=EVERY_ROW)[0].record.id == "keep"


def test_soft_delete_and_edit_keep_history(tmp_path: Path) -> None:
    from olav.audit.db import migrate
    from olav.audit.recorder import AuditRecorder

    migrate(tmp_path / "a.duckdb")
    audit = AuditRecorder(tmp_path / "a.duckdb")
    store = hash_store(tmp_path / "m.lance")
    store.upsert([rec("f", "the NOC phone is 1234")])
    edit(store, "f", "the NOC phone is 5678", Actor(audit=audit))
    assert (
        store.search("NOC phone", k=1, filter=EVERY_ROW)[0].record.text == "the NOC phone is 5678"
    )
    forget(store, "f", Actor(audit=audit))
    assert (
        store.search("NOC phone", k=3, filter=EVERY_ROW) == []
        and store.read("f", EVERYONE) is not None
    )
    events = audit.query("SELECT action, detail FROM memory_events ORDER BY created_at")
    assert [e[0] for e in events] == ["edit", "delete"]
    assert json.loads(events[0][1])["old_text"] == "the NOC phone is 1234"
