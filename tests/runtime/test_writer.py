"""The background writer (olav.memory.store.writer): order, flush, exit and crash semantics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from olav.memory.store.writer import BackgroundWriter
from tests.helpers import EVERY_ROW

BATCH = 10

# a child that queues 200 batches of captures on the shared writer and reports each one the
# writer has committed; the parent kills it with SIGKILL after the third
CHILD = """
import sys
from pathlib import Path
from olav.memory.ingest.capture import CapturePlan, apply_capture
from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.table import MemoryStore
from olav.memory.store.writer import shared_writer

BATCH = BATCH_SIZE
store = MemoryStore(Path(sys.argv[1]), HashEmbedder("hash-64"))
batches = int(sys.argv[2])
for b in range(batches):
    plan = CapturePlan([MemoryRecord(id=f"op_{b}_{i}", text=f"restarted service {b} {i}",
                                     category="operational_event", scope="ops", origin="agent")
                        for i in range(BATCH)], [])
    future = shared_writer().submit("capture", apply_capture, store, plan)
    future.add_done_callback(lambda f, b=b: print(f"committed {b}", flush=True))
print("queued", shared_writer().pending(), flush=True)
""".replace("BATCH_SIZE", str(BATCH))


def _child(path: Path, batches: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(batches)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_jobs_run_in_order_and_a_failure_is_reported_not_raised() -> None:
    writer = BackgroundWriter("test-writer")
    seen: list[int] = []
    gate = threading.Event()
    writer.submit("gate", gate.wait)
    for i in range(5):
        writer.submit("append", seen.append, i)
    writer.submit("boom", lambda: 1 / 0)
    writer.submit("append", seen.append, 5)
    assert writer.pending() == 8 and seen == []  # nothing ran while the first job waited
    gate.set()
    errors = writer.flush(timeout=30)
    assert seen == [0, 1, 2, 3, 4, 5]
    assert [type(e) for e in errors] == [ZeroDivisionError]
    assert writer.pending() == 0


def test_a_clean_exit_writes_everything_queued(tmp_path: Path) -> None:
    path = tmp_path / "memory.lance"
    child = _child(path, 5)
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0
    queued = next(line for line in out.splitlines() if line.startswith("queued"))
    assert int(queued.split()[1]) > 0  # the script ended with writes still queued
    store = MemoryStore(path, HashEmbedder("hash-64"))
    assert store.size() == 5 * BATCH


def test_kill_9_loses_only_queued_writes_and_corrupts_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.lance"
    child = _child(path, 200)
    assert child.stdout is not None
    committed: list[int] = []
    for line in child.stdout:
        if line.startswith("committed"):
            committed.append(int(line.split()[1]))
            if len(committed) == 3:
                os.kill(child.pid, signal.SIGKILL)
                break
    child.wait(timeout=60)
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    store = MemoryStore(path, HashEmbedder("hash-64"))  # opens, and the write lock is free
    ids = [r.id for r in store.list_rows()]
    assert len(ids) == len(set(ids))
    batches = {rid.split("_")[1] for rid in ids}
    # every write reported committed is there; any other write is whole or absent
    assert {str(b) for b in committed} <= batches
    assert len(ids) == BATCH * len(batches)
    assert len(batches) < 200, "the queued writes were lost, as documented"
    assert [h.record.id for h in store.search("restarted service 0 1", k=1, filter=EVERY_ROW)]
    store.upsert(  # and it takes writes again
        [MemoryRecord(id="after", text="after", category="fact", scope="ops", origin="user")]
    )
    assert store.read("after", EVERYONE) is not None
