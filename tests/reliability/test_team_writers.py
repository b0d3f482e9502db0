"""Three machines, one team table: three processes, each with its own workspace pointed at the
same ``s3://`` URI on a real S3-protocol server, prime the guides, capture events, record
lessons and upsert shared rows at once. No row is lost, no id is duplicated, and every process
then recalls what the others wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import HASH_CONFIG
from tests.s3server import team_config, write_workspace

ROUNDS = 3

WORKER = """
import json, sys
from pathlib import Path
from olav.admin.setup import init_workspace
from olav.core.config import Workspace
from olav.memory.ingest.capture import ToolEvent, capture
from olav.memory.recall.lessons import add_reflection
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from olav.memory.store import writes

me, rounds = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()  # the three machines start writing together
init_workspace(Path.cwd())
store = MemoryStore.for_workspace(Workspace.open())
wrote = []
for i in range(rounds):
    own = ToolEvent("core", "save_report", {"who": me, "n": i}, "ok", "success")
    shared = ToolEvent("core", "save_report", {"who": "everyone", "n": i}, "ok", "success")
    wrote += capture(store, [own, shared], question="", run_id=f"{me}-{i}")
    added, rid = add_reflection(store, f"lesson{me}x{i} check the vlan first", dedup_distance=0.0)
    wrote.append(rid)
    store.upsert([MemoryRecord(id=f"shared_{i}", text=f"shared fact {i} from {me}",
                               category="fact", scope="global")])
    store.upsert([MemoryRecord(id=f"own_{me}_{i}", text=f"fact{me}x{i} about bgp",
                               category="fact", scope="global")])
    wrote += [f"shared_{i}", f"own_{me}_{i}"]
print("written", flush=True)
sys.stdin.readline()  # the test says go once every machine has written
store = MemoryStore.for_workspace(Workspace.open())  # a fresh handle: the latest version
seen = {}
for other in "ABC":
    lessons = SearchFilter(categories=["reflection"], reader=EVERYONE)
    fact = SearchFilter(categories=["fact"], reader=EVERYONE)
    hits = store.search(f"lesson{other}x0", mode="fts", k=3, filter=lessons)
    facts = store.search(f"fact{other}x{rounds - 1}", mode="fts", k=3, filter=fact)
    seen[other] = [h.record.text for h in hits] + [h.record.id for h in facts]
print(json.dumps({"wrote": sorted(set(wrote)), "seen": seen, "retries": writes.stats["retries"]}))
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_three_machines_write_one_team_table(tmp_path: Path, s3_env: Any) -> None:
    uri = f"s3://{s3_env.bucket()}/olav/team"
    procs, logs = [], []
    for me in "ABC":
        logs.append((tmp_path / f"{me}.err").open("w"))
        root = write_workspace(tmp_path / me, team_config(s3_env.endpoint, uri, HASH_CONFIG))
        env = {k: v for k, v in os.environ.items() if not k.startswith("OLAV_")}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, me, str(ROUNDS)],
                cwd=root,
                env={**env, **s3_env.env},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=logs[-1],
                text=True,
            )
        )

    def barrier(expect: str) -> None:
        """Every machine has said ``expect``; then each is told to go on, at once."""
        for me, proc in zip("ABC", procs, strict=True):
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == expect, (tmp_path / f"{me}.err").read_text()[-3000:]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()

    barrier("ready")  # imported: all three write at once
    barrier("written")  # no one reads the others' writes before they are all written
    results = []
    for me, proc in zip("ABC", procs, strict=True):
        out, _ = proc.communicate(timeout=500)
        assert proc.returncode == 0, (tmp_path / f"{me}.err").read_text()[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    for log in logs:
        log.close()

    from olav.core.config import Workspace
    from olav.memory.store.table import MemoryStore

    store = MemoryStore.for_workspace(Workspace.open(tmp_path / "A"))
    ids = store.column_values(["id"]).column("id").to_pylist()
    assert len(ids) == len(set(ids)), "an id was stored twice"
    wrote = set().union(*(r["wrote"] for r in results))
    assert wrote <= set(ids), f"lost: {sorted(wrote - set(ids))[:5]}"
    guides = [i for i in ids if i.startswith("guide_")]
    assert guides, "the three inits primed no guide"
    assert len([i for i in ids if i.startswith("shared_")]) == ROUNDS
    assert len([i for i in ids if i.startswith("op_")]) == ROUNDS * 4  # 3 own + 1 shared each
    for me, result in zip("ABC", results, strict=True):
        for other in "ABC":
            found = result["seen"][other]
            assert any(f"lesson{other}x0 " in t for t in found), (me, other, found)
            assert f"own_{other}_{ROUNDS - 1}" in found, (me, other, found)
