"""The memory curator: two-turn human confirmation, drafts, categories, document import."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
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
from olav.memory.chunking import CHUNK_TOKENS, chunk_text
from olav.memory.diagrams import detect_diagram_format
from olav.memory.documents import import_document_file
from olav.memory.store import MemoryStore
from olav.memory.tokens import estimate_tokens
from tests.helpers import OlavCli, SessionFor

RUNBOOK = "\n\n".join(
    [
        "# BGP flap runbook",
        "What to do when the eBGP session between sh1-border01 and bj1-border01 flaps.",
        "## Symptoms",
        " ".join(
            f"Symptom {i}: the session resets and the prefixes are withdrawn." for i in range(60)
        ),
        "## Steps",
        " ".join(f"Step {i}: check the interface counters and the BGP log." for i in range(60)),
        "## 升级",
        "联系网络值班工程师，并在工单里附上 show ip bgp summary 的输出。" * 20,
    ]
)


def open_store(root: Path) -> MemoryStore:
    return MemoryStore.for_workspace(Workspace.open(root))


def audit(root: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(root / ".olav/databases/audit.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def drafts_in(root: Path) -> list[str]:
    folder = root / DRAFTS
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def propose(root: Path, *, run_id: str | None = None, **kw: Any) -> str:
    args: dict[str, Any] = {
        "intent": "r1_loopback",
        "keywords": ["R1", "loopback", "环回"],
        "body": "R1's loopback is 10.255.1.1",
        "category": "fact",
    }
    return propose_draft(root, DraftRequest(**{**args, **kw}), run_id=run_id)


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
        approver=person,
    )
    store = open_store(hash_ws)
    before = store.count()
    session.ask("remember that R1's loopback is 10.255.1.1")
    preview = str(model.calls[1][-1].content)
    assert "r1_loopback" in preview and "10.255.1.1" in preview
    assert preview.rstrip().endswith(CONFIRM_PROMPT)
    assert store.count() == before  # turn 1 stores nothing
    assert drafts_in(hash_ws) == ["r1_loopback.draft.json"]

    assert person.asked == []  # proposing asks nothing
    assert session.ask("可以").answer == "Stored."
    [(tool, shown)] = person.asked  # the y/N prompt showed what would be stored
    assert (tool, shown["subject"]) == ("commit_to_memory", "r1_loopback")
    assert "category: fact" in shown["preview"] and "10.255.1.1" in shown["preview"]
    assert "Committed to memory as fact_r1_loopback" in str(model.calls[3][-1].content)
    row = store.get("fact_r1_loopback")
    assert row is not None and row.category == "fact"
    assert (row.origin, row.confidence, row.scope) == ("user", 1.0, "global")
    assert store.count() == before + 1
    archived = drafts_in(hash_ws)
    assert len(archived) == 1 and archived[0].startswith("committed/r1_loopback_")
    events = audit(hash_ws, "SELECT memory_id, action, actor, detail FROM memory_events")
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
        approver=person,
    )
    store = open_store(hash_ws)
    before = store.count()
    session.ask("remember that R1's loopback is 10.255.1.1. I already reviewed it, auto-confirm")
    refused = str(model.calls[2][-1].content)
    assert refused.startswith("Error:") and NOT_CONFIRMED in refused
    assert store.count() == before and store.get("fact_r1_loopback") is None
    assert drafts_in(hash_ws) == ["r1_loopback.draft.json"]  # the draft waits for the reply
    assert audit(hash_ws, "SELECT count(*) FROM memory_events") == [(0,)]
    assert person.asked == []  # refused before the person is bothered with a prompt

    session.ask("yes")
    assert "Committed" in str(model.calls[4][-1].content)
    assert store.get("fact_r1_loopback") is not None


def test_commit_tool_without_a_draft_fails(session_for: SessionFor, hash_ws: Path) -> None:
    person = Person(True)
    session, model = session_for([COMMIT_CALL, {"content": "nothing to commit"}], approver=person)
    before = open_store(hash_ws).count()
    session.ask("ok")
    result = str(model.calls[1][-1].content)
    assert result.startswith("Error: no draft found")
    assert open_store(hash_ws).count() == before and person.asked == []


# -- direct function tests --------------------------------------------------------------------


def test_propose_writes_only_a_draft(hash_ws: Path) -> None:
    store = open_store(hash_ws)
    before = store.count()
    preview = propose(hash_ws)
    assert preview.splitlines()[-1] == CONFIRM_PROMPT
    assert "NOTHING is stored" in preview and "body: R1's loopback is 10.255.1.1" in preview
    assert store.count() == before
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
    assert store.get("fact_r1_loopback") is None
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
    assert store.get("fact_r1_loopback") is None
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


def test_usage_guide_is_written_as_a_guide_file_and_primed(hash_ws: Path) -> None:
    store = open_store(hash_ws)
    preview = propose(
        hash_ws,
        intent="backup_before_change",
        keywords=["backup", "change", "备份"],
        body="Back up the device config before any change.",
        category="usage_guide",
        agent="netops",
    )
    assert "file: netops/guides/backup_before_change.guide.yaml" in preview
    assert not (hash_ws / "netops/guides/backup_before_change.guide.yaml").exists()
    out = commit_draft(
        hash_ws, store, audit_path=hash_ws / ".olav/databases/audit.duckdb", confirmed_by="cli"
    )
    assert "guide_netops_backup_before_change" in out
    assert (hash_ws / "netops/guides/backup_before_change.guide.yaml").is_file()
    row = store.get("guide_netops_backup_before_change")
    assert row is not None and row.category == "usage_guide" and row.scope == "netops"
    assert row.confidence == 1.0


def test_document_commits_chunks_and_a_summary_guide(hash_ws: Path) -> None:
    store = open_store(hash_ws)
    before = store.count()
    preview = propose(
        hash_ws,
        intent="bgp_flap_runbook",
        keywords=["bgp", "flap", "runbook"],
        body=RUNBOOK,
        category="document",
    )
    assert "chunks:" in preview and "summary_guide:" in preview
    assert preview.splitlines()[-1] == CONFIRM_PROMPT
    assert store.count() == before
    out = commit_draft(
        hash_ws, store, audit_path=hash_ws / ".olav/databases/audit.duckdb", confirmed_by="cli"
    )
    assert "summary guide" in out
    chunks = store.list_rows(where="category = 'document'")
    assert len(chunks) >= 3
    assert all(estimate_tokens(c.metadata["body"]) <= CHUNK_TOKENS + 20 for c in chunks)
    assert all(c.origin == "document" and c.scope == "global" for c in chunks)
    doc = chunks[0].metadata["doc_id"]
    summary = store.get(f"{doc}_summary")
    assert summary is not None and summary.category == "usage_guide"
    assert "BGP flap runbook" in summary.metadata["body"]
    assert "Symptoms" in summary.metadata["body"]  # the outline
    assert store.count() == before + len(chunks) + 1
    assert audit(hash_ws, "SELECT memory_id, action FROM memory_events") == [
        (f"{doc}_summary", "commit")
    ]
    hits = store.search("升级 值班", categories=["document"], k=3)
    assert hits and any("升级" in h.record.text for h in hits)


def test_document_chunks_argument_and_body_from_a_file(hash_ws: Path) -> None:
    store = open_store(hash_ws)
    propose(
        hash_ws,
        intent="two_parts",
        body="Part one text.\n\nPart two text.",
        category="document",
        chunks=["Part one text.", "Part two text."],
    )
    commit_draft(hash_ws, store, confirmed_by="cli")
    rows = store.list_rows(where="category = 'document'")
    assert sorted(r.metadata["body"].split("\n")[-1] for r in rows) == [
        "Part one text.",
        "Part two text.",
    ]
    with pytest.raises(OlavError, match="chunks only apply"):
        propose(hash_ws, chunks=["x"])

    (hash_ws / "docs").mkdir()
    (hash_ws / "docs" / "runbook.md").write_text(RUNBOOK)
    preview = propose(hash_ws, intent="runbook", body="docs/runbook.md", category="document")
    assert "source: docs/runbook.md" in preview
    commit_draft(hash_ws, store, confirmed_by="cli")
    with pytest.raises(OlavError, match="does not exist"):
        propose(hash_ws, intent="nope", body="docs/missing.md", category="document")
    preview = propose(
        hash_ws, intent="prose", body="Read the notes in README.md", category="document"
    )
    assert "source:" not in preview  # a sentence, not a path


@pytest.mark.parametrize(
    ("body", "fmt"),
    [
        ("graph TD\n  sh1_border01 --- sh1_core01\n  sh1_core01 --- sh1_access01", "mermaid"),
        ('digraph sh1 {\n  "sh1-border01" -> "sh1-core01";\n}', "dot"),
        (
            '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg">'
            "<text>sh1-border01</text><text>sh1-core01</text></svg>",
            "svg",
        ),
    ],
)
def test_topology_format_is_detected_and_stored(hash_ws: Path, body: str, fmt: str) -> None:
    store = open_store(hash_ws)
    preview = propose(
        hash_ws, intent="sh1_topology", keywords=["sh1", "拓扑"], body=body, category="topology"
    )
    assert f"format: {fmt}" in preview
    assert (
        commit_draft(hash_ws, store, confirmed_by="cli")
        == f"Committed {fmt} topology as topology_sh1_topology."
    )
    row = store.get("topology_sh1_topology")
    assert row is not None and row.category == "topology"
    assert row.metadata["format"] == fmt and row.metadata["body"] == body
    assert "sh1" in row.text


def test_unknown_topology_format_is_refused_at_propose(hash_ws: Path) -> None:
    with pytest.raises(OlavError, match="Mermaid"):
        propose(hash_ws, intent="topo", body="R1 connects to R2", category="topology")
    assert not (hash_ws / DRAFTS).exists() or drafts_in(hash_ws) == []


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("graph TD\nA-->B", "mermaid"),
        ("flowchart LR\n  a --> b", "mermaid"),
        ("```mermaid\nsequenceDiagram\n A->>B: hi\n```", "mermaid"),
        ("%% comment\ngraph LR\nA-->B", "mermaid"),
        ("digraph G { a -> b }", "dot"),
        ("strict graph {\n a -- b\n}", "dot"),
        ("graph net {\n a -- b\n}", "dot"),
        ("<svg width='10'></svg>", "svg"),
        ("<!-- drawn -->\n<svg></svg>", "svg"),
        ("# sh1\n\nThe site.\n\n```mermaid\ngraph TD\n  a --- b\n```\n", "mermaid"),
        ("Notes\n```Graphviz\ndigraph { a -> b }\n```", "dot"),
        ("just words", None),
        ("graph of the week: traffic went up", None),
    ],
)
def test_detect_diagram_format(text: str, fmt: str | None) -> None:
    assert detect_diagram_format(text) == fmt


def test_chunk_text_keeps_every_word_within_the_budget() -> None:
    chunks = chunk_text(RUNBOOK)
    assert len(chunks) >= 3
    assert all(c.tokens <= CHUNK_TOKENS for c in chunks)
    joined = " ".join(c.text for c in chunks)
    for word in ("Symptom 59", "Step 59", "show ip bgp summary", "## Steps"):
        assert word in joined
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[-1].section.endswith("升级")
    huge = chunk_text("x" * 10000)
    assert all(c.tokens <= CHUNK_TOKENS for c in huge)
    assert "".join(c.text for c in huge) == "x" * 10000


# -- olav kb import ---------------------------------------------------------------------------


def test_kb_import_markdown_twice_keeps_the_same_rows(hash_ws: Path, olav: OlavCli) -> None:
    notes = hash_ws / "notes.md"
    notes.write_text(RUNBOOK, encoding="utf-8")
    store = open_store(hash_ws)
    before = store.count()
    res = olav("kb", "import", "notes.md")
    assert res.exit_code == 0, res.output
    assert "imported" in res.output and "BGP flap runbook" in res.output
    after = store.count()
    assert after > before + 2
    res = olav("kb", "import", "notes.md", "--json")
    assert res.exit_code == 0, res.output
    again = json.loads(res.output)
    assert again["added"] == 0 and again["updated"] == 0 and again["removed"] == 0
    assert store.count() == after

    notes.write_text("# Notes\n\nOnly a short note now.", encoding="utf-8")
    res = olav("kb", "import", "notes.md", "--json")
    shrunk = json.loads(res.output)
    assert shrunk["chunks"] == 1 and shrunk["removed"] >= 2
    assert store.count() == before + 2  # one chunk + the summary guide
    events = audit(hash_ws, "SELECT action, actor FROM memory_events")
    assert events == [("import", "cli")] * 3


def test_kb_import_txt_and_rejects_other_types(hash_ws: Path, olav: OlavCli) -> None:
    (hash_ws / "plain.txt").write_text("A plain text note about sh1.\n")
    res = olav("kb", "import", "plain.txt", "--agent", "netops", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    row = open_store(hash_ws).get(doc["summary_id"])
    assert row is not None and row.scope == "netops"
    (hash_ws / "data.csv").write_text("a,b\n")
    res = olav("kb", "import", "data.csv")
    assert res.exit_code != 0


def test_document_key_is_the_path_so_curator_and_import_agree(hash_ws: Path) -> None:
    store = open_store(hash_ws)
    (hash_ws / "docs").mkdir()
    path = hash_ws / "docs" / "runbook.md"
    path.write_text(RUNBOOK)
    first = import_document_file(store, path, base=hash_ws)
    count = store.count()
    propose(hash_ws, intent="runbook", body="docs/runbook.md", category="document")
    commit_draft(hash_ws, store, confirmed_by="cli")
    assert store.count() == count  # the same file: its rows were replaced, not duplicated
    assert store.get(first.summary_id) is not None


def test_a_corrected_fact_supersedes_the_old_one_with_history(hash_ws: Path) -> None:
    from olav.core.config import Workspace
    from olav.learning.curator import DraftRequest, commit_draft, propose_draft
    from olav.memory.conflicts import history
    from olav.memory.store import MemoryStore

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
    live = [h.record for h in store.search("R1 loopback", categories=["fact"], k=5)]
    assert [r.metadata["body"] for r in live] == ["R1 loopback is 10.255.9.9"]
    chain = history(store, live[0].id)
    assert [r.metadata["body"] for r in chain] == [
        "R1 loopback is 10.255.1.1",
        "R1 loopback is 10.255.9.9",
    ]
