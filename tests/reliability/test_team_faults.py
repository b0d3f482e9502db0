"""The object store dies in the middle of a write (a relay in front of the S3 server is cut at
the request that commits the new table version): the writer gets one clear line, the table is
readable at its last good version, and the same write succeeds once the store is back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import HASH_CONFIG
from tests.s3server import Relay, team_config, write_workspace

pytestmark = pytest.mark.slow  # a module of 10 s or more: scheduled first (conftest.py)

COMMIT = rb"PUT /[^ ]*memory\.lance/_versions/"


def _state(uri: str, endpoint: str) -> tuple[int, int]:
    import lancedb

    opts = {"endpoint": endpoint, "allow_http": "true", "region": "us-east-1"}
    table = lancedb.connect(uri, storage_options=opts).open_table("memory")
    return int(table.version), int(table.count_rows())


def test_store_killed_mid_write_then_restarted(
    tmp_path: Path, s3_env: Any, olav: Any, monkeypatch: Any
) -> None:
    from olav.core.config import Workspace
    from olav.core.errors import OlavError
    from olav.memory.store.table import MemoryStore

    relay = Relay(s3_env.port).start()
    uri = f"s3://{s3_env.bucket()}/olav/team"
    root = write_workspace(tmp_path / "ws", team_config(relay.endpoint, uri, HASH_CONFIG))
    assert olav("init", str(root), "--no-prime").exit_code == 0
    monkeypatch.chdir(root)
    MemoryStore.for_workspace(Workspace.open(root))  # creates the table
    rows = [{"format": "olav-memory-export", "version": 2, "embedder": "hash:hash-64", "dim": 64}]
    rows += [{"id": f"f{i}", "text": f"fact {i} on vlan {i}", "category": "fact"} for i in range(5)]
    dump = tmp_path / "facts.jsonl"
    dump.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    before = _state(uri, s3_env.endpoint)

    relay.cut_on = re.compile(COMMIT)
    cut = olav("kb", "import", str(dump))
    assert relay.cut.is_set(), "the write never reached its commit"
    assert isinstance(cut.exception, OlavError), cut.exception  # printed as one red line
    line = cut.exception.one_line()
    assert "went away while a write was committing" in line and "\n" not in line, line
    assert _state(uri, s3_env.endpoint) == before  # the last good version, nothing half-done

    relay.cut_on = None
    relay.start()  # the store is back
    again = olav("kb", "import", str(dump))
    assert again.exit_code == 0, again.output
    store = MemoryStore.for_workspace(Workspace.open(root))
    assert sorted(r.id for r in store.list_rows("category = 'fact'")) == [f"f{i}" for i in range(5)]
    relay.stop()
