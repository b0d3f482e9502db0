"""Capacity with cold storage: a bounded category's lowest-value live rows move to the archive
table, are never recalled, can be listed and restored, and a kill in the middle of a move
loses no row. Guides and pinned rows are never archived."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from olav.audit.db import migrate
from olav.audit.queries import memory_decisions
from olav.audit.recorder import AuditRecorder
from olav.core.config import Config, Workspace
from olav.core.errors import ConfigError
from olav.memory.lifecycle.archive import Archive, enforce_capacity, restore
from olav.memory.policy import DEFAULTS, MemoryPolicy, policy_for
from olav.memory.recall.lessons import add_reflection
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from tests.helpers import (
    EVERY_ROW,
    HASH_CONFIG,
    OlavCli,
    hash_store,
    olav_entry,
    olav_here,
    rec,
    write_config,
)

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py)

OLD = datetime.now(UTC) - timedelta(days=90)


def _bounded(**caps: int) -> MemoryPolicy:
    return MemoryPolicy(capacity={**DEFAULTS.capacity, **caps})


def _facts(store: MemoryStore) -> None:
    store.upsert(
        [
            rec("keep_used", "vlan 10 is voice", category="fact", access_count=9, updated_at=OLD),
            rec("keep_sure", "vlan 20 is data", category="fact", confidence=0.9),
            rec("drop_old", "vlan 30 was guests", category="fact", confidence=0.3, updated_at=OLD),
            rec("drop_unsure", "vlan 40 may be lab", category="fact", confidence=0.2),
            rec(
                "pinned",
                "vlan 50 is mgmt",
                category="fact",
                confidence=0.1,
                updated_at=OLD,
                metadata={"pinned": True},
            ),
        ]
    )


def test_the_lowest_value_rows_go_to_the_archive_and_are_never_recalled(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    _facts(store)
    migrate(tmp_path / "audit.duckdb")
    audit = AuditRecorder(tmp_path / "audit.duckdb")
    assert enforce_capacity(store, DEFAULTS) == []  # unbounded: nothing moves
    moved = enforce_capacity(store, _bounded(fact=3), log=audit, run_id="r1")
    assert sorted(moved) == ["drop_old", "drop_unsure"]
    assert {r.id for r in store.list_rows()} == {"keep_used", "keep_sure", "pinned"}
    archived = {r.id: r for r in Archive(store).rows()}
    assert set(archived) == {"drop_old", "drop_unsure"}
    assert archived["drop_old"].vector is not None and archived["drop_old"].confidence == 0.3
    hits = store.search("vlan guests lab", mode="hybrid", k=10, filter=EVERY_ROW)
    assert not {h.record.id for h in hits} & set(archived)
    log = memory_decisions(audit.path, kinds=("lifecycle",), limit=10)
    assert sorted(d["memory_id"] for d in log) == ["drop_old", "drop_unsure"]
    assert all(d["action"] == "archived" and "capacity 3" in d["reason"] for d in log)
    # restore puts a row back as it was (vector, counts); the archive no longer holds it
    assert restore(store, ["drop_old"], log=audit) == ["drop_old"]
    back = store.read("drop_old", EVERYONE, with_vector=True)
    assert back is not None and back.vector == archived["drop_old"].vector
    assert (back.confidence, back.updated_at) == (0.3, archived["drop_old"].updated_at)
    assert {r.id for r in Archive(store).rows()} == {"drop_unsure"}
    assert memory_decisions(audit.path, kinds=("lifecycle",), limit=1)[0]["action"] == "restored"


def test_guides_and_pinned_rows_are_never_archived(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert(
        [rec(f"g{i}", f"guide {i}", category="usage_guide", confidence=0.1) for i in range(3)]
        + [
            rec(f"p{i}", f"pinned {i}", category="preference", metadata={"pinned": True})
            for i in range(3)
        ]
    )
    assert enforce_capacity(store, _bounded(preference=1)) == []  # all pinned
    assert store.size() == 6
    path = tmp_path / "olav.yaml"
    path.write_text("memory:\n  policy:\n    capacity: {usage_guide: 1}\n")
    with pytest.raises(ConfigError, match="guides are never archived"):
        policy_for(Config.load(path, environ={}))


def test_a_write_over_capacity_archives_at_once(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    policy = _bounded(reflection=2)
    for text in ("check the vault token first", "retry the backup once", "read the cron log"):
        add_reflection(store, text, dedup_distance=0.0, policy=policy)
    assert len(store.list_rows("category = 'reflection'")) == 2
    assert len(Archive(store).rows()) == 1


KILL_MID_MOVE = """
import os, signal, sys
from olav.memory.lifecycle import archive
from olav.memory.policy import DEFAULTS, MemoryPolicy
from tests.helpers import hash_store

