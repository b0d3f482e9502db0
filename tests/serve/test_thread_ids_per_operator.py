"""Thread ids are per operator (issue 52): bob asking for an id alice uses is answered exactly
as for an unused one, and gets a thread of his own under it. Both then use one id, each on
their own thread: their messages, runs, checkpoints, search and deletes never touch the
other's, and nothing either of them is shown names the key the second thread is stored under
(which would tell that the id was taken). The store's side, on a file and on PostgreSQL:
an owner's ids are unique, another owner's are not in the way, and a schema 3 database opens.

Through the real HTTP API of an in-process server (tests.serve._inprocess)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from olav.runtime.threads import SCHEMA_VERSION, ThreadStore
from tests.serve._inprocess import Local, human, local_server, sse, tokens_for

TID = "payroll-2026"
ALICE_SAYS = "alice: the payroll password is tulip-99."
BOB_SAYS = "bob: my bonus is 12k."
MODES = ["values", "updates", "messages-tuple", "checkpoints", "events", "debug", "tasks"]
STAMP = re.compile(r"\d{4}-\d\d-\d\dT[\d:.+]+|[0-9a-f]{8}-[0-9a-f-]{27}|[0-9a-f]{32}")


@pytest.fixture
def local(hash_ws: Path) -> Iterator[Local]:
    alice, tokens = tokens_for(hash_ws, "bob")
    with local_server(hash_ws, tokens, alice) as server:
        yield server


def _shape(got: Any, tid: str) -> tuple[int, str]:
    """A response with its id, times, run ids and uuids taken out: what tells one id from
    another."""
    text = STAMP.sub("*", got.text.replace(tid, "<id>"))
    return got.status_code, text


def _run(client: Any, tid: str, text: str, **extra: Any) -> Any:
    body = {"assistant_id": "core", "input": human(text), **extra}
    return client.post(f"/threads/{tid}/runs/wait", json=body)


def _bobs_key(local: Local) -> str:
    bobs = local.server.threads.owned("bob", TID)
    assert bobs is not None and bobs.known_as == TID and bobs.id != TID
    return str(bobs.id)


def test_an_id_another_operator_uses_is_answered_as_an_unused_one(local: Local) -> None:
    with local.http() as alice, local.http("bob") as bob:
        assert alice.post("/threads", json={"thread_id": TID}).status_code == 200
        assert _run(alice, TID, ALICE_SAYS).status_code == 200
        # reads, and a run without if_not_exists: a 404 either way
        for path in (f"/threads/{TID}", f"/threads/{TID}/state", f"/threads/{TID}/runs"):
            assert _shape(bob.get(path), TID) == _shape(bob.get(path.replace(TID, "x-9")), "x-9")
        assert _shape(_run(bob, TID, "hi"), TID) == _shape(_run(bob, "x-9", "hi"), "x-9")
        # making it: as for an unused id, and bob's own thread
        made = bob.post("/threads", json={"thread_id": TID, "metadata": {"k": 1}})
        fresh = bob.post("/threads", json={"thread_id": "fresh-1", "metadata": {"k": 1}})
        assert made.status_code == 200, made.text
        assert _shape(made, TID) == _shape(fresh, "fresh-1")
        assert made.json()["thread_id"] == TID and made.json()["metadata"]["owner"] == "bob"
        # a second POST is his own thread's 409 (or do_nothing), for both alike
        for body in ({}, {"if_exists": "do_nothing"}):
            again = bob.post("/threads", json={"thread_id": TID, **body})
            twice = bob.post("/threads", json={"thread_id": "fresh-1", **body})
            assert _shape(again, TID) == _shape(twice, "fresh-1")
        # a run that makes its thread, on an id alice has and on an unused one
        assert bob.delete(f"/threads/{TID}").status_code == 204
        body = {"assistant_id": "core", "input": human("hi"), "if_not_exists": "create"}
        made = bob.post(f"/threads/{TID}/runs", json=body)
        fresh = bob.post("/threads/fresh-2/runs", json=body)
        assert made.status_code == 200, made.text
        assert _shape(made, TID) == _shape(fresh, "fresh-2")
        assert made.json()["thread_id"] == TID
        assert bob.get(f"/threads/{TID}/runs/{made.json()['run_id']}/join").status_code == 200
        key = _bobs_key(local)
        assert alice.get(f"/threads/{TID}").json()["metadata"]["owner"] == local.alice
        assert key not in bob.get(f"/threads/{TID}/runs").text


def test_both_have_their_own_thread_under_one_id(local: Local) -> None:
    with local.http() as alice, local.http("bob") as bob:
        assert alice.post("/threads", json={"thread_id": TID}).status_code == 200
        assert _run(alice, TID, ALICE_SAYS).status_code == 200
        assert bob.post("/threads", json={"thread_id": TID}).status_code == 200
        streamed = bob.post(
            f"/threads/{TID}/runs/stream",
            json={"assistant_id": "core", "input": human(BOB_SAYS), "stream_mode": MODES},
        )
        assert streamed.status_code == 200, streamed.text
        key = _bobs_key(local)
        events = sse(streamed.text)
        assert {e for _, e, _ in events} >= {"metadata", "values", "checkpoints", "end"}
        assert key not in streamed.text and ALICE_SAYS not in streamed.text
        named = re.findall(r'"thread_id": ?"([^"]+)"', streamed.text)
        assert named and set(named) == {TID}, set(named)
        assert streamed.headers["location"].startswith(f"/threads/{TID}/runs/")
        for client, mine, theirs in ((alice, ALICE_SAYS, BOB_SAYS), (bob, BOB_SAYS, ALICE_SAYS)):
            state = client.get(f"/threads/{TID}/state").json()
            texts = [m["content"] for m in state["values"]["messages"]]
            assert texts == [mine, f"answer to {mine}"]
            assert state["checkpoint"]["thread_id"] == TID
            history = client.post(f"/threads/{TID}/history", json={"limit": 50}).json()
            assert history and {h["checkpoint"]["thread_id"] for h in history} == {TID}
            parents = {
                h["parent_checkpoint"]["thread_id"] for h in history if h["parent_checkpoint"]
            }
            assert parents == {TID}
            runs = client.get(f"/threads/{TID}/runs").json()
            assert len(runs) == 1 and runs[0]["thread_id"] == TID
            got = client.get(f"/threads/{TID}/runs/{runs[0]['run_id']}")
            assert got.status_code == 200 and got.json()["thread_id"] == TID
            found = client.post("/threads/search", json={"ids": [TID]}).json()
            assert [t["thread_id"] for t in found] == [TID]
            assert mine in str(found) and theirs not in str(found)
            everything = [
                client.get(f"/threads/{TID}"),
                client.get(f"/threads/{TID}/state"),
                client.post(f"/threads/{TID}/history", json={"limit": 50}),
                client.get(f"/threads/{TID}/runs"),
                client.post("/threads/search", json={}),
            ]
            for response in everything:
                assert key not in response.text and theirs not in response.text
            # the other's run is not on this operator's thread of the same id
            other = alice if client is bob else bob
            rid = other.get(f"/threads/{TID}/runs").json()[0]["run_id"]
            assert client.get(f"/threads/{TID}/runs/{rid}").status_code == 404
            assert client.get(f"/threads/{TID}/runs/{rid}/join").status_code == 404
        patched = bob.patch(f"/threads/{TID}", json={"metadata": {"label": "bobs"}})
        assert patched.status_code == 200 and patched.json()["thread_id"] == TID
        assert "label" not in alice.get(f"/threads/{TID}").json()["metadata"]
        again = _run(bob, TID, "and again?")  # continues his own thread, not hers
        assert again.status_code == 200 and ALICE_SAYS not in again.text
    for op, mine in ((local.alice, ALICE_SAYS), ("bob", BOB_SAYS)):
        with local.console(op) as console:
            page = console.get("/chat", params={"thread": TID, "format": "json"})
            assert page.status_code == 200 and page.json()["thread"] == TID
            assert mine in page.text and key not in page.text
            runs = console.get("/runs", params={"format": "json"}).json()["runs"]
            assert runs and {r["thread_id"] for r in runs} == {TID}
            assert key not in console.get("/chat").text


def test_a_delete_by_one_never_touches_the_others(local: Local) -> None:
    with local.http() as alice, local.http("bob") as bob:
        for client, text in ((alice, ALICE_SAYS), (bob, BOB_SAYS)):
            assert client.post("/threads", json={"thread_id": TID}).status_code == 200
            assert _run(client, TID, text).status_code == 200
        assert bob.delete(f"/threads/{TID}").status_code == 204
        assert bob.get(f"/threads/{TID}").status_code == 404
        state = alice.get(f"/threads/{TID}/state").json()
        assert [m["content"] for m in state["values"]["messages"]] == [
            ALICE_SAYS,
            f"answer to {ALICE_SAYS}",
        ]
        assert len(alice.get(f"/threads/{TID}/runs").json()) == 1
        assert bob.post("/threads", json={"thread_id": TID}).status_code == 200  # anew: empty
        assert bob.get(f"/threads/{TID}/state").json()["values"] == {}
        assert bob.get(f"/threads/{TID}/runs").json() == []
        assert alice.delete(f"/threads/{TID}").status_code == 204
        assert alice.get(f"/threads/{TID}").status_code == 404
        assert bob.get(f"/threads/{TID}").json()["metadata"]["owner"] == "bob"
        # alice's id is free again: hers is made under it, bob's keeps its own key
        assert alice.post("/threads", json={"thread_id": TID}).status_code == 200
        assert local.server.threads.owned(local.alice, TID).id == TID


def _per_owner(store: ThreadStore) -> list[Any]:
    """What the store does with one id two owners use, and what each step returned."""
    a, made_a = store.insert("core", TID, owner="alice", metadata={"who": "alice"})
    b, made_b = store.insert("core", TID, owner="bob", metadata={"who": "bob"})
    again, made = store.insert("core", TID, owner="bob", metadata={"who": "again"})
    assert (made_a, made_b, made) == (True, True, False) and again.id == b.id
    assert (a.id, a.known_as, b.known_as) == (TID, TID, TID) and b.id != TID
    assert store.owned("carol", TID) is None
    assert store.owned("bob", b.id) is None  # a key is no id of bob's
    deleted = store.delete(b.id)
    out = [
        store.owned("alice", TID) == a,
        deleted.known_as,
        store.owned("bob", TID),
        store.insert("core", TID, owner="bob")[0].known_as,
        sorted((t.owner, t.known_as) for t in store.recent()),
        store.get(TID).owner,  # the key wins over another owner's id
    ]
    return out


def test_the_store_keeps_ids_per_owner_on_a_file_and_on_postgres(tmp_path: Path) -> None:
    from tests.pg_support import new_database, postgres_server

    with closing(ThreadStore(tmp_path / "threads.sqlite")) as store:
        on_file = _per_owner(store)
    with postgres_server() as server:
        with closing(ThreadStore(uri=new_database(server))) as store:
            assert _per_owner(store) == on_file
        # a database of schema 3 (before ids per owner) opens, its threads known by their keys
        uri = new_database(server)
        import psycopg

        with psycopg.connect(uri, autocommit=True) as con:
            con.execute(SCHEMA_3)
        with closing(ThreadStore(uri=uri)) as store:
            assert store.migrated == ["4: thread ids per owner"]
            old = store.owned("alice", TID)
            assert old is not None and (old.id, old.known_as, old.name) == (TID, TID, "kept")
            bobs, made = store.insert("core", TID, owner="bob")
            assert made and bobs.id != TID and store.owned("bob", TID) == bobs
            (version,) = store.conn.execute(
                "SELECT value FROM olav_meta WHERE key = 'schema'"
            ).fetchone()
            assert version == str(SCHEMA_VERSION) == "4"
    assert on_file == [True, TID, None, TID, [("alice", TID), ("bob", TID)], "alice"]


SCHEMA_3 = f"""
CREATE TABLE olav_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE olav_threads (
    id TEXT PRIMARY KEY, agent TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '', created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL, turns INTEGER NOT NULL DEFAULT 0,
    preview TEXT NOT NULL DEFAULT '', metadata TEXT NOT NULL DEFAULT '{{}}', run_id TEXT,
    run_pid INTEGER, run_host TEXT, run_since DOUBLE PRECISION
);
CREATE TABLE olav_turns (
    thread_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '', content TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (thread_id, seq)
);
INSERT INTO olav_meta VALUES ('schema', '3');
INSERT INTO olav_threads (id, agent, owner, name, created_at, updated_at)
    VALUES ('{TID}', 'core', 'alice', 'kept', 1.0, 2.0);
"""
