"""The memory table on S3-compatible object storage (`memory.uri`), end to end through the
CLI against a real S3-protocol server on 127.0.0.1 (tests/s3server.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.helpers import HASH_CONFIG, olav_entry, olav_here
from tests.s3server import team_config, write_workspace

pytestmark = pytest.mark.slow  # a module of 10 s or more: scheduled first (conftest.py)


def _workspace(tmp_path: Path, server: Any, name: str = "ws", uri: str = "") -> tuple[Path, str]:
    uri = uri or f"s3://{server.bucket()}/olav/netops"
    root = write_workspace(tmp_path / name, team_config(server.endpoint, uri, HASH_CONFIG))
    return root, uri


def _olav(root: Path, server: Any, *args: str) -> Any:
    """``olav ARGS`` through its entry point in this process, with the server's credentials:
    its exit status and the one line it prints on an error."""
    with mock.patch.dict(os.environ, server.env):
        return olav_entry(root, *args)


def test_init_primes_guides_into_the_bucket_and_search_reads_them(
    tmp_path: Path, s3_env: Any
) -> None:
    root, uri = _workspace(tmp_path, s3_env)
    done = olav_here(root, "init", ".")
    assert done.returncode == 0, done.stderr
    assert not (root / ".olav" / "databases" / "memory.lance").exists()  # nothing local
    bucket, prefix = uri[5:].split("/", 1)
    keys = [o["Key"] for o in s3_env.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(k.startswith(f"{prefix}/memory.lance/") for k in keys)
    found = olav_here(root, "memory", "search", "backup router config", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert hits and all(h["category"] for h in hits)
    again = olav_here(root, "kb", "import-guides")
    assert again.returncode == 0, again.stderr
    assert "0 added" in again.stdout
    stats = olav_here(root, "memory", "stats", "--json")
    assert json.loads(stats.stdout)["rows"] == len(hits) or json.loads(stats.stdout)["rows"] > 0


def test_init_memory_uri_writes_the_setting_and_doctor_checks_the_bucket(
    tmp_path: Path, s3_env: Any
) -> None:
    bucket = s3_env.bucket()
    root = tmp_path / "ws"
    write_workspace(root, HASH_CONFIG)
    uri = f"s3://{bucket}/olav/team"
    done = olav_here(root, "init", ".", "--memory-uri", uri, "--memory-endpoint", s3_env.endpoint)
    assert done.returncode == 0, done.stderr
    text = (root / ".olav" / "olav.yaml").read_text()
    assert uri in text and s3_env.endpoint in text
    assert s3_env.env["AWS_SECRET_ACCESS_KEY"] not in text  # credentials stay in the env
    doctor = olav_here(root, "doctor")
    assert "team memory" in doctor.stdout and f"bucket {bucket}" in doctor.stdout, doctor.stdout
    assert "-d table" in doctor.stdout


@pytest.mark.parametrize("fault", ["missing bucket", "unreachable", "bad uri"])
def test_a_broken_team_table_is_a_one_line_error(tmp_path: Path, s3_env: Any, fault: str) -> None:
    from tests.reliability._support import assert_one_line_error

    uri = {"missing bucket": "s3://no-such-bucket-olav/x", "bad uri": "gs://x/y"}.get(fault, "")
    root, uri = _workspace(tmp_path, s3_env, uri=uri)
    if fault == "unreachable":
        from tests.s3server import free_port

        text = (root / ".olav" / "olav.yaml").read_text()
        dead = f"http://127.0.0.1:{free_port()}"
        (root / ".olav" / "olav.yaml").write_text(text.replace(s3_env.endpoint, dead))
    out = _olav(root, s3_env, "memory", "search", "backup")
    expect = {
        "missing bucket": "bucket of s3://no-such-bucket-olav/x does not exist",
        "unreachable": "cannot reach the object store",
        "bad uri": "memory.uri: 'gs://x/y' is not supported",
    }[fault]
    assert_one_line_error(out, expect)
    doctor = olav_here(root, "doctor")
    assert expect in doctor.stdout


def test_refused_credentials_are_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second server that checks credentials (its first request, the bucket, is free)."""
    from tests.reliability._support import assert_one_line_error
    from tests.s3server import start_server

    server = start_server({"INITIAL_NO_AUTH_ACTION_COUNT": "1"})
    try:
        root, _uri = _workspace(tmp_path, server)
        out = _olav(root, server, "memory", "search", "backup")
        assert_one_line_error(out, "refused the credentials", "AWS_ACCESS_KEY_ID")
        assert server.env["AWS_SECRET_ACCESS_KEY"] not in out.stderr + out.stdout
        for key, value in server.env.items():
            monkeypatch.setenv(key, value)
        doctor = olav_here(root, "doctor")
        assert "refused the credentials" in doctor.stdout
    finally:
        server.stop()


