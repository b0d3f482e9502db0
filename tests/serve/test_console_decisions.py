"""The console's view of memory's control plane: a run's page lists the decisions made during it
(``memory_decisions``) and the lessons whose metadata names it; a row's page lists the decisions
about that row. Neither ever shows another operator's private memory, by id or by text.

The run and its decisions are seeded before the server starts: a run without a thread (shown to
the workspace's own operator, alice), two lessons captured through ``add_reflection`` with the
audit recorder as their decision log (one in alice's private scope, one in bob's), and a
conflict decision of alice's lesson against bob's, through the recorder's ``decisions()``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from olav.memory.store.scopes import EVERYONE
from tests.serve._support import Served, logged_in_page, serving, session

pytestmark = pytest.mark.slow

MINE = "when asked for the otter inventory, call list_devices first"  # alice's private lesson
BOBS = "bob's badger vault combination lives in the yak notebook"  # bob's private lesson
seeded: dict[str, str] = {}


def _prepare(ws: Path) -> None:
    from olav.audit.recorder import AuditRecorder
    from olav.core.config import Workspace
    from olav.memory.decisions import Decision
    from olav.memory.recall.lessons import add_reflection
    from olav.memory.store.scopes import user_scope
    from olav.memory.store.table import MemoryStore

    opened = Workspace.open(ws)
    store = MemoryStore.for_workspace(opened)
    audit = AuditRecorder(opened.audit_path)
    run = audit.start_run("core", uuid.uuid4().hex, "count the otters", "stub")
    audit.end_run(run, "completed")
    mine = add_reflection(
        store, MINE, dedup_distance=0.0, scope=user_scope(opened.config), log=audit, run_id=run
    )
    bobs = add_reflection(store, BOBS, dedup_distance=0.0, scope="user:bob", log=audit, run_id=run)
    assert mine[0] and bobs[0]
    for rid in (mine[1], bobs[1]):  # the lesson names the run it was learned from
        rec = store.read(rid, EVERYONE)
        store.update(rid, metadata=dict(rec.metadata, run_id=run))
    why = "distance 0.100 <= 0.2"
    audit.decisions(run, [Decision("conflict", "kept_both", mine[1], why, "reflection", bobs[1])])
    seeded.update(run=run, mine=mine[1], bobs=bobs[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve-decisions") / "ws"
    with serving(root, prepare=_prepare) as s:
        yield s


def test_the_run_and_row_pages_show_decisions_and_lessons_but_never_bobs_private_row(
    served: Served,
) -> None:
    run, mine, bobs = seeded["run"], seeded["mine"], seeded["bobs"]
    with session(served) as alice:
        got = alice.get(f"/runs/{run}", params={"format": "json"})
        assert got.status_code == 200, got.text
        data: dict[str, Any] = got.json()
        decided = data["memory_decisions"]
        assert [(d["kind"], d["action"], d["memory_id"]) for d in decided] == [
            ("write", "captured", mine)
        ]
        assert "a new lesson from trace_learner" in decided[0]["reason"]
        assert [r["id"] for r in data["lessons"]] == [mine]
        row = alice.get(f"/memory/{mine}", params={"format": "json"}).json()
        assert [(d["kind"], d["action"]) for d in row["decisions"]] == [("write", "captured")]
        for text in (got.text, str(row)):
            assert bobs not in text and "badger" not in text
        assert alice.get(f"/memory/{bobs}").status_code == 404

    with logged_in_page(served) as page:
        page.goto(f"{served.url}/runs/{run}")
        decisions = page.locator("h2:has-text('Memory decisions of this run') ~ .table-wrap").first
        assert "captured" in decisions.inner_text()
        lessons = page.locator("h2:has-text('Lessons learned from this run') ~ .table-wrap").first
        assert "otter inventory" in lessons.inner_text()
        html = page.content()
        assert bobs not in html and "badger" not in html
        lessons.get_by_role("link").first.click()
        page.wait_for_url(f"**/memory/{mine}")
        page.get_by_role("heading", name="Decisions about this memory").wait_for()
        about = page.locator("h2:has-text('Decisions about this memory') ~ .table-wrap").first
        assert "captured" in about.inner_text()
        assert bobs not in page.content()
