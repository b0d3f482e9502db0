"""`olav serve` killed with -9 mid-run: the threads file is intact, and once the server is
started again on the same workspace the thread continues from its last completed step. Stopped
with SIGTERM mid-run, it ends its runs and their streams at once, flushes its audit and exits."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import pytest
from langgraph_sdk.errors import NotFoundError

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
    with serving(tmp_path / "ws") as served:
        client = served.sdk()
        tid = client.threads.create(metadata={"graph_id": "core"})["thread_id"]
        client.runs.wait(tid, "core", input=human("first: which OSPF area is the core in?"))
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
        with pytest.raises(NotFoundError):  # the killed run is not known any more
            client.runs.get(tid, run["run_id"])

        values = client.runs.wait(tid, "core", input=human("after the restart"))
        assert values["messages"][-1]["content"] == "answer to after the restart"
        seen = sent_text(request_for(served.state, "after the restart"))
        assert "answer to first: which OSPF area is the core in?" in seen
        assert client.threads.get(tid)["status"] == "idle"
        history = client.threads.get_history(tid, limit=100)
        assert history[0]["values"]["messages"][-1]["content"] == "answer to after the restart"


def test_sigterm_mid_run_ends_the_streams_flushes_the_audit_and_exits(tmp_path: Path) -> None:
    with serving(tmp_path / "ws") as served:
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
