"""The workspace templates (tests.helpers.workspace_template): a copy of one with a test's
olav.yaml is what ``olav init`` makes with that olav.yaml, so that ``hash_ws``,
``ollama_workspace``, ``openai_workspace`` and the like copy a template instead of running init
in every test. What may differ: the rows' timestamps, the applied-at times of the audit
database's migrations, and the random names of LanceDB's files."""

from __future__ import annotations

import contextlib
import dataclasses
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    HASH_CONFIG,
    TEMPLATE_EMBEDDERS,
    ollama_config,
    openai_config,
    workspace_from_template,
    write_config,
)

LANCE = Path(".olav/databases/memory.lance")
STAMPS = {"created_at": None, "updated_at": None, "event_at": None}


@contextlib.contextmanager
def _no_stub() -> Iterator[tuple[str, None]]:
    yield "http://127.0.0.1:9", None


def _stub(embedder: str) -> Callable[[], Any]:
    from tests.stubs.ollama_stub import ollama_stub
    from tests.stubs.openai_stub import openai_stub

    return {"hash": _no_stub, "ollama": ollama_stub, "openai": openai_stub}[embedder]


# for each template, an olav.yaml whose other settings init must not care about
CONFIGS: dict[str, Callable[[str], str]] = {
    "hash": lambda url: HASH_CONFIG + "memory:\n  user: alice\n  team: x\n",
    "ollama": lambda url: ollama_config(url, "runtime:\n  max_model_calls: 3\n"),
    "openai": lambda url: openai_config(url),
}


def _files(root: Path) -> dict[str, Any]:
    """{path: (mode, bytes)}; inside LanceDB's table, whose names are random, the modes and
    the number of files of each of its folders (data, _versions, _indices ...); the
    databases without their bytes (compared by their contents)."""
    out: dict[str, Any] = {}
    depth = len(LANCE.parts) + 2  # .olav/databases/memory.lance/memory.lance/data
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        mode = stat.S_IMODE(path.stat().st_mode)
        if rel.is_relative_to(LANCE) and len(rel.parts) > depth:
            key = f"{Path(*rel.parts[:depth])}/*"
            modes, count = out.get(key, (set(), 0))
            out[key] = (modes | {mode}, count + path.is_file())
        elif path.is_file() and path.suffix not in (".duckdb", ".wal"):
            out[str(rel)] = (mode, path.read_bytes())
        else:
            out[str(rel)] = (mode, None)
    return out


def _databases(root: Path) -> dict[str, list[Any]]:
    """Every table of the workspace's DuckDB files, its rows but no timestamp column."""
    import duckdb

    out: dict[str, list[Any]] = {}
    for path in sorted((root / ".olav/databases").glob("*.duckdb")):
        con = duckdb.connect(str(path), read_only=True)
        try:
            columns = con.execute(
                "SELECT table_schema || '.' || table_name, column_name FROM "
                "information_schema.columns WHERE data_type NOT LIKE 'TIMESTAMP%' "
                "ORDER BY table_schema, table_name, ordinal_position"
            ).fetchall()
            tables: dict[str, list[str]] = {}
            for table, column in columns:
                tables.setdefault(table, []).append(f'"{column}"')
            for table, cols in tables.items():
                rows = con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
                out[f"{path.name}:{table}"] = sorted(map(repr, rows))
        finally:
            con.close()
    return out


def _memory(root: Path) -> tuple[dict[str, str], list[Any]]:
    """The memory table's metadata (its embedder and dimension) and its rows, timestamps
    left out."""
    from olav.core.config import Workspace
    from olav.memory.store.table import MemoryStore

    store = MemoryStore.for_workspace(Workspace.open(root))
    meta = {k.decode(): v.decode() for k, v in (store.table.schema.metadata or {}).items()}
    rows = [
        repr(dataclasses.replace(r, **STAMPS))
        for r in sorted(store.list_rows(with_vector=True), key=lambda r: r.id)
    ]
    return meta, rows


@pytest.mark.parametrize("embedder", TEMPLATE_EMBEDDERS)
def test_a_template_copy_is_what_init_makes(embedder: str, tmp_path: Path) -> None:
    from olav.admin.setup import init_workspace

    with _stub(embedder)() as (url, _):
        config = CONFIGS[embedder](url)
        fresh = tmp_path / "fresh"
        write_config(fresh, config)
        init_workspace(fresh)
        copy = workspace_from_template(tmp_path / "copy", embedder, config)
        assert (copy / ".olav/olav.yaml").read_text() == config
        assert _files(copy) == _files(fresh)
        assert _databases(copy) == _databases(fresh)
        memory = _memory(fresh)
        assert memory[1] and _memory(copy) == memory


def test_a_folder_that_holds_something_is_initialised(tmp_path: Path) -> None:
    """Init refreshes a folder that is not empty (it keeps what is there): no copy then."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    workspace_from_template(root, "hash", HASH_CONFIG)
    assert (root / "notes.txt").read_text() == "mine"
    assert (root / ".olav/olav.yaml").read_text() == HASH_CONFIG
    assert _memory(root)[1]
