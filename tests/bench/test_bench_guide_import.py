"""Benchmark of the memory layer: guides imported per second.

Run with ``make bench`` (``pytest -m bench -s``). Every benchmark prints Markdown tables and,
when ``OLAV_BENCH_OUT`` names a file, merges its numbers into that JSON file. The assertions
are sanity checks only (counts, recall); wall-clock times are reported, never asserted.
Results and their reading: docs/benchmarks.md.

Settings: ``OLAV_BENCH_OUT`` (JSON file).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.perf import write_guides
from olav.memory.ingest.guides import import_guides
from olav.memory.store.embedders import E5Embedder, HashEmbedder
from olav.memory.store.table import MemoryStore
from tests.bench.support import report
from tests.helpers import EVERY_ROW

pytestmark = pytest.mark.bench


# -- 1. guides imported per second -------------------------------------------------------------


@pytest.mark.timeout(900)
def test_bench_guide_import(tmp_path: Path) -> None:
    n = 1000
    root = tmp_path / "guides"
    files = write_guides(root, n)
    assert len(files) == n

    rows: list[list[Any]] = []
    for label, embedder in (
        ("e5 (multilingual-e5-small)", E5Embedder()),
        ("hash-384 (storage only)", HashEmbedder("hash-384")),
    ):
        store = MemoryStore(tmp_path / f"db-{embedder.name.split(':')[0]}", embedder)
        t0 = time.perf_counter()
        first = import_guides(store, files, base=root, prune_under=root)
        t_first = time.perf_counter() - t0
        assert not first.errors, [e.one_line() for e in first.errors]
        assert len(first.added) == n
        assert store.size() == n

        version = store.table.version
        t0 = time.perf_counter()
        again = import_guides(store, files, base=root, prune_under=root)
        t_again = time.perf_counter() - t0
        assert len(again.unchanged) == n
        assert not again.added and not again.updated and not again.pruned and not again.errors
        assert store.table.version == version, "a no-change re-import wrote to the table"

        hits = store.search("回滚 router", mode="fts", k=5, filter=EVERY_ROW)
        assert hits, "imported guides are not found by full-text search"
        rows.append([label, n, t_first, n / t_first, t_again * 1000.0])

    report(
        "guide_import",
        f"Guide import ({n} guides)",
        ["embedder", "guides", "first import s", "guides/s", "no-change re-import ms"],
        rows,
    )
