"""The console's Lessons and gaps page (`/lessons`) in a real browser: alice's live lesson is
listed with its expiry and a link to its row; bob never sees alice's private lesson; the gaps
section shows what `olav memory gaps` shows (a request of the recall log that got no directive,
with the guide that came close)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.serve._support import Served, logged_in_page, serving, session

pytestmark = pytest.mark.slow

LESSON = "ping the otter gateway twice before declaring it down"  # alice's private lesson
GLOBAL = "the badger switch needs a longer ssh timeout"  # a global lesson
REQUEST = "save the running configuration of every lab box"  # a near miss of the recall log
GUIDE: dict[str, str] = {}


def _prepare(ws: Path) -> None:
    from olav.audit.db import connect
    from olav.core.config import Workspace
    from olav.memory.recall.lessons import add_reflection
    from olav.memory.store.scopes import user_scope
    from olav.memory.store.table import MemoryStore

    opened = Workspace.open(ws)
    store = MemoryStore.for_workspace(opened)
    assert add_reflection(store, LESSON, dedup_distance=0.0, scope=user_scope(opened.config))[0]
    assert add_reflection(store, GLOBAL, dedup_distance=0.0)[0]
    guide = store.list_rows("category = 'usage_guide' AND scope = 'global'", limit=1)[0]
    GUIDE["id"] = guide.id
    cands = [
        {"id": guide.id, "category": "usage_guide", "decision": "irrelevant"}
        | {"margin": 0.05, "floor": 0.06}
    ]
    with connect(Path(opened.audit_path)) as con:
        con.execute(
            "INSERT INTO recalls (id, run_id, agent, query, candidates, injected, latency_ms, "
            "created_at) VALUES (?, NULL, 'core', ?, ?, '[]', 1.0, ?)",
            [uuid.uuid4().hex, REQUEST, json.dumps(cands), datetime.now(UTC)],
        )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("serve-lessons") / "ws", prepare=_prepare) as s:
        yield s


@pytest.fixture(scope="module")
def page(served: Served) -> Iterator[Any]:
    with logged_in_page(served) as tab:
        yield tab


def test_a_lesson_is_listed_with_its_expiry_and_the_gaps_render(served: Served, page: Any) -> None:
    page.goto(served.url + "/")
    page.get_by_role("link", name="Lessons", exact=True).click()
    page.wait_for_url(served.url + "/lessons")
    row = page.locator("tr", has_text=LESSON)
    assert row.count() == 1
    expiry = row.locator("td").nth(6).inner_text()
    assert "in 30 days" in expiry or "in 29 days" in expiry, expiry
    assert page.locator("tr", has_text=GLOBAL).count() == 1
    row.get_by_role("link").first.click()
    page.wait_for_url(lambda u: "/memory/" in u)
    assert LESSON in page.locator("main").inner_text()

    page.goto(served.url + "/lessons")
    gap = page.locator("tr", has_text=REQUEST)
    assert gap.count() == 1
    assert GUIDE["id"] in gap.inner_text() and "0.050 < 0.06" in gap.inner_text()

    data = page.context.request.get(served.url + "/lessons?format=json").json()
    assert LESSON in [r["text"] for r in data["lessons"]]
    mine = next(r for r in data["lessons"] if r["text"] == LESSON)
    assert mine["expires_at"] and mine["category"] == "reflection"
    assert [g["request"] for g in data["gaps"]] == [REQUEST]
    assert data["gaps"][0]["near"][0]["id"] == GUIDE["id"]


def test_bob_never_sees_alices_private_lesson(served: Served) -> None:
    with session(served, "bob") as bob:
        html = bob.get("/lessons").text
        assert GLOBAL in html and LESSON not in html
        data = bob.get("/lessons", params={"format": "json"}).json()
        texts = [r["text"] for r in data["lessons"]]
        assert GLOBAL in texts and LESSON not in texts
        # the gap's request came from a run that is not bob's: its wording is not his to see
        assert data["gaps"] == []
