"""`olav mcp`: the real server as a subprocess, driven by the MCP SDK's own client.

Over stdio (the client spawns `olav mcp`) and over streamable HTTP (`olav mcp --http --port 0`,
one server per module, reached at the URL it announces), in workspaces with the bundled e5
embedder, LanceDB and DuckDB. Readiness is the URL line plus a completed handshake, each
polled with a deadline.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters, types

from olav.audit.queries import runs_to_learn
from olav.audit.recorder import OUTCOMES, AuditRecorder
from olav.core.config import Workspace
from olav.learning.curator import DRAFTS
from olav.mcp.server import Category, Outcome, RememberCategory
from olav.mcp.service import REMEMBER_CATEGORIES, ToolCall, check_outcome, draft_intent
from olav.memory.schema import CATEGORIES, MemoryRecord
from olav.memory.store import MemoryStore
from tests.helpers import clean_env, wait_until

OLAV = [sys.executable, "-c", "from olav.cli.app import main; main()"]
CLIENT = types.Implementation(name="olav-test", version="1.0")
BACKUP = "back up the device configs"
DEADLINE = 120.0
Scenario = Callable[[Client], Awaitable[Any]]


def _env() -> dict[str, str]:
    env = clean_env()
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def stdio(root: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=OLAV[0], args=[*OLAV[1:], "mcp", *args], cwd=root, env=_env()
    )


def drive(server: Any, scenario: Scenario, **client: Any) -> Any:
    """Connect the SDK client to ``server`` (stdio parameters or a URL) and run ``scenario``."""

    async def main() -> Any:
        with anyio.fail_after(DEADLINE):
            async with Client(server, **{"client_info": CLIENT, **client}) as c:
                return await scenario(c)

    return anyio.run(main)


def answering(action: str, content: dict[str, Any] | None, asked: list[str]) -> Any:
    """An elicitation callback standing for the person: records the question, answers."""

    async def callback(_ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return callback


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def store_of(root: Path) -> MemoryStore:
    return MemoryStore.for_workspace(Workspace.open(root))


def audit_of(root: Path) -> AuditRecorder:
    return AuditRecorder(root / ".olav/databases/audit.duckdb")


def events(root: Path, kind: str) -> list[dict[str, Any]]:
    rows = audit_of(root).query(
        "SELECT detail FROM events WHERE kind = ? ORDER BY created_at", [kind]
    )
    return [json.loads(r[0]) for r in rows]


class HttpServer:
    """`olav mcp --http --port 0` in a subprocess; ``url`` is what it announced."""

    def __init__(self, root: Path, *args: str) -> None:
        self.root = root
        self.log = root / "mcp-server.log"
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(
                [*OLAV, "mcp", "--http", "--port", "0", *args],
                cwd=root,
                env=_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self.url = self._announced_url()

    def _announced_url(self) -> str:
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            found = re.search(r"http://127\.0\.0\.1:\d+/mcp", self.log.read_text())
            if found:
                return found.group(0)
            if self.proc.poll() is not None:
                raise AssertionError(f"olav mcp exited: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        raise AssertionError("olav mcp --http never announced its URL")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def _copy_workspace(template: Path, target: Path) -> Path:
    shutil.copytree(template, target)
    return target


@pytest.fixture(scope="module")
def http_ws(_e5_ws_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_workspace(_e5_ws_template, tmp_path_factory.mktemp("mcp") / "ws")


@pytest.fixture(scope="module")
def http_server(http_ws: Path) -> Iterator[HttpServer]:
    server = HttpServer(http_ws)
    yield server
    server.stop()


# -- without the protocol -----------------------------------------------------------------------


def test_schema_enums_are_the_ones_olav_uses() -> None:
    assert get_args(Category) == CATEGORIES
    assert get_args(Outcome) == OUTCOMES
    assert get_args(RememberCategory) == REMEMBER_CATEGORIES
    assert "document" not in REMEMBER_CATEGORIES and "topology" not in REMEMBER_CATEGORIES


def test_draft_ids_are_stable_and_distinct() -> None:
    first = draft_intent("The R1 loopback is 10.0.0.1")
    assert first == draft_intent("The  R1 loopback is 10.0.0.1")
    assert first != draft_intent("The R1 loopback is 10.0.0.2")
    assert first.startswith("r1_loopback_")
    assert re.fullmatch(r"memory_[0-9a-f]{6}", draft_intent("备份配置用 SCP"[:4]))


@pytest.mark.parametrize(
    ("calls", "outcome", "error", "problem"),
    [
        ([], "tool_error", None, "needs a call with status error"),
        (
            [ToolCall("save_config", {}, "Error: disk full", "error")],
            "completed",
            None,
            "tool_error",
        ),
        ([ToolCall("save_config")], "narrated", None, "no tool was called"),
        ([], "failed", None, "needs the error"),
        ([], "finished", None, "outcome must be one of"),
    ],
)
def test_an_outcome_that_contradicts_its_calls_is_refused(
    calls: list[ToolCall], outcome: str, error: str | None, problem: str
) -> None:
    from olav.mcp.service import McpArgumentError

    with pytest.raises(McpArgumentError, match=problem):
        check_outcome(calls, outcome, error)
    check_outcome([ToolCall("task")], "narrated", None)  # delegating is not acting


def test_unknown_agent_and_stray_port_are_one_line_errors(e5_ws: Path, olav: Any) -> None:
    result = olav("mcp", "--agent", "nosuch")
    assert result.exit_code == 1
    assert "there is no agent 'nosuch'" in str(result.exception)
    assert "core" in str(result.exception) and "netops" in str(result.exception)
    result = olav("mcp", "--port", "9999")
    assert result.exit_code == 1 and "--http" in str(result.exception)


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
    assert store_of(e5_ws).get(f"fact_{draft_id}") is None
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

        drive(server.url, scenario)
        assert server.proc.wait(30) == -signal.SIGKILL
    finally:
        server.stop()
    stats = subprocess.run(
        [*OLAV, "memory", "stats", "--json"],
        cwd=e5_ws,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert stats.returncode == 0, stats.stderr
    ws = Workspace.open(e5_ws)
    store = MemoryStore(ws.memory_path, store_of(e5_ws).embedder, lock_timeout=5.0)
    store.upsert(
        [MemoryRecord(id="fact_after_kill", text="written after the kill", category="fact")]
    )
    assert store.get("fact_after_kill") is not None


# -- streamable HTTP ------------------------------------------------------------------------------


def test_http_lists_every_tool_with_a_strict_schema(http_server: HttpServer) -> None:
    async def scenario(c: Client) -> Any:
        return (await c.list_tools()).tools

    tools = {t.name: t for t in drive(http_server.url, scenario)}
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
        http_server.url,
        scenario,
        mode=mode,
        elicitation_callback=answering("accept", {"store": True}, asked),
    )
    assert result.structured_content["stored"] is True, text(result)
    draft_id = result.structured_content["draft_id"]
    assert len(asked) == 1 and memory in asked[0] and "olav-test" in asked[0]
    row = store_of(http_server.root).get(f"fact_{draft_id}")
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

    result = drive(
        http_server.url, scenario, elicitation_callback=answering(action, content, asked)
    )
    draft_id = result.structured_content["draft_id"]
    assert result.structured_content["stored"] is False and len(asked) == 1
    assert store_of(http_server.root).get(f"decision_{draft_id}") is None
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

    result = drive(http_server.url, scenario)
    assert result.is_error
    message = text(result)
    assert says in message and "\n" not in message and "Traceback" not in message


def test_http_another_agents_memory_is_invisible(http_server: HttpServer) -> None:
    async def scenario(c: Client) -> Any:
        found = await c.call_tool("search", {"query": BACKUP, "k": 20})
        hidden = await c.call_tool("get", {"id": "guide_netops_backup_device_configs"})
        shared = await c.call_tool("get", {"id": "guide_core_delegate_network_tasks_to_netops"})
        return found, hidden, shared

    found, hidden, shared = drive(http_server.url, scenario)
    scopes = {h["scope"] for h in found.structured_content["hits"]}
    assert scopes and scopes <= {"core", "global"}
    assert hidden.is_error and "no memory with id" in text(hidden)
    assert not shared.is_error and shared.structured_content["scope"] == "global"
    assert store_of(http_server.root).get("guide_netops_backup_device_configs") is not None


def test_http_record_outcome_narrated_feeds_trace_review(http_server: HttpServer) -> None:
    request = "back up the configs of every core switch"
    answer = "I will now back up the configs of every core switch."

    async def scenario(c: Client) -> Any:
        return await c.call_tool(
            "record_outcome",
            {"request": request, "tools_called": [], "outcome": "narrated", "answer": answer},
        )

    result = drive(http_server.url, scenario)
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

    result = drive(http_server.url, scenario)
    captured = result.structured_content["captured"]
    assert len(captured) == 1  # the read and the failed push are not precedents
    row = store_of(http_server.root).get(captured[0])
    assert row is not None and row.category == "operational_event" and row.scope == "core"
    assert "save_config" in row.text and "s3cr3t-t0ken" not in row.text


def test_http_every_call_is_audited(http_server: HttpServer) -> None:
    probe = types.Implementation(name="audit-probe", version="2.0")  # this test's rows only

    async def scenario(c: Client) -> Any:
        await c.call_tool("recall", {"request": "which VLAN is the lab on"})
        await c.call_tool("get", {"id": "no_such_memory_7f3a"})
        await c.read_resource("olav://lessons")

    drive(http_server.url, scenario, client_info=probe)

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

    listed, guides, lessons, episodes, prompt = drive(http_server.url, scenario)
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
        http_server.url, scenario, elicitation_callback=answering("decline", None, unused)
    )
    assert isinstance(forged, types.InputRequiredResult)
    assert isinstance(replayed, types.InputRequiredResult | MCPError), replayed
    store = store_of(http_server.root)
    assert store.get(f"fact_{second}") is None
    assert honest.structured_content["stored"] is True and store.get(f"fact_{first}") is not None


def test_the_category_schema_is_the_tables() -> None:
    """The MCP schema spells the categories out for clients; it must follow the table's."""
    from typing import get_args

    from olav.mcp.server import Category
    from olav.memory.schema import CATEGORIES

    assert get_args(Category) == CATEGORIES
