"""The console's Chat page (`/chat`) in a real browser, on the real CLI server and the Ollama
stub: a message streams its answer on a new olav thread (listed by `olav threads list`), and
the turn shows the memory block its model call received, exactly as the audit recorded it and
the model got it; a dangerous tool shows Allow and Deny, Allow runs it and Deny does not (the
audit's approval and denial events). The chat's POSTs are the console's: without the cookie,
from another origin, without the CSRF token or with an API token they are 403; bob cannot
answer alice's approval; a form without JavaScript still works."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import olav_here
from tests.serve._support import (
    Model,
    Served,
    chromium,
    last_user,
    log_in,
    request_for,
    serving,
    session,
    sse_events,
)

pytestmark = pytest.mark.slow

NETOPS = "back up the device configs of the lab routers"  # recall injects a netops guide
SNAPSHOT = {"name": "take_snapshot", "args": {"devices": ["sh1-border01"]}}
ENDED = 'li.turn.live:not([data-state="running"]):not([data-state="waiting"])'  # its run ended


class SnapshotModel(Model):
    """Asks for a snapshot when the request says so; answers once the tool has answered."""

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        text = last_user(body)
        roles = [m["role"] for m in body["messages"]]
        if "snapshot" in text and "tool" not in roles:
            return {"tool_calls": [SNAPSHOT]}
        if "snapshot" in text:
            result = next(m for m in reversed(body["messages"]) if m["role"] == "tool")
            return {"content": f"tool said: {result['content'][:60]}"}
        return super().reply(body)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("serve-chat") / "ws", model=SnapshotModel()) as s:
        yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture()
def page(browser: Any, served: Served) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    try:
        log_in(tab, served)
        yield tab
    finally:
        context.close()


def audit(ws: Path, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    from olav.audit.db import connect

    with connect(ws / ".olav" / "databases" / "audit.duckdb") as con:
        return list(con.execute(sql, params).fetchall())


def answers_of(ws: Path, thread_id: str) -> list[str]:
    """The thread's interrupt, approval and denial events, in order."""
    rows = audit(
        ws,
        "SELECT e.kind FROM events e JOIN runs r ON e.run_id = r.id WHERE r.thread_id = ? "
        "AND e.kind IN ('interrupt', 'approval', 'denial') ORDER BY e.created_at",
        [thread_id],
    )
    return [r[0] for r in rows]


def snapshots(ws: Path) -> set[str]:
    found = ws / "exports" / "snapshots"
    return {p.name for p in found.glob("*.json")} if found.exists() else set()


def thread_of(page: Any) -> str:
    found = re.search(r"[?&]thread=([^&]+)", page.url)
    assert found, page.url
    return found.group(1)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the page has no CSRF field"
    return found.group(1)


def say(page: Any, served: Served, text: str, agent: str) -> Any:
    """A new chat: pick the agent, send ``text``; the turn it makes."""
    page.goto(served.url + "/")
    page.get_by_role("link", name="Chat", exact=True).click()
    page.wait_for_url(served.url + "/chat")
    page.get_by_label("agent").select_option(agent)
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()
    return page.locator("li.turn.live").last


# -- in the browser ---------------------------------------------------------------------------


