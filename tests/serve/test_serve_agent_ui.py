"""What agent-chat-ui and LangGraph's SDKs ask of `olav serve`, through the real Python
langgraph-sdk against the real server (in this process, on the Ollama stub): every stream mode
LangGraph has, the ids of streamed messages, the headers and bodies the SDKs parse, approvals
in LangChain v1's human-in-the-loop shape (approve, edit, reject, and agent-inbox's older
answers), and runs from a checkpoint (regenerate and edit: branches in the history)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve._inprocess import Here, serving_here
from tests.serve._support import HOLD_S, Model, human, last_user

pytestmark = pytest.mark.slow

SNAPSHOT = {"name": "take_snapshot", "args": {"devices": ["sh1-border01"]}}
LIST = {"name": "list_devices", "args": {"site": "sh1"}}
ALL_MODES = [
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "checkpoints",
    "tasks",
]


class ToolModel(Model):
    """Asks for a snapshot or the device list when the request says so; once the tool has
    answered, says what it said."""

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        text = last_user(body)
        for tag, gate in list(self.gates.items()):
            if tag in text and not any(m["role"] == "tool" for m in body["messages"][-1:]):
                gate.held.set()
                gate.release.wait(HOLD_S)
        after_user = body["messages"][
            max(i for i, m in enumerate(body["messages"]) if m["role"] == "user") :
        ]
        tools = [m for m in after_user if m["role"] == "tool"]
        if tools:
            return {"content": f"tool said: {tools[-1]['content'][:200]}"}
        if "snapshot" in text:
            return {"tool_calls": [SNAPSHOT]}
        if "devices" in text:
            return {"tool_calls": [LIST]}
        return super().reply(body)


@pytest.fixture(scope="module")
def model() -> ToolModel:
    return ToolModel()


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory, model: ToolModel) -> Iterator[Here]:
    with serving_here(tmp_path_factory.mktemp("agent-ui") / "ws", model=model) as h:
        yield h


@pytest.fixture
def sdk(here: Here) -> Iterator[Any]:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=here.url, api_key=here.tokens[here.alice])
    try:
        yield client
    finally:
        client.close()


def audit(here: Here, kinds: tuple[str, ...] = ("interrupt", "approval", "denial")) -> list[Any]:
    from olav.audit.db import connect

    with connect(Path(here.server.ws.audit_path)) as con:
        rows = con.execute("SELECT kind, detail FROM events ORDER BY created_at").fetchall()
    return [(k, json.loads(d)) for k, d in rows if k in kinds]


# -- stream modes -------------------------------------------------------------------------------


def test_every_stream_mode_emits_what_langgraph_emits(here: Here, sdk: Any) -> None:
    tid = sdk.threads.create(metadata={"graph_id": "netops"})["thread_id"]
    parts = list(
        sdk.runs.stream(
            tid, "netops", input=human("list the devices in sh1"), stream_mode=ALL_MODES
        )
    )
    kinds = [p.event for p in parts]
    assert kinds[0] == "metadata" and kinds[-1] == "end" and "error" not in kinds
    by = {k: [p.data for p in parts if p.event == k] for k in set(kinds)}
    final = by["values"][-1]["messages"]
    assert final[-1]["content"].startswith("tool said:")

    # custom: what the tool guard writes to LangGraph's stream writer, the tool's progress
    notes = [(c["name"], c["status"]) for c in by["custom"] if c.get("olav") == "tool"]
    assert notes == [("list_devices", "start"), ("list_devices", "success")]
    # checkpoints: each names its parent, the chain ends at the thread's state
    chain = by["checkpoints"]
    ids = [c["config"]["configurable"]["checkpoint_id"] for c in chain]
    parents = [
        (c["parent_config"] or {}).get("configurable", {}).get("checkpoint_id") for c in chain
    ]
    assert parents[1:] == ids[:-1] and len(set(ids)) == len(ids)
    state = sdk.threads.get_state(tid)
    assert ids[-1] == state["checkpoint"]["checkpoint_id"]
    assert chain[-1]["values"]["messages"][-1]["content"] == final[-1]["content"]
    assert chain[-1]["next"] == [] and "step" in chain[-1]["metadata"]
    # tasks: each node's start (its triggers) and its result, "tools" among them
    starts = {t["name"] for t in by["tasks"] if "triggers" in t}
    results = {t["name"] for t in by["tasks"] if "result" in t}
    assert {"model", "tools"} <= starts and starts == results
    # debug: checkpoints, tasks and their results, numbered by step
    assert {d["type"] for d in by["debug"]} == {"checkpoint", "task", "task_result"}
    assert all(isinstance(d["step"], int) and d["timestamp"] for d in by["debug"])
    # events: the graph's chain around the nodes' chains and the model's tokens
    events = [e["event"] for e in by["events"]]
    assert events[0] == "on_chain_start" and events[-1] == "on_chain_end"
    assert by["events"][0]["name"] == by["events"][-1]["name"] == "netops"
    assert "on_chat_model_stream" in events
    # messages-tuple ("messages" events) and messages (partial, then complete), with the ids
    # of the messages as the thread keeps them
    stored = {m["id"] for m in state["values"]["messages"] if m["type"] == "ai"}
    tuple_ids = {chunk["id"] for chunk, _ in by["messages"]}
    assert tuple_ids and tuple_ids <= stored
    complete = [m[0] for m in by["messages/complete"]]
    assert {m["id"] for m in complete} <= stored and complete[-1]["content"] == final[-1]["content"]
    partial = by["messages/partial"][-1][0]
    assert partial["id"] == complete[-1]["id"] and partial["content"] == final[-1]["content"]
    assert set(by["messages/metadata"][0]) <= stored


def test_only_the_modes_asked_for_are_streamed(here: Here, sdk: Any) -> None:
    tid = sdk.threads.create()["thread_id"]
    only = list(sdk.runs.stream(tid, "core", input=human("which area?"), stream_mode="values"))
    assert {p.event for p in only} == {"metadata", "values", "end"}
    # agent-chat-ui's modes, with nothing custom to say: custom stays quiet
    ui = list(
        sdk.runs.stream(
            tid, "core", input=human("and BGP?"), stream_mode=["values", "messages-tuple", "custom"]
        )
    )
    assert {p.event for p in ui} == {"metadata", "values", "messages", "end"}
    bad = httpx.post(
        f"{here.url}/threads/{tid}/runs/stream",
        headers={"x-api-key": here.tokens[here.alice]},
        json={"assistant_id": "core", "input": human("x"), "stream_mode": ["values", "tools2"]},
    )
    assert bad.status_code == 422 and "'tools2' is not supported" in bad.json()["detail"]
    assert "checkpoints" in bad.json()["detail"]


def test_a_join_streams_the_modes_it_asks_for(here: Here, sdk: Any, model: ToolModel) -> None:
    tid = sdk.threads.create()["thread_id"]
    with model.hold("hold-join") as gate:
        run = sdk.runs.create(
            tid, "netops", input=human("hold-join list devices"), stream_mode=ALL_MODES
        )
        gate.wait_held()
        joined = sdk.runs.join_stream(tid, run["run_id"], stream_mode=["custom", "values"])
        first = next(joined)  # the stream is open before the run goes on
        gate.release.set()
        rest = [first, *joined]
    kinds = [p.event for p in rest]
    assert set(kinds) <= {"metadata", "custom", "values", "end"}, kinds
    assert "custom" in kinds and "values" in kinds and kinds[-1] == "end"


# -- the headers and bodies the SDKs parse ------------------------------------------------------


def test_the_run_id_is_in_content_location(here: Here, sdk: Any) -> None:
    tid = sdk.threads.create()["thread_id"]
    created: list[Any] = []
    parts = list(
        sdk.runs.stream(
            tid, "core", input=human("hello"), stream_mode="values", on_run_created=created.append
        )
    )
    run_id = parts[0].data["run_id"]
    assert [(c["run_id"], c["thread_id"]) for c in created] == [(run_id, tid)]
    assert sdk.runs.get(tid, run_id)["status"] == "success"
    with (
        here.http() as http,
        http.stream(
            "POST",
            f"/threads/{tid}/runs/stream",
            json={"assistant_id": "core", "input": human("again")},
        ) as res,
    ):
        assert res.headers["location"].endswith("/stream")
        rid = res.headers["content-location"].rsplit("/", 1)[-1]
        assert res.headers["content-location"] == f"/threads/{tid}/runs/{rid}"
        res.read()


def test_cancel_answers_without_a_body_to_parse(here: Here, sdk: Any, model: ToolModel) -> None:
    tid = sdk.threads.create()["thread_id"]
    with model.hold("hold-stop") as gate:
        run = sdk.runs.create(tid, "core", input=human("hold-stop please"))
        gate.wait_held()
        with here.http() as http:
            later = http.post(f"/threads/{tid}/runs/{run['run_id']}/cancel")
            assert later.status_code == 202 and later.content == b""
            gate.release.set()
            waited = http.post(f"/threads/{tid}/runs/{run['run_id']}/cancel?wait=1")
            assert waited.status_code == 204 and waited.content == b""
            rollback = http.post(f"/threads/{tid}/runs/{run['run_id']}/cancel?action=rollback")
            assert rollback.status_code == 422 and "'rollback'" in rollback.json()["detail"]
    assert sdk.runs.get(tid, run["run_id"])["status"] == "interrupted"
    sdk.runs.cancel(tid, run["run_id"], wait=True)  # the SDK's own call, on an ended run


def test_thread_search_has_values_select_and_sort(here: Here, sdk: Any) -> None:
    made = []
    for text in ("first topic", "second topic", "third topic"):
        tid = sdk.threads.create(metadata={"graph_id": "core", "batch": "search-1"})["thread_id"]
        sdk.runs.wait(tid, "core", input=human(text))
        made.append(tid)
    found = sdk.threads.search(metadata={"graph_id": "core", "batch": "search-1"}, limit=100)
    assert [t["thread_id"] for t in found] == made[::-1]  # updated_at, newest first
    # agent-chat-ui names a thread by its first message
    assert [t["values"]["messages"][0]["content"] for t in found] == [
        "third topic",
        "second topic",
        "first topic",
    ]
    oldest = sdk.threads.search(
        metadata={"batch": "search-1"}, sort_by="created_at", sort_order="asc", limit=2
    )
    assert [t["thread_id"] for t in oldest] == made[:2]
    slim = sdk.threads.search(
        metadata={"batch": "search-1"}, select=["thread_id", "status"], limit=100
    )
    assert [set(t) for t in slim] == [{"thread_id", "status"}] * 3
    assert {t["thread_id"] for t in sdk.threads.search(ids=made[1:], limit=100)} == set(made[1:])
    with here.http() as http:
        bad = http.post("/threads/search", json={"sort_by": "colour"})
        assert bad.status_code == 422 and "sort_by 'colour'" in bad.json()["detail"]
        bad = http.post("/threads/search", json={"select": ["thread_id", "secrets"]})
        assert bad.status_code == 422 and "'secrets'" in bad.json()["detail"]


# -- approvals: LangChain v1's human-in-the-loop shape ------------------------------------------


def _paused(sdk: Any, text: str) -> tuple[str, dict[str, Any]]:
    """A thread whose run waits for the approval of a snapshot: (its id, the interrupt's
    value), as agent-chat-ui reads it from the thread's state."""
    tid = sdk.threads.create(metadata={"graph_id": "netops"})["thread_id"]
    list(sdk.runs.stream(tid, "netops", input=human(text), stream_mode=["values"]))
    thread = sdk.threads.get(tid)
    assert thread["status"] == "interrupted"
    (waiting,) = sdk.threads.get_state(tid)["interrupts"]
    return tid, waiting["value"]


