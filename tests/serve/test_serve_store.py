"""`olav serve`'s store API, driven by langgraph-sdk's ``client.store``: a put is a draft that
waits for `olav kb drafts confirm`, never a write; what is confirmed is read (get, search,
namespaces) by its operator and nobody else; a delete retires only the operator's own private
rows; bad input is a 422 that names the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.errors import NotFoundError, PermissionDeniedError

from olav.core.errors import OlavError
from olav.learning.curator import DRAFTS, DraftRequest, propose_draft
from tests.helpers import olav_here
from tests.serve._support import Served, serving

pytestmark = pytest.mark.slow

ALICE_NOTE = "the heron failover drill runs on the second tuesday of each month"
BOB_NOTE = "bob keeps the pelican console password in the blue binder"
GUIDE_ID = "guide_core_store_api_test"
SHARED_ID = "fact_store_api_shared_rule"


def _shared_rows(ws: Path) -> None:
    """A guide and a shared fact (scope global), before the server starts."""
    from olav.core.config import Workspace
    from olav.memory.store.schema import MemoryRecord
    from olav.memory.store.table import MemoryStore

    store = MemoryStore.for_workspace(Workspace.open(ws))
    store.upsert(
        [
            MemoryRecord(
                id=GUIDE_ID,
                text="how to read the osprey dashboards: open the ospf panel first",
                category="usage_guide",
                scope="global",
                origin="user",
            ),
            MemoryRecord(
                id=SHARED_ID,
                text="every change to the osprey core needs a maintenance window",
                category="fact",
                scope="global",
                origin="user",
            ),
        ]
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("serve-store") / "ws", prepare=_shared_rows) as s:
        yield s


def confirm(served: Served, draft: str) -> None:
    done = olav_here(served.ws, "kb", "drafts", "confirm", draft)
    assert done.returncode == 0, done.stderr
    assert "Committed" in done.stdout


def pending(served: Served) -> dict[str, dict[str, Any]]:
    listed = olav_here(served.ws, "kb", "drafts", "--json")
    assert listed.returncode == 0, listed.stderr
    return {item["id"]: item for item in json.loads(listed.stdout)}


def texts(found: dict[str, Any]) -> list[str]:
    return [item["value"]["text"] for item in found["items"]]


@pytest.fixture(scope="module")
def alice_row(served: Served) -> dict[str, Any]:
    """alice's put, shown to be only a draft, then confirmed: her private row."""
    with served.http() as http:
        put = http.put(
            "/store/items",
            json={
                "namespace": ["memories", "fact"],
                "key": "heron-drill",
                "value": {"text": ALICE_NOTE, "tags": ["heron", "failover"]},
            },
        )
    assert put.status_code == 202, put.text
    draft = put.json()["draft"]
    assert put.json() == {
        "draft": draft,
        "status": "pending",
        "confirm": f"olav kb drafts confirm {draft}",
    }
    # a draft that records its operator and her private scope, listed for a person's decision
    assert pending(served)[draft]["kind"] == "memory"
    data = json.loads((served.ws / ".curator_drafts" / f"{draft}.draft.json").read_text())
    assert data["operator"] == served.alice and data["scope"] == f"user:{served.alice}"
    assert data["category"] == "fact" and data["body"] == ALICE_NOTE
    shown = olav_here(served.ws, "kb", "drafts", "show", draft)
    assert f"operator: {served.alice}" in shown.stdout and ALICE_NOTE in shown.stdout
    # nothing in memory yet
    client = served.sdk()
    with pytest.raises(NotFoundError):
        client.store.get_item(["memories", "fact"], key="heron-drill")
    assert ALICE_NOTE not in str(client.store.search_items(["memories"], query="heron drill"))
    assert ALICE_NOTE not in str(client.store.search_items(["memories"], limit=1000))

    confirm(served, draft)
    assert draft not in pending(served)
    item = client.store.get_item(["memories", "fact"], key="heron-drill")  # the put's key
    return dict(item)


@pytest.fixture(scope="module")
def bob_row(served: Served) -> dict[str, Any]:
    """bob's private row, put with the sdk and confirmed."""
    bob = served.sdk("bob")
    assert bob.store.put_item(["memories", "decision"], "pelican", {"text": BOB_NOTE}) is None
    (draft,) = [d for d, item in pending(served).items() if "pelican" in item["summary"]]
    confirm(served, draft)
    return dict(bob.store.get_item(["memories", "decision"], key="pelican"))