def test_two_maintenance_jobs_one_runs_the_other_reports_the_lease(
    tmp_path: Path, s3_env: Any
) -> None:
    from olav.core.config import Workspace
    from olav.memory.store.table import MemoryStore
    from tests.reliability._support import assert_one_line_error

    root, _uri = _workspace(tmp_path, s3_env)
    assert olav_here(root, "init", ".").returncode == 0
    store = MemoryStore.for_workspace(Workspace.open(root))
    with store.maintenance_lock():  # the first job, on "another machine", is compacting
        other = _olav(root, s3_env, "memory", "gc")
        assert_one_line_error(other, "maintenance lease", "is held by", "try again later")
        # writes go on meanwhile, and the automatic pass after an import steps aside
        imported = olav_here(root, "kb", "import-guides")
        assert imported.returncode == 0, imported.stderr
    after = olav_here(root, "memory", "gc")
    assert after.returncode == 0, after.stderr


def _lease_location(server: Any) -> Any:
    from olav.memory.store.remote import MemoryLocation

    return MemoryLocation(
        f"s3://{server.bucket()}/t", {"endpoint": server.endpoint, "allow_http": "true"}
    )


def test_an_expired_lease_is_taken_over_by_exactly_one_process(s3_env: Any) -> None:
    from olav.memory.store.remote import Lease

    loc = _lease_location(s3_env)
    first, second = Lease(loc, "maintenance", 60), Lease(loc, "maintenance", 60)
    # a holder on another machine that died: its lease ran out (a time to live of 0 s)
    dead = json.dumps({"owner": "other-host:1:dead", "ttl": 0})
    s3_env.client().put_object(Bucket=first.bucket, Key=first.key, Body=dead.encode())
    second.owner = "third-host:2:beef"
    assert first.try_acquire()  # took over the expired one
    # as another machine would try (in this process, the registry of leases refuses first)
    assert not second._try_put()  # a live lease is not taken over
    first.release()
    assert second.try_acquire()
    second.release()
    assert second.holder() is None


SKEW = 600.0  # ten minutes


@pytest.mark.parametrize(
    ("holder_skew", "taker_skew"),
    [(SKEW, 0.0), (-SKEW, 0.0), (0.0, SKEW), (0.0, -SKEW), (SKEW, -SKEW), (-SKEW, SKEW)],
    ids=["holder-fast", "holder-slow", "taker-fast", "taker-slow", "apart+-", "apart-+"],
)
def test_a_skewed_clock_neither_steals_a_live_lease_nor_holds_one_forever(
    s3_env: Any, holder_skew: float, taker_skew: float
) -> None:
    """Two machines whose clocks are ten minutes apart (injected clocks): expiry is counted
    on the object store's clock, so a live lease runs its 60 s for both, and a lease that
    ran out on the store is free at once, however far ahead the holder's clock was."""
    from olav.memory.store.remote import Lease, LeaseHeldError

    loc = _lease_location(s3_env)

    def lease(ttl: float, skew: float, owner: str) -> Lease:
        made = Lease(loc, "write", ttl, clock=lambda: time.time() + skew)
        made.owner = owner
        return made

    holder = lease(60, holder_skew, "holder-host:1:aaaa")
    taker = lease(60, taker_skew, "taker-host:2:bbbb")
    assert holder._try_put()  # on "another machine"
    held = taker.holder()
    assert held is not None and held.owner == holder.owner
    assert 58 <= held.left <= 60, held  # neither ten minutes more nor ten minutes less
    assert not taker._try_put()  # not stolen early
    with pytest.raises(LeaseHeldError, match=r"held by holder-host:1:aaaa for (58|59|60)s more"):
        taker.acquire(0)

    # the holder died, and its lease has run out on the store's clock (a 0 s lease)
    assert lease(0, holder_skew, holder.owner)._try_put()  # its own lease: rewritten
    assert taker._try_put()  # taken over at once, not ten minutes later
    assert taker.holder().owner == taker.owner  # type: ignore[union-attr]


