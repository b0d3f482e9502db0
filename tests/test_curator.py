"""The memory curator: two-turn human confirmation, drafts and categories (documents, topology
and `olav kb import`: test_curator_documents.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.learning.curator import (
    CONFIRM_PROMPT,
    DRAFTS,
    NOT_CONFIRMED,
    DraftRequest,
    commit_draft,
    list_drafts,
    propose_draft,
)
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from olav.runtime.hooks import Callbacks
from tests.curator_support import drafts_in, open_store, propose
from tests.helpers import SessionFor, audit_rows

# -- turn 1 / turn 2 through a chat session ---------------------------------------------------


class Person:
    """The approver of a chat session: answers the y/N prompts in turn, records what it saw."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, args: dict[str, Any]) -> bool:
        self.asked.append((name, args))
        return self.answers.pop(0) if self.answers else False


def _propose_call(**kw: Any) -> dict[str, Any]:
    args = {
        "intent": "r1_loopback",
        "keywords": ["R1", "loopback", "环回"],
        "body": "R1's loopback is 10.255.1.1",
        "category": "fact",
        **kw,
    }
    return {"tool_calls": [{"name": "propose_memory_draft", "args": args}]}


COMMIT_CALL = {"tool_calls": [{"name": "commit_to_memory", "args": {"from_draft": True}}]}


def test_two_turn_session_commits_only_after_the_user_confirms(
    session_for: SessionFor, hash_ws: Path
) -> None:
    person = Person(True)
    session, model = session_for(
        [
            _propose_call(),
            {"content": "Here is the draft. " + CONFIRM_PROMPT},
            COMMIT_CALL,
            {"content": "Stored."},
        ],
        callbacks=Callbacks(approver=person),
    )
    store = open_store(hash_ws)
    before = store.size()
    session.ask("remember that R1's loopback is 10.255.1.1")
    preview = str(model.calls[1][-1].content)
    assert "r1_loopback" in preview and "10.255.1.1" in preview
    assert preview.rstrip().endswith(CONFIRM_PROMPT)
    assert store.size() == before  # turn 1 stores nothing
    assert drafts_in(hash_ws) == ["r1_loopback.draft.json"]

    assert person.asked == []  # proposing asks nothing
    assert session.ask("可以").answer == "Stored."
    [(tool, shown)] = person.asked  # the y/N prompt showed what would be stored
    assert (tool, shown["subject"]) == ("commit_to_memory", "r1_loopback")
    assert "category: fact" in shown["preview"] and "10.255.1.1" in shown["preview"]
    assert "Committed to memory as fact_r1_loopback" in str(model.calls[3][-1].content)
    row = store.read("fact_r1_loopback", EVERYONE)
    assert row is not None and row.category == "fact"
    assert (row.origin, row.confidence, row.scope) == ("user", 1.0, "global")
    assert store.size() == before + 1
    archived = drafts_in(hash_ws)
    assert len(archived) == 1 and archived[0].startswith("committed/r1_loopback_")
    events = audit_rows(hash_ws, "SELECT memory_id, action, actor, detail FROM memory_events")
    assert [(e[0], e[1], e[2]) for e in events] == [
        ("fact_r1_loopback", "commit", "memory_curator")
    ]
    assert json.loads(events[0][3])["archive"] == f"{DRAFTS}/{archived[0]}"


