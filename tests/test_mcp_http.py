"""`olav mcp` over streamable HTTP: one real server per module (`olav mcp --http --port 0`),
reached at the URL it announces, in a workspace with the bundled e5 embedder, LanceDB and
DuckDB. Readiness is the URL line plus a completed handshake, each polled with a deadline."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, MCPError, types

from olav.access.tokens import TokenStore
from olav.audit.queries import runs_to_learn
from olav.core.config import Workspace
from olav.memory.store.scopes import EVERYONE, private_scope
from tests.helpers import wait_until
from tests.mcp_support import (
    BACKUP,
    HttpServer,
    answering,
    audit_of,
    bearer,
    copy_workspace,
    drive,
    events,
    store_of,
    text,
)


@pytest.fixture(scope="module")
def http_ws(_e5_ws_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace(_e5_ws_template, tmp_path_factory.mktemp("mcp") / "ws")


@pytest.fixture(scope="module")
def http_server(http_ws: Path) -> Iterator[HttpServer]:
    server = HttpServer(http_ws)
    yield server
    server.stop()


# -- streamable HTTP ------------------------------------------------------------------------------


def test_http_lists_every_tool_with_a_strict_schema(http_server: HttpServer) -> None:
    async def scenario(c: Client) -> Any:
        return (await c.list_tools()).tools

    tools = {t.name: t for t in drive(http_server, scenario)}
    assert list(tools) == ["recall", "search", "get", "remember", "confirm", "record_outcome"]
    for tool in tools.values():
        assert tool.input_schema["additionalProperties"] is False
        assert tool.description and len(tool.description) > 40
    assert "consent" not in tools["confirm"].input_schema["properties"]  # only the dialog says yes


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 rounds; 2025-11-25 requests
def test_http_accepted_elicitation_stores(http_server: HttpServer, mode: str) -> None:
    asked: list[str] = []
    memory = f"The lab NTP server is 10.0.0.123 ({mode})"

    async def scenario(c: Client) -> Any:
        drafted = await c.call_tool("remember", {"text": memory, "category": "fact"})
        assert drafted.structured_content["stored"] is False  # type: ignore[index]
        return await c.call_tool("confirm", {"draft_id": drafted.structured_content["draft_id"]})  # type: ignore[index]

    result = drive(
        http_server,
        scenario,
        mode=mode,
        elicitation_callback=answering("accept", {"store": True}, asked),
    )
    assert result.structured_content["stored"] is True, text(result)
    draft_id = result.structured_content["draft_id"]
    assert len(asked) == 1 and memory in asked[0] and "olav-test" in asked[0]
    row = store_of(http_server.root).read(f"fact_{draft_id}", EVERYONE)
    assert row is not None and row.origin == "user" and memory in row.text
    commits = audit_of(http_server.root).query(
        "SELECT detail FROM memory_events WHERE memory_id = ? AND action = 'commit'", [row.id]
    )
    assert json.loads(commits[0][0])["confirmed_by"] == "mcp"
    if mode == "auto":  # the question went out as an input_required round, then the yes came

        def rounds() -> list[str]:
            rows = events(http_server.root, "mcp_call")
            return [e["status"] for e in rows if e["tool"] == "confirm"][-2:]

        # the server audits after replying
        wait_until(
            lambda: rounds() == ["input_required", "ok"], 30, "the two confirm rounds", every=0.05
        )


@pytest.mark.parametrize(
    ("action", "content"),
    [("decline", None), ("cancel", None), ("accept", {"store": False})],
)
def test_http_a_declined_elicitation_stores_nothing(
    http_server: HttpServer, action: str, content: dict[str, Any] | None
) -> None:
    asked: list[str] = []
    memory = f"Decommission R9 next week ({action}, {content})"

    async def scenario(c: Client) -> Any:
        drafted = await c.call_tool("remember", {"text": memory, "category": "decision"})
        return await c.call_tool("confirm", {"draft_id": drafted.structured_content["draft_id"]})  # type: ignore[index]

    result = drive(http_server, scenario, elicitation_callback=answering(action, content, asked))
    draft_id = result.structured_content["draft_id"]
    assert result.structured_content["stored"] is False and len(asked) == 1
    assert store_of(http_server.root).read(f"decision_{draft_id}", EVERYONE) is None
    denial = [d for d in events(http_server.root, "denial") if d["subject"] == draft_id]
    assert denial and denial[-1]["asked"] is True


@pytest.mark.parametrize(
    ("tool", "args", "says"),
    [
        ("recall", {}, "'request'"),
        ("recall", {"request": "x", "scope": "netops"}, "unknown argument 'scope'"),
        ("search", {"query": "backup", "k": 0}, "'k'"),
        ("search", {"query": "backup", "category": "secrets"}, "'category'"),
        ("confirm", {"draft_id": "x", "consent": {"store": True}}, "unknown argument 'consent'"),
        ("confirm", {"draft_id": "../../etc"}, "'draft_id'"),
        ("confirm", {"draft_id": "no_such_draft"}, "no draft found"),
        ("remember", {"text": "a runbook", "category": "document"}, "'category'"),
        ("record_outcome", {"request": "x", "tools_called": [], "outcome": "done"}, "'outcome'"),
        (
            "record_outcome",
            {
                "request": "x",
                "tools_called": [{"tool": "save", "extra": 1}],
                "outcome": "completed",
            },
            "tools_called",
        ),
        (
            "record_outcome",
            {"request": "x", "tools_called": [], "outcome": "tool_error"},
            "status error",
        ),
        ("recall", {"request": "x", "agent": "netops"}, "serves agent 'core' only"),
    ],
)
def test_http_a_bad_argument_is_a_structured_error(
    http_server: HttpServer, tool: str, args: dict[str, Any], says: str
) -> None:
    async def scenario(c: Client) -> Any:
        return await c.call_tool(tool, args)

    result = drive(http_server, scenario)
    assert result.is_error
    message = text(result)
    assert says in message and "\n" not in message and "Traceback" not in message


def test_http_another_agents_memory_is_invisible(http_server: HttpServer) -> None:
    async def scenario(c: Client) -> Any:
        found = await c.call_tool("search", {"query": BACKUP, "k": 20})
        hidden = await c.call_tool("get", {"id": "guide_netops_backup_device_configs"})
        shared = await c.call_tool("get", {"id": "guide_core_delegate_network_tasks_to_netops"})
        return found, hidden, shared

    found, hidden, shared = drive(http_server, scenario)
    scopes = {h["scope"] for h in found.structured_content["hits"]}
    # the agent's scopes, and the private scope of the token's operator (their own writes)
    assert scopes and scopes <= {"core", "global", f"user:{http_server.operator}"}
    assert hidden.is_error and "no memory with id" in text(hidden)
    assert not shared.is_error and shared.structured_content["scope"] == "global"
    assert (
        store_of(http_server.root).read("guide_netops_backup_device_configs", EVERYONE) is not None
    )


def test_http_record_outcome_narrated_feeds_trace_review(http_server: HttpServer) -> None:
    request = "back up the configs of every core switch"
    answer = "I will now back up the configs of every core switch."

    async def scenario(c: Client) -> Any:
        return await c.call_tool(
            "record_outcome",
            {"request": request, "tools_called": [], "outcome": "narrated", "answer": answer},
        )

    result = drive(http_server, scenario)
    assert not result.is_error, text(result)
    run_id = result.structured_content["run_id"]
    since = datetime.now(UTC) - timedelta(hours=1)
    runs = {
        r["run_id"]: r
        for r in runs_to_learn(
            http_server.root / ".olav/databases/audit.duckdb", since=since, limit=50
        )
    }
    assert runs[run_id]["outcome"] == "narrated"
    assert runs[run_id]["request"] == request and runs[run_id]["answer"] == answer
    model = audit_of(http_server.root).query("SELECT model FROM runs WHERE id = ?", [run_id])
    assert model[0][0] == "mcp:olav-test"


def test_http_record_outcome_captures_successful_writes(http_server: HttpServer) -> None:
    calls = [
        {"tool": "list_devices", "args": {"site": "lab"}, "result": "R1, R2"},
        {"tool": "save_config", "args": {"device": "R1", "token": "s3cr3t-t0ken"}, "result": "ok"},
        {
            "tool": "push_config",
            "args": {"device": "R2"},
            "result": "Error: timeout",
            "status": "error",
        },
    ]

    async def scenario(c: Client) -> Any:
        return await c.call_tool(
            "record_outcome",
            {"request": "save R1 and push R2", "tools_called": calls, "outcome": "tool_error"},
        )

    result = drive(http_server, scenario)
    captured = result.structured_content["captured"]
    assert len(captured) == 1  # the read and the failed push are not precedents
    row = store_of(http_server.root).read(captured[0], EVERYONE)
    assert row is not None and row.category == "operational_event"
    # the report is the workspace operator's until someone allowed promotes it
    assert row.scope == private_scope(Workspace.open(http_server.root).config)
    assert "save_config" in row.text and "s3cr3t-t0ken" not in row.text


def test_http_every_call_is_audited(http_server: HttpServer) -> None:
    probe = types.Implementation(name="audit-probe", version="2.0")  # this test's rows only

    async def scenario(c: Client) -> Any:
        await c.call_tool("recall", {"request": "which VLAN is the lab on"})
        await c.call_tool("get", {"id": "no_such_memory_7f3a"})
        await c.read_resource("olav://lessons")

    drive(http_server, scenario, client_info=probe)

    def rows() -> list[dict[str, Any]]:
        return [e for e in events(http_server.root, "mcp_call") if e["client"] == "audit-probe"]

    recall, get, read = wait_until(
        lambda: len(rows()) == 3 and rows(), 30, "three mcp_call rows", every=0.05
    )
    assert (recall["tool"], recall["status"], recall["error"]) == ("recall", "ok", None)
    assert get["tool"] == "get" and get["status"] == "error" and "no memory with id" in get["error"]
    assert (read["method"], read["tool"], read["status"]) == (
        "resources/read",
        "olav://lessons",
        "ok",
    )
    assert recall["transport"] == "http" and recall["agent"] == "core"
    assert isinstance(recall["latency_ms"], float) and recall["latency_ms"] > 0


def test_http_resources_and_prompt(http_server: HttpServer) -> None:
    async def scenario(c: Client) -> Any:
        listed = await c.list_resources()
        guides = await c.read_resource("olav://guides")
        lessons = await c.read_resource("olav://lessons")
        episodes = await c.read_resource("olav://episodes")
        prompt = await c.get_prompt("use_olav_memory")
        return listed, guides, lessons, episodes, prompt

    listed, guides, lessons, episodes, prompt = drive(http_server, scenario)
    assert sorted(str(r.uri) for r in listed.resources) == [
        "olav://episodes",
        "olav://guides",
        "olav://lessons",
    ]
    guide_text = guides.contents[0].text
    assert "guide_core_delegate_network_tasks_to_netops" in guide_text
    assert "guide_netops_backup_device_configs" not in guide_text
    assert lessons.contents[0].text.startswith("# Lessons")
    assert episodes.contents[0].text.startswith("# Recent episodes")
    words = prompt.messages[0].content.text
    assert all(w in words for w in ("recall", "remember", "confirm", "record_outcome"))


def test_http_a_client_cannot_answer_a_question_it_was_not_asked(http_server: HttpServer) -> None:
    """2026-07-28 rounds: a forged or replayed yes is asked again, never taken as consent."""
    yes = types.ElicitResult(action="accept", content={"store": True})

    async def confirm(c: Client, draft: str, **round_: Any) -> Any:
        return await c.session.call_tool(
            "confirm", {"draft_id": draft}, allow_input_required=True, **round_
        )

    async def scenario(c: Client) -> Any:
        first, second = [
            (await c.call_tool("remember", {"text": t})).structured_content["draft_id"]  # type: ignore[index]
            for t in ("Syslog goes to 10.9.9.9", "Syslog goes to 10.6.6.6")
        ]
        asked = await confirm(c, first)
        assert isinstance(asked, types.InputRequiredResult)
        key = next(iter(asked.input_requests))
        forged = await confirm(c, first, input_responses={key: yes})  # no sealed state
        try:  # the yes given to another draft's preview, with that round's sealed state
            replayed: Any = await confirm(
                c, second, input_responses={key: yes}, request_state=asked.request_state
            )
        except MCPError as exc:  # the SDK refuses state minted for another request
            replayed = exc
        honest = await confirm(
            c, first, input_responses={key: yes}, request_state=asked.request_state
        )
        return first, second, forged, replayed, honest

    unused: list[str] = []
    first, second, forged, replayed, honest = drive(
        http_server, scenario, elicitation_callback=answering("decline", None, unused)
    )
    assert isinstance(forged, types.InputRequiredResult)
    assert isinstance(replayed, types.InputRequiredResult | MCPError), replayed
    store = store_of(http_server.root)
    assert store.read(f"fact_{second}", EVERYONE) is None
    assert (
        honest.structured_content["stored"] is True
        and store.read(f"fact_{first}", EVERYONE) is not None
    )


# -- a token on every request (MCP's authorization rules) ----------------------------------------


def _initialize(url: str, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    return httpx.post(url, json=body, headers=headers, timeout=30)


def test_http_refuses_a_request_without_a_live_token(http_server: HttpServer) -> None:
    revoked = http_server.token_for("carol")
    store = TokenStore.for_workspace(Workspace.open(http_server.root))
    store.revoke(revoked.split("_")[1])
    for token in (None, "olav_0123456789ab_" + "x" * 43, revoked, "not-a-token"):
        got = _initialize(http_server.url, token)
        assert got.status_code == 401, (token, got.text)
        challenge = got.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
        assert "resource_metadata=" in challenge
    assert _initialize(http_server.url, http_server.token).status_code == 200
    # where a client learns how to authenticate (RFC 9728), as the challenge says
    meta_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    meta = httpx.get(meta_url, timeout=30).json()
    assert meta["resource"] == http_server.url and "olav:memory" in meta["scopes_supported"]


def test_http_each_token_sees_its_own_operators_memory(http_server: HttpServer) -> None:
    alice = http_server.token_for("alice")
    bob = http_server.token_for("bob")
    secret = "alice's lab VPN PSK is kept in vault path ops/vpn-alpha"

    async def remember(c: Client) -> Any:
        drafted = await c.call_tool("remember", {"text": secret, "category": "fact"})
        return await c.call_tool("confirm", {"draft_id": drafted.structured_content["draft_id"]})  # type: ignore[index]

    async def look(c: Client) -> Any:
        found = await c.call_tool("search", {"query": "lab VPN PSK vault path", "k": 10})
        recalled = await c.call_tool("recall", {"request": "where is the lab VPN PSK kept?"})
        return found.structured_content, recalled.structured_content

    asked: list[str] = []
    accept = answering("accept", {"store": True}, asked)
    stored = drive(bearer(http_server.url, alice), remember, elicitation_callback=accept)
    assert stored.structured_content["stored"] is True, text(stored)
    row = store_of(http_server.root).read(f"fact_{stored.structured_content['draft_id']}", EVERYONE)
    assert row is not None and row.scope == "user:alice"

    theirs = json.dumps(drive(bearer(http_server.url, bob), look))
    assert "ops/vpn-alpha" not in theirs
    mine = json.dumps(drive(bearer(http_server.url, alice), look))
    assert "ops/vpn-alpha" in mine
    # the audit names who called, not the workspace's owner
    who = {e["operator"] for e in events(http_server.root, "mcp_call") if e["tool"] == "search"}
    assert {"alice", "bob"} <= who


def test_http_a_session_answers_only_the_token_that_opened_it(http_server: HttpServer) -> None:
    alice = http_server.token_for("alice")
    opened = _initialize(http_server.url, alice)
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}

    def call(token: str) -> httpx.Response:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}",
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-11-25",
        }
        return httpx.post(http_server.url, json=listing, headers=headers, timeout=30)

    borrowed = call(http_server.token_for("mallory"))
    assert borrowed.status_code in (403, 404), borrowed.text
    assert "recall" not in borrowed.text
    assert call(alice).status_code == 200