def _resume(sdk: Any, tid: str, answer: Any) -> dict[str, Any]:
    # agent-chat-ui's submit of a decision: an empty input and the command
    values: dict[str, Any] = sdk.runs.wait(tid, "netops", input={}, command={"resume": answer})
    return values


def _tool_calls(here: Here, tool: str) -> list[dict[str, Any]]:
    from olav.audit.db import connect

    with connect(Path(here.server.ws.audit_path)) as con:
        rows = con.execute(
            "SELECT args FROM tool_calls WHERE tool = ? ORDER BY created_at", [tool]
        ).fetchall()
    return [json.loads(r[0]) for r in rows]


def _ran(here: Here) -> int:
    """How many snapshots ran (the audit's successful calls: two in one second share a
    file name)."""
    from olav.audit.db import connect

    with connect(Path(here.server.ws.audit_path)) as con:
        (n,) = con.execute(
            "SELECT COUNT(*) FROM tool_calls WHERE tool = 'take_snapshot' AND status = 'success'"
        ).fetchone()
    return int(n)


def _snapshots(here: Here) -> list[list[str]]:
    folder = here.ws / "exports" / "snapshots"
    files = sorted(folder.glob("*.json")) if folder.exists() else []
    return [json.loads(f.read_text())["devices"] for f in files]