def test_auto_confirm_in_the_first_request_does_not_skip_the_preview(
    session_for: SessionFor, hash_ws: Path
) -> None:
    person = Person(True)
    session, model = session_for(
        [
            _propose_call(),
            COMMIT_CALL,  # the model tries to commit in the same turn
            {"content": "Please confirm. " + CONFIRM_PROMPT},
            COMMIT_CALL,
            {"content": "Stored."},
        ],
        callbacks=Callbacks(approver=person),
    )
    store = open_store(hash_ws)
    before = store.size()
    session.ask("remember that R1's loopback is 10.255.1.1. I already reviewed it, auto-confirm")
    refused = str(model.calls[2][-1].content)
    assert refused.startswith("Error:") and NOT_CONFIRMED in refused
    assert store.size() == before and store.read("fact_r1_loopback", EVERYONE) is None
    assert drafts_in(hash_ws) == ["r1_loopback.draft.json"]  # the draft waits for the reply
    assert audit_rows(hash_ws, "SELECT count(*) FROM memory_events") == [(0,)]
    assert person.asked == []  # refused before the person is bothered with a prompt

    session.ask("yes")
    assert "Committed" in str(model.calls[4][-1].content)
    assert store.read("fact_r1_loopback", EVERYONE) is not None


def test_commit_tool_without_a_draft_fails(session_for: SessionFor, hash_ws: Path) -> None:
    person = Person(True)
    session, model = session_for(
        [COMMIT_CALL, {"content": "nothing to commit"}], callbacks=Callbacks(approver=person)
    )
    before = open_store(hash_ws).size()
    session.ask("ok")
    result = str(model.calls[1][-1].content)
    assert result.startswith("Error: no draft found")
    assert open_store(hash_ws).size() == before and person.asked == []


# -- direct function tests --------------------------------------------------------------------


def test_propose_writes_only_a_draft(hash_ws: Path) -> None:
    store = open_store(hash_ws)
    before = store.size()
    preview = propose(hash_ws)
    assert preview.splitlines()[-1] == CONFIRM_PROMPT
    assert "NOTHING is stored" in preview and "body: R1's loopback is 10.255.1.1" in preview
    assert store.size() == before
    draft = json.loads((hash_ws / DRAFTS / "r1_loopback.draft.json").read_text())
    assert draft["category"] == "fact" and draft["scope"] == "global"
    assert draft["keywords"] == ["R1", "loopback", "环回"]


def test_commit_without_draft_fails(hash_ws: Path) -> None:
    with pytest.raises(OlavError, match="no draft found"):
        commit_draft(hash_ws, open_store(hash_ws), confirmed_by="cli")
    propose(hash_ws)
    with pytest.raises(OlavError, match="no draft found"):
        commit_draft(hash_ws, open_store(hash_ws), intent="other_intent", confirmed_by="cli")


def test_commit_in_the_proposing_run_is_refused(hash_ws: Path) -> None:
    store = open_store(hash_ws)
    propose(hash_ws, run_id="run-1")
    with pytest.raises(OlavError, match="the user has not confirmed yet"):
        commit_draft(hash_ws, store, run_id="run-1", confirmed_by="chat")
    assert store.read("fact_r1_loopback", EVERYONE) is None
    assert (
        commit_draft(hash_ws, store, run_id="run-2", confirmed_by="chat")
        == "Committed to memory as fact_r1_loopback."
    )
    with pytest.raises(OlavError, match="no draft found"):  # archived: it cannot commit twice
        commit_draft(hash_ws, store, run_id="run-3", confirmed_by="chat")


def test_a_draft_without_run_id_must_predate_the_committing_run(hash_ws: Path) -> None:
    from olav.audit.recorder import AuditRecorder

    audit_path = hash_ws / ".olav/databases/audit.duckdb"
    recorder = AuditRecorder(audit_path)
    store = open_store(hash_ws)
    run1 = recorder.start_run("core", "s1", "remember that ...", "scripted")
    propose(hash_ws)  # e.g. from a caller that does not know its run id
    with pytest.raises(OlavError, match="the user has not confirmed yet"):
        commit_draft(hash_ws, store, run_id=run1, audit_path=audit_path, confirmed_by="chat")
    with pytest.raises(OlavError, match="the user has not confirmed yet"):
        commit_draft(
            hash_ws, store, audit_path=audit_path, confirmed_by="chat"
        )  # run1 is the running run
    recorder.end_run(run1, "completed")
    run2 = recorder.start_run("core", "s1", "yes", "scripted")
    assert "fact_r1_loopback" in commit_draft(
        hash_ws, store, run_id=run2, audit_path=audit_path, confirmed_by="chat"
    )


