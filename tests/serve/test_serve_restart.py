"""`olav serve` killed with -9 mid-run: the threads file is intact, and once the server is
started again on the same workspace the thread continues from its last completed step, and its
runs are still found: the finished one a success, the killed one an error that says why. Stopped
with SIGTERM mid-run, it ends its runs and their streams at once, keeps them interrupted,
flushes its audit and exits."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langgraph_sdk.errors import NotFoundError

from olav.runtime.threads import ThreadStore
from olav.serve.records import RunRecord, RunRecords
from olav.serve.runs import RunManager
from tests.serve._support import (
    http_events,
    human,
    request_for,
    sent_text,
    serving,
    sse_events,
    start_server,
    stop_server,
)

pytestmark = pytest.mark.slow


def test_a_server_killed_mid_run_restarts_and_the_thread_continues(tmp_path: Path) -> None:
    with serving(tmp_path / "ws", process=True) as served:
        client = served.sdk()
        tid = client.threads.create(metadata={"graph_id": "core"})["thread_id"]
        client.runs.wait(tid, "core", input=human("first: which OSPF area is the core in?"))
        (first_id,) = [r["run_id"] for r in client.runs.list(tid)]
        with served.model.hold("hold-crash") as gate:
            run = client.runs.create(tid, "core", input=human("hold-crash: and the edge?"))
            gate.wait_held()
            served.proc.send_signal(signal.SIGKILL)
            assert served.proc.wait(timeout=30) == -signal.SIGKILL
            stop_server(served.proc)  # its pipes
        served.close()  # its clients spoke to the dead server

        con = sqlite3.connect(served.ws / ".olav" / "databases" / "threads.sqlite")
        try:
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            con.close()

        served.proc, served.url = start_server(served.ws)
        client = served.sdk()
        thread = client.threads.get(tid)
        assert thread["status"] == "idle"  # the dead server's claim holds nothing
        texts = [m["content"] for m in client.threads.get_state(tid)["values"]["messages"]]
        assert texts[:2] == [
            "first: which OSPF area is the core in?",
            "answer to first: which OSPF area is the core in?",
        ]
        assert "answer to hold-crash: and the edge?" not in texts  # that step never completed
        killed = client.runs.get(tid, run["run_id"])  # kept in the threads file
        assert killed["status"] == "error"
        assert "the server stopped while it ran" in killed["error"]
        listed = client.runs.list(tid)
        assert [r["run_id"] for r in listed] == [run["run_id"], first_id]  # newest first
        assert [r["status"] for r in listed] == ["error", "success"]
        assert client.runs.get(tid, first_id)["error"] == ""
        # joined after its server: the thread's values at once, the last completed step
        joined = client.runs.join(tid, run["run_id"])
        assert [m["content"] for m in joined["messages"]] == texts
        with pytest.raises(NotFoundError):  # bob's token: her run is not found, as before
            served.sdk("bob").runs.get(tid, run["run_id"])
        with served.http() as http:
            stored = f"/threads/{tid}/runs/{run['run_id']}"
            assert http.post(stored + "/cancel").status_code == 204  # ended: no body
            bad = http.get(f"/threads/{tid}/runs", params={"limit": "many"})
            assert bad.status_code == 422 and bad.json()["detail"].startswith("limit must be")
            errored = http.get(f"/threads/{tid}/runs", params={"status": "error"}).json()
            assert [r["run_id"] for r in errored] == [run["run_id"]]

        values = client.runs.wait(tid, "core", input=human("after the restart"))
        assert values["messages"][-1]["content"] == "answer to after the restart"
        seen = sent_text(request_for(served.state, "after the restart"))
        assert "answer to first: which OSPF area is the core in?" in seen
        assert client.threads.get(tid)["status"] == "idle"
        history = client.threads.get_history(tid, limit=100)
        assert history[0]["values"]["messages"][-1]["content"] == "answer to after the restart"


def test_sigterm_mid_run_ends_the_streams_flushes_the_audit_and_exits(tmp_path: Path) -> None:
    with serving(tmp_path / "ws", process=True) as served:
        client = served.sdk()
        tid = client.threads.create()["thread_id"]
        with served.http() as http:
            assert http.get("/threads/sigterm-probe").status_code == 404  # an audit row to flush
        with served.model.hold("hold-sigterm") as gate:
            run = client.runs.create(tid, "core", input=human("hold-sigterm: a long one"))
            gate.wait_held()
            path = f"/threads/{tid}/runs/{run['run_id']}/stream"
            with served.http() as http, http.stream("GET", path) as stream:
                events = sse_events(stream)
                assert next(events)[1] == "metadata"
                stopped = time.monotonic()
                served.proc.terminate()
                rest = list(events)  # the stream ends, though the model call still waits
            assert served.proc.wait(timeout=15) is not None
            assert time.monotonic() - stopped < 10
            assert not gate.release.is_set()  # the model call never returned
        assert [e for _, e, _ in rest][-2:] == ["error", "end"]
        assert rest[-2][2]["error"] == "ServerStopped" and rest[-1][2]["status"] == "interrupted"
        assert "Traceback" not in stop_server(served.proc)
        served.close()
        probes = [
            e
            for e in http_events(served.ws)  # no waiting: the server wrote them as it stopped
            if e["route"] == "/threads/{thread_id}" and e["status"] == 404
        ]
        assert probes and probes[0]["operator"] == served.alice
        store = ThreadStore(served.ws / ".olav" / "databases" / "threads.sqlite")
        try:  # kept as it ended: interrupted, and why
            kept = RunRecords(store).get(run["run_id"])
        finally:
            store.close()
        assert kept is not None and kept.status == "interrupted"
        assert kept.error.startswith("the server stopped")


def test_a_kept_run_is_an_error_once_its_server_is_gone_and_only_then(tmp_path: Path) -> None:
    """Which kept runs are orphans: of this machine, a process that is gone (or an earlier one
    with this process's pid); of another machine, one whose thread no live run holds."""
    store = ThreadStore(tmp_path / "threads.sqlite")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    here = RunRecord("x", "t", "core", "alice", "running", 1.0, 1.0).host
    cases = {  # run id: (its status, its server's pid and host, what a GET says)
        "dead-here": ("running", int(dead.stdout), here, "error"),
        "earlier-me": ("pending", os.getpid(), here, "error"),
        "live-here": ("pending", os.getppid(), here, "pending"),
        "far-unheld": ("running", 4242, "another-host", "error"),
        "far-held": ("running", 4242, "another-host", "running"),
        "done": ("success", int(dead.stdout), here, "success"),
    }
    store.claim("t-held", "claim", "core", "alice")  # a live run holds this thread
    try:
        for run_id, (status, pid, host, _) in cases.items():
            thread = "t-held" if run_id == "far-held" else "t-" + run_id
            store.create("core", thread, owner="alice")
            RunRecords(store).record(
                RunRecord(run_id, thread, "core", "alice", status, 1.0, 1.0, pid=pid, host=host)
            )
        manager = RunManager(pool=None, threads=store)  # type: ignore[arg-type]
        seen: dict[str, str] = {}
        for run_id in cases:
            thread = "t-held" if run_id == "far-held" else "t-" + run_id
            found = manager.find(thread, run_id, "alice", known_as=thread)
            assert found is not None and found.stored
            seen[run_id] = found.status
            kept = RunRecords(store).get(run_id)
            assert kept is not None and kept.status == found.status  # the store says so too
        assert seen == {run_id: want for run_id, (_, _, _, want) in cases.items()}
        pending = RunRecords(store).get("earlier-me")
        assert pending is not None and pending.error.startswith(
            "the server stopped before it started"
        )
        assert (
            manager.find("t-done", "dead-here", "alice", known_as="t-done") is None
        )  # another thread's run
        assert (
            manager.find("t-dead-here", "dead-here", "bob", known_as="t-dead-here") is None
        )  # another operator's
        listed = manager.thread_runs("t-held", "alice", known_as="t-held", limit=10)
        assert [(r.run_id, r.status) for r in listed] == [("far-held", "running")]
    finally:
        store.release("t-held", "claim")
        store.close()