def test_a_confirmed_put_is_its_operators_item(served: Served, alice_row: dict[str, Any]) -> None:
    alice = served.sdk()
    key = alice_row["key"]
    assert alice_row["namespace"] == ["memories", "private", "fact"]
    value = alice_row["value"]
    assert ALICE_NOTE in value["text"] and value["metadata"]["body"] == ALICE_NOTE
    assert value["scope"] == f"user:{served.alice}" and value["category"] == "fact"
    assert value["origin"] == "user" and value["confidence"] == 1.0
    assert {"heron", "failover"} <= set(value["tags"])
    assert alice_row["created_at"] and alice_row["updated_at"]
    # the row's id is its key too, and search (with a query, or a listing) finds it
    assert alice.store.get_item(alice_row["namespace"], key=key)["key"] == key
    hits = alice.store.search_items(["memories"], query="when is the heron failover drill")
    assert key in [h["key"] for h in hits["items"]]
    assert all(isinstance(h["score"], float) for h in hits["items"])
    for prefix in (["memories", "private"], ["memories", "private", "fact"], []):
        assert key in [i["key"] for i in alice.store.search_items(prefix, limit=100)["items"]]
    assert alice.store.search_items(["memories", "global"], limit=100)["items"]
    assert key not in str(alice.store.search_items(["memories", "global"], limit=100))
    assert alice.store.search_items(["memories", "private", "decision"])["items"] == []
    assert alice.store.search_items(["elsewhere"])["items"] == []
    mine = alice.store.search_items(["memories"], filter={"scope": f"user:{served.alice}"})
    assert [i["key"] for i in mine["items"]] == [key]
    # the namespaces that hold what she may read
    spaces = alice.store.list_namespaces()["namespaces"]
    assert ["memories", "private", "fact"] in spaces
    assert ["memories", "global", "usage_guide"] in spaces
    assert alice.store.list_namespaces(prefix=["memories", "private"])["namespaces"] == [
        ["memories", "private", "fact"]
    ]
    # the suffix matches the whole namespace, then max_depth cuts it (as LangGraph's stores do)
    assert alice.store.list_namespaces(suffix=["fact"], max_depth=2)["namespaces"] == [
        ["memories", "global"],
        ["memories", "private"],
    ]


def test_no_operator_reads_anothers_private_items(
    served: Served, alice_row: dict[str, Any], bob_row: dict[str, Any]
) -> None:
    alice, bob = served.sdk(), served.sdk("bob")
    assert bob_row["value"]["scope"] == "user:bob" and bob_row["namespace"][1] == "private"
    for reader, other, theirs in ((bob, alice_row, ALICE_NOTE), (alice, bob_row, BOB_NOTE)):
        for namespace in (other["namespace"], ["memories"], []):
            with pytest.raises(NotFoundError):  # 404, never 403: the id reveals nothing
                reader.store.get_item(namespace, key=other["key"])
        for prefix in ([], ["memories"], ["memories", "private"], other["namespace"]):
            for query in (None, theirs, other["key"]):
                found = reader.store.search_items(prefix, query=query, limit=1000)
                assert theirs not in str(found), (prefix, query)
                assert other["key"] not in [i["key"] for i in found["items"]]
        scoped = reader.store.search_items([], filter={"scope": other["value"]["scope"]})
        assert scoped["items"] == []
    # a put's key names only its operator's item: bob's "heron-drill" is not hers
    with pytest.raises(NotFoundError):
        bob.store.get_item(["memories", "fact"], key="heron-drill")
    assert ["memories", "private", "decision"] not in alice.store.list_namespaces()["namespaces"]
    assert ["memories", "private", "decision"] in bob.store.list_namespaces()["namespaces"]
    # both still read their own, and the shared rows
    assert BOB_NOTE in str(bob.store.search_items(["memories", "private"], query="pelican"))
    assert bob.store.get_item(["memories"], key=SHARED_ID)["namespace"] == [
        "memories",
        "global",
        "fact",
    ]


def test_delete_retires_only_the_operators_own_private_rows(
    served: Served, bob_row: dict[str, Any]
) -> None:
    from olav.audit.db import connect

    alice, bob = served.sdk(), served.sdk("bob")
    alice.store.put_item(
        ["memories", "preference"], "short-names", {"text": "alice likes terse output"}
    )
    (draft,) = [d for d, item in pending(served).items() if "terse" in item["summary"]]
    confirm(served, draft)
    row = alice.store.get_item(["memories", "preference"], key="short-names")
    # shared rows and guides: 403, with the workspace's way
    for key in (GUIDE_ID, SHARED_ID):
        with pytest.raises(PermissionDeniedError, match=f"olav memory delete {key}"):
            alice.store.delete_item(["memories", "global"], key=key)
        assert alice.store.get_item([], key=key)["key"] == key
    # another operator's: 404, and it stays
    with pytest.raises(NotFoundError):
        alice.store.delete_item(bob_row["namespace"], key=bob_row["key"])
    assert bob.store.get_item([], key=bob_row["key"])["key"] == bob_row["key"]
    # her own: retired (kept for history), audited with her as the actor
    assert alice.store.delete_item(["memories", "preference"], key="short-names") is None
    for key in ("short-names", row["key"]):
        with pytest.raises(NotFoundError):
            alice.store.get_item(["memories", "preference"], key=key)
    assert row["key"] not in str(alice.store.search_items([], limit=1000))
    with pytest.raises(NotFoundError):
        alice.store.delete_item(["memories", "preference"], key=row["key"])
    with connect(served.ws / ".olav" / "databases" / "audit.duckdb") as con:
        events = con.execute(
            "SELECT action, actor FROM memory_events WHERE memory_id = ?", [row["key"]]
        ).fetchall()
    assert ("delete", served.alice) in events


