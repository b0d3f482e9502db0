from __future__ import annotations

from pathlib import Path

import pytest

from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.memory.ingest.transfer import export_jsonl, import_jsonl
from olav.memory.store.table import MemoryStore
from tests.helpers import HASH_CONFIG, rec, workspace_from_template


def test_export_then_import_into_a_fresh_workspace_gives_identical_rows(
    hash_ws: Path, tmp_path: Path
) -> None:
    src = MemoryStore.for_workspace(Workspace.open(hash_ws))
    src.upsert([rec("fact_1", "R1 is the border router of AS 65000", origin="user", tags=["r1"])])
    src.bump_access(["fact_1"])
    dump = tmp_path / "mem.jsonl"
    n = export_jsonl(src, dump)
    assert n == src.size()

    other = workspace_from_template(tmp_path / "other", "hash", HASH_CONFIG)  # a fresh init
    dst = MemoryStore.for_workspace(Workspace.open(other))
    import_jsonl(dst, dump)
    a = {r.id: r for r in src.list_rows(with_vector=True)}
    b = {r.id: r for r in dst.list_rows(with_vector=True)}
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], key


def test_malformed_line_imports_nothing(hash_ws: Path, tmp_path: Path) -> None:
    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    dump = tmp_path / "mem.jsonl"
    export_jsonl(store, dump)
    lines = dump.read_text().splitlines()
    lines.insert(2, '{"id": "x", "text": ')
    dump.write_text("\n".join(lines) + "\n")
    before = store.table.version
    with pytest.raises(OlavError, match="line 3"):
        import_jsonl(store, dump)
    assert store.table.version == before
    dump.write_text("not an export\n")
    with pytest.raises(OlavError, match="line 1"):
        import_jsonl(store, dump)