store = hash_store(sys.argv[1])
archive.between_copy_and_delete = lambda: os.kill(os.getpid(), signal.SIGKILL)
archive.enforce_capacity(store, MemoryPolicy(capacity={**DEFAULTS.capacity, "fact": 3}))
"""


def test_a_kill_in_the_middle_of_a_move_loses_no_row(tmp_path: Path) -> None:
    path = tmp_path / "m.lance"
    store = hash_store(path)
    _facts(store)
    every = {r.id for r in store.list_rows()}
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "-c", KILL_MID_MOVE, str(path)], cwd=root, capture_output=True
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    store = hash_store(path)
    live, cold = {r.id for r in store.list_rows()}, {r.id for r in Archive(store).rows()}
    assert live | cold == every  # copied, not yet deleted: in both tables, lost from neither
    assert cold == {"drop_old", "drop_unsure"} and cold <= live
    # the next pass finishes the move
    assert enforce_capacity(store, _bounded(fact=3)) == []
    live, cold = {r.id for r in store.list_rows()}, {r.id for r in Archive(store).rows()}
    assert live == {"keep_used", "keep_sure", "pinned"} and cold == {"drop_old", "drop_unsure"}


def test_olav_memory_archive_list_and_restore(hash_ws: Path, olav: OlavCli) -> None:
    write_config(hash_ws, HASH_CONFIG + "memory:\n  policy:\n    capacity: {fact: 3}\n")
    ws = Workspace.open(hash_ws)
    store = MemoryStore.for_workspace(ws)
    _facts(store)
    res = olav("memory", "gc")
    assert res.exit_code == 0, res.output
    listed = olav("memory", "archive", "list")
    assert "drop_old" in listed.output and "drop_unsure" in listed.output
    data = json.loads(olav("memory", "archive", "list", "--json").output)
    assert sorted(r["id"] for r in data) == ["drop_old", "drop_unsure"]
    assert olav("memory", "archive", "restore", "drop_old").exit_code == 0
    assert store.read("drop_old", EVERYONE) is not None
    assert olav("memory", "archive", "restore", "nope").exit_code != 0
    kinds = json.loads(olav("memory", "log", "--kind", "lifecycle", "--json").output)
    assert {d["action"] for d in kinds} >= {"archived", "restored", "collected"}


def test_each_scope_is_bounded_apart(tmp_path: Path) -> None:
    """One operator's many private rows never push out another's, nor the shared ones."""
    store = hash_store(tmp_path / "m.lance")
    store.upsert(
        [rec(f"alice{i}", f"alice note {i}", scope="user:alice") for i in range(5)]
        + [rec("bob0", "bob note", scope="user:bob", confidence=0.1, updated_at=OLD)]
        + [rec(f"team{i}", f"team note {i}", scope="global") for i in range(2)]
    )
    moved = enforce_capacity(store, _bounded(fact=2))
    assert sorted(moved) == ["alice0", "alice1", "alice2"]  # equal value: the oldest ids go
    live = {r.id for r in store.list_rows()}
    assert live == {"alice3", "alice4", "bob0", "team0", "team1"}


KILL_MID_RESTORE = """
import os, signal, sys
from olav.memory.lifecycle import archive
from tests.helpers import hash_store

store = hash_store(sys.argv[1])
archive.between_restore_and_delete = lambda: os.kill(os.getpid(), signal.SIGKILL)
archive.restore(store, ["drop_old"])
"""


def test_a_kill_in_the_middle_of_a_restore_is_finished_not_undone(tmp_path: Path) -> None:
    path = tmp_path / "m.lance"
    store = hash_store(path)
    _facts(store)
    enforce_capacity(store, _bounded(fact=3))
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "-c", KILL_MID_RESTORE, str(path)], cwd=root, capture_output=True
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    store = hash_store(path)
    assert "drop_old" in {r.id for r in store.list_rows()}
    assert "drop_old" in {r.id for r in Archive(store).rows()}  # in both: marked as restoring
    listed = {r.id: r for r in Archive(store).rows(marked=False)}
    assert "archive_restoring" not in listed["drop_old"].metadata
    # the next pass finishes the restore (a restore, not a move, was cut off)
    assert enforce_capacity(store, _bounded(fact=4)) == []
    live, cold = {r.id for r in store.list_rows()}, {r.id for r in Archive(store).rows()}
    assert live == {"keep_used", "keep_sure", "pinned", "drop_old"} and cold == {"drop_unsure"}
    back = store.read("drop_old", EVERYONE)
    assert back is not None and "archive_restoring" not in back.metadata


WRITE_AND_BOUND = """
import sys
from olav.memory.lifecycle.archive import enforce_capacity
from olav.memory.policy import DEFAULTS, MemoryPolicy
from tests.helpers import hash_store, rec

