"""A run belongs to its operator, for good, and faults leave nothing misleading behind.

- A thread id deleted by one operator and taken by another shows the second nothing of the
  first: not her runs (listed, got, joined, streamed from event 0), not her messages (state,
  history, search), not on the console (/runs, /chat); the same for a stateless run's thread.
- Two servers on one workspace whose operators make one thread id at once: each gets a thread
  of their own under it (thread ids are per operator), and nobody's metadata lands in
  another's thread; one operator's two requests for one id at once make exactly one thread.
- After `kill -9` mid-run: the audit's run says error (and why) once the workspace is opened
  again, and a stream of the run resumed with ``Last-Event-ID`` gets its error and end, numbered
  after every event the client saw.
- A stateless resume has nothing to resume (409); ``metadata.name`` names a new thread.

Most of it runs in this process (tests.serve._inprocess); the kill is the real CLI's."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from olav.core.procs import this_process
from olav.runtime.threads import ThreadStore
from olav.serve.records import RunRecord, RunRecords
from tests.serve._inprocess import Local, human, local_server, sse, tokens_for
from tests.serve._support import serving, sse_events, start_server, stop_server

SECRET = "payroll password is tulip-99"


@pytest.fixture
def two(hash_ws: Path) -> Iterator[tuple[Local, Local]]:
    """Two in-process servers on one workspace (alice and bob have tokens on both)."""
    alice, tokens = tokens_for(hash_ws, "bob")
    with local_server(hash_ws, tokens, alice) as one, local_server(hash_ws, tokens, alice) as two:
        yield one, two


@pytest.fixture
def local(two: tuple[Local, Local]) -> Local:
    return two[0]


def _run(http: Any, tid: str, text: str, **extra: Any) -> dict[str, Any]:
    """A run on the thread, to its end: the run as created."""
    got = http.post(
        f"/threads/{tid}/runs", json={"assistant_id": "core", "input": human(text), **extra}
    )
    assert got.status_code == 200, got.text
    run = got.json()
    joined = http.get(f"/threads/{tid}/runs/{run['run_id']}/join")
    assert joined.status_code == 200, joined.text
    return dict(run)


def _nothing_of(secret: str, *responses: Any) -> None:
    for got in responses:
        assert secret not in got.text, (got.request.url, got.text[:500])


# -- A: a thread id taken again -----------------------------------------------------------------


def test_a_deleted_threads_id_taken_by_another_operator_shows_nothing_of_the_first(
    local: Local,
) -> None:
    tid = "alice-notes"
    with local.http() as alice, local.http("bob") as bob:
        assert alice.post("/threads", json={"thread_id": tid}).status_code == 200
        run = _run(alice, tid, SECRET)
        rid = run["run_id"]
        assert [r["run_id"] for r in alice.get(f"/threads/{tid}/runs").json()] == [rid]
        assert alice.delete(f"/threads/{tid}").status_code == 204

        made = bob.post("/threads", json={"thread_id": tid, "metadata": {"graph_id": "core"}})
        assert made.status_code == 200 and made.json()["metadata"]["owner"] == "bob"
        assert bob.get(f"/threads/{tid}/runs").json() == []
        for path in (f"/threads/{tid}/runs/{rid}", f"/threads/{tid}/runs/{rid}/join"):
            assert bob.get(path).status_code == 404, path
        streamed = bob.get(f"/threads/{tid}/runs/{rid}/stream", headers={"Last-Event-ID": "0"})
        assert streamed.status_code == 404
        state = bob.get(f"/threads/{tid}/state")
        assert state.status_code == 200 and state.json()["values"] == {}
        history = bob.get(f"/threads/{tid}/history")
        assert history.status_code == 200 and history.json() == []
        found = bob.post("/threads/search", json={})
        assert [t["thread_id"] for t in found.json()] == [tid]
        _nothing_of("tulip", state, history, found, bob.get(f"/threads/{tid}"))

        # nothing of hers is left to find, in memory or in the store
        assert RunRecords(local.server.threads).get(rid) is None
        assert local.server.runs.find(tid, rid, local.alice, known_as=tid) is None
        assert local.server.runs.runs_of(tid, local.alice) == []
        config = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        assert local.server.threads.checkpointer.get_tuple(config) is None

        # his own run on the id is his alone, and hers is not among them
        mine = _run(bob, tid, "bob's own question")
        assert [r["run_id"] for r in bob.get(f"/threads/{tid}/runs").json()] == [mine["run_id"]]
        texts = [
            m["content"] for m in bob.get(f"/threads/{tid}/state").json()["values"]["messages"]
        ]
        assert texts == ["bob's own question", "answer to bob's own question"]

    with local.console("bob") as console:
        runs = console.get("/runs", params={"format": "json"})
        assert [r["query"] for r in runs.json()["runs"]] == ["bob's own question"]
        chat = console.get("/chat", params={"thread": tid, "format": "json"})
        assert [t["query"] for t in chat.json()["turns"]] == ["bob's own question"]
        _nothing_of("tulip", runs, chat, console.get("/runs"), console.get(f"/chat?thread={tid}"))
    with local.console() as console:  # hers are still hers to see in the audit
        queries = [
            r["query"] for r in console.get("/runs", params={"format": "json"}).json()["runs"]
        ]
        assert queries == [SECRET]


def test_a_stateless_runs_thread_id_taken_by_another_operator_shows_nothing(local: Local) -> None:
    from olav.audit.export import RunFilter, list_runs

    with local.http() as alice, local.http("bob") as bob:
        got = alice.post("/runs/wait", json={"assistant_id": "core", "input": human(SECRET)})
        assert got.status_code == 200, got.text
        (audited,) = list_runs(local.server.ws.audit_path, RunFilter(), read_only=False)
        tid = audited.thread_id
        assert tid and local.server.threads.find(tid) is None  # deleted with the run
        assert bob.post("/threads", json={"thread_id": tid}).status_code == 200
        assert bob.get(f"/threads/{tid}/runs").json() == []
        _nothing_of("tulip", bob.get(f"/threads/{tid}/state"), bob.get(f"/threads/{tid}/history"))
    with local.console("bob") as console:
        runs = console.get("/runs", params={"format": "json"}).json()
        assert runs["runs"] == [] and runs["total"] == 0
        chat = console.get("/chat", params={"thread": tid, "format": "json"})
        assert chat.status_code == 200 and chat.json()["turns"] == []
        page = console.get(f"/runs/{audited.id}")
        assert page.status_code == 404
    (audited,) = list_runs(local.server.ws.audit_path, RunFilter(), read_only=False)
    assert audited.operator == local.alice  # recorded on the run itself


def test_every_run_lookup_names_the_operator(local: Local) -> None:
    with local.http() as alice:
        alice.post("/threads", json={"thread_id": "t-own"})
        rid = _run(alice, "t-own", "a question")["run_id"]
    runs = local.server.runs
    assert runs.find("t-own", rid, local.alice, known_as="t-own") is not None
    assert runs.find("t-own", rid, "bob", known_as="t-own") is None  # in memory
    assert runs.thread_runs("t-own", "bob", known_as="t-own") == []
    assert runs.runs_of("t-own", "bob") == []
    runs._runs.clear()  # as after a restart: only the store has it
    assert runs.find("t-own", rid, local.alice, known_as="t-own") is not None
    assert runs.find("t-own", rid, "bob", known_as="t-own") is None


# -- B: two servers make one thread id at once --------------------------------------------------


def _race(calls: list[Any]) -> list[Any]:
    """Each call in its own thread, released at once; what each returned or raised."""
    start = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def go(i: int) -> None:
        start.wait()
        try:
            out[i] = calls[i]()
        except Exception as exc:
            out[i] = exc

    workers = [threading.Thread(target=go, args=(i,)) for i in range(len(calls))]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    return out


def _race_stores(one: ThreadStore, two: ThreadStore, rounds: int) -> None:
    for n in range(rounds):
        tid = f"race-{n}"
        got = _race(
            [
                lambda s=one, t=tid: s.insert("core", t, owner="alice", metadata={"who": "alice"}),
                lambda s=two, t=tid: s.insert("core", t, owner="bob", metadata={"who": "bob"}),
            ]
        )
        assert all(isinstance(g, tuple) and g[1] is True for g in got), (n, got)
        (a, _), (b, _) = got
        assert a.known_as == b.known_as == tid and a.id != b.id and tid in (a.id, b.id), (n, got)
        for store, who in ((one, "alice"), (two, "bob")):
            mine = store.owned(who, tid)
            assert mine is not None and (mine.owner, mine.metadata) == (who, {"who": who}), n
        # one operator's id made on both at once: exactly one makes it, the other finds it
        own = f"own-{n}"
        got = _race(
            [
                lambda s=one, t=own: s.insert("core", t, owner="alice", metadata={"who": "one"}),
                lambda s=two, t=own: s.insert("core", t, owner="alice", metadata={"who": "two"}),
            ]
        )
        assert sorted(g[1] for g in got) == [False, True], (n, got)
        (first, made), (second, _) = got
        assert first.id == second.id == own, (n, got)
        assert one.owned("alice", own).metadata == {"who": "one" if made else "two"}, (n, got)
        # the owner's own second try is no error, and changes nothing
        again, made = two.insert("core", tid, owner="bob", metadata={"who": "again"})
        assert made is False and again.id == b.id and again.metadata == {"who": "bob"}


def test_two_stores_on_one_file_make_one_id_at_once_each_owner_their_own(tmp_path: Path) -> None:
    path = tmp_path / "threads.sqlite"
    one, two = ThreadStore(path), ThreadStore(path)
    try:
        _race_stores(one, two, rounds=100)
    finally:
        one.close()
        two.close()


@pytest.mark.slow
def test_two_stores_on_one_postgres_database_make_one_id_at_once(tmp_path: Path) -> None:
    from tests.pg_support import new_database, postgres_server

    with postgres_server() as server:
        uri = new_database(server)
        one, two = ThreadStore(uri=uri), ThreadStore(uri=uri)
        try:
            _race_stores(one, two, rounds=100)
        finally:
            one.close()
            two.close()


def test_two_servers_making_one_thread_id_at_once_give_each_operator_their_own(
    two: tuple[Local, Local],
) -> None:
    first, second = two
    with first.http() as alice, second.http("bob") as bob:
        for n in range(25):
            tid = f"both-{n}"
            got = _race(
                [
                    lambda t=tid: alice.post(
                        "/threads", json={"thread_id": t, "metadata": {"who": "alice"}}
                    ),
                    lambda t=tid: bob.post(
                        "/threads", json={"thread_id": t, "metadata": {"who": "bob"}}
                    ),
                ]
            )
            assert [g.status_code for g in got] == [200, 200], (n, [g.text for g in got])
            assert [g.json()["thread_id"] for g in got] == [tid, tid]
            for client, who in ((alice, "alice"), (bob, "bob")):
                shown = client.get(f"/threads/{tid}").json()
                assert shown["thread_id"] == tid and shown["metadata"]["who"] == who, n
        body = {"assistant_id": "core", "input": human("hi"), "if_not_exists": "create"}
        for n in range(6):
            tid = f"run-both-{n}"
            got = _race(
                [
                    lambda t=tid: alice.post(f"/threads/{t}/runs", json=body),
                    lambda t=tid: bob.post(f"/threads/{t}/runs", json=body),
                ]
            )
            assert [g.status_code for g in got] == [200, 200], (n, [g.text for g in got])
            for client, run in zip((alice, bob), got, strict=True):
                assert run.json()["thread_id"] == tid
                rid = run.json()["run_id"]
                assert client.get(f"/threads/{tid}/runs/{rid}/join").status_code == 200
                listed = client.get(f"/threads/{tid}/runs").json()
                assert [r["run_id"] for r in listed] == [rid], n


def test_a_thread_made_by_another_server_after_the_check_is_the_operators_own(
    two: tuple[Local, Local], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving the race can take, made certain: server one looked for the
    operator's id and found nothing, then server two made it (for that operator, or for
    another one)."""
    first, second = two
    with second.http("bob") as bob:
        made = bob.post("/threads", json={"thread_id": "late", "metadata": {"who": "bob"}})
        assert made.status_code == 200
    real, blinded = first.server.own_thread, set()

    def once_blind(operator: str, thread_id: str) -> Any:
        """Each operator's first look finds nothing (the check before the other made it)."""
        if operator in blinded:
            return real(operator, thread_id)
        blinded.add(operator)
        return None

    monkeypatch.setattr(first.server, "own_thread", once_blind)
    body = {"assistant_id": "core", "input": human("x"), "if_not_exists": "create"}
    with first.http() as alice, first.http("bob") as bob_on_one:
        got = alice.post("/threads", json={"thread_id": "late", "metadata": {"who": "alice"}})
        assert got.status_code == 200 and got.json()["metadata"]["who"] == "alice"
        run = alice.post("/threads/late/runs", json=body)  # her look finds nothing: made again
        assert run.status_code == 200, run.text
        assert alice.get(f"/threads/late/runs/{run.json()['run_id']}/join").status_code == 200
        again = bob_on_one.post("/threads/late/runs", json=body)  # bob's, made on server two
        assert again.status_code == 200, again.text
        assert (
            bob_on_one.get(f"/threads/late/runs/{again.json()['run_id']}/join").status_code == 200
        )
    bobs = first.server.threads.owned("bob", "late")
    alices = first.server.threads.owned(first.alice, "late")
    assert bobs.metadata == {"who": "bob"} and alices.metadata == {"who": "alice"}
    assert [r.run_id for r in first.server.runs.runs_of(bobs.id, "bob")] == [again.json()["run_id"]]
    assert [r.run_id for r in first.server.runs.runs_of(alices.id, first.alice)] == [
        run.json()["run_id"]
    ]


