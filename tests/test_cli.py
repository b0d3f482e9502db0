from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import OlavCli, OlavMain, rec, run_olav

HEAVY = ("lancedb", "langgraph", "deepagents", "duckdb", "apscheduler")


def test_help_and_version_import_no_heavy_library() -> None:
    """One fresh interpreter runs each command in turn and names what is loaded after each:
    modules only accumulate, so a heavy one shows up after the first command that loads it."""
    argvs = [["--help"], ["--version"], ["memory", "--help"], ["kb", "--help"]]
    code = (
        "import sys\n"
        "from olav.cli.app import main\n"
        f"for args in {argvs!r}:\n"
        "    sys.argv = ['olav', *args]\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        f"    print('LOADED', args, [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    loaded = [line for line in out.stdout.splitlines() if line.startswith("LOADED")]
    assert loaded == [f"LOADED {args!r} []" for args in argvs], (out.stdout[-600:], out.stderr)


def test_outside_a_workspace_says_so_in_one_line(tmp_path: Path) -> None:
    result = run_olav("memory", "stats", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "no olav workspace" in lines[0] and "olav init" in lines[0]
    assert "Traceback" not in result.stderr


def test_debug_flag_shows_the_traceback(tmp_path: Path) -> None:
    result = run_olav("--debug", "memory", "stats", cwd=tmp_path)
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_bad_config_value_is_one_line_naming_key(hash_ws: Path, olav_main: OlavMain) -> None:
    cfg = hash_ws / ".olav" / "olav.yaml"
    cfg.write_text(cfg.read_text().replace("model: hash-64", "model: hash-64\n  cache_size: lots"))
    result = olav_main("memory", "stats")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "embedder.cache_size must be int" in result.stderr


def test_env_override_mismatch_is_reported_with_the_fix(
    hash_ws: Path, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLAV_EMBEDDER_MODEL", "hash-32")
    result = olav_main("memory", "stats")
    assert result.returncode == 1
    line = result.stderr.strip()
    assert "\n" not in line
    assert "hash:hash-64 (64-d)" in line and "hash:hash-32 (32-d)" in line
    assert "olav kb re-embed" in line


def test_memory_commands_json(hash_ws: Path, olav: OlavCli) -> None:
    res = olav("memory", "search", "backup router configuration", "--json", "-k", "3")
    assert res.exit_code == 0, res.output
    hits = json.loads(res.output)
    assert len(hits) == 3
    assert {"id", "distance", "fts_score", "score", "category", "scope"} <= hits[0].keys()
    first = hits[0]["id"]

    res = olav("memory", "search", "backup", "--agent", "admin", "--json", "-k", "50")
    assert {h["scope"] for h in json.loads(res.output)} <= {"admin", "global"}
    res = olav("memory", "search", "x", "--category", "format_guide", "--json", "-k", "50")
    assert {h["category"] for h in json.loads(res.output)} == {"format_guide"}

    res = olav("memory", "show", first, "--json")
    assert json.loads(res.output)["id"] == first
    res = olav("memory", "list", "--category", "format_guide", "--json")
    assert all(r["category"] == "format_guide" for r in json.loads(res.output))

    stats = json.loads(olav("memory", "stats", "--json").output)
    assert stats["dim"] == 64 and stats["embedder"] == "hash:hash-64"
    assert stats["indexes"]["fts"] is not None
    total = stats["rows"]

    res = olav("memory", "delete", first, input="n\n")
    assert res.exit_code != 0
    res = olav("memory", "delete", first, "--yes")
    assert res.exit_code == 0
    assert json.loads(olav("memory", "show", first, "--json").output)["invalidated_at"]
    res = olav("memory", "search", "backup router configuration", "--json", "-k", "50")
    assert first not in {h["id"] for h in json.loads(res.output)}  # retired: never recalled
    assert olav("memory", "delete", first, "--yes", "--purge").exit_code == 0
    assert json.loads(olav("memory", "stats", "--json").output)["rows"] == total - 1
    res = olav("memory", "show", "nope")
    assert res.exit_code != 0


def test_import_guides_cli_reports_bad_file_and_exits_nonzero(hash_ws: Path, olav: OlavCli) -> None:
    bad = hash_ws / "netops" / "guides" / "oops.guide.yaml"
    bad.write_text("intent: oops\nagent: netops\nkeywords: [x]\n")
    res = olav("kb", "import-guides", "--json")
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert data["unchanged"] >= 15 and data["added"] == 0
    assert len(data["errors"]) == 1
    assert re.search(
        r"netops/guides/oops\.guide\.yaml: field 'body': is required", data["errors"][0]
    )


def test_kb_export_import_cli(hash_ws: Path, olav: OlavCli, tmp_path: Path) -> None:
    out = tmp_path / "dump.jsonl"
    res = olav("kb", "export", str(out))
    assert res.exit_code == 0 and out.exists()
    res = olav("kb", "import", str(out))
    assert res.exit_code == 0 and "replaced" in res.output


def test_doctor_reports_each_check(hash_ws: Path, olav: OlavCli) -> None:
    res = olav("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(res.output)}
    for name in ("workspace", "config", "embedder", "memory", "fts index", "audit db"):
        assert checks[name]["status"] == "ok", checks[name]
    assert checks["ollama"]["status"] == "warn"
    assert "ollama serve" in checks["ollama"]["fix"]
    assert "`olav engine start`" in checks["ollama"]["fix"]  # with no server, the small one
    assert res.exit_code == 0


def test_doctor_reads_an_openai_compatible_servers_window(tmp_path: Path) -> None:
    from tests.helpers import olav_here, openai_workspace
    from tests.stubs.openai_stub import OpenAIStubState, openai_stub

    with openai_stub(OpenAIStubState(n_ctx=8192)) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url, embedder="hash")
        up = json.loads(olav_here(ws, "doctor", "--json").stdout)
    (server,) = [c for c in up if c["name"] == "model server"]
    assert server["status"] == "ok" and "window 8192 tokens (/props n_ctx)" in server["detail"]
    down = json.loads(olav_here(ws, "doctor", "--json").stdout)  # the stub has stopped
    (gone,) = [c for c in down if c["name"] == "model server"]
    assert gone["status"] == "warn" and "not reachable" in gone["detail"]
    assert "`olav engine start`" in gone["fix"]


def test_doctor_warns_about_a_fragmented_table_and_gc_fixes_it(
    hash_ws: Path, olav: OlavCli
) -> None:
    from olav.core.config import Workspace
    from olav.memory.store.table import MAX_FRAGMENTS, MemoryStore

    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    assert olav("doctor", "--json").exit_code == 0
    for i in range(2 * MAX_FRAGMENTS + 1):  # one fragment per write
        store.insert_new([rec(f"frag{i}", f"event {i}")])
    checks = {c["name"]: c for c in json.loads(olav("doctor", "--json").output)}
    assert checks["memory layout"]["status"] == "warn"
    assert "olav memory gc" in checks["memory layout"]["fix"]
    assert olav("memory", "gc").exit_code == 0
    checks = {c["name"]: c for c in json.loads(olav("doctor", "--json").output)}
    assert checks["memory layout"]["status"] == "ok"


def test_agent_list(hash_ws: Path, olav: OlavCli) -> None:
    res = olav("agent", "list", "--json")
    names = {a["name"] for a in json.loads(res.output)}
    assert {"core", "admin", "netops"} <= names


def test_reembed_cli_switches_embedder(
    hash_ws: Path, olav: OlavCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLAV_EMBEDDER_MODEL", "hash-32")
    res = olav("kb", "re-embed", "--yes")
    assert res.exit_code == 0, res.output
    assert "memory_backup_" in res.stdout
    res = olav("memory", "stats", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["dim"] == 32
    res = olav("kb", "backups")
    assert res.stdout.startswith("memory_backup_")


def test_doctor_reports_and_repairs_a_half_built_reembed(hash_ws: Path, olav: OlavCli) -> None:
    import shutil

    mem = hash_ws / ".olav" / "databases" / "memory.lance"
    shutil.copytree(mem / "memory.lance", mem / "memory_reembed.lance")
    checks = {c["name"]: c for c in json.loads(olav("doctor", "--json").output)}
    assert checks["leftovers"]["status"] == "warn" and "--repair" in checks["leftovers"]["fix"]
    checks = {c["name"]: c for c in json.loads(olav("doctor", "--json", "--repair").output)}
    assert checks["leftovers"]["status"] == "ok" and not (mem / "memory_reembed.lance").exists()
    assert checks["memory"]["status"] == "ok"


def _groups(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, group)]
    for sub in group.registered_groups:
        found += _groups(sub.typer_instance, (*path, sub.name))
    return found


def test_every_command_is_listed_on_one_reflowed_line() -> None:
    """A group's command list shows each command's summary as one paragraph: it once broke
    wherever the docstring's source line did ("a draft that / `olav kb drafts confirm`")."""
    import inspect

    from olav.cli.app import app

    for path, group in _groups(app):
        for info in group.registered_commands:
            # what Typer lists: short_help, else help, else the docstring's first paragraph
            doc = (inspect.getdoc(info.callback) or "").split("\n\n")[0]
            summary = info.short_help or info.help or doc
            assert summary and "\n" not in summary, (path, info.name)