def test_the_interrupt_is_a_hitl_request(here: Here, sdk: Any) -> None:
    tid, value = _paused(sdk, "take a snapshot of sh1-border01 (shape)")
    assert value["action_requests"] == [
        {
            "name": "take_snapshot",
            "args": SNAPSHOT["args"],
            "description": "take_snapshot needs your approval before it runs.",
        }
    ]
    assert value["review_configs"] == [
        {"action_name": "take_snapshot", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
    # agent-inbox's older keys are still there for clients that read them
    assert value["action_request"] == {"action": "take_snapshot", "args": SNAPSHOT["args"]}
    _resume(sdk, tid, {"decisions": [{"type": "reject"}]})


def test_approve_runs_the_tool(here: Here, sdk: Any) -> None:
    before = _ran(here)
    tid, _ = _paused(sdk, "take a snapshot of sh1-border01 (approve)")
    done = _resume(sdk, tid, {"decisions": [{"type": "approve"}]})
    assert done["messages"][-1]["content"].startswith("tool said: Saved exports/snapshots/")
    assert _ran(here) == before + 1
    kind, detail = audit(here)[-1]
    assert kind == "approval" and detail["decision"] == "approve"
    assert sdk.threads.get(tid)["status"] == "idle"


def test_edit_runs_the_edited_arguments_audited_as_edited(here: Here, sdk: Any) -> None:
    tid, _ = _paused(sdk, "take a snapshot of sh1-border01 (edit)")
    edited = {"name": "take_snapshot", "args": {"devices": ["sh1-core01"]}}
    done = _resume(sdk, tid, {"decisions": [{"type": "edit", "edited_action": edited}]})
    assert done["messages"][-1]["content"].startswith("tool said: Saved exports/snapshots/")
    assert _snapshots(here)[-1] == ["sh1-core01"]  # what ran is the person's edit
    assert _tool_calls(here, "take_snapshot")[-1] == {"devices": ["sh1-core01"]}
    kind, detail = audit(here)[-1]
    assert kind == "approval" and detail["decision"] == "edit" and detail["edited"] is True
    assert detail["args"] == SNAPSHOT["args"] and detail["edited_args"] == edited["args"]


def test_reject_tells_the_model_what_the_person_said(here: Here, sdk: Any) -> None:
    before = _ran(here)
    tid, _ = _paused(sdk, "take a snapshot of sh1-border01 (reject)")
    why = "not during the change window"
    done = _resume(sdk, tid, {"decisions": [{"type": "reject", "message": why}]})
    tool = next(m for m in reversed(done["messages"]) if m["type"] == "tool")
    assert tool["content"] == f"Error: the user rejected take_snapshot and said: {why}"
    assert _ran(here) == before
    kind, detail = audit(here)[-1]
    assert kind == "denial" and detail["decision"] == "reject" and detail["message"] == why


@pytest.mark.parametrize(
    ("answer", "ran", "told"),
    [
        ([{"type": "accept", "args": None}], True, "Saved exports/snapshots/"),
        ({"type": "ignore"}, False, "the user denied take_snapshot"),
        ([{"type": "response", "args": "use the core"}], False, "said: use the core"),
        (
            [
                {
                    "type": "edit",
                    "args": {"action": "take_snapshot", "args": {"devices": ["sh1-core02"]}},
                }
            ],
            True,
            "Saved exports/snapshots/",
        ),
        ("yes", True, "Saved exports/snapshots/"),
        (False, False, "the user denied take_snapshot"),
    ],
)
def test_agent_inbox_answers_keep_working(
    here: Here, sdk: Any, answer: Any, ran: bool, told: str
) -> None:
    before = _ran(here)
    tid, _ = _paused(sdk, "take a snapshot of sh1-border01 (inbox)")
    done = _resume(sdk, tid, answer)
    tool = next(m for m in reversed(done["messages"]) if m["type"] == "tool")
    assert told in tool["content"]
    assert _ran(here) == before + int(ran)


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ({"decisions": [{"type": "maybe"}]}, "'maybe', which is not a decision"),
        ({"decisions": []}, "a list of one decision"),
        ({"decisions": [{"type": "approve"}, {"type": "approve"}]}, "a list of one decision"),
        ("perhaps", "neither a yes nor a no"),
        ({"decisions": [{"type": "edit"}]}, "an edit without edited_action"),
        (
            {"decisions": [{"type": "edit", "edited_action": {"name": "db_query", "args": {}}}]},
            "an edit changes the arguments, not the tool",
        ),
        ({"decisions": [{"type": "respond", "message": "done"}]}, "'respond' is not a decision"),
        ({"decisions": [{"type": "reject", "message": 42}]}, "message must be text"),
        (7, "must be a decision object"),
    ],
)
def test_an_unreadable_answer_is_a_422_never_a_denial(
    here: Here, sdk: Any, answer: Any, named: str
) -> None:
    tid, value = _paused(sdk, "take a snapshot of sh1-border01 (unreadable)")
    with here.http() as http:
        res = http.post(
            f"/threads/{tid}/runs/wait",
            json={"assistant_id": "netops", "command": {"resume": answer}},
        )
    assert res.status_code == 422, res.text
    detail = res.json()["detail"]
    assert detail.startswith("command.resume") and named in detail, detail
    # nothing was decided: the thread still waits for the same approval
    assert sdk.threads.get(tid)["status"] == "interrupted"
    assert sdk.threads.get_state(tid)["interrupts"][0]["value"] == value
    _resume(sdk, tid, {"decisions": [{"type": "reject"}]})


