"""Three processes upserting overlapping ids must leave exactly one row per id."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from olav.memory.store.scopes import EVERYONE
from tests.helpers import EVERY_ROW, hash_store, rec


def _writer(path: str, worker: int, start: mp.synchronize.Event) -> None:  # type: ignore[name-defined]
    store = hash_store(Path(path))
    start.wait()
    for round_ in range(6):
        # every worker writes ids 0..39 (overlapping) plus a few of its own
        batch = [
            rec(f"shared{i}", f"shared row {i} from {worker} round {round_}") for i in range(40)
        ]
        batch += [rec(f"own{worker}_{round_}", f"private row {worker}")]
        store.upsert(batch)


def test_three_processes_upserting_overlapping_ids_leave_one_row_per_id(tmp_path: Path) -> None:
    path = tmp_path / "m.lance"
    hash_store(path)  # create the table first
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(path), w, start)) for w in range(3)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=240)
        assert p.exitcode == 0
    store = hash_store(path)
    ids = store.column_values(["id"]).column("id").to_pylist()
    assert len(ids) == len(set(ids)), "duplicate ids after concurrent upserts"
    assert len(ids) == 40 + 3 * 6


def _add_one(path: str) -> None:
    hash_store(Path(path)).upsert([rec("from_child", "written by another process")])


def test_a_reader_sees_another_processes_write(tmp_path: Path) -> None:
    path = tmp_path / "m.lance"
    reader = hash_store(path)
    assert reader.read("from_child", EVERYONE) is None
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_add_one, args=(str(path),))
    p.start()
    p.join(timeout=120)
    assert p.exitcode == 0
    assert reader.read("from_child", EVERYONE) is not None
    hits = reader.search("written by another process", mode="fts", k=1, filter=EVERY_ROW)
    assert hits and hits[0].record.id == "from_child"
