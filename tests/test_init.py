from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pytest

from olav.admin.setup import init_workspace, template_dir
from olav.core.config import Workspace
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from tests.helpers import OlavMain, rec, write_config

pytestmark = pytest.mark.slow  # a module of 10 s or more: scheduled first (conftest.py)


def _store(root: Path) -> MemoryStore:
    return MemoryStore.for_workspace(Workspace.open(root))


def test_init_creates_the_workspace_and_primes_every_guide(hash_ws: Path) -> None:
    for rel in [
        ".olav/olav.yaml",
        ".olav/databases/memory.lance",
        ".olav/databases/audit.duckdb",
        ".olav/logs",
        "exports",
    ]:
        assert (hash_ws / rel).exists(), rel
    for agent in ("core", "admin", "netops"):
        assert (hash_ws / agent / "AGENT.md").is_file()
        assert (hash_ws / agent / "SKILL.md").is_file()
    guides = sorted(hash_ws.glob("*/guides/*.guide.yaml"))
    assert len(guides) >= 15
    store = _store(hash_ws)
    assert len(store.list_rows("category IN ('usage_guide', 'format_guide')")) == len(guides)
    con = duckdb.connect(str(hash_ws / ".olav/databases/audit.duckdb"), read_only=True)
    tables = {
        r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    }
    con.close()
    assert {"runs", "tool_calls", "recalls", "schema_migrations"} <= tables


def test_template_ships_bilingual_useful_guides() -> None:
    guides = list(template_dir().glob("*/guides/*.guide.yaml"))
    assert len(guides) >= 15
    texts = [g.read_text(encoding="utf-8") for g in guides]
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in texts) == len(texts)
    assert any("format_and_export" in t for t in texts)


def test_reinit_is_idempotent_keeps_edits_refreshes_unedited_and_user_rows(hash_ws: Path) -> None:
    store = _store(hash_ws)
    store.upsert([rec("fact_r1", "R1 loopback is 10.255.1.1", origin="user")])
    version = store.table.version

    edited = hash_ws / "netops" / "AGENT.md"
    edited.write_text(edited.read_text() + "\nOur team also owns the firewalls.\n")
    stale = hash_ws / "core" / "AGENT.md"
    old_text = "an older template version of this file\n"
    stale.write_text(old_text)
    manifest_path = hash_ws / ".olav" / "template-manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["core/AGENT.md"] = hashlib.sha256(old_text.encode()).hexdigest()
    manifest_path.write_text(json.dumps(manifest))

    report = init_workspace(hash_ws)
    assert "netops/AGENT.md" in report.kept_edited
    assert "firewalls" in edited.read_text()
    assert report.refreshed == ["core/AGENT.md"]
    assert stale.read_text() == (template_dir() / "core" / "AGENT.md").read_text()
    backups = list((hash_ws / ".olav" / "backups").rglob("AGENT.md"))
    assert [b.read_text() for b in backups] == [old_text]
    assert report.primed is not None and not report.primed.added and not report.primed.updated
    store = _store(hash_ws)
    assert store.read("fact_r1", EVERYONE) is not None
    assert store.table.version == version, "re-init with unchanged guides must not write"
    assert not report.copied


def test_init_reprimes_when_embedder_changed_and_only_template_guides_exist(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    write_config(root)
    init_workspace(root)
    n = _store(root).size()
    write_config(root, "embedder:\n  provider: hash\n  model: hash-32\n")
    report = init_workspace(root)
    assert report.reprimed_for_embedder
    store = _store(root)
    assert store.embedder.dim == 32 and store.size() == n


def test_init_refuses_to_nest_a_workspace_inside_another(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    res = olav_main("init", str(hash_ws / "netops"))
    assert res.returncode == 1
    assert f"inside the workspace {hash_ws}" in res.stderr and "Traceback" not in res.stderr
    assert not (hash_ws / "netops" / ".olav").exists()
    assert not (hash_ws / "netops" / "core").exists()


def test_a_failed_first_init_leaves_nothing_behind(
    tmp_path: Path, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    # an S3 endpoint nobody listens on: priming the team table fails
    args = ["--memory-uri", "s3://nobucket/x", "--memory-endpoint", "http://127.0.0.1:9"]
    for target in (tmp_path / "fresh", kept):
        res = olav_main("init", str(target), *args)
        assert res.returncode == 1
        assert res.stderr.startswith("error: ") and "s3://nobucket/x" in res.stderr
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert not (tmp_path / "fresh").exists()
    assert sorted(p.name for p in kept.iterdir()) == ["notes.txt"]


def test_a_broken_olav_yaml_names_its_line_and_reset_config_recovers(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    config = hash_ws / ".olav" / "olav.yaml"
    broken = config.read_text() + "\nllm: [unclosed\n"
    config.write_text(broken)
    res = olav_main("memory", "stats")
    assert res.returncode == 1
    assert "is not valid YAML" in res.stderr and "line " in res.stderr
    assert "olav init --reset-config" in res.stderr
    res = olav_main("init", "--reset-config")
    assert res.returncode == 0, res.stderr
    backups = list((hash_ws / ".olav" / "backups").rglob("olav.yaml"))
    assert [b.read_text() for b in backups] == [broken]
    assert olav_main("memory", "stats").returncode == 0
