"""Approvals are interrupts: a dangerous tool (or a memory commit) pauses an Agent Protocol run
with an interrupt that says what would happen; the client's answer, with a person's token,
continues it. The same audit as the terminal's y/N; the OpenAI endpoint, which cannot answer,
refuses the tool instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import wait_until
from tests.serve._support import Model, http_events, human, last_user, serving

pytestmark = pytest.mark.slow

SNAPSHOT = {"name": "take_snapshot", "args": {"devices": ["sh1-border01"]}}


class SnapshotModel(Model):
    """Asks for a snapshot when the request says so; answers once the tool has answered."""

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        text = last_user(body)
        roles = [m["role"] for m in body["messages"]]
        if "snapshot" in text and "tool" not in roles:
            return {"tool_calls": [SNAPSHOT]}
        if "tool" in roles:
            result = next(m for m in reversed(body["messages"]) if m["role"] == "tool")
            return {"content": f"tool said: {result['content'][:60]}"}
        return super().reply(body)


def audit_kinds(ws: Path) -> list[str]:
    from olav.audit.db import connect

    with connect(ws / ".olav" / "databases" / "audit.duckdb") as con:
        rows = con.execute("SELECT kind FROM events ORDER BY created_at").fetchall()
    return [r[0] for r in rows if r[0] in ("interrupt", "approval", "denial")]


@pytest.mark.parametrize("answer", [[{"type": "accept"}], "no"])
def test_a_dangerous_tool_pauses_the_run_and_the_answer_decides(
    tmp_path: Path, answer: Any
) -> None:
    with serving(tmp_path / "ws", model=SnapshotModel()) as served:
        client = served.sdk()
        tid = client.threads.create(metadata={"graph_id": "netops"})["thread_id"]
        events = list(
            client.runs.stream(
                tid,
                "netops",
                input=human("take a snapshot of sh1-border01"),
                stream_mode=["values", "updates"],
            )
        )
        paused = [
            e.data["__interrupt__"]
            for e in events
            if e.event == "updates" and "__interrupt__" in (e.data or {})
        ]
        assert paused, [e.event for e in events]
        ask = paused[0][0]["value"]
        assert ask["action_request"] == {"action": "take_snapshot", "args": SNAPSHOT["args"]}
        assert "needs your approval" in ask["description"]
        thread = client.threads.get(tid)
        assert thread["status"] == "interrupted" and thread["interrupts"]
        state = client.threads.get_state(tid)
        assert state["next"] == ["tools"] and state["interrupts"][0]["value"] == ask
        snaps = served.ws / "exports" / "snapshots"
        assert not snaps.exists() or not list(snaps.glob("*.json"))  # nothing ran yet

        done = client.runs.wait(tid, "netops", command={"resume": answer})
        last = done["messages"][-1]["content"]
        ran = bool(list(snaps.glob("*.json"))) if snaps.exists() else False
        if answer == "no":
            assert not ran and "denied" in last
            assert audit_kinds(served.ws) == ["interrupt", "denial"]
        else:
            assert ran and last.startswith("tool said: Saved exports/snapshots/")
            assert audit_kinds(served.ws) == ["interrupt", "approval"]
        assert client.threads.get(tid)["status"] == "idle"
        with pytest.raises(httpx.HTTPStatusError) as nothing:  # nothing waits any more
            client.runs.wait(tid, "netops", command={"resume": "yes"})
        assert nothing.value.response.status_code == 409
        # bob cannot answer alice's approval: her thread does not exist for him
        with served.http("bob") as bob:
            res = bob.post(
                f"/threads/{tid}/runs/wait",
                json={"assistant_id": "netops", "command": {"resume": "yes"}},
            )
        assert res.status_code == 404
        # and it was audited: the request audit writes its batches from a thread of its own
        wait_until(lambda: http_events(served.ws), 30, "the request audit's rows")


def test_the_openai_endpoint_refuses_the_dangerous_tool_instead(tmp_path: Path) -> None:
    import openai

    with serving(tmp_path / "ws", model=SnapshotModel()) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key=served.tokens[served.alice])
        reply = client.chat.completions.create(
            model="olav/netops",
            messages=[{"role": "user", "content": "take a snapshot of sh1-border01"}],
        )
        assert "refused by the server's policy" in (reply.choices[0].message.content or "")
        snaps = served.ws / "exports" / "snapshots"
        assert not snaps.exists() or not list(snaps.glob("*.json"))
        # the model was told the server refused it, never that the user did
        told = [
            m["content"]
            for path, body in list(served.state.requests)
            if path == "/api/chat"
            for m in body["messages"]
            if m["role"] == "tool"
        ]
        assert told and all("not by the user" in t and "--auto-approve" in t for t in told)
        assert not any("user denied" in t for t in told)
        kinds = [k for k in audit_kinds(served.ws) if k in ("approval", "denial")]
        assert kinds == ["denial"]


def test_a_malformed_command_is_a_422(tmp_path: Path) -> None:
    with serving(tmp_path / "ws") as served, served.http() as http:
        tid = http.post("/threads", json={}).json()["thread_id"]
        for command in ("yes", {"goto": "tools"}, {"resume": None}):
            res = http.post(
                f"/threads/{tid}/runs/wait", json={"assistant_id": "core", "command": command}
            )
            assert res.status_code == 422 and "command" in res.json()["detail"], command
