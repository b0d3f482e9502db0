"""Scope isolation, the examples around the store API's property test
(tests/test_store_reads.py: no read returns a row its reader may not read, in any search mode,
with any k and filter, and the filters are pre-filters): recall, the tools, the table that
LanceDB answers, hostile filter values, a team table."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from olav.core.errors import MemoryStoreError, OlavError
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import CATEGORIES
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.search import SearchTuning
from olav.memory.store.table import SEARCH_MODES
from tests.helpers import hash_store, rec

SCOPES = ("global", "agentA", "agentB", "team:x", "team:y", "user:alice", "user:bob")
# what agentA's recall reads for operator alice of team x (see test_recall_reads_...)
VISIBLE = ("agentA", "global", "user:alice", "team:x")


@pytest.mark.parametrize("ann", [False, True], ids=["exact", "ann_index"])
def test_selective_scope_is_a_prefilter(tmp_path: Path, ann: bool) -> None:
    """2,000 rows match the query far better than the 3 in scope 'tiny'; k=3 still returns
    exactly the 3, with exact search and with an IVF_SQ index."""
    store = hash_store(
        tmp_path / "m.lance", tuning=SearchTuning(ann_threshold=1000 if ann else 20000)
    )
    query = "router backup configuration nightly"
    big = [rec(f"big{i}", f"{query} job {i}", scope="big") for i in range(2000)]
    tiny = [rec(f"tiny{i}", f"bananas router note {i}", scope="tiny") for i in range(3)]
    store.upsert(big + tiny)
    done = store.maintain(force_optimize=True)
    assert done["ann_built"] is ann
    for mode in SEARCH_MODES:
        hits = store.search(
            query, mode=mode, k=3, filter=SearchFilter(scopes=["tiny"], reader=EVERYONE)
        )
        assert sorted(h.record.id for h in hits) == ["tiny0", "tiny1", "tiny2"], mode


@pytest.mark.parametrize(
    "agent",
    ["o'brien", "x' OR '1'='1", "a') OR scope IS NOT NULL OR ('", "team:x'--", "%", "_"],
)
def test_sql_hostile_scope_names_stay_isolated(tmp_path: Path, agent: str) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert(
        [
            rec("mine", "shared words about routers", scope=agent),
            rec("other", "shared words about routers", scope="agentB"),
            rec("team", "shared words about routers", scope="team:x"),
        ]
    )
    for mode in SEARCH_MODES:
        hits = store.search(
            "shared words routers",
            mode=mode,
            k=10,
            filter=SearchFilter(scopes=[agent], reader=EVERYONE),
        )
        assert [h.record.id for h in hits] == ["mine"], mode
    hits = store.search(
        "routers", k=10, filter=SearchFilter(categories=["fact' OR '1'='1"], reader=EVERYONE)
    )
    assert hits == []


def test_empty_scope_cannot_be_written(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert([rec("keep", "already here")])
    version = store.table.version
    for scope in ("", None):
        with pytest.raises(MemoryStoreError, match="needs a scope"):
            store.upsert([rec("ok", "fine row"), rec("bad", "no scope", scope=scope)])
    assert store.table.version == version
    assert [r.id for r in store.list_rows()] == ["keep"]


def test_whitespace_scope_cannot_be_written(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    with pytest.raises(MemoryStoreError, match="scope"):
        store.upsert([rec("bad", "blank scope", scope="   ")])
    assert store.size() == 0


def test_recall_reads_the_agent_the_user_and_the_team_and_no_one_else() -> None:
    from olav.core.config import Config
    from olav.memory.recall.recaller import Recaller, RecallOptions
    from olav.memory.store.scopes import personal_scopes

    cfg = Config.load(None, environ={"OLAV_MEMORY_USER": "Alice", "OLAV_MEMORY_TEAM": "x"})
    with tempfile.TemporaryDirectory() as tmp:
        store = hash_store(Path(tmp) / "m.lance")
        recaller = Recaller(
            store, agent="agentA", options=RecallOptions(extra_scopes=personal_scopes(cfg))
        )
        assert sorted(recaller.scopes) == sorted(VISIBLE)


def test_the_agents_memory_stats_tool_names_only_the_operators_own_scopes(
    tmp_path: Path,
) -> None:
    """The agent's ``memory_stats`` counts another operator's private rows without naming
    their scope (as ``olav memory stats`` does)."""
    from olav.core.config import Config
    from olav.memory.store.table import OTHERS_PRIVATE
    from olav.runtime.tools.base import ToolContext
    from olav.runtime.tools.memory import memory_stats

    store = hash_store(tmp_path / "m.lance")
    store.upsert(
        [rec("a", "alice's note", scope="user:alice"), rec("b", "bob's", scope="user:bob")]
    )
    cfg = Config.load(None, environ={"OLAV_MEMORY_USER": "alice"})
    ctx = ToolContext(tmp_path, tmp_path, tmp_path, tmp_path, "core", lambda: store, config=cfg)
    shown = memory_stats(ctx)
    assert "user:alice 1" in shown and f"{OTHERS_PRIVATE} 1" in shown
    assert "bob" not in shown


# -- every read path, through the CLI ---------------------------------------------------------

# the operator of the workspace below, and what they may never read (another operator's
# private scope, another team's scope); written independently of olav.memory.store.scopes
OPERATORS = {
    "alice of team x": ("  user: alice\n  team: x\n", {"user:bob", "team:y"}),
    "bob, no team": ("  user: bob\n", {"user:alice"}),
}


@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_no_read_path_shows_a_row_the_operator_may_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operator: str
) -> None:
    """show, history, pin, edit, delete, quarantine, list, search, why, promote and the MCP
    get/search tools, on a table with a row in every scope: a row of a hidden scope is "no
    memory with id ..." by id, unchanged, and absent from every listing, while every other row
    stays readable."""
    import json

    from typer.testing import CliRunner

    from olav.cli.app import app
    from olav.core.config import Workspace
    from olav.mcp.service import MemoryService
    from olav.memory.store.table import MemoryStore
    from olav.runtime.tools.memory import recall_memory
    from tests.helpers import HASH_CONFIG, tool_context, workspace_from_template

    settings_text, hidden = OPERATORS[operator]
    # promote names the missing team first; either way the row is not revealed
    refusal = "no memory with id '{id}'" if "team:" in settings_text else "no team is configured"
    # what olav init makes: memory.user and memory.team change nothing it writes
    root = workspace_from_template(
        tmp_path / "ws", "hash", HASH_CONFIG + "memory:\n" + settings_text
    )
    monkeypatch.chdir(root)
    runner = CliRunner()

    def cli(*args: str) -> tuple[int, str]:
        out = runner.invoke(app, list(args), catch_exceptions=True)
        error = out.exception.one_line() if isinstance(out.exception, OlavError) else ""
        return out.exit_code, out.output + error

    def check(rows: list[tuple[str, str, str]], query: str) -> None:
        ws = Workspace.open(root)
        store = MemoryStore.for_workspace(ws)
        store.delete(where="id LIKE 'iso_%'")
        records = [
            rec(f"iso_{i:02d}", f"{text} row{i}", category=cat, scope=scope)
            for i, (scope, cat, text) in enumerate(rows)
        ]
        if records:
            store.upsert(records)
        secret = {r.id for r in records if r.scope in hidden}
        for r in records:
            code, out = cli("memory", "show", r.id, "--json")
            if r.id in secret:
                assert code != 0 and f"no memory with id {r.id!r}" in out, (r.scope, out)
                assert r.text not in out
                code, out = cli("memory", "promote", r.id)
                assert code != 0 and refusal.format(id=r.id) in out, (r.scope, out)
                assert r.text not in out
                # nor can it be changed, or its history read, by its id
                for args in (
                    ("history", r.id, "--json"),
                    ("pin", r.id),
                    ("edit", r.id, "--text", "overwritten"),
                    ("delete", r.id, "--yes"),
                    ("delete", r.id, "--yes", "--purge"),
                ):
                    code, out = cli("memory", *args)
                    assert code != 0 and f"no memory with id {r.id!r}" in out, (args, out)
                    assert r.text not in out
                code, out = cli("memory", "quarantine", "--release", r.id)
                assert code != 0 and "is not in quarantine" in out, out
                code, out = cli("memory", "why", "--agent", r.scope, "--json", "--", "x")
                assert code != 0 and "another operator's scope" in out, out
                kept = store.read(r.id, EVERYONE)
                assert kept is not None and kept.text == r.text and kept.invalidated_at is None
                assert not kept.metadata.get("pinned")
            else:
                assert code == 0, out
                assert json.loads(out)["scope"] == r.scope
        code, out = cli("memory", "stats", "--json")
        assert code == 0, out
        assert not set(json.loads(out)["by_scope"]) & {r.scope for r in records if r.id in secret}
        code, out = cli("memory", "list", "--json", "--limit", "1000")
        listed = {row["id"] for row in json.loads(out)}
        assert {r.id for r in records} - secret <= listed and not listed & secret
        for mode in SEARCH_MODES:
            code, out = cli(
                "memory", "search", "--json", "-k", "50", "--mode", mode, "--", query or "x"
            )
            assert code == 0, out
            assert not {h["id"] for h in json.loads(out)} & secret, mode
        code, out = cli("memory", "why", "--json", "--", query or "x")
        assert code == 0, out
        assert not {c["id"] for c in json.loads(out)["candidates"]} & secret
        svc = MemoryService.open(ws)
        for r in records:
            if r.id in secret:
                with pytest.raises(OlavError, match="no memory with id"):
                    svc.get(r.id)
        assert not {h["id"] for h in svc.search(query or "x", k=50)["hits"]} & secret
        # the chat's recall_memory tool, with and without an explicit scope
        ctx = tool_context(root)
        ctx.config = ws.config
        said = recall_memory(ctx, query or "x")
        assert not [i for i in secret if f" {i}]" in said], said
        for scope in hidden:
            assert "another operator" in recall_memory(ctx, query or "x", scope=scope)

    # one example through every client: a row in each scope, each of another category, with
    # the words a query would find; the store's own property test (tests/test_store_reads.py)
    # draws the tables at random
    words = ("router backup", "vlan o'reilly", "bgp 100%", "firewall AND", "备份 交换机")
    rows = [
        (scope, CATEGORIES[i % len(CATEGORIES)], words[i % len(words)])
        for i, scope in enumerate(SCOPES)
    ]
    check(rows, "router backup vlan")
