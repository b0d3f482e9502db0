"""`olav serve` as langgraph's own RemoteGraph sees it: an olav agent used as a graph node
(invoke, stream), its state read back at the head and at a checkpoint, its history, a state
written by update_state, and the thread routes the SDK's helpers call (count, join_stream with
its default stream_mode)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.pregel.remote import RemoteGraph

from tests.serve._support import Served, human

pytestmark = pytest.mark.slow


def remote(served: Served, agent: str = "core") -> RemoteGraph:
    return RemoteGraph(agent, sync_client=served.sdk())


def config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    made: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
    if checkpoint_id:
        made["configurable"]["checkpoint_id"] = checkpoint_id
    return made


def last_ai(values: dict[str, Any]) -> str:
    last = values["messages"][-1]
    assert last["type"] == "ai", last
    return str(last["content"])


def test_remote_graph_invoke_stream_and_state(served: Served) -> None:
    graph = remote(served)
    tid = served.sdk().threads.create(metadata={"graph_id": "core"})["thread_id"]
    out = graph.invoke(human("first question"), config(tid))
    assert last_ai(out) == "answer to first question"
    chunks = list(graph.stream(human("second question"), config(tid), stream_mode="values"))
    assert chunks and last_ai(chunks[-1]) == "answer to second question"

    state = graph.get_state(config(tid))
    assert last_ai(state.values) == "answer to second question"
    head = state.config["configurable"]["checkpoint_id"]
    assert head and state.config["configurable"]["thread_id"] == tid

    history = list(graph.get_state_history(config(tid)))
    assert history[0].config["configurable"]["checkpoint_id"] == head
    assert all(isinstance(s.tasks, tuple) for s in history)
    # an earlier checkpoint: the state after the first answer
    first = next(
        s
        for s in history
        if s.values.get("messages")
        and s.values["messages"][-1]["content"] == "answer to first question"
    )
    at = graph.get_state(config(tid, first.config["configurable"]["checkpoint_id"]))
    assert last_ai(at.values) == "answer to first question"
    assert (
        at.config["configurable"]["checkpoint_id"] == first.config["configurable"]["checkpoint_id"]
    )


def test_remote_graph_update_state(served: Served) -> None:
    graph = remote(served)
    tid = served.sdk().threads.create(metadata={"graph_id": "core"})["thread_id"]
    graph.invoke(human("hello"), config(tid))
    note = {"type": "ai", "content": "a note the client wrote into the thread"}
    updated = graph.update_state(config(tid), {"messages": [note]})
    assert updated["configurable"]["checkpoint_id"]
    state = graph.get_state(config(tid))
    assert last_ai(state.values) == "a note the client wrote into the thread"
    assert state.config["configurable"]["checkpoint_id"] == updated["configurable"]["checkpoint_id"]
    # the next run continues from it
    out = graph.invoke(human("and now?"), config(tid))
    texts = [m["content"] for m in out["messages"]]
    assert "a note the client wrote into the thread" in texts and texts[-1] == "answer to and now?"


def test_threads_count_and_join_stream_with_the_sdks_defaults(served: Served) -> None:
    client = served.sdk()
    tag = {"project": "count-e2e"}
    for _ in range(3):
        client.threads.create(metadata={"graph_id": "core", **tag})
    assert client.threads.count(metadata=tag) == 3
    assert client.threads.count(metadata={"project": "nobody-has-this"}) == 0
    assert client.threads.count() >= 3
    tid = client.threads.create(metadata={"graph_id": "core"})["thread_id"]
    run = client.runs.create(tid, "core", input=human("joined later"))
    parts = list(client.runs.join_stream(tid, run["run_id"]))
    values = [p.data for p in parts if p.event == "values"]
    assert values and last_ai(values[-1]) == "answer to joined later"
    # another operator's threads are not counted
    assert served.sdk("bob").threads.count(metadata=tag) == 0
