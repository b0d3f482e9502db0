"""`olav kb drafts`: memory drafts, guide drafts and fix proposals are shown to a person, wait
for their decision without expiring, and only their confirm stores anything."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from olav.audit.recorder import AuditRecorder
from olav.core.config import Workspace
from olav.learning.curator import DRAFTS, DraftRequest, propose_draft
from olav.learning.reflector import write_code_fix
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from tests.helpers import OlavCli, OlavMain, scripted_ws


def propose_fact(root: Path, **kw: Any) -> None:
    args: dict[str, Any] = {
        "intent": "r1_loopback",
        "keywords": ["R1", "loopback"],
        "body": "R1's loopback is 10.255.1.1",
        "category": "fact",
    }
    propose_draft(root, DraftRequest(**{**args, **kw}))


def propose_guide(root: Path) -> None:
    propose_fact(
        root,
        intent="refresh_inventory_first",
        body="Refresh the inventory before a snapshot.",
        category="usage_guide",
    )


def write_fix(root: Path) -> str:
    path = write_code_fix(
        root,
        root / "exports",
        title="Stale lab inventory",
        root_cause="devices.csv is stale",
        suggested_fix="Reload it nightly.",
    )
    return path.stem


def store_of(root: Path) -> MemoryStore:
    return MemoryStore.for_workspace(Workspace.open(root))


def events(root: Path, kind: str) -> list[dict[str, Any]]:
    rows = AuditRecorder(root / ".olav/databases/audit.duckdb").query(
        "SELECT detail FROM events WHERE kind = ? ORDER BY created_at", [kind]
    )
    return [json.loads(r[0]) for r in rows]


def listed(olav: Any) -> dict[str, dict[str, Any]]:
    res = olav("kb", "drafts", "--json")
    assert res.exit_code == 0, res.output
    return {item["id"]: item for item in json.loads(res.output)}


def test_list_covers_memory_guide_and_fix_drafts(hash_ws: Path, olav: OlavCli) -> None:
    assert "No drafts are waiting." in olav("kb", "drafts").output
    propose_fact(hash_ws)
    propose_guide(hash_ws)
    fix = write_fix(hash_ws)
    items = listed(olav)
    assert {i: (v["kind"], v["seen"]) for i, v in items.items()} == {
        "r1_loopback": ("memory", False),
        "refresh_inventory_first": ("guide", False),
        fix: ("fix", True),
    }
    out = olav("kb", "drafts").output
    assert "r1_loopback" in out and "fact: R1's loopback is 10.255.1.1" in out
    assert "Stale lab inventory" in out and "3 waiting" in out


def test_show_prints_what_would_be_stored_and_marks_it_seen(hash_ws: Path, olav: OlavCli) -> None:
    propose_fact(hash_ws)
    fix = write_fix(hash_ws)
    res = olav("kb", "drafts", "show", "r1_loopback")
    assert res.exit_code == 0, res.output
    assert "intent: r1_loopback" in res.output and "category: fact" in res.output
    assert "olav kb drafts confirm r1_loopback" in res.output
    assert listed(olav)["r1_loopback"]["seen"] is True
    res = olav("kb", "drafts", "show", fix)
    assert "## Root cause" in res.output and "devices.csv is stale" in res.output
    assert "no code is changed" in res.output


def test_confirm_stores_a_memory_draft_as_the_person(hash_ws: Path, olav: OlavCli) -> None:
    propose_fact(hash_ws)
    res = olav("kb", "drafts", "confirm", "r1_loopback")
    assert res.exit_code == 0, res.output
    assert "Committed to memory as fact_r1_loopback" in res.output
    assert store_of(hash_ws).read("fact_r1_loopback", EVERYONE) is not None
    assert "r1_loopback" not in listed(olav)
    rows = AuditRecorder(hash_ws / ".olav/databases/audit.duckdb").query(
        "SELECT memory_id, detail FROM memory_events WHERE action = 'commit'"
    )
    assert [(r[0], json.loads(r[1])["confirmed_by"]) for r in rows] == [("fact_r1_loopback", "cli")]


def test_confirm_writes_a_guide_draft_as_a_guide_file(hash_ws: Path, olav: OlavCli) -> None:
    propose_guide(hash_ws)
    res = olav("kb", "drafts", "confirm", "refresh_inventory_first")
    assert res.exit_code == 0, res.output
    assert (hash_ws / "core/guides/refresh_inventory_first.guide.yaml").is_file()
    assert store_of(hash_ws).read("guide_core_refresh_inventory_first", EVERYONE) is not None


def test_confirm_a_fix_marks_it_accepted_and_changes_no_code(hash_ws: Path, olav: OlavCli) -> None:
    fix = write_fix(hash_ws)
    before = store_of(hash_ws).size()
    res = olav("kb", "drafts", "confirm", fix)
    assert res.exit_code == 0, res.output
    assert "accepted" in res.output and "olav never edits code" in res.output
    assert (hash_ws / "exports/reflections/accepted" / f"{fix}.md").is_file()
    assert not (hash_ws / "exports/reflections" / f"{fix}.md").exists()
    assert store_of(hash_ws).size() == before
    assert [e["id"] for e in events(hash_ws, "fix_accepted")] == [fix]
    assert fix not in listed(olav)


def test_reject_archives_and_stores_nothing(hash_ws: Path, olav: OlavCli) -> None:
    propose_fact(hash_ws)
    fix = write_fix(hash_ws)
    assert olav("kb", "drafts", "reject", "r1_loopback").exit_code == 0
    assert olav("kb", "drafts", "reject", fix).exit_code == 0
    assert listed(olav) == {}
    assert store_of(hash_ws).read("fact_r1_loopback", EVERYONE) is None
    [archived] = (hash_ws / DRAFTS / "rejected").glob("r1_loopback_*.json")
    assert json.loads(archived.read_text())["rejected_by"] == "cli"
    assert (hash_ws / "exports/reflections/rejected" / f"{fix}.md").is_file()
    assert [e["id"] for e in events(hash_ws, "draft_rejected")] == ["r1_loopback"]
    assert [e["id"] for e in events(hash_ws, "fix_rejected")] == [fix]


@pytest.mark.parametrize("command", ["show", "confirm", "reject"])
def test_unknown_id_is_one_red_line(hash_ws: Path, olav_main: OlavMain, command: str) -> None:
    res = olav_main("kb", "drafts", command, "../../nope")
    assert res.returncode == 1
    assert res.stderr.strip() == (
        "error: no pending draft or fix proposal with id '../../nope'. "
        "List them with `olav kb drafts`"
    )
    assert "Traceback" not in res.stderr


def test_an_unseen_draft_never_expires(hash_ws: Path, olav: OlavCli) -> None:
    propose_fact(hash_ws)
    path = hash_ws / DRAFTS / "r1_loopback.draft.json"
    draft = json.loads(path.read_text())
    draft["created_at"] = (datetime.now(UTC) - timedelta(days=90)).isoformat()
    path.write_text(json.dumps(draft))
    assert listed(olav)["r1_loopback"]["seen"] is False
    assert olav("kb", "drafts", "confirm", "r1_loopback").exit_code == 0
    assert store_of(hash_ws).read("fact_r1_loopback", EVERYONE) is not None


def test_chat_banner_says_when_drafts_are_waiting(hash_ws: Path, olav: OlavCli) -> None:
    scripted_ws(hash_ws, [{"content": "hi"}])
    res = olav("chat", input="/exit\n")
    assert res.exit_code == 0, res.output
    assert "/help for commands" in res.output and "waiting" not in res.output
    propose_fact(hash_ws)
    write_fix(hash_ws)
    res = olav("chat", input="/exit\n")
    assert "2 drafts are waiting for you: olav kb drafts" in res.output
