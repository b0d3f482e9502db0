"""The console's memory changes in a real browser, by the CLI's rules: Edit re-embeds a row's
text and keeps the old one in the history (a guide is refused: it is edited in its YAML);
Quarantine holds a row back from recall as `olav memory quarantine` knows it, and Release
returns it; both audited with the operator and refused without the CSRF token. The search's
created from/to filters, and a bad date is a 400 that says which."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import olav_here
from tests.serve._support import Served, logged_in_page, serving, session

pytestmark = pytest.mark.slow

OTTER = "the otter rack is in row 7 of the lab"  # alice's private memory she edits
EDITED = "the otter rack moved to row 9 of the lab in december"
HERON = "the heron vlan carries the lab management traffic"  # alice's, quarantined
IBIS = "the ibis firewall was replaced in march 2025"  # a global row created long ago
OLD = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
KITE = "the kite uplink runs at 10 gigabit"  # a global fact an admin proposed
GUIDE = "guide_netops_backup_device_configs"
IDS: dict[str, str] = {}


def _prepare(ws: Path) -> None:
    from olav.core.config import Workspace
    from olav.memory.recall.lessons import add_reflection
    from olav.memory.store.schema import MemoryRecord
    from olav.memory.store.scopes import user_scope
    from olav.memory.store.table import MemoryStore

    opened = Workspace.open(ws)
    store = MemoryStore.for_workspace(opened)
    mine = user_scope(opened.config)
    for name, text in (("otter", OTTER), ("heron", HERON)):
        added, rid = add_reflection(store, text, dedup_distance=0.0, scope=mine)
        assert added
        IDS[name] = str(rid)
    old = MemoryRecord("fact_ibis_firewall", IBIS, "fact", origin="user", created_at=OLD)
    store.upsert([old])
    IDS["ibis"] = old.id
    from olav.learning import drafts
    from olav.learning.curator import DraftRequest, propose_draft
    from olav.memory.store.roles import ADMIN, Author

    # ann, an admin, proposed a global fact in her run; the owner confirmed it
    request = DraftRequest("kite_uplink", ["kite"], KITE, "fact", scope="global")
    propose_draft(ws, request, author=Author("ann", ADMIN))
    drafts.confirm(opened, "kite_uplink", store=store)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("serve-memory") / "ws", prepare=_prepare) as s:
        yield s


@pytest.fixture(scope="module")
def page(served: Served) -> Iterator[Any]:
    with logged_in_page(served) as tab:
        yield tab


def row_json(served: Served, memory_id: str) -> dict[str, Any]:
    with session(served) as alice:
        got = alice.get(f"/memory/{memory_id}", params={"format": "json"})
        assert got.status_code == 200, got.text
        return dict(got.json())


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the page has no CSRF field"
    return found.group(1)


def test_edit_re_embeds_the_text_and_keeps_the_old_one(served: Served, page: Any) -> None:
    otter = IDS["otter"]
    page.goto(f"{served.url}/memory/{otter}")
    page.get_by_text("Edit the text").click()
    box = page.get_by_label(re.compile("^New text"))
    assert box.input_value() == OTTER
    box.fill(EDITED)
    page.get_by_role("button", name="Save the text").click()
    assert f"Updated and re-embedded {otter}" in page.get_by_role("status").inner_text()
    assert page.locator("main pre").first.inner_text() == EDITED
    history = page.locator("main table").last.inner_text()
    assert "edit" in history and served.alice in history
    data = row_json(served, otter)
    assert data["memory"]["text"] == EDITED
    edit = next(e for e in data["events"] if e["action"] == "edit")
    assert edit["actor"] == served.alice and edit["detail"]["old_text"] == OTTER
    with session(served) as alice:  # the new text is what a search finds now
        rows = alice.get("/memory", params={"q": "otter rack row 9", "format": "json"}).json()
        assert EDITED in [r["text"] for r in rows["rows"]]
        assert OTTER not in [r["text"] for r in rows["rows"]]


def test_a_guide_is_edited_in_its_yaml_not_here(served: Served, page: Any) -> None:
    before = row_json(served, GUIDE)["memory"]["text"]
    page.goto(f"{served.url}/memory/{GUIDE}")
    assert page.locator("textarea").count() == 0
    note = page.locator("main p.hint").first.inner_text()
    assert "is a guide" in note and "netops/guides/backup_device_configs.guide.yaml" in note
    with session(served) as alice:
        token = csrf_of(alice.get(f"/memory/{GUIDE}").text)
        got = alice.post(
            f"/memory/{GUIDE}/edit",
            data={"csrf": token, "text": "overwritten"},
            headers={"Origin": served.url},
        )
        assert got.status_code == 403 and "is a guide" in got.text
    assert row_json(served, GUIDE)["memory"]["text"] == before


def test_quarantine_holds_a_row_back_and_release_returns_it(served: Served, page: Any) -> None:
    heron = IDS["heron"]
    page.goto(f"{served.url}/memory/{heron}")
    page.get_by_role("button", name="Quarantine (never recalled)").click()
    assert "recall never reads it" in page.get_by_role("status").inner_text()
    assert "quarantined" in page.locator("p.lead").inner_text()
    held = olav_here(served.ws, "memory", "quarantine", "--json")
    assert held.returncode == 0, held.stderr
    assert [r["id"] for r in json.loads(held.stdout)] == [heron]  # the CLI's quarantine
    with session(served) as alice:
        found = alice.get("/memory", params={"q": "heron vlan", "format": "json"}).json()
        assert heron not in [r["id"] for r in found["rows"]]  # live rows only: held back
        why = alice.get("/why", params={"q": HERON, "format": "json"}).json()
        assert heron not in [c["id"] for c in why["candidates"]]  # recall never reads it
    page.get_by_role("button", name="Release from quarantine").click()
    assert "recall reads it again" in page.get_by_role("status").inner_text()
    assert "live" in page.locator("p.lead").inner_text()
    released = olav_here(served.ws, "memory", "quarantine", "--json")
    assert json.loads(released.stdout) == []
    actions = [(e["action"], e["actor"]) for e in row_json(served, heron)["events"]]
    assert ("quarantine", served.alice) in actions and ("release", served.alice) in actions


def test_edit_and_quarantine_need_the_session_token_and_the_right(served: Served) -> None:
    ibis = IDS["ibis"]
    with session(served) as alice:
        for action, form in (("edit", {"text": "changed"}), ("quarantine", {})):
            got = alice.post(f"/memory/{ibis}/{action}", data=form, headers={"Origin": served.url})
            assert got.status_code == 403 and "CSRF" in got.text, action
    with session(served, "bob") as bob:
        token = csrf_of(bob.get("/memory").text)
        for action, form in (("edit", {"text": "changed"}), ("quarantine", {})):
            target = f"/memory/{ibis}/{action}"  # a global row: not bob's to change
            got = bob.post(target, data={**form, "csrf": token}, headers={"Origin": served.url})
            assert got.status_code == 403 and "only your own private memories" in got.text
            hidden = f"/memory/{IDS['otter']}/{action}"  # alice's private row: "not found"
            got = bob.post(hidden, data={**form, "csrf": token}, headers={"Origin": served.url})
            assert got.status_code == 404
    data = row_json(served, ibis)["memory"]
    assert data["text"] == IBIS and data["invalidated_at"] is None


def test_the_created_filters_and_a_bad_date(served: Served, page: Any) -> None:
    today = datetime.now(UTC).date().isoformat()
    with session(served) as alice:

        def ids(**params: str) -> set[str]:
            got = alice.get("/memory", params={**params, "format": "json", "limit": "200"})
            assert got.status_code == 200, got.text
            return {r["id"] for r in got.json()["rows"]}

        assert IDS["ibis"] in ids()
        assert ids(created_from="2025-03-14", created_to="2025-03-14") == {IDS["ibis"]}
        assert IDS["ibis"] not in ids(created_from=today)
        assert IDS["ibis"] not in ids(created_to="2025-03-13")
        assert IDS["ibis"] in ids(created_from="0001-01-01", created_to="9999-12-31")
        searched = ids(q="ibis firewall replaced", created_to="2025-12-31")
        assert searched == {IDS["ibis"]}
        for params, said in (
            ({"created_from": "tuesday"}, "created_from must be a date written YYYY-MM-DD"),
            ({"created_to": "2025-02-30"}, "created_to must be a date written YYYY-MM-DD"),
            (
                {"created_from": "2025-06-01", "created_to": "2025-05-01"},
                "created_from (2025-06-01) is after created_to (2025-05-01)",
            ),
        ):
            got = alice.get("/memory", params=params)
            assert got.status_code == 400 and said in got.text and "Traceback" not in got.text
            got = alice.get("/memory", params={**params, "format": "json"})
            assert got.status_code == 400 and said in got.json()["detail"]
    page.goto(served.url + "/memory")
    tomorrow = (datetime.now(UTC).date() + timedelta(days=1)).isoformat()
    page.get_by_label("created from").fill(tomorrow)
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(re.compile(r"created_from=" + tomorrow))
    assert page.locator("p.empty").inner_text() == "No memory matches."
    assert page.get_by_label("created from").input_value() == tomorrow


def test_each_row_says_whether_it_is_shared_and_who_made_it(served: Served) -> None:
    with session(served) as alice:
        listed = alice.get("/memory", params={"format": "json", "limit": 200}).json()["rows"]
        html = alice.get("/memory", params={"limit": 200}).text
    rows = {r["id"]: r for r in listed}
    assert (rows[IDS["otter"]]["shared"], rows[IDS["otter"]]["made_by"]) == (False, served.alice)
    kite = next((r for r in listed if KITE in r["text"]), None)
    assert kite is not None, [(r["id"], r["scope"], r["text"][:40]) for r in listed]
    assert (kite["shared"], kite["made_by"]) == (True, "ann")
    assert (rows[GUIDE]["shared"], rows[GUIDE]["made_by"]) == (True, "a guide file")
    assert rows[IDS["ibis"]]["shared"] is True
    assert ">shared</th>" in html and ">made by</th>" in html
    assert row_json(served, kite["id"])["memory"]["scope"] == "global"
