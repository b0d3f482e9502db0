"""kill -9 in the middle of writes: `olav kb import-guides`, `olav kb re-embed`, `olav memory gc`.

Each test starts the real CLI, polls the table's files until the process has started writing,
SIGKILLs it, then checks that the store opens, search works in every mode, the rows are exactly
the old or exactly the new state (never a mix, never duplicates), and that re-running the same
command completes. Leftovers (the lock file, a half-built re-embed table, a swap interrupted
between its two renames) are checked with `olav doctor`.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import lancedb
import pytest

from olav.core.config import Workspace
from olav.core.errors import EmbeddingDimMismatchError
from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.schema import build_schema, now
from olav.memory.store.table import MemoryStore, reembed
from tests.helpers import EVERY_ROW, hash_store, olav_entry, rec, write_config
from tests.reliability._support import (
    HASH32_CONFIG,
    assert_no_crash,
    kill_when,
    make_workspace,
    memory_path,
    mixed_records,
    snapshot,
    start_olav,
    table_dir,
)

pytestmark = pytest.mark.slow


def _count(folder: Path) -> int:
    try:
        return len(os.listdir(folder))
    except FileNotFoundError:
        return 0


def _ids(store: MemoryStore) -> list[str]:
    return store.column_values(["id"]).column("id").to_pylist()


def _search_works(store: MemoryStore, query: str) -> None:
    for mode in ("vector", "fts", "hybrid"):
        assert store.search(query, mode=mode, k=5, filter=EVERY_ROW), mode


def _write_guides(folder: Path, n: int) -> set[str]:
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"bulk_{i:03d}.guide.yaml").write_text(
            f"intent: bulk_{i:03d}\nagent: core\nkeywords: [bulk, item{i}]\n"
            f"body: |\n  Bulk guide number {i}: check the uplink before step {i}.\n"
        )
    return {f"guide_core_bulk_{i:03d}" for i in range(n)}


def test_kill_during_import_guides(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    new_ids = _write_guides(root / "bulk", 300)
    old_ids = set(_ids(hash_store(memory_path(root))))
    data = table_dir(root) / "data"
    n0 = _count(data)

    proc = start_olav("kb", "import-guides", "bulk", cwd=root)
    assert kill_when(proc, lambda: _count(data) > n0), "import finished before it was killed"

    store = hash_store(memory_path(root))
    ids = _ids(store)
    assert len(ids) == len(set(ids)), "duplicate ids after a crash"
    assert set(ids) in (old_ids, old_ids | new_ids), "a partial import is visible"
    _search_works(store, "bulk guide uplink")

    again = olav_entry(root, "kb", "import-guides", "bulk")
    assert again.returncode == 0, again.stdout + again.stderr
    assert_no_crash(again)
    ids = _ids(hash_store(memory_path(root)))
    assert len(ids) == len(set(ids)) and set(ids) == old_ids | new_ids


def _reembed_ws(tmp_path: Path) -> tuple[Path, dict[str, dict[str, object]]]:
    root = make_workspace(tmp_path / "ws", prime=False)
    store = MemoryStore.for_workspace(Workspace.open(root))
    store.upsert(mixed_records(100))
    store.maintain(force_optimize=True)
    before = snapshot(store)
    write_config(root, HASH32_CONFIG)
    return root, before


def _open_whichever(root: Path) -> MemoryStore:
    """The store in whatever state it is: new (hash-32) or old (hash-64)."""
    try:
        return MemoryStore.for_workspace(Workspace.open(root))
    except EmbeddingDimMismatchError:
        return hash_store(memory_path(root), 64)


def test_kill_during_reembed(tmp_path: Path) -> None:
    root, before = _reembed_ws(tmp_path)
    building = memory_path(root) / "memory_reembed.lance" / "data"

    proc = start_olav("kb", "re-embed", "--yes", cwd=root)
    assert kill_when(proc, lambda: _count(building) > 0), "re-embed finished before the kill"

    store = _open_whichever(root)
    assert store.embedder.dim in (32, 64)
    assert snapshot(store) == before
    _search_works(store, "user fact 7")

    again = olav_entry(root, "kb", "re-embed", "--yes")
    assert again.returncode == 0, again.stdout + again.stderr
    store = MemoryStore.for_workspace(Workspace.open(root))
    assert store.embedder.dim == 32 and snapshot(store) == before
    assert "memory_reembed" not in lancedb.connect(str(memory_path(root))).list_tables().tables
    _search_works(store, "user fact 7")


def test_kill_during_gc(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    store = hash_store(memory_path(root))
    past = now() - timedelta(hours=1)
    for batch in range(30):  # many small fragments, so that compaction has work to do
        store.upsert(
            [rec(f"live_{batch}_{i}", f"live note {batch} {i} uplink") for i in range(40)]
            + [
                rec(f"gone_{batch}_{i}", f"expired note {batch} {i}", expires_at=past)
                for i in range(10)
            ]
        )
    ids = set(_ids(store))
    live = {i for i in ids if not i.startswith("gone_")}
    data = table_dir(root) / "data"
    n0 = _count(data)

    proc = start_olav("memory", "gc", cwd=root)
    assert kill_when(proc, lambda: _count(data) > n0), "gc finished before it was killed"

    store = hash_store(memory_path(root))
    after = _ids(store)
    assert len(after) == len(set(after))
    assert set(after) in (ids, live)
    _search_works(store, "live note uplink")

    again = olav_entry(root, "memory", "gc")
    assert again.returncode == 0, again.stdout + again.stderr
    assert set(_ids(hash_store(memory_path(root)))) == live


def test_doctor_passes_with_a_leftover_lock_and_half_built_reembed(hash_ws: Path) -> None:
    path = memory_path(hash_ws)
    lock = Path(str(path) + ".lock")
    lock.touch()  # filelock leaves the file behind; only a held flock means anything
    rows = hash_store(path).size()
    half = lancedb.connect(str(path)).create_table(
        "memory_reembed", schema=build_schema(32, "hash:hash-32")
    )
    half.add([{**rec("x", "half built").to_row(), "vector": [0.1] * 32}])

    result = olav_entry(hash_ws, "doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_no_crash(result)
    assert f"{rows} rows in memory.lance" in result.stdout

    done, _ = reembed(path, HashEmbedder("hash-32"))  # drops the leftover and completes
    assert done == rows and hash_store(path, 32).size() == rows


def test_doctor_recovers_a_swap_interrupted_between_the_renames(hash_ws: Path) -> None:
    path = memory_path(hash_ws)
    before = snapshot(hash_store(path))
    reembed(path, HashEmbedder("hash-32"))
    (path / "memory.lance").rename(path / "memory_reembed.lance")  # the crash point
    write_config(hash_ws, HASH32_CONFIG)

    result = olav_entry(hash_ws, "doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(before)} rows in memory.lance" in result.stdout
    store = hash_store(path, 32)
    assert snapshot(store) == before
    _search_works(store, "backup router")


def test_reembed_rerun_after_a_swap_interrupted_between_the_renames(tmp_path: Path) -> None:
    path = tmp_path / "m.lance"
    hash_store(path, 64).upsert([rec(f"r{i}", f"row {i}") for i in range(5)])
    reembed(path, HashEmbedder("hash-32"))
    (path / "memory.lance").rename(path / "memory_reembed.lance")  # the crash point
    rows, _ = reembed(path, HashEmbedder("hash-32"))
    assert rows == 5 and hash_store(path, 32).size() == 5
