"""No silent embedder switch: after olav.yaml changes the embedder, every memory command refuses
with the mismatch error and the rows stay intact; `olav kb re-embed` rebuilds the same rows at
the new dimension and keeps the old table as a backup that still opens."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path

import lancedb
import numpy as np
import pytest

from olav.core.config import Workspace
from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.table import MemoryStore, reembed
from tests.helpers import EVERY_ROW, hash_store, olav_entry, rec, write_config
from tests.reliability._support import (
    HASH32_CONFIG,
    assert_one_line_error,
    make_workspace,
    memory_path,
    memory_state,
    mixed_records,
    snapshot,
)

REFUSING = [
    ("memory", "stats"),
    ("memory", "search", "router backup"),
    ("memory", "list"),
    ("kb", "import-guides"),
    ("init",),  # the one command with a (directive-only) re-prime path must refuse too
]


def test_switch_refuses_everywhere_then_reembed_keeps_every_row(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", prime=False)
    store = MemoryStore.for_workspace(Workspace.open(root))
    store.upsert(mixed_records(100))
    store.bump_access(["user_001", "op_002", "guide_core_seed_003"])
    store.maintain(force_optimize=True)
    before = snapshot(store)
    assert len(before) == 300
    assert Counter(r["origin"] for r in before.values()) == {
        "user": 100,
        "agent": 100,
        "directive": 100,
    }
    state = memory_state(root)

    write_config(root, HASH32_CONFIG)
    for args in REFUSING:
        result = olav_entry(root, *args)
        assert_one_line_error(
            result, "hash:hash-64 (64-d)", "hash:hash-32 (32-d)", "olav kb re-embed"
        )
        assert memory_state(root) == state, args
    assert snapshot(hash_store(memory_path(root), 64)) == before

    result = olav_entry(root, "kb", "re-embed", "--yes")
    assert result.returncode == 0, result.stderr
    assert "re-embedded 300 rows with hash:hash-32" in result.stdout

    new = MemoryStore.for_workspace(Workspace.open(root))
    assert new.embedder.dim == 32
    assert snapshot(new) == before  # same ids, text, metadata, times and counters
    rows = sorted(new.list_rows(with_vector=True), key=lambda r: r.id)
    expected = HashEmbedder("hash-32").embed_passages([r.text for r in rows])
    got = np.asarray([r.vector for r in rows], dtype=np.float32)
    assert got.shape == (300, 32)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    for mode in ("vector", "fts", "hybrid"):
        hits = new.search(before["user_007"]["text"], mode=mode, k=3, filter=EVERY_ROW)
        assert "user_007" in [h.record.id for h in hits], mode

    (backup,) = new.backups()
    assert backup in result.stdout
    old = lancedb.connect(str(memory_path(root))).open_table(backup)
    assert old.count_rows() == 300
    assert (old.schema.metadata or {})[b"olav.embedder"] == b"hash:hash-64"


class _FrozenDatetime(datetime):
    @classmethod
    def now(cls, tz=None):  # type: ignore[no-untyped-def, override]
        return datetime(2026, 11, 30, 4, 0, 0, tzinfo=tz)


def test_two_reembeds_within_one_second_keep_two_backups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import olav.memory.store.connection as store_mod

    monkeypatch.setattr(store_mod, "datetime", _FrozenDatetime)
    path = tmp_path / "m.lance"
    hash_store(path, 64).upsert([rec(f"r{i}", f"row {i}") for i in range(5)])
    _, first = reembed(path, HashEmbedder("hash-32"))
    _, second = reembed(path, HashEmbedder("hash-64"))
    assert first != second
    store = hash_store(path, 64)
    assert store.size() == 5 and sorted(store.backups()) == sorted([first, second])
