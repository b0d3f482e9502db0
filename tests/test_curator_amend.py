"""A keyword proposed for a guide (olav.learning.curator.amend): a guide draft that `olav kb
drafts` lists and shows like any other, that changes nothing until it is confirmed, and whose
Confirm changes only the guide file's ``keywords:`` value."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from olav.core.errors import OlavError
from olav.learning.curator.amend import propose_keywords, with_keywords
from olav.memory.store.scopes import EVERYONE
from tests.helpers import OlavCli

GUIDE = "guide_netops_list_devices_by_role_and_site"
FILE = "netops/guides/list_devices_by_role_and_site.guide.yaml"


def _guide(ws: Path) -> object:
    from olav.core.config import Workspace
    from olav.memory.store.table import MemoryStore

    rec = MemoryStore.for_workspace(Workspace.open(ws)).read(GUIDE, EVERYONE)
    assert rec is not None
    return rec


def test_a_flow_list_changes_in_place_and_a_block_list_becomes_one() -> None:
    flow = "intent: x\nkeywords: [a, 'b c']  # the words\nbody: |\n  hi\n"
    assert with_keywords(flow, ["a", "b c", "d: e"]) == (
        "intent: x\nkeywords: [a, b c, 'd: e']  # the words\nbody: |\n  hi\n"
    )
    block = "intent: x\nkeywords:\n  - a\n  - b\nbody: |\n  hi\n"
    changed = with_keywords(block, ["a", "b", "c"])
    assert yaml.safe_load(changed) == {"intent": "x", "keywords": ["a", "b", "c"], "body": "hi\n"}
    with pytest.raises(OlavError, match="no keywords"):
        with_keywords("intent: x\nbody: hi\n", ["a"])


def test_confirm_adds_the_keyword_to_the_file_and_nothing_else(
    hash_ws: Path, olav: OlavCli
) -> None:
    path = hash_ws / FILE
    before = path.read_text(encoding="utf-8")
    draft = propose_keywords(hash_ws, _guide(hash_ws), ["Sh1 border"], request="sh1 border?")
    assert draft == "list_devices_by_role_and_site" and path.read_text() == before
    listed = olav("kb", "drafts")
    assert "add keyword(s) Sh1 border to" in listed.output and GUIDE in listed.output
    shown = olav("kb", "drafts", "show", draft)
    assert "adds_keywords: Sh1 border" in shown.output and f"file: {FILE}" in shown.output
    again = propose_keywords(hash_ws, _guide(hash_ws), ["lab inventory", "sh1 BORDER"])
    assert again == draft  # the same guide: one draft, the words merged, case-insensitively
    done = olav("kb", "drafts", "confirm", draft)
    assert done.exit_code == 0, done.output
    assert f"Added keyword(s) Sh1 border, lab inventory to guide {GUIDE}" in done.output
    after = path.read_text(encoding="utf-8")
    old, new = yaml.safe_load(before), yaml.safe_load(after)
    assert new["keywords"] == [*old["keywords"], "Sh1 border", "lab inventory"]
    assert {k: v for k, v in new.items() if k != "keywords"} == {
        k: v for k, v in old.items() if k != "keywords"
    }
    assert "lab inventory" in _guide(hash_ws).metadata["keywords"]  # type: ignore[attr-defined]


def test_a_keyword_it_has_or_another_draft_of_that_name_is_refused(hash_ws: Path) -> None:
    from olav.learning.curator import DraftRequest, propose_draft

    rec = _guide(hash_ws)
    have = rec.metadata["keywords"][0]  # type: ignore[attr-defined]
    with pytest.raises(OlavError, match="is a keyword of"):
        propose_keywords(hash_ws, rec, [have.upper()])
    with pytest.raises(OlavError, match="the keyword is empty"):
        propose_keywords(hash_ws, rec, ["  "])
    propose_draft(
        hash_ws,
        DraftRequest("list_devices_by_role_and_site", ["x"], "a new guide", "usage_guide"),
    )
    with pytest.raises(OlavError, match="already waiting for a decision"):
        propose_keywords(hash_ws, rec, ["fresh words"])
