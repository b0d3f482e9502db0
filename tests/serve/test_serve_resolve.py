"""agent-chat-ui's *Mark as resolved* sends ``command: {"goto": "__end__"}`` to a thread that
waits at an approval: the wait ends, the tool does not run, the model is told so on the next
turn, and the audit keeps the person's decision."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.serve._support import human, serving
from tests.serve.test_serve_interrupts import SnapshotModel, audit_kinds

pytestmark = pytest.mark.slow


def test_mark_as_resolved_ends_the_wait_without_running_the_tool(tmp_path: Path) -> None:
    with serving(tmp_path / "ws", model=SnapshotModel()) as served:
        client = served.sdk()
        tid = client.threads.create(metadata={"graph_id": "netops"})["thread_id"]
        client.runs.wait(tid, "netops", input=human("take a snapshot of sh1-border01"))
        assert client.threads.get(tid)["status"] == "interrupted"
        # bob cannot end alice's wait: her thread does not exist for him
        with served.http("bob") as bob:
            res = bob.post(
                f"/threads/{tid}/runs/wait",
                json={"assistant_id": "netops", "command": {"goto": "__end__"}},
            )
        assert res.status_code == 404
        assert client.threads.get(tid)["status"] == "interrupted"

        client.runs.wait(tid, "netops", command={"goto": "__end__"})
        snaps = served.ws / "exports" / "snapshots"
        assert not snaps.exists() or not list(snaps.glob("*.json"))  # the tool never ran
        thread = client.threads.get(tid)
        assert thread["status"] == "idle" and not thread["interrupts"]
        state = client.threads.get_state(tid)
        assert state["next"] == [] and not state["interrupts"]
        tool = [m for m in state["values"]["messages"] if m["type"] == "tool"]
        assert len(tool) == 1 and "marked its approval as resolved" in tool[0]["content"]
        assert audit_kinds(served.ws) == ["interrupt", "denial"]
        with pytest.raises(httpx.HTTPStatusError) as nothing:  # nothing waits any more
            client.runs.wait(tid, "netops", command={"goto": "__end__"})
        assert nothing.value.response.status_code == 409

        # the thread goes on: the next turn's model reads that nothing ran
        done = client.runs.wait(tid, "netops", input=human("and now?"))
        told = [
            m["content"]
            for path, body in list(served.state.requests)
            if path == "/api/chat"
            for m in body["messages"]
            if m["role"] == "tool"
        ]
        assert told and "marked its approval as resolved" in told[-1]
        assert done["messages"][-1]["type"] == "ai"


@pytest.mark.parametrize(
    ("command", "status", "says"),
    [
        ({"goto": "tools"}, 422, "'__end__' only"),
        ({"goto": [{"node": "agent"}]}, 422, "'__end__' only"),
        ({"goto": "__end__", "resume": "yes"}, 422, "not both"),
        ({"update": {"messages": []}}, 422, "command.update"),
        ({"goto": "__end__"}, 409, "nothing to resolve"),  # a new thread waits for nothing
    ],
)
def test_a_command_olav_cannot_follow_says_why(
    tmp_path: Path, command: dict[str, object], status: int, says: str
) -> None:
    with serving(tmp_path / "ws") as served, served.http() as http:
        tid = http.post("/threads", json={}).json()["thread_id"]
        res = http.post(
            f"/threads/{tid}/runs/wait", json={"assistant_id": "core", "command": command}
        )
        assert res.status_code == status and says in res.json()["detail"], res.text
