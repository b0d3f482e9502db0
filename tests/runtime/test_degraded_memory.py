"""Memory degrades, the agent keeps working: a failing embedder, table or index costs recall
(full text first, then nothing), never the run. One warning per run, a log line, an audit
event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import HumanMessage

from olav.core.config import Workspace
from olav.core.errors import EmbeddingDimMismatchError
from olav.core.log import flush as flush_log
from olav.memory.store.table import MemoryStore
from tests.helpers import DelegatingEmbedder, OlavMain, SessionFor, audit_rows, scripted_ws

QUERY = "please save the report with format_and_export"
GUIDE = "guide_core_export_when_asked_to_save"
EXPORT_TURNS: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {
                "name": "format_and_export",
                "args": {"data": "# Report", "format": "md", "filename": "report"},
            }
        ]
    },
    {"content": "Saved exports/report.md"},
]
DELEGATE_TURNS: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {
                "name": "task",
                "args": {"subagent_type": "netops", "description": "list the sh1 border routers"},
            }
        ]
    },
    {"content": "sh1 has two border routers"},
    {"content": "netops reports: sh1 has two border routers"},
]


class QueryEmbedderDown(DelegatingEmbedder):
    """The test hash embedder, except that embedding a query raises, as a crashed
    embedding server would. Passages still embed, so the table opens normally."""

    def embed_query(self, text: str) -> np.ndarray:
        raise RuntimeError("embedding server went away")


def table_dir(root: Path) -> Path:
    return Workspace.open(root).memory_path / "memory.lance"


def corrupt(paths: list[Path]) -> None:
    assert paths, "nothing to corrupt"
    for path in paths:
        path.write_bytes(b"garbage")


def events(root: Path, kind: str) -> list[dict[str, Any]]:
    rows = audit_rows(root, f"SELECT run_id, detail FROM events WHERE kind = '{kind}'")
    return [{"run_id": run_id, **json.loads(detail)} for run_id, detail in rows]


def human_seen(model: Any, call: int = 0) -> str:
    return str([m for m in model.calls[call] if isinstance(m, HumanMessage)][-1].content)


def test_broken_embedder_recalls_by_full_text_and_warns_once_per_run(
    session_for: SessionFor, hash_ws: Path
) -> None:
    store = MemoryStore(Workspace.open(hash_ws).memory_path, QueryEmbedderDown())  # type: ignore[arg-type]
    session, model = session_for(EXPORT_TURNS * 2, store=store)
    warnings: list[str] = []
    session.run.on_warning = warnings.append
    result = session.ask(QUERY)
    assert result.answer == "Saved exports/report.md" and result.status == "completed"
    assert warnings == [
        "memory degraded: the embedder failed (RuntimeError: embedding server went away); "
        "recalled by full text only"
    ]
    # the guide was found by its words: every candidate came from full text, none by vector
    recall = session.run.recalls[-1]
    assert GUIDE in recall.injected_ids
    assert all(c.hit.distance is None and c.hit.fts_score is not None for c in recall.candidates)
    assert human_seen(model).startswith("<relevant-memories>")
    assert f"\n\n{QUERY}" in human_seen(model)
    [event] = events(hash_ws, "recall_degraded")
    assert event["run_id"] == result.run_id
    assert event["stage"] == "embed" and event["error"] == "RuntimeError"
    assert event["recalled_by"] == "fts"
    flush_log()  # the log's lines are written by a thread of their own
    logged = (hash_ws / ".olav/logs/olav.core.log").read_text()
    assert "failed at embed" in logged and "RuntimeError: embedding server went away" in logged
    session.ask(QUERY)  # the next run tries again, and says so again
    assert len(warnings) == 2 and len(events(hash_ws, "recall_degraded")) == 2


def test_corrupted_table_runs_without_memory_and_warns_once(
    session_for: SessionFor, hash_ws: Path
) -> None:
    session, model = session_for(DELEGATE_TURNS)
    warnings: list[str] = []
    session.run.on_warning = warnings.append
    corrupt(sorted((table_dir(hash_ws) / "data").glob("*.lance")))
    result = session.ask("list the border routers of sh1")
    assert result.answer == "netops reports: sh1 has two border routers"
    assert "<relevant-memories>" not in human_seen(model, 0)
    assert "<relevant-memories>" not in human_seen(model, 1)  # the sub-agent's call
    # core and netops both lost their memory in this run: two audit events, one warning
    assert len(warnings) == 1
    assert warnings[0].startswith("memory degraded: the memory search failed (RuntimeError: ")
    assert warnings[0].endswith("full-text recall failed too (RuntimeError); no memories")
    assert "\n" not in warnings[0] and len(warnings[0]) < 250
    degraded = events(hash_ws, "recall_degraded")
    assert sorted(e["agent"] for e in degraded) == ["core", "netops"]
    for e in degraded:
        assert (e["stage"], e["error"], e["recalled_by"]) == ("search", "RuntimeError", "none")
        assert [f["stage"] for f in e["failed"]] == ["search", "fts"]
    assert audit_rows(hash_ws, "SELECT status FROM runs") == [("completed",)]


def test_unopenable_table_starts_the_chat_with_memory_off(
    session_for: SessionFor, hash_ws: Path
) -> None:
    corrupt(sorted((table_dir(hash_ws) / "_versions").glob("*.manifest")))
    session, model = session_for(EXPORT_TURNS)
    warnings: list[str] = []
    session.run.on_warning = warnings.append
    result = session.ask(QUERY)
    assert result.answer == "Saved exports/report.md"
    assert (hash_ws / "exports" / "report.md").read_text() == "# Report"
    assert "<relevant-memories>" not in human_seen(model)
    assert len(warnings) == 1
    assert warnings[0].startswith("memory off: the memory table could not be opened (")
    assert session.store.size() == 0
    [event] = events(hash_ws, "memory_unavailable")
    assert (event["stage"], event["error"]) == ("open", "RuntimeError")
    assert events(hash_ws, "recall_degraded") == []
    session.close()  # the episode and access counts fail quietly into the log


def test_embedder_mismatch_still_refuses_to_start(session_for: SessionFor, hash_ws: Path) -> None:
    cfg = hash_ws / ".olav" / "olav.yaml"
    cfg.write_text(cfg.read_text().replace("hash-64", "hash-32"))
    session, _ = session_for(EXPORT_TURNS)
    warnings: list[str] = []
    session.run.on_warning = warnings.append
    with pytest.raises(EmbeddingDimMismatchError, match="olav kb re-embed"):
        session.ask(QUERY)
    assert warnings == []


@pytest.mark.parametrize(
    ("part", "pattern", "first_words"),
    [
        ("data", "*.lance", "memory degraded: the memory search failed"),
        ("_versions", "*.manifest", "memory off: the memory table could not be opened"),
    ],
)
def test_olav_ask_prints_one_warning_line_and_the_answer(
    hash_ws: Path, olav_main: OlavMain, part: str, pattern: str, first_words: str
) -> None:
    scripted_ws(hash_ws, EXPORT_TURNS)
    corrupt(sorted((table_dir(hash_ws) / part).glob(pattern)))
    res = olav_main("ask", QUERY)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "Saved exports/report.md"
    [line] = res.stderr.strip().splitlines()
    assert line.startswith(first_words) and "Traceback" not in res.stderr