def test_a_message_streams_its_answer_and_shows_what_the_model_saw(
    served: Served, page: Any
) -> None:
    turn = say(page, served, NETOPS, "netops")
    page.locator(ENDED).wait_for()
    assert turn.get_attribute("data-state") == "narrated"  # the stub says it, calls nothing
    assert turn.locator(".msg.assistant .text").inner_text() == f"answer to {NETOPS}"
    tid = thread_of(page)  # the page now names the thread it started
    run_id = turn.get_by_role("link", name="the run in the audit").get_attribute("href")
    run_id = run_id.removeprefix("/runs/")
    ((recorded,),) = audit(
        served.ws, "SELECT block FROM recalls WHERE run_id = ? AND agent = 'netops'", [run_id]
    )
    assert recorded and recorded.startswith("<relevant-memories>")
    turn.locator("details.saw summary").click()
    assert turn.locator("details.saw pre.block").inner_text() == recorded
    sent = request_for(served.state, NETOPS)  # and it is what the model got
    person = next(m["content"] for m in reversed(sent["messages"]) if m["role"] == "user")
    assert person.startswith(recorded)

    listed = olav_here(served.ws, "threads", "list", "--json")  # a normal olav thread
    assert listed.returncode == 0, listed.stderr
    mine = [t for t in json.loads(listed.stdout) if t["id"] == tid]
    assert mine and mine[0]["agent"] == "netops"

    page.reload()  # the thread again, from the audit: the same turn and the same block
    again = page.locator("li.turn").last
    assert again.locator(".msg.user .text").inner_text() == NETOPS
    assert again.locator(".msg.assistant .text").inner_text() == f"answer to {NETOPS}"
    again.locator("details.saw summary").click()
    assert again.locator("details.saw pre.block").inner_text() == recorded
    page.get_by_label("Message").fill("and the switches too")
    page.get_by_role("button", name="Send").click()  # the same thread continues
    page.locator(ENDED).nth(0).wait_for()
    assert thread_of(page) == tid
    assert len(audit(served.ws, "SELECT id FROM runs WHERE thread_id = ?", [tid])) == 2


@pytest.mark.parametrize("button", ["Allow", "Deny"])
def test_a_dangerous_tool_waits_for_allow_or_deny(served: Served, page: Any, button: str) -> None:
    before = snapshots(served.ws)
    turn = say(page, served, "take a snapshot of sh1-border01", "netops")
    turn.locator('.tool-call[data-tool="take_snapshot"]').wait_for()  # shown as it runs
    asked = turn.get_by_role("group", name="approval")
    asked.get_by_role("button", name="Allow").wait_for()
    assert "take_snapshot needs your approval" in asked.inner_text()
    assert "sh1-border01" in asked.locator("pre").inner_text()
    page.locator('li.turn.live[data-state="waiting"]').wait_for()
    tid = thread_of(page)
    assert answers_of(served.ws, tid) == ["interrupt"] and snapshots(served.ws) == before

    status = turn.locator("p.run-status").first
    assert status.inner_text().startswith("waiting for your answer")
    # every text the waiting run's status line takes from the answer on (issue 38: it said
    # "waiting for your answer" after Allow)
    status.evaluate(
        """line => {
          window.statusSeen = [];
          new MutationObserver(() => window.statusSeen.push(line.textContent))
            .observe(line, {childList: true, characterData: true, subtree: true});
        }"""
    )
    asked.get_by_role("button", name=button).click()
    page.locator(ENDED).wait_for()
    seen = page.evaluate("window.statusSeen")
    verb = "allowed, running take_snapshot…" if button == "Allow" else "denied, take_snapshot"
    assert seen and seen[0].startswith(verb), seen
    past = "allowed take_snapshot" if button == "Allow" else "denied take_snapshot"
    assert status.inner_text().startswith(past + " · ")
    assert "waiting for your answer" not in turn.inner_text()
    answer = turn.locator(".msg.assistant .text").last.inner_text()
    if button == "Allow":
        assert answer.startswith("tool said: Saved exports/snapshots/")
        assert "tool result · take_snapshot · success" in turn.inner_text()
        assert answers_of(served.ws, tid) == ["interrupt", "approval"]
        assert len(snapshots(served.ws) - before) == 1
    else:
        assert "denied" in answer
        assert answers_of(served.ws, tid) == ["interrupt", "denial"]
        assert snapshots(served.ws) == before


# -- the wire ---------------------------------------------------------------------------------


def test_the_stream_sends_tokens_then_the_turn(served: Served) -> None:
    with session(served) as alice:
        token = csrf_of(alice.get("/chat").text)
        form = {"csrf": token, "text": "hello from the stream", "agent": "core", "stream": "1"}
        with alice.stream("POST", "/chat/send", data=form, headers={"Origin": served.url}) as res:
            assert res.status_code == 200, res.read()
            assert res.headers["content-type"].startswith("text/event-stream")
            events = [(kind, data) for _, kind, data in sse_events(res)]
    kinds = [k for k, _ in events]
    assert kinds[0] == "thread" and kinds[-1] == "done" and "token" in kinds
    streamed = "".join(d["text"] for k, d in events if k == "token")
    end = events[-1][1]
    assert end["outcome"] == "completed" and end["answer"] == "answer to hello from the stream"
    assert streamed == end["answer"]
    assert end["thread"] == events[0][1]["thread"] and end["run"]