# -- E: a resume with nothing to resume; a name at creation --------------------------------------


def test_a_resume_that_waits_on_nothing_is_a_409(local: Local) -> None:
    body = {"assistant_id": "core", "command": {"resume": "yes"}}
    with local.http() as alice:
        for path in ("/runs/wait", "/runs/stream"):
            got = alice.post(path, json=body)
            assert got.status_code == 409, (path, got.text)
            assert "resume" in got.json()["detail"]
        fresh = alice.post("/threads/fresh-id/runs", json={**body, "if_not_exists": "create"})
        assert fresh.status_code == 409 and "nothing to resume" in fresh.json()["detail"]
        assert local.server.threads.find("fresh-id") is None  # nothing made for it
        assert alice.post("/threads", json={"thread_id": "idle"}).status_code == 200
        idle = alice.post("/threads/idle/runs/wait", json=body)
        assert idle.status_code == 409


def test_metadata_name_at_creation_names_the_thread(local: Local) -> None:
    with local.http() as alice:
        got = alice.post("/threads", json={"thread_id": "named", "metadata": {"name": "OSPF"}})
        assert got.status_code == 200 and got.json()["metadata"]["name"] == "OSPF"
        assert alice.get("/threads/named").json()["metadata"]["name"] == "OSPF"
        bad = alice.post("/threads", json={"metadata": {"name": 7}})
        assert bad.status_code == 422 and "metadata.name" in bad.json()["detail"]
    assert local.server.threads.get("named").name == "OSPF"