store = hash_store(sys.argv[1])
me = sys.argv[2]
for i in range(4):
    store.upsert([rec(f"{me}_{i}", f"fact {i} written by process {me}")])
    enforce_capacity(store, MemoryPolicy(capacity={**DEFAULTS.capacity, "fact": 5}))
"""


def test_processes_writing_at_once_keep_the_capacity_exactly(tmp_path: Path) -> None:
    """Four processes write and bound one category at once: the table ends at its capacity,
    every row is live or archived, and none is in both (no surplus archived twice)."""
    path = tmp_path / "m.lance"
    hash_store(path).upsert([rec("seed", "the first fact")])
    root = Path(__file__).resolve().parent.parent
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITE_AND_BOUND, str(path), f"p{n}"],
            cwd=root,
            stderr=subprocess.PIPE,
        )
        for n in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()
    store = hash_store(path)
    live, cold = {r.id for r in store.list_rows()}, {r.id for r in Archive(store).rows()}
    every = {"seed"} | {f"p{n}_{i}" for n in range(4) for i in range(4)}
    assert len(live) == 5 and not live & cold and live | cold == every


def test_a_team_table_on_s3_archives_and_restores_each_operator_s_own(
    tmp_path: Path, s3_env: Any
) -> None:
    """Capacity on a team table in object storage (a real S3-protocol server): alice's
    private rows are bounded apart from bob's, archived in the bucket, and only she can list
    or restore them."""
    from olav.memory.store.scopes import private_scope
    from tests.s3server import team_config, write_workspace

    uri = f"s3://{s3_env.bucket()}/olav/netops"

    def operator(user: str) -> Path:
        text = team_config(s3_env.endpoint, uri, HASH_CONFIG)
        text += f"  user: {user}\n  team: netops\n  policy:\n    capacity: {{fact: 2}}\n"
        return write_workspace(tmp_path / user, text)

    alice, bob = operator("alice"), operator("bob")
    assert olav_here(alice, "init", ".", "--no-prime").returncode == 0
    assert olav_here(bob, "init", ".", "--no-prime").returncode == 0
    ws = Workspace.open(alice)
    store = MemoryStore.for_workspace(ws)
    mine = private_scope(ws.config)
    store.upsert(
        [
            rec("a_old", "alice: vlan 30 was guests", scope=mine, confidence=0.2, updated_at=OLD),
            rec("a_new", "alice: vlan 40 is lab", scope=mine),
            rec("a_sure", "alice: vlan 20 is data", scope=mine, confidence=0.9),
            rec("b_only", "bob: vlan 10 is voice", scope="user:bob", confidence=0.1),
        ]
    )
    done = olav_here(alice, "memory", "gc")
    assert done.returncode == 0, done.stderr
    assert {r.id for r in Archive(store).rows()} == {"a_old"}  # bob's one row stays
    bucket, prefix = uri[5:].split("/", 1)
    keys = [o["Key"] for o in s3_env.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(k.startswith(f"{prefix}/memory_archive.lance/") for k in keys)

    theirs = json.loads(olav_here(bob, "memory", "archive", "list", "--json").stdout)
    assert theirs == []  # alice's private archived row is not bob's to see
    refused = olav_entry(bob, "memory", "archive", "restore", "a_old")
    assert refused.returncode != 0 and "'a_old' is not in the archive" in refused.stderr
    listed = json.loads(olav_here(alice, "memory", "archive", "list", "--json").stdout)
    assert [r["id"] for r in listed] == ["a_old"]
    assert olav_here(alice, "memory", "archive", "restore", "a_old").returncode == 0
    back = MemoryStore.for_workspace(ws).read("a_old", EVERYONE)
    assert back is not None and back.scope == mine and not Archive(store).rows()
