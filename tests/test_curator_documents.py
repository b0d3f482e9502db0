"""The memory curator's documents: usage guides, chunked documents, topology diagrams, and
`olav kb import` of the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olav.core.errors import OlavError
from olav.learning.curator import (
    CONFIRM_PROMPT,
    DRAFTS,
    commit_draft,
)
from olav.memory.ingest.chunking import CHUNK_TOKENS, chunk_text
from olav.memory.ingest.diagrams import detect_diagram_format
from olav.memory.ingest.documents import import_document_file
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.token_counts import estimate_tokens
from tests.curator_support import RUNBOOK, drafts_in, open_store, propose
from tests.helpers import OlavCli, audit_rows


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
    row = store.read("guide_netops_backup_before_change", EVERYONE)
    assert row is not None and row.category == "usage_guide" and row.scope == "netops"
    assert row.confidence == 1.0


def test_document_commits_chunks_and_a_summary_guide(hash_ws: Path) -> None:
    store = open_store(hash_ws)
    before = store.size()
    preview = propose(
        hash_ws,
        intent="bgp_flap_runbook",
        keywords=["bgp", "flap", "runbook"],
        body=RUNBOOK,
        category="document",
    )
    assert "chunks:" in preview and "summary_guide:" in preview
    assert preview.splitlines()[-1] == CONFIRM_PROMPT
    assert store.size() == before
    out = commit_draft(
        hash_ws, store, audit_path=hash_ws / ".olav/databases/audit.duckdb", confirmed_by="cli"
    )
    assert "summary guide" in out
    chunks = store.list_rows(where="category = 'document'")
    assert len(chunks) >= 3
    assert all(estimate_tokens(c.metadata["body"]) <= CHUNK_TOKENS + 20 for c in chunks)
    assert all(c.origin == "document" and c.scope == "global" for c in chunks)
    doc = chunks[0].metadata["doc_id"]
    summary = store.read(f"{doc}_summary", EVERYONE)
    assert summary is not None and summary.category == "usage_guide"
    assert "BGP flap runbook" in summary.metadata["body"]
    assert "Symptoms" in summary.metadata["body"]  # the outline
    assert store.size() == before + len(chunks) + 1
    assert audit_rows(hash_ws, "SELECT memory_id, action FROM memory_events") == [
        (f"{doc}_summary", "commit")
    ]
    hits = store.search(
        "升级 值班", k=3, filter=SearchFilter(categories=["document"], reader=EVERYONE)
    )
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
    row = store.read("topology_sh1_topology", EVERYONE)
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
    before = store.size()
    res = olav("kb", "import", "notes.md")
    assert res.exit_code == 0, res.output
    assert "imported" in res.output and "BGP flap runbook" in res.output
    after = store.size()
    assert after > before + 2
    res = olav("kb", "import", "notes.md", "--json")
    assert res.exit_code == 0, res.output
    again = json.loads(res.output)
    assert again["added"] == 0 and again["updated"] == 0 and again["removed"] == 0
    assert store.size() == after

    notes.write_text("# Notes\n\nOnly a short note now.", encoding="utf-8")
    res = olav("kb", "import", "notes.md", "--json")
    shrunk = json.loads(res.output)
    assert shrunk["chunks"] == 1 and shrunk["removed"] >= 2
    assert store.size() == before + 2  # one chunk + the summary guide
    events = audit_rows(
        hash_ws, "SELECT action, actor, json_extract_string(detail, '$.by') FROM memory_events"
    )
    assert events == [("import", "user", "cli")] * 3  # as the other operations are audited


def test_kb_import_txt_and_rejects_other_types(hash_ws: Path, olav: OlavCli) -> None:
    (hash_ws / "plain.txt").write_text("A plain text note about sh1.\n")
    res = olav("kb", "import", "plain.txt", "--agent", "netops", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    row = open_store(hash_ws).read(doc["summary_id"], EVERYONE)
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
    count = store.size()
    propose(hash_ws, intent="runbook", body="docs/runbook.md", category="document")
    commit_draft(hash_ws, store, confirmed_by="cli")
    assert store.size() == count  # the same file: its rows were replaced, not duplicated
    assert store.read(first.summary_id, EVERYONE) is not None