# -- D: after a kill -----------------------------------------------------------------------------


def _audit_run(path: Path, rid: str, status: str, pid: int | None, host: str, mark: str) -> None:
    from olav.audit.db import connect

    with connect(path) as con:
        con.execute(
            "INSERT INTO runs (id, agent, status, query, started_at, operator, pid, host, "
            "process) VALUES (?, 'core', ?, ?, ?, 'alice', ?, ?, ?)",
            [rid, status, f"query of {rid}", datetime.now(UTC), pid, host, mark],
        )


def test_an_audit_run_left_running_by_a_dead_process_is_settled_and_only_that(
    hash_ws: Path,
) -> None:
    from olav.audit.db import connect
    from olav.audit.recorder import settle_orphans
    from olav.core.config import Workspace

    path = Path(Workspace.open(hash_ws).audit_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    here = socket.gethostname()
    cases = {  # run id: (pid, host, process mark, the status it ends up with)
        "dead": (int(dead.stdout), here, f"{int(dead.stdout)}-1", "error"),
        "earlier-me": (os.getpid(), here, f"{os.getpid()}-0", "error"),  # a pid used again
        "me": (os.getpid(), here, this_process(), "running"),
        "parent": (os.getppid(), here, "", "running"),
        "far": (4242, "another-host", "4242-1", "running"),
        "unnamed": (None, here, "", "running"),  # from before runs named their process
    }
    for rid, (pid, host, mark, _) in cases.items():
        _audit_run(path, rid, "running", pid, host, mark)
    _audit_run(path, "done", "completed", int(dead.stdout), here, "x")
    assert settle_orphans(path) == 2
    assert settle_orphans(path) == 0  # once
    with connect(path) as con:
        rows = dict(con.execute("SELECT id, status FROM runs").fetchall())
        (why,) = con.execute("SELECT error FROM runs WHERE id = 'dead'").fetchone()
    assert rows == {**{rid: want for rid, (*_, want) in cases.items()}, "done": "completed"}
    assert (
        why == f"the process that ran it (pid {int(dead.stdout)} on {here}) stopped before it ended"
    )


def test_event_numbers_are_reserved_in_the_store_before_any_client_sees_them() -> None:
    from olav.serve.run import RESERVE, Run

    asked: list[int] = []
    run = Run("r", "t", "core", "alice", "", [], ("values",), reserved=RESERVE)

    def reserve(upto: int) -> None:  # the next event is not out yet when its number is kept
        assert run.last_event == len(asked) * RESERVE + RESERVE and upto > run.last_event
        asked.append(upto)

    run.reserve = reserve
    for n in range(2 * RESERVE + 2):
        run.emit("messages", n)
    run.close()
    assert asked == [2 * RESERVE, 3 * RESERVE]
    assert [e[0] for e in run.events] == list(range(1, 2 * RESERVE + 4))


def test_a_replayed_stream_numbers_its_events_after_those_its_server_sent(local: Local) -> None:
    """A kept run whose server died (in the store as running, pid gone): its stream here is
    its values, its error and its end, numbered after the events reserved for it."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    threads = local.server.threads
    threads.create("core", "killed", owner=local.alice)
    rid = str(uuid.uuid4())
    RunRecords(threads).record(
        RunRecord(
            rid, "killed", "core", local.alice, "running", 1.0, 1.0, pid=int(dead.stdout), events=64
        )
    )
    path = f"/threads/killed/runs/{rid}/stream"
    with local.http() as alice:
        first = sse(alice.get(path, headers={"Last-Event-ID": "2"}).text)
        assert [(n, e) for n, e, _ in first] == [(65, "values"), (66, "error"), (67, "end")]
        assert "the server stopped while it ran" in first[1][2]["message"]
        again = sse(alice.get(path, headers={"Last-Event-ID": "66"}).text)
        assert [(n, e) for n, e, _ in again] == [(67, "end")]
        assert alice.get(path, headers={"Last-Event-ID": "67"}).text.strip() == ""


def test_a_kept_run_reserves_its_event_numbers(local: Local) -> None:
    from olav.serve.run import RESERVE

    with local.http() as alice:
        alice.post("/threads", json={"thread_id": "kept"})
        run = _run(alice, "kept", "a question", stream_mode=["values", "messages-tuple"])
        streamed = sse(alice.get(f"/threads/kept/runs/{run['run_id']}/stream").text)
    kept = RunRecords(local.server.threads).get(run["run_id"])
    assert kept is not None and kept.events >= streamed[-1][0] and kept.events == RESERVE


@pytest.mark.slow
def test_after_kill_9_the_audit_says_error_and_a_resumed_stream_gets_the_error(
    tmp_path: Path,
) -> None:
    with serving(tmp_path / "ws", process=True) as served:
        with served.http() as http:
            tid = http.post("/threads", json={"metadata": {"graph_id": "core"}}).json()["thread_id"]
            with served.model.hold("hold-kill") as gate:
                body = {"assistant_id": "core", "input": human("hold-kill: the edge?")}
                rid = http.post(f"/threads/{tid}/runs", json=body).json()["run_id"]
                path = f"/threads/{tid}/runs/{rid}/stream"
                with http.stream("GET", path) as stream:
                    events = sse_events(stream)
                    seen = [next(events), next(events)]  # metadata, and the input's values
                    gate.wait_held()
                    served.proc.send_signal(signal.SIGKILL)
                    assert served.proc.wait(timeout=30) == -signal.SIGKILL
                stop_server(served.proc)
        assert [e for _, e, _ in seen] == ["metadata", "values"]
        last = seen[-1][0]
        served.close()

        served.proc, served.url = start_server(served.ws)
        with served.http() as http:
            resumed = sse(http.get(path, headers={"Last-Event-ID": str(last)}).text)
            assert [e for _, e, _ in resumed] == ["values", "error", "end"]
            assert all(n > last for n, _, _ in resumed)
            assert "the server stopped while it ran" in resumed[1][2]["message"]
            error_id, end_id = resumed[1][0], resumed[2][0]
            rest = sse(http.get(path, headers={"Last-Event-ID": str(error_id)}).text)
            assert [(n, e) for n, e, _ in rest] == [(end_id, "end")]
        with served.http(None) as console:
            login = console.post(
                "/login",
                data={"token": served.tokens[served.alice]},
                headers={"Origin": served.url},
            )
            assert login.status_code == 303
            runs = console.get("/runs", params={"format": "json"}).json()["runs"]
        (killed,) = [r for r in runs if r["query"] == "hold-kill: the edge?"]
        assert killed["status"] == "error" and killed["outcome"] == "failed"
        assert "stopped before it ended" in killed["error"]
