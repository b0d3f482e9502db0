"""The snapshot on disk (olav.memory.store.snapfile): a cold read-only store answers from it without
importing lancedb, exactly as the in-process snapshot does, and never from a stale one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from olav.core.errors import EmbeddingDimMismatchError
from olav.memory.store import snapfile
from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.table import MemoryStore
from tests.helpers import EVERY_ROW
from tests.vcache_support import rows as _rows

QUERIES = ["router backup config", "备份 路由器", "disk alert cpu", "zebra"]

COLD = """
import json, sys
from pathlib import Path
import numpy as np
from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
store = MemoryStore(Path(sys.argv[1]), HashEmbedder("hash-64"), cold=True)
out = {"queries": []}
for q in json.loads(sys.argv[2]):
    hits = store.search(q, mode=sys.argv[3], k=8, filter=SearchFilter(reader=EVERYONE))
    out["queries"].append([[h.record.id, h.score, h.distance, h.fts_score, h.ranks] for h in hits])
out["lancedb"] = "lancedb" in sys.modules
out["opened"] = store._tbl is not None
out["count"] = store.size()  # opens the table: lancedb after its extension was loaded alone
print(json.dumps(out))
"""


def _cold(path: Path, mode: str = "hybrid", queries: list[str] = QUERIES) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", COLD, str(path), json.dumps(queries), mode],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _warm(store: MemoryStore, mode: str = "hybrid") -> list:
    out = []
    for q in QUERIES:
        hits = store.search(q, mode=mode, k=8, filter=EVERY_ROW)
        out.append([[h.record.id, h.score, h.distance, h.fts_score, h.ranks] for h in hits])
    return json.loads(json.dumps(out))


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "memory.lance", HashEmbedder("hash-64"))
    s.upsert(_rows(120))
    s.maintain(force_optimize=True)
    return s


@pytest.mark.parametrize("mode", ["hybrid", "fts", "vector"])
def test_a_cold_store_answers_from_disk_as_the_warm_snapshot_does(
    store: MemoryStore, mode: str
) -> None:
    assert store.persist_snapshot()
    assert snapfile.saved_version(store.path) == store.table.version
    want = _warm(store, mode)
    assert store.vcache.served > 0 and sum(len(w) for w in want) > 10
    got = _cold(store.path, mode)
    assert got["lancedb"] is False and got["opened"] is False
    assert got["queries"] == want
    assert got["count"] == 120


def test_a_write_after_the_snapshot_is_seen_by_the_next_cold_search(store: MemoryStore) -> None:
    assert store.persist_snapshot()
    assert _cold(store.path, "fts", ["quarantine"])["queries"] == [[]]
    writer = MemoryStore(store.path, HashEmbedder("hash-64"))  # as another process would
    writer.upsert(
        [
            MemoryRecord(
                id="fresh",
                text="quarantine the zebra",
                category="fact",
                scope="global",
                origin="user",
            )
        ]
    )
    got = _cold(store.path, "fts", ["quarantine"])
    assert [h[0] for h in got["queries"][0]] == ["fresh"]
    assert got["opened"] is True  # the stale snapshot was not read


def test_a_cold_store_sees_writes_made_after_it_opened(store: MemoryStore) -> None:
    assert store.persist_snapshot()
    cold = MemoryStore(store.path, HashEmbedder("hash-64"), cold=True)
    assert cold._tbl is None and cold.search("zebra quarantine", mode="fts", filter=EVERY_ROW) == []
    store.upsert(
        [
            MemoryRecord(
                id="fresh",
                text="zebra quarantine",
                category="fact",
                scope="global",
                origin="user",
            )
        ]
    )
    assert [h.record.id for h in cold.search("zebra quarantine", mode="fts", filter=EVERY_ROW)] == [
        "fresh"
    ]
    assert cold._tbl is not None


def test_persisting_again_rewrites_only_a_newer_version(store: MemoryStore) -> None:
    assert store.persist_snapshot()
    stamp = (store.path / snapfile.ROWS_FILE).stat().st_mtime_ns
    assert store.persist_snapshot()
    assert (store.path / snapfile.ROWS_FILE).stat().st_mtime_ns == stamp
    store.delete(ids=["m0001"])
    assert store.persist_snapshot()
    assert snapfile.saved_version(store.path) == store.table.version


def test_another_embedder_is_refused_as_without_the_snapshot(store: MemoryStore) -> None:
    assert store.persist_snapshot()
    with pytest.raises(EmbeddingDimMismatchError):
        MemoryStore(store.path, HashEmbedder("hash-32"), cold=True)


def test_a_damaged_snapshot_is_ignored(store: MemoryStore) -> None:
    assert store.persist_snapshot()
    (store.path / snapfile.POSTINGS_FILE).write_bytes(b"not a zip")
    cold = MemoryStore(store.path, HashEmbedder("hash-64"), cold=True)
    assert cold._tbl is not None  # opened the table instead
    want = [
        h.record.id for h in store.search("router backup", mode="vector", k=5, filter=EVERY_ROW)
    ]
    assert [
        h.record.id for h in cold.search("router backup", mode="vector", k=5, filter=EVERY_ROW)
    ] == want


def test_manifest_names_give_the_latest_version(tmp_path: Path) -> None:
    folder = tmp_path / "memory.lance" / "_versions"
    folder.mkdir(parents=True)
    assert snapfile.latest_version(tmp_path) is None
    for v in (1, 2, 7):
        (folder / f"{snapfile.U64_MAX - v:020d}.manifest").write_bytes(b"")
    (folder / ".tmp_abc.manifest").write_bytes(b"")
    (folder / "latest_version_hint.json").write_text('{"version": 99}')
    assert snapfile.latest_version(tmp_path) == 7
    old = tmp_path / "old"
    (old / "memory.lance" / "_versions").mkdir(parents=True)
    for v in (3, 12):
        (old / "memory.lance" / "_versions" / f"{v}.manifest").write_bytes(b"")
    assert snapfile.latest_version(old) == 12
    assert np.int64(snapfile.latest_version(old)) == 12