def test_bad_input_is_a_422_that_names_the_field(served: Served) -> None:
    item = {"namespace": ["memories", "fact"], "key": "k", "value": {"text": "x"}}
    cases: list[tuple[str, str, Any, str]] = [
        ("PUT", "/store/items", {**item, "namespace": "memories.fact"}, "namespace"),
        ("PUT", "/store/items", {**item, "namespace": ["memories", 7]}, "namespace"),
        ("PUT", "/store/items", {**item, "namespace": []}, "namespace"),
        ("PUT", "/store/items", {k: v for k, v in item.items() if k != "key"}, "key"),
        ("PUT", "/store/items", {**item, "key": ""}, "key"),
        ("PUT", "/store/items", {**item, "key": 5}, "key"),
        ("PUT", "/store/items", {**item, "value": "remember this"}, "value must be an object"),
        ("PUT", "/store/items", {**item, "value": {}}, "value is empty"),
        ("PUT", "/store/items", {**item, "value": {"text": 5}}, "value.text"),
        ("PUT", "/store/items", {**item, "value": {"text": "x", "tags": "a"}}, "value.tags"),
        ("PUT", "/store/items", {**item, "namespace": ["memories", "usage_guide"]}, "guide"),
        ("PUT", "/store/items", {**item, "namespace": ["memories", "team", "fact"]}, "team"),
        ("PUT", "/store/items", {**item, "namespace": ["topology"]}, "format"),
        ("GET", "/store/items?namespace=memories", None, "key"),
        ("DELETE", "/store/items", {"namespace": ["memories"]}, "key"),
        ("DELETE", "/store/items", {"namespace": "x", "key": "k"}, "namespace"),
        ("POST", "/store/items/search", {"namespace_prefix": "memories"}, "namespace_prefix"),
        ("POST", "/store/items/search", {"limit": 0}, "limit"),
        ("POST", "/store/items/search", {"offset": -1}, "offset"),
        ("POST", "/store/items/search", {"query": 5}, "query"),
        ("POST", "/store/items/search", {"filter": {"text": "x"}}, "filter on 'text'"),
        ("POST", "/store/items/search", {"filter": ["x"]}, "filter"),
        ("POST", "/store/namespaces", {"prefix": [1]}, "prefix"),
        ("POST", "/store/namespaces", {"max_depth": 0}, "max_depth"),
        ("POST", "/store/namespaces", {"limit": "all"}, "limit"),
    ]
    before = set(pending(served))
    with served.http() as http:
        for method, path, body, says in cases:
            got = http.request(method, path, json=body)
            where = f"{method} {path} {body!r}: {got.status_code} {got.text[:300]}"
            assert got.status_code == 422, where
            assert says in got.json()["detail"], where
    assert set(pending(served)) == before  # none of them made a draft


def test_a_remote_operators_draft_is_theirs_and_never_a_file(tmp_path: Path) -> None:
    """The curator side of a put: the operator's own ``user:`` scope (nobody else's, and only
    for a draft that names its operator), and the body as sent, never a server file it names."""
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "SKILL.md").write_text("---\nname: core\n---\n")
    (tmp_path / "notes.md").write_text("a file on the server that no client may read\n")

    def draft(**kw: Any) -> dict[str, Any]:
        args: dict[str, Any] = {"intent": "n", "keywords": ["n"], "body": "notes.md"}
        propose_draft(tmp_path, DraftRequest(**{"category": "document", **args, **kw}))
        return dict(json.loads((tmp_path / DRAFTS / "n.draft.json").read_text()))

    data = draft(scope="user:alice", operator="alice")
    assert data["operator"] == "alice" and data["scope"] == "user:alice"
    assert data["body"] == "notes.md" and data["source"] is None
    for kw in ({"scope": "user:bob", "operator": "alice"}, {"scope": "user:alice"}):
        with pytest.raises(OlavError, match="scope"):
            draft(**kw)
    assert "operator" not in draft()  # the chat's drafts are as they were
    assert draft()["source"] == "notes.md"
