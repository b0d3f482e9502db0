"""The drafts page for every kind, in a real browser: a guide draft's Confirm writes its guide
(file and row) and Reject writes nothing; a fix proposal's Accept and Reject only move its file
(olav never edits code); each decision is audited with the operator. A gap of the Lessons page
becomes a keyword draft for its guide: the guide's file is untouched until a person confirms
it on the drafts page, then its keywords include it (and nothing else in the file changed)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.serve._support import Served, log_near_miss, logged_in_page, serving, session

pytestmark = pytest.mark.slow

BGP = "To reset a stuck BGP session: show the neighbor, then clear it softly, never hard."
OSPF = "Restart OSPF on every router at once when a neighbor flaps."  # a draft alice rejects
FIXES = {"accept": "list_devices times out on large sites", "reject": "db_query drops the limit"}
REQUEST = "save the running configuration of every lab box"  # a near miss of the recall log
GUIDE = "guide_netops_backup_device_configs"
GUIDE_FILE = "netops/guides/backup_device_configs.guide.yaml"
KEYWORD = "running configuration"
FIX_IDS: dict[str, str] = {}


def _prepare(ws: Path) -> None:
    from olav.core.config import Workspace
    from olav.learning.curator import DraftRequest, propose_draft
    from olav.learning.reflector import write_code_fix

    for intent, body in (("reset_bgp_session", BGP), ("restart_ospf_everywhere", OSPF)):
        propose_draft(ws, DraftRequest(intent, ["bgp", "ospf"], body, "usage_guide", "netops"))
    exports = Path(Workspace.open(ws).exports)
    for key, title in FIXES.items():
        path = write_code_fix(ws, exports, title=title, root_cause="why", suggested_fix="how")
        FIX_IDS[key] = path.stem
    log_near_miss(ws, REQUEST, GUIDE, 0.05, 0.06)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("serve-drafts") / "ws", prepare=_prepare) as s:
        yield s


@pytest.fixture(scope="module")
def page(served: Served) -> Iterator[Any]:
    with logged_in_page(served) as tab:
        yield tab


def pending(served: Served) -> dict[str, dict[str, Any]]:
    with session(served) as alice:
        got = alice.get("/drafts", params={"format": "json"})
        return {d["id"]: d for d in got.json()["drafts"]}


def memory_row(served: Served, memory_id: str) -> dict[str, Any] | None:
    with session(served) as alice:
        got = alice.get(f"/memory/{memory_id}", params={"format": "json"})
        return dict(got.json()["memory"]) if got.status_code == 200 else None


def audit(ws: Path, sql: str) -> list[dict[str, Any]]:
    from olav.audit.db import connect

    with connect(ws / ".olav" / "databases" / "audit.duckdb") as con:
        return [json.loads(r[0]) for r in con.execute(sql).fetchall()]


def decide(page: Any, served: Served, item: str, button: str) -> str:
    """Press ``button`` on the card of ``item``; the note the page then shows."""
    page.goto(served.url + "/drafts")
    card = page.locator("section.draft", has=page.locator(f"code:text-is('{item}')"))
    card.get_by_role("button", name=button).click()
    page.wait_for_url(served.url + "/drafts")
    return str(page.get_by_role("status").inner_text())


def test_a_guide_draft_confirm_writes_the_guide_and_reject_does_not(
    served: Served, page: Any
) -> None:
    assert {"reset_bgp_session", "restart_ospf_everywhere"} <= set(pending(served))
    page.goto(served.url + "/drafts")
    card = page.locator("section.draft", has_text="reset_bgp_session")
    assert "guide" in card.locator(".badge").first.inner_text()
    assert "file: netops/guides/reset_bgp_session.guide.yaml" in card.locator("pre").inner_text()
    done = decide(page, served, "reset_bgp_session", "Confirm")
    assert "Committed guide guide_netops_reset_bgp_session" in done
    written = yaml.safe_load((served.ws / "netops/guides/reset_bgp_session.guide.yaml").read_text())
    assert written["body"].strip() == BGP
    row = memory_row(served, "guide_netops_reset_bgp_session")
    assert row is not None and row["metadata"]["body"].strip() == BGP
    assert "Nothing was stored" in decide(page, served, "restart_ospf_everywhere", "Reject")
    assert not (served.ws / "netops/guides/restart_ospf_everywhere.guide.yaml").exists()
    assert memory_row(served, "guide_netops_restart_ospf_everywhere") is None
    assert not {"reset_bgp_session", "restart_ospf_everywhere"} & set(pending(served))
    (commit,) = audit(
        served.ws,
        "SELECT detail FROM memory_events WHERE memory_id = 'guide_netops_reset_bgp_session'",
    )
    assert commit["confirmed_by"] == "console" and commit["operator"] == served.alice
    rejected = audit(served.ws, "SELECT detail FROM events WHERE kind = 'draft_rejected'")
    ((who,),) = {(e["operator"],) for e in rejected if e["id"] == "restart_ospf_everywhere"}
    assert who == served.alice


def test_a_fix_proposal_is_only_accepted_or_rejected(served: Served, page: Any) -> None:
    folder = served.ws / "exports" / "reflections"
    accepted, refused = FIX_IDS["accept"], FIX_IDS["reject"]
    page.goto(served.url + "/drafts")
    card = page.locator("section.draft", has_text=accepted)
    assert FIXES["accept"] in card.locator("pre").inner_text()  # the proposal, in full
    code = sorted(p.name for p in (served.ws / "netops").rglob("*"))
    done = decide(page, served, accepted, "Accept (no code is changed)")
    assert f"Marked fix proposal {accepted} accepted" in done and "never edits code" in done
    assert (folder / "accepted" / f"{accepted}.md").is_file()
    assert "Nothing was stored" in decide(page, served, refused, "Reject")
    assert (folder / "rejected" / f"{refused}.md").is_file()
    assert not list(folder.glob("*.md")) and not {accepted, refused} & set(pending(served))
    assert sorted(p.name for p in (served.ws / "netops").rglob("*")) == code  # nothing edited
    kinds = audit(
        served.ws, "SELECT detail FROM events WHERE kind LIKE 'fix_%' ORDER BY created_at"
    )
    assert [(e["id"], e["by"], e["operator"]) for e in kinds] == [
        (accepted, "console", served.alice),
        (refused, "console", served.alice),
    ]


def test_a_gap_becomes_a_keyword_only_when_a_person_confirms_it(served: Served, page: Any) -> None:
    path = served.ws / GUIDE_FILE
    before = path.read_text(encoding="utf-8")
    page.goto(served.url + "/lessons")
    gap = page.locator("tr", has_text=REQUEST)
    assert gap.get_by_label("guide").input_value() == GUIDE
    assert gap.get_by_label("keyword").input_value() == REQUEST
    gap.get_by_label("keyword").fill(KEYWORD)
    gap.get_by_role("button", name="Propose keyword").click()
    page.wait_for_url(served.url + "/drafts")
    assert f"Proposed keyword '{KEYWORD}' for {GUIDE}" in page.get_by_role("status").inner_text()
    assert path.read_text(encoding="utf-8") == before  # a draft, never a silent edit
    assert KEYWORD not in memory_row(served, GUIDE)["metadata"]["keywords"]  # type: ignore[index]
    draft = pending(served)["backup_device_configs"]
    assert draft["kind"] == "guide" and draft["amends"]["add_keywords"] == [KEYWORD]
    assert draft["amends"]["request"] == REQUEST
    card = page.locator("section.draft", has_text="backup_device_configs")
    shown = card.locator("pre").inner_text()
    assert f"adds_keywords: {KEYWORD}" in shown and f"file: {GUIDE_FILE}" in shown

    with session(served, "bob") as bob:  # the workspace's file: alice's decision, not bob's
        assert "backup_device_configs" not in bob.get("/drafts").text
        token = re.search(r'name="csrf" value="([^"]+)"', bob.get("/drafts").text)
        assert token is not None
        got = bob.post(
            "/drafts/backup_device_configs/confirm",
            data={"csrf": token.group(1)},
            headers={"Origin": served.url},
        )
        assert got.status_code == 404
    with served.http() as scripted:  # an API token never confirms
        assert scripted.post("/drafts/backup_device_configs/confirm").status_code == 403
    assert path.read_text(encoding="utf-8") == before

    done = decide(page, served, "backup_device_configs", "Confirm")
    assert f"Added keyword(s) {KEYWORD} to guide {GUIDE}" in done
    after = path.read_text(encoding="utf-8")
    old, new = yaml.safe_load(before), yaml.safe_load(after)
    assert new["keywords"] == [*old["keywords"], KEYWORD]
    assert {k: v for k, v in new.items() if k != "keywords"} == {
        k: v for k, v in old.items() if k != "keywords"
    }  # priority, related, body: all as they were
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert len(changed) == 1 and changed[0][1].startswith("keywords: [")
    row = memory_row(served, GUIDE)
    assert row is not None and KEYWORD in row["metadata"]["keywords"]
    (commit,) = [
        e
        for e in audit(served.ws, f"SELECT detail FROM memory_events WHERE memory_id = '{GUIDE}'")
        if e.get("amends")
    ]
    assert commit["confirmed_by"] == "console" and commit["operator"] == served.alice
    assert commit["amends"]["add_keywords"] == [KEYWORD]


def test_a_rejected_keyword_leaves_the_guide_as_it_was(served: Served, page: Any) -> None:
    path = served.ws / GUIDE_FILE
    before = path.read_text(encoding="utf-8")
    with session(served) as alice:
        token = re.search(r'name="csrf" value="([^"]+)"', alice.get("/lessons").text)
        assert token is not None
        form = {"csrf": token.group(1), "guide": GUIDE, "request": REQUEST}
        for word, said in (("", "the keyword is empty"), ("Backup", "is a keyword of")):
            got = alice.post(
                "/drafts/keyword", data={**form, "keyword": word}, headers={"Origin": served.url}
            )
            assert got.status_code == 400 and said in got.text, word
        got = alice.post(
            "/drafts/keyword",
            data={**form, "keyword": "lab box"},
            headers={"Origin": served.url},
        )
        assert got.status_code == 303 and got.headers["location"] == "/drafts"
    assert "Nothing was stored" in decide(page, served, "backup_device_configs", "Reject")
    assert path.read_text(encoding="utf-8") == before
    assert "lab box" not in memory_row(served, GUIDE)["metadata"]["keywords"]  # type: ignore[index]
