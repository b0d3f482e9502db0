"""`olav mcp` over stdio: the SDK client spawns the real server in a workspace with the bundled
e5 embedder, LanceDB and DuckDB."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from olav.core.config import Workspace
from olav.learning.curator import DRAFTS
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from tests.helpers import olav_entry
from tests.mcp_support import (
    BACKUP,
    HttpServer,
    drive,
    events,
    stdio,
    store_of,
)

pytestmark = pytest.mark.slow  # a module of 10 s or more: scheduled first (conftest.py)

# -- stdio ----------------------------------------------------------------------------------------


def test_stdio_recall_is_what_memory_why_says(e5_ws: Path, olav: Any) -> None:
    why = olav("memory", "why", BACKUP, "--agent", "core", "--json")
    assert why.exit_code == 0, why.output
    expected = json.loads(why.output)

    async def scenario(c: Client) -> Any:
        return await c.call_tool("recall", {"request": BACKUP})

    result = drive(stdio(e5_ws), scenario)
    got = result.structured_content
    assert not result.is_error and got is not None
    assert expected["injected"], "the query should inject something for the test to mean much"
    assert got["injected"] == expected["injected"]
    assert got["block"] == expected["block"] and got["block"].startswith("<relevant-memories>")
    assert got["tier"] == expected["tier"]
    want = [(c["id"], c["decision"], c["reason"]) for c in expected["candidates"]]
    assert [(c["id"], c["decision"], c["reason"]) for c in got["candidates"]] == want
    assert all(
        set(c) == {"id", "category", "decision", "reason", "margin"} for c in got["candidates"]
    )


def test_stdio_confirm_without_elicitation_stores_nothing(e5_ws: Path) -> None:
    async def scenario(c: Client) -> Any:
        drafted = await c.call_tool("remember", {"text": "The R1 loopback is 10.255.1.1"})
        draft_id = drafted.structured_content["draft_id"]  # type: ignore[index]
        return draft_id, await c.call_tool("confirm", {"draft_id": draft_id})

    draft_id, result = drive(stdio(e5_ws), scenario)  # no elicitation_callback: no dialog
    assert not result.is_error
    assert result.structured_content["stored"] is False
    assert f"olav kb drafts confirm {draft_id}" in result.structured_content["message"]
    assert store_of(e5_ws).read(f"fact_{draft_id}", EVERYONE) is None
    assert (e5_ws / DRAFTS / f"{draft_id}.draft.json").is_file()  # still waiting for a person
    denial = events(e5_ws, "denial")[-1]
    assert denial["subject"] == draft_id and denial["asked"] is False
    assert denial["client"] == "olav-test"


def test_read_only_lists_no_writing_tool(e5_ws: Path) -> None:
    async def scenario(c: Client) -> Any:
        listed = await c.list_tools()
        refused = await c.call_tool("remember", {"text": "anything"})
        return [t.name for t in listed.tools], refused

    names, refused = drive(stdio(e5_ws, "--read-only"), scenario)
    assert names == ["recall", "search", "get"]
    assert refused.is_error
    assert not (e5_ws / DRAFTS).exists() or not list((e5_ws / DRAFTS).glob("*.draft.json"))


def test_a_killed_server_leaves_no_lock_behind(e5_ws: Path) -> None:
    server = HttpServer(e5_ws)
    try:
        save = {"tool": "save_config", "args": {"device": "R1"}, "result": "saved"}

        async def scenario(c: Client) -> Any:
            await c.call_tool(
                "record_outcome",
                {"request": "save R1", "tools_called": [save], "outcome": "completed"},
            )
            async with anyio.create_task_group() as tg:  # a second write in flight
                tg.start_soon(c.call_tool, "remember", {"text": "R2 is in rack 4"})
                server.proc.send_signal(signal.SIGKILL)
                tg.cancel_scope.cancel()

        drive(server, scenario)
        assert server.proc.wait(30) == -signal.SIGKILL
    finally:
        server.stop()
    stats = olav_entry(e5_ws, "memory", "stats", "--json")  # opens what the kill left
    assert stats.returncode == 0, stats.stderr
    ws = Workspace.open(e5_ws)
    store = MemoryStore(ws.memory_path, store_of(e5_ws).embedder, lock_timeout=5.0)
    store.upsert(
        [MemoryRecord(id="fact_after_kill", text="written after the kill", category="fact")]
    )
    assert store.read("fact_after_kill", EVERYONE) is not None