def test_a_memory_commit_takes_no_edit() -> None:
    from olav.serve.approvals import AnswerError, approval_request, check_answer, read_answer

    asked = approval_request("commit_to_memory", {"subject": "d1", "preview": "text"})
    assert asked["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    edit = read_answer(
        {"decisions": [{"type": "edit", "edited_action": {"name": "commit_to_memory", "args": {}}}]}
    )
    with pytest.raises(AnswerError, match="commit_to_memory takes no edit"):
        check_answer(edit, asked)


# -- checkpoints: regenerate and edit are branches ----------------------------------------------


def _first_seen_parent(history: list[dict[str, Any]], message_id: str) -> dict[str, Any]:
    """What agent-chat-ui sends to regenerate or edit a message: the parent checkpoint of the
    oldest state that holds it (the SDK's firstSeenState.parent_checkpoint)."""
    holding = [
        h for h in history if message_id in {m.get("id") for m in h["values"].get("messages", [])}
    ]
    parent: dict[str, Any] = holding[-1]["parent_checkpoint"]
    assert parent and parent["checkpoint_id"]
    return {k: v for k, v in parent.items() if k != "thread_id"}  # as useStream sends it


def test_regenerate_and_edit_from_a_checkpoint_make_branches(here: Here, sdk: Any) -> None:
    tid = sdk.threads.create(metadata={"graph_id": "core"})["thread_id"]
    sdk.runs.wait(tid, "core", input=human("first question"))
    sdk.runs.wait(tid, "core", input=human("second question"))
    state = sdk.threads.get_state(tid)
    q1, a1, q2, a2 = state["values"]["messages"]
    history = sdk.threads.get_history(tid, limit=100)

    # regenerate the last answer: no input, the checkpoint before it
    asked = len([b for p, b in list(here.state.requests) if p == "/api/chat"])
    again = list(
        sdk.runs.stream(
            tid,
            "core",
            input=None,
            checkpoint=_first_seen_parent(history, a2["id"]),
            stream_mode=["values", "messages-tuple", "custom"],
        )
    )
    assert "error" not in [p.event for p in again]
    calls = [b for p, b in list(here.state.requests) if p == "/api/chat"]
    assert len(calls) == asked + 1 and last_user(calls[-1]) == "second question"
    now = sdk.threads.get_state(tid)["values"]["messages"]
    assert [m["content"] for m in now] == [
        q1["content"],
        a1["content"],
        q2["content"],
        a2["content"],
    ]
    assert now[-1]["id"] != a2["id"]  # a new answer, on a new branch
    streamed = {c["id"] for p in again if p.event == "messages" for c in p.data[:1]}
    assert streamed == {now[-1]["id"]}

    # edit the second question: its parent checkpoint, with the new message
    history = sdk.threads.get_history(tid, limit=100)
    edited = list(
        sdk.runs.stream(
            tid,
            "core",
            input=human("second question, edited"),
            checkpoint=_first_seen_parent(history, q2["id"]),
            stream_mode=["values"],
        )
    )
    assert "error" not in [p.event for p in edited]
    now = sdk.threads.get_state(tid)["values"]["messages"]
    assert [m["content"] for m in now] == [
        "first question",
        "answer to first question",
        "second question, edited",
        "answer to second question, edited",
    ]
    # the history holds every branch: two answers grew from one checkpoint, and the edit
    # from the checkpoint before the second question
    history = sdk.threads.get_history(tid, limit=100)
    parents = [h["parent_checkpoint"]["checkpoint_id"] for h in history if h["parent_checkpoint"]]
    assert len(parents) > len(set(parents))  # some checkpoint has two children
    holding_a2 = [h for h in history if a2["id"] in {m["id"] for m in h["values"]["messages"]}]
    assert holding_a2, "the first answer's branch is still in the history"
    # the thread's index (olav threads show, the console) shows the current branch
    turns = [t.content for t in here.server.threads.turns(tid)]
    assert turns == [m["content"] for m in now]
    # a checkpoint the thread does not have
    with here.http() as http:
        res = http.post(
            f"/threads/{tid}/runs/wait",
            json={"assistant_id": "core", "checkpoint_id": "1f0-no-such-checkpoint"},
        )
        assert res.status_code == 404 and "no checkpoint" in res.json()["detail"]