def test_moving_a_local_memory_to_the_team_table_and_every_command_on_it(
    tmp_path: Path, s3_env: Any
) -> None:
    """export | import into the bucket, then why, list, re-embed, backups and gc there."""
    local = write_workspace(tmp_path / "local", HASH_CONFIG)
    assert olav_here(local, "init", ".").returncode == 0
    assert olav_here(local, "memory", "stats").returncode == 0
    dump = tmp_path / "memory.jsonl"
    assert olav_here(local, "kb", "export", str(dump)).returncode == 0
    exported = [json.loads(line)["id"] for line in dump.read_text().splitlines()[1:]]

    team, _uri = _workspace(tmp_path, s3_env, "team")
    assert olav_here(team, "init", ".", "--no-prime").returncode == 0
    moved = olav_here(team, "kb", "import", str(dump))
    assert moved.returncode == 0, moved.stderr
    listed = olav_here(team, "memory", "list", "--json", "--limit", "1000")
    assert sorted(r["id"] for r in json.loads(listed.stdout)) == sorted(exported)
    why = olav_here(team, "memory", "why", "backup the router config", "--json")
    assert why.returncode == 0, why.stderr
    assert json.loads(why.stdout)

    # a new embedder: re-embed builds the new table beside the old one and keeps a backup
    cfg = team / ".olav" / "olav.yaml"
    cfg.write_text(cfg.read_text().replace("hash-64", "hash-32"))
    refused = _olav(team, s3_env, "memory", "stats")  # what the user sees
    assert "olav kb re-embed" in refused.stderr
    redone = olav_here(team, "kb", "re-embed", "--yes")
    assert redone.returncode == 0, redone.stderr
    stats = json.loads(olav_here(team, "memory", "stats", "--json").stdout)
    assert stats["dim"] == 32 and stats["rows"] == len(exported)
    backups = olav_here(team, "kb", "backups").stdout.split()
    assert len(backups) == 1 and backups[0].startswith("memory_backup_")
    dropped = olav_here(team, "kb", "drop-backup", backups[0], "--yes")
    assert dropped.returncode == 0, dropped.stderr
    assert olav_here(team, "kb", "backups").stdout.strip() == "no backups"
    gc = olav_here(team, "memory", "gc")
    assert gc.returncode == 0, gc.stderr


@pytest.mark.parametrize(
    ("ttl", "left"), [(1e12, 3600.0), (-5, 0.0), ("soon", 60.0), (True, 60.0), (None, 60.0)]
)
def test_a_lease_with_a_wild_time_to_live_still_ends(s3_env: Any, ttl: Any, left: float) -> None:
    """A corrupt or foreign lease object blocks writers for an hour at most; one without a
    usable ttl counts with its name's (60 s for the write lease)."""
    from olav.memory.store.remote import Lease

    lease = Lease(_lease_location(s3_env), "write", 60)
    body = json.dumps({"owner": "odd-host:1:x", "ttl": ttl}).encode()
    s3_env.client().put_object(Bucket=lease.bucket, Key=lease.key, Body=body)
    held = lease.holder()
    assert held is not None and left - 2 <= held.left <= left, held


def test_an_endpoint_nothing_listens_on_is_refused_before_lancedb_retries() -> None:
    """A port that refuses the connection is the one-line error at once; a listening one, a
    local folder and AWS itself (no endpoint) pass untouched to LanceDB."""
    import socket

    from olav.core.errors import MemoryStoreError
    from olav.memory.store.remote import MemoryLocation, refuse_if_nothing_listens

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        up = MemoryLocation("s3://team/memory", {"endpoint": f"http://127.0.0.1:{port}"})
        refuse_if_nothing_listens(up)
    with socket.socket() as closed:  # bound, never listening: the port refuses
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        down = MemoryLocation("s3://team/memory", {"endpoint": f"http://127.0.0.1:{port}"})
        with pytest.raises(MemoryStoreError, match=r"cannot reach the object store of s3://"):
            refuse_if_nothing_listens(down)
    refuse_if_nothing_listens(MemoryLocation("s3://team/memory"))
    refuse_if_nothing_listens(MemoryLocation("/tmp/local/memory.lance"))