def test_without_javascript_the_forms_wait_and_show_the_approval(served: Served) -> None:
    with session(served) as alice:
        token = csrf_of(alice.get("/chat").text)
        sent = alice.post(
            "/chat/send",
            data={"csrf": token, "text": "take a snapshot of sh1-border01", "agent": "netops"},
            headers={"Origin": served.url},
        )
        assert sent.status_code == 303 and sent.headers["location"].startswith("/chat?thread=")
        tid = sent.headers["location"].split("=", 1)[1]
        shown = alice.get(sent.headers["location"]).text
        assert 'action="/chat/answer"' in shown and ">Allow</button>" in shown
        assert "take_snapshot needs your approval" in shown
        with session(served, "bob") as bob:  # not bob's to answer: his answer finds no thread
            bobs = csrf_of(bob.get("/chat").text)
            got = bob.post(
                "/chat/answer",
                data={"csrf": bobs, "thread": tid, "answer": "allow"},
                headers={"Origin": served.url},
            )
            assert got.status_code == 404
            assert bob.get("/chat", params={"thread": tid}).status_code == 404
        assert answers_of(served.ws, tid) == ["interrupt"]
        answered = alice.post(
            "/chat/answer",
            data={"csrf": token, "thread": tid, "answer": "deny"},
            headers={"Origin": served.url},
        )
        assert answered.status_code == 303
        after = alice.get(answered.headers["location"]).text
        assert 'action="/chat/answer"' not in after and "denied take_snapshot" in after
        assert after.count('data-tool="take_snapshot"') == 1  # the call once, then its answer
        assert "tool result · take_snapshot · error" in after
        assert answers_of(served.ws, tid) == ["interrupt", "denial"]


def test_the_chat_posts_are_the_consoles_only(served: Served) -> None:
    with session(served) as alice:
        token = csrf_of(alice.get("/chat").text)
        sent = alice.post(
            "/chat/send",
            data={"csrf": token, "text": "take a snapshot of sh1-border01", "agent": "netops"},
            headers={"Origin": served.url},
        )
        tid = sent.headers["location"].split("=", 1)[1]
        allow = {"csrf": token, "thread": tid, "answer": "allow"}
        tries = [
            ({"Origin": "http://evil.example"}, allow),  # another site
            ({"Referer": "http://evil.example/chat"}, allow),
            ({}, allow),  # neither Origin nor Referer
            ({"Origin": served.url}, {**allow, "csrf": ""}),  # no CSRF token
            (
                {"Origin": served.url},
                {**allow, "csrf": ("y" if token[0] == "x" else "x") + token[1:]},
            ),  # a wrong one
        ]
        for headers, form in tries:
            got = alice.post("/chat/answer", data=form, headers=headers)
            assert got.status_code == 403 and "Refused" in got.text, (headers, form)
        cross = alice.post(
            "/chat/send",
            data={"csrf": token, "text": "hi", "agent": "core"},
            headers={"Origin": "http://evil.example"},
        )
        assert cross.status_code == 403
        for form in (  # bad input: a 400 that says what is wrong, in one line
            {"csrf": token, "text": "  ", "agent": "core", "format": "json"},
            {"csrf": token, "text": "hi", "agent": "nobody", "format": "json"},
            {"csrf": token, "thread": tid, "answer": "maybe", "format": "json"},
        ):
            target = "/chat/answer" if "answer" in form else "/chat/send"
            got = alice.post(target, data=form, headers={"Origin": served.url})
            assert got.status_code == 400 and "\n" not in got.json()["detail"], got.text
    with httpx.Client(base_url=served.url, timeout=60) as anonymous:  # no cookie
        got = anonymous.post("/chat/answer", data=allow, headers={"Origin": served.url})
        assert got.status_code == 403
    with served.http() as scripted:  # alice's API token, no cookie: never a person's yes
        got = scripted.post("/chat/answer", data=allow, headers={"Origin": served.url})
        assert got.status_code == 403
    assert answers_of(served.ws, tid) == ["interrupt"]  # nothing was answered
