"""Threads in PostgreSQL (``threads.uri``), against a real server started on 127.0.0.1 for this
module: the store does what the workspace file does; one run per thread holds across processes
(and machines: a claim is the claiming process's connection's lock); a holder killed with -9
frees its thread at once; `olav ask`, `olav threads` and two `olav serve` processes share the
database; a bad or unreachable URI is a one-line error that never shows a password."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from olav.core.errors import OlavError
from olav.runtime.threads import (
    ThreadBusyError,
    ThreadNotFoundError,
    ThreadStore,
)
from olav.serve.records import RunRecord, RunRecords
from tests.helpers import clean_env, olav_entry, olav_here, ollama_workspace
from tests.pg_support import new_database, postgres_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    with postgres_server() as uri:
        yield uri


@pytest.fixture
def pg_uri(pg_server: str) -> str:
    return new_database(pg_server)


def _transcript(store: ThreadStore) -> list[Any]:
    """The same operations on a store, and what each returned, without times."""
    out: list[Any] = []
    a = store.create("core", "alpha-1", name="first", owner="alice")
    store.create("netops", "alpha-2", owner="bob")
    store.create("core", "beta-1", owner="alice")
    out.append((a.id, a.agent, a.owner, a.name, a.turns, a.running))
    messages = [
        HumanMessage("Which OSPF area is the core in?"),
        AIMessage("", tool_calls=[{"name": "db_query", "args": {"q": "ospf"}, "id": "c1"}]),
        ToolMessage("area 0", tool_call_id="c1", name="db_query"),
        AIMessage("The core is in area 0."),
    ]
    out.append(store.sync("alpha-1", messages))
    out.append(store.sync("alpha-1", [*messages, HumanMessage("and 100% of the edge_?")]))
    out.append([(t.seq, t.role, t.content, t.name) for t in store.turns("alpha-1")])
    out.append([(t.seq, t.role) for t in store.turns("alpha-1", last=1)])
    hits = store.search("AREA 0", owner="alice")
    out.append([(h.thread.id, h.turn.seq, h.before and h.before.seq) for h in hits])
    out.append([h.turn.seq for h in store.search("100%")])  # a wildcard taken literally
    out.append(store.search("nowhere"))
    out.append(store.get("beta").id)  # a unique prefix
    with pytest.raises(ThreadNotFoundError, match="ambiguous"):
        store.get("alpha")
    out.append(store.find("alpha-2", owner="alice"))  # bob's, not alice's
    out.append(store.set_metadata("alpha-1", {"label": "ospf"}).metadata)
    out.append(store.set_metadata("alpha-1", {"pinned": True}).metadata)
    out.append(store.rename("alpha-2", "  edge  ").name)
    out.append([t.id for t in store.recent(owner="alice")])
    out.append([t.id for t in store.recent(agent="netops")])
    out.append(sorted(store.owners().items()))
    last = store.last("core")
    out.append(last and (last.id, last.turns, last.preview))
    store.claim("beta-1", "run-1", "core", "alice")
    with pytest.raises(ThreadBusyError):
        store.claim("beta-1", "run-2", "core", "alice")
    with pytest.raises(ThreadBusyError):
        store.delete("beta-1")
    out.append((store.held("beta-1"), store.get("beta-1").running))
    store.release("beta-1", "run-0")  # a stale release frees nothing
    out.append(store.held("beta-1"))
    store.release("beta-1", "run-1")
    out.append((store.held("beta-1"), store.get("beta-1").running))
    store.claim("gamma-1", "run-3", "core", "carol")  # a claim creates its thread
    store.release("gamma-1", "run-3")
    out.append((store.get("gamma-1").owner, store.get("gamma-1").agent))
    runs = RunRecords(store)
    runs.record(RunRecord("run-a", "alpha-2", "netops", "bob", "running", 1.0, 1.0))
    runs.record(RunRecord("run-b", "alpha-2", "netops", "bob", "pending", 2.0, 2.0))
    out.append(runs.update("run-a", "success", only_from=("running",)))
    out.append(runs.update("run-a", "error", "late", only_from=("running",)))
    out.append([(r.run_id, r.status) for r in runs.of_thread("alpha-2", owner="bob")])
    out.append([r.run_id for r in runs.of_thread("alpha-2", status=("pending",), limit=1)])
    kept = runs.get("run-b", thread_id="alpha-2", owner="bob")
    out.append(kept and (kept.assistant_id, kept.status, kept.created_at, kept.error))
    out.append(runs.get("run-b", owner="alice"))
    out.append(store.delete("alpha-2").id)
    out.append(runs.get("run-a"))  # deleted with its thread
    out.append(sorted(t.id for t in store.recent()))
    return out


def test_postgres_does_what_the_workspace_file_does(tmp_path: Path, pg_uri: str) -> None:
    with closing(ThreadStore(tmp_path / "threads.sqlite")) as on_file_store:
        on_file = _transcript(on_file_store)
    with closing(ThreadStore(uri=pg_uri)) as pg_store:
        on_pg = _transcript(pg_store)
    assert on_pg == on_file
    assert on_pg[1:3] == [4, 1]  # the second sync indexed only the new message
    assert on_pg[5] == [("alpha-1", 2, 1), ("alpha-1", 3, 2)]
    assert on_pg[-1] == ["alpha-1", "beta-1", "gamma-1"]
    with closing(ThreadStore(uri=pg_uri)) as reopened:  # another process's: nothing to migrate
        assert reopened.migrated == []
        assert [t.seq for t in reopened.turns("alpha-1")] == [0, 1, 2, 3, 4]


HOLDER = """
import sys
from olav.runtime.threads import ThreadStore
store = ThreadStore(uri=sys.argv[1])
store.claim(sys.argv[2], "held-run", "core", "alice")
pid = store.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
print(pid, flush=True)
sys.stdin.readline()  # holds the claim until the test says, or kills it
store.release(sys.argv[2], "held-run")
print("released", flush=True)
"""


def _holder(uri: str, thread_id: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, uri, thread_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert line.strip().isdigit(), proc.stderr.read()  # type: ignore[union-attr]
    return proc, int(line)


def _wait_gone(uri: str, backend: int) -> None:
    """Until the server has ended a dead client's session (it notices the closed socket)."""
    with psycopg.connect(uri, autocommit=True) as con:
        deadline = time.monotonic() + 30
        while con.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [backend]).fetchone():
            assert time.monotonic() < deadline, "the server kept the dead client's session"
            time.sleep(0.02)