def test_commit_without_a_confirmation_is_refused(hash_ws: Path) -> None:
    propose(hash_ws)
    store = open_store(hash_ws)
    for confirmed_by in (None, "model", ""):
        with pytest.raises(OlavError, match="only after a person confirms"):
            commit_draft(hash_ws, store, confirmed_by=confirmed_by)
    assert store.read("fact_r1_loopback", EVERYONE) is None
    assert drafts_in(hash_ws) == ["r1_loopback.draft.json"]


def test_an_old_unseen_draft_does_not_expire(hash_ws: Path) -> None:
    propose(hash_ws)
    path = hash_ws / DRAFTS / "r1_loopback.draft.json"
    draft = json.loads(path.read_text())
    draft["created_at"] = (datetime.now(UTC) - timedelta(days=40)).isoformat()
    path.write_text(json.dumps(draft))
    assert [d.intent for d in list_drafts(hash_ws)] == ["r1_loopback"]
    store = open_store(hash_ws)
    assert "fact_r1_loopback" in commit_draft(hash_ws, store, confirmed_by="cli")
    assert not (hash_ws / DRAFTS / "expired").exists()


def test_intent_cannot_escape_the_drafts_folder(hash_ws: Path) -> None:
    propose(hash_ws, intent="../../x")
    assert drafts_in(hash_ws) == ["x.draft.json"]
    assert not (hash_ws.parent / "x.draft.json").exists()
    assert not list(hash_ws.parent.glob("*.draft.json"))
    with pytest.raises(OlavError, match="no usable characters"):
        propose(hash_ws, intent="../..")
    with pytest.raises(OlavError, match="no agent"):
        propose(hash_ws, agent="../../etc", category="usage_guide")
    store = open_store(hash_ws)
    assert "fact_x" in commit_draft(hash_ws, store, intent="../../x", confirmed_by="cli")
    archived = drafts_in(hash_ws)
    assert len(archived) == 1 and archived[0].startswith("committed/x_")


def test_latest_draft_is_committed_and_a_named_one_can_be_chosen(hash_ws: Path) -> None:
    store = open_store(hash_ws)
    propose(hash_ws, intent="first_fact", body="first")
    propose(hash_ws, intent="second_fact", body="second", category="decision")
    assert [d.data["intent"] for d in list_drafts(hash_ws)] == ["first_fact", "second_fact"]
    assert "decision_second_fact" in commit_draft(hash_ws, store, confirmed_by="cli")
    assert "fact_first_fact" in commit_draft(
        hash_ws, store, intent="first_fact", confirmed_by="cli"
    )


def test_a_corrected_fact_supersedes_the_old_one_with_history(hash_ws: Path) -> None:
    from olav.learning.curator import commit_draft
    from olav.memory.lifecycle.conflicts import history

    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    for value in ("10.255.1.1", "10.255.9.9"):
        request = DraftRequest(
            intent="r1_loopback",
            keywords=["r1", "loopback"],
            body=f"R1 loopback is {value}",
            category="fact",
        )
        propose_draft(hash_ws, request, run_id="turn1")
        commit_draft(hash_ws, store, run_id="turn2", confirmed_by="chat")
    live = [
        h.record
        for h in store.search(
            "R1 loopback", k=5, filter=SearchFilter(categories=["fact"], reader=EVERYONE)
        )
    ]
    assert [r.metadata["body"] for r in live] == ["R1 loopback is 10.255.9.9"]
    chain = history(store, live[0].id)
    assert [r.metadata["body"] for r in chain] == [
        "R1 loopback is 10.255.1.1",
        "R1 loopback is 10.255.9.9",
    ]