def _wait_unlocked(uri: str, thread_id: str) -> None:
    """Until no session holds the thread's lock (the server ends a killed client's session
    when it notices the closed socket)."""
    with psycopg.connect(uri, autocommit=True) as con:
        deadline = time.monotonic() + 30
        while con.execute(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s AND objid = hashtext(%s)::oid",
            [0x6F6C6176, thread_id],
        ).fetchone():
            assert time.monotonic() < deadline, "the killed server's lock was never dropped"
            time.sleep(0.02)


def test_a_claim_holds_across_processes_and_a_kill_9_frees_it(pg_uri: str) -> None:
    with closing(ThreadStore(uri=pg_uri)) as store:
        _claims_across_processes(store, pg_uri)


def _claims_across_processes(store: ThreadStore, pg_uri: str) -> None:
    proc, _ = _holder(pg_uri, "t-released")
    with pytest.raises(ThreadBusyError, match="t-released is running in another process"):
        store.claim("t-released", "mine", "core")
    assert store.held("t-released")
    proc.stdin.write("\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    assert proc.stdout.readline().strip() == "released"  # type: ignore[union-attr]
    proc.communicate(timeout=30)
    store.claim("t-released", "mine", "core")
    store.release("t-released", "mine")

    proc, backend = _holder(pg_uri, "t-killed")
    try:
        with pytest.raises(ThreadBusyError):
            store.claim("t-killed", "mine", "core")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    _wait_gone(pg_uri, backend)
    assert not store.held("t-killed")
    store.claim("t-killed", "mine", "core")  # taken over: its holder is gone
    assert store.get("t-killed").running == "mine"
    store.release("t-killed", "mine")


def test_a_dead_machine_s_claim_is_taken_over(tmp_path: Path, pg_uri: str) -> None:
    """A claim written by a process of another machine: the workspace file cannot tell whether
    it lives, so it holds; in PostgreSQL nobody holds its lock, so it is taken over."""
    for store in (ThreadStore(tmp_path / "threads.sqlite"), ThreadStore(uri=pg_uri)):
        _dead_machine(store)
        store.close()


def _dead_machine(store: ThreadStore) -> None:
    store.create("core", "t1")
    with store._tx() as con:
        con.execute(
            "UPDATE olav_threads SET run_id = 'gone', run_pid = 4242, "
            "run_host = 'crashed-host', run_since = 0 WHERE id = 't1'"
        )
    if store.path is not None:
        with pytest.raises(ThreadBusyError, match="pid 4242"):
            store.claim("t1", "mine", "core")
    else:
        store.claim("t1", "mine", "core")
        assert store.get("t1").running == "mine"


RACER = """
import sys
from olav.runtime.threads import ThreadBusyError, ThreadStore
store = ThreadStore(uri=sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
try:
    store.claim("contested", "run-" + sys.argv[2], "core")
except ThreadBusyError:
    print("busy", flush=True)
else:
    print("won", flush=True)
sys.stdin.readline()
"""


def test_of_processes_claiming_one_thread_at_once_exactly_one_wins(pg_uri: str) -> None:
    ThreadStore(uri=pg_uri).close()  # the schema, before the race
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, pg_uri, str(i)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        for i in range(6)
    ]
    try:
        for proc in racers:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()  # type: ignore[union-attr]
        for proc in racers:  # every one at once
            proc.stdin.write("\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        results = [proc.stdout.readline().strip() for proc in racers]  # type: ignore[union-attr]
    finally:
        for proc in racers:
            proc.kill()
            proc.communicate(timeout=30)
    assert sorted(results) == ["busy"] * 5 + ["won"]


def _pg_workspace(root: Path, url: str, uri: str) -> Path:
    return ollama_workspace(root, url, f"runtime:\n  nudge: false\nthreads:\n  uri: {uri}\n")


def test_olav_ask_and_threads_keep_the_conversation_in_postgres(
    tmp_path: Path, pg_uri: str
) -> None:
    """``olav ask`` and ``olav threads`` in this process: the processes sharing the database
    are the tests around this one."""
    from tests.stubs.ollama_stub import StubState, ollama_stub

    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = _pg_workspace(tmp_path / "ws", url, pg_uri)
        state.chat_script[:] = [{"content": "We use OSPF area 0."}, {"content": "Still area 0."}]
        first = olav_here(ws, "ask", "--thread", "ospf-1", "which OSPF area do we use?")
        assert first.returncode == 0, first.stderr
        again = olav_here(ws, "ask", "--continue", "and after the change?", "--json")
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["answer"] == "Still area 0."
        sent = [
            m["content"]
            for path, body in state.requests
            if path == "/api/chat"
            for m in body["messages"]
        ]
    assert "We use OSPF area 0." in sent  # the second call saw the first answer
    listed = json.loads(olav_here(ws, "threads", "list", "--json").stdout)
    assert [(t["id"], t["turns"]) for t in listed] == [("ospf-1", 2)]
    shown = json.loads(olav_here(ws, "threads", "show", "ospf-1", "--json").stdout)
    assert [t["content"] for t in shown["turns"]] == [
        "which OSPF area do we use?",
        "We use OSPF area 0.",
        "and after the change?",
        "Still area 0.",
    ]
    assert not (ws / ".olav" / "databases" / "threads.sqlite").exists()
    with psycopg.connect(pg_uri) as con:
        (count,) = con.execute(
            "SELECT COUNT(DISTINCT thread_id) FROM checkpoints WHERE thread_id = 'ospf-1'"
        ).fetchone()  # type: ignore[misc]
    assert count == 1


def test_two_servers_share_their_threads_and_one_run_per_thread(
    tmp_path: Path, pg_uri: str
) -> None:
    """Two `olav serve` processes on one database, as two machines of a team: a thread begun on
    one continues on the other; while one runs it the other refuses a second run; when the
    first is killed with -9 the other runs the thread at once, from its last step. The other
    sees the first one's run (running, then an error once its server is gone), and a stream it
    follows that run with ends when the first one dies."""
    from langgraph_sdk import get_sync_client
    from langgraph_sdk.errors import ConflictError

    from tests.serve._support import human, serving, sse_events, start_server, stop_server

    def prepare(ws: Path) -> None:
        with (ws / ".olav" / "olav.yaml").open("a") as cfg:
            cfg.write(f"threads:\n  uri: {pg_uri}\n")

    with serving(tmp_path / "ws", prepare=prepare, process=True) as one, ExitStack() as stack:
        two_proc, two_url = start_server(one.ws)
        two = get_sync_client(url=two_url, api_key=one.tokens[one.alice])
        try:
            a = one.sdk()
            tid = a.threads.create(metadata={"graph_id": "core"})["thread_id"]
            a.runs.wait(tid, "core", input=human("first: which OSPF area is the core in?"))
            assert two.threads.get(tid)["thread_id"] == tid
            with one.model.hold("hold-team") as gate:
                held = a.runs.create(tid, "core", input=human("hold-team: and the edge?"))
                gate.wait_held()
                assert two.runs.get(tid, held["run_id"])["status"] == "running"  # one runs it
                with pytest.raises(ConflictError, match="runs on another server"):
                    two.runs.cancel(tid, held["run_id"])
                with pytest.raises(httpx.HTTPStatusError) as refused:
                    two.runs.wait(tid, "core", input=human("second: meanwhile?"))
                assert refused.value.response.status_code == 409
                # server two follows the run server one runs: its stream is open, and waits
                follower = stack.enter_context(httpx.Client(base_url=two_url, timeout=60))
                stream = stack.enter_context(
                    follower.stream(
                        "GET",
                        f"/threads/{tid}/runs/{held['run_id']}/stream",
                        headers={"Authorization": f"Bearer {one.tokens[one.alice]}"},
                    )
                )
                assert stream.status_code == 200
                one.proc.send_signal(signal.SIGKILL)
                assert one.proc.wait(timeout=30) == -signal.SIGKILL
                stop_server(one.proc)
            one.close()
            _wait_unlocked(pg_uri, tid)
            followed = list(sse_events(stream))  # ends once server two sees that one is gone
            assert [e for _, e, _ in followed] == ["values", "error", "end"]
            assert "stopped while it ran" in followed[1][2]["message"]
            assert followed[2][2]["status"] == "error"
            orphan = two.runs.get(tid, held["run_id"])  # the run server one started
            assert orphan["status"] == "error" and "stopped while it ran" in orphan["error"]
            done = two.runs.wait(tid, "core", input=human("second: and now?"))
            texts = [m["content"] for m in done["messages"]]
            assert texts[:2] == [
                "first: which OSPF area is the core in?",
                "answer to first: which OSPF area is the core in?",
            ]
            assert texts[-1] == "answer to second: and now?"
            assert "answer to hold-team: and the edge?" not in texts
            bob = get_sync_client(url=two_url, api_key=one.tokens["bob"])
            assert tid not in [t["thread_id"] for t in bob.threads.search()]
            bob.close()
            one.proc, one.url = start_server(one.ws)  # for serving()'s own stop
        finally:
            two.close()
            err = stop_server(two_proc)
            assert "Traceback" not in err, err[-3000:]


def test_a_bad_or_unreachable_uri_is_one_line_without_the_password(
    tmp_path: Path, pg_server: str
) -> None:
    from tests.helpers import write_config

    root = tmp_path / "ws"
    write_config(root)
    cfg = root / ".olav" / "olav.yaml"
    base = cfg.read_text()
    cfg.write_text(base + "threads:\n  uri: mysql://ops:s3cret@db.example/olav\n")
    bad = olav_entry(root, "threads", "list")
    line = bad.stderr.strip()
    assert bad.returncode != 0 and "\n" not in line and "Traceback" not in line
    assert "threads.uri" in line and "not a PostgreSQL URI" in line and "s3cret" not in line

    with psycopg.connect(pg_server, autocommit=True):
        pass  # the server is up; a port nobody listens on:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg.write_text(base + f"threads:\n  uri: postgresql://ops:s3cret@127.0.0.1:{port}/olav\n")
    down = olav_entry(root, "threads", "list")
    line = down.stderr.strip()
    assert down.returncode != 0 and "\n" not in line and "Traceback" not in line
    assert f"cannot connect to PostgreSQL at 127.0.0.1:{port}/olav" in line
    assert "s3cret" not in line
    with pytest.raises(OlavError, match="not a PostgreSQL URI"):
        ThreadStore(uri="sqlite:///x.db")
