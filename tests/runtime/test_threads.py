"""Conversations that last: a chat resumed with --continue sends the earlier turns to the model;
one run per thread across processes; a kill -9 mid-run leaves the thread at its last step and it
resumes from there; a file from an older olav is migrated, never dropped; the threads CLI."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pexpect
import pytest

from olav.compose import agent_session
from olav.core.config import Workspace
from olav.runtime.threads import SCHEMA_VERSION, ThreadBusyError, ThreadStore
from olav.serve.records import RunRecord, RunRecords
from tests.helpers import (
    OlavCli,
    clean_env,
    olav_entry,
    olav_here,
    ollama_workspace,
    scripted_ws,
    spawn_olav,
)

DOC = "# Devices\n\n- sh1-border01\n"
EXPORT = {"name": "format_and_export", "args": {"data": DOC, "format": "md", "filename": "d.md"}}


def chat_bodies(state: Any) -> list[dict[str, Any]]:
    return [body for path, body in state.requests if path == "/api/chat"]


def last_user(body: dict[str, Any]) -> str:
    """The person's last message, without the recall block AutoRecall puts in front of it."""
    text = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    return text.rsplit("</relevant-memories>", 1)[-1].strip()


@pytest.mark.slow
def test_chat_quit_and_continue_sends_the_earlier_turns(
    tmp_path: Path, olav: OlavCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first chat runs in this process and quits; a new ``olav`` process at a terminal
    continues its thread from what the first left on disk."""
    from tests.stubs.ollama_stub import StubState, ollama_stub

    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [
            {"content": "We use OSPF area 0."},
            {"content": "After the change it is still area 0."},
        ]
        monkeypatch.chdir(ws)
        first = olav("chat", input="which OSPF area do we use?\n/exit\n")
        assert first.exit_code == 0 and "We use OSPF area 0." in first.output, first.output
        again = spawn_olav(ws, "chat", "--continue")
        try:
            again.expect("continuing ")
            again.expect("which OSPF area do we use")  # where the person left off
            again.expect("core> ")
            again.sendline("and after the change?")
            again.expect("After the change it is still area 0.")
            again.expect("core> ")
            again.sendline("/exit")
            again.expect(pexpect.EOF)
        finally:
            again.close(force=True)
    bodies = chat_bodies(state)
    resumed = [(m["role"], m["content"]) for m in bodies[-1]["messages"] if m["role"] != "system"]
    assert ("assistant", "We use OSPF area 0.") in resumed
    users = [c for r, c in resumed if r == "user"]
    assert "which OSPF area do we use?" in users[0] and "and after the change?" in users[-1]


@pytest.mark.slow
def test_one_run_per_thread_and_a_kill_9_resumes_from_the_last_step(tmp_path: Path) -> None:
    """Three processes on one store: the victim is killed with -9 while its second model call
    waits; a second run of its thread is refused meanwhile, the other threads finish, nothing
    is corrupted, and the victim's thread resumes with the step that had completed."""
    from tests.stubs.ollama_stub import StubState, ollama_stub

    held = threading.Event()
    release = threading.Event()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        text = last_user(body)
        roles = [m["role"] for m in body["messages"]]
        if text.startswith("victim"):
            if "tool" not in roles:
                return {"tool_calls": [EXPORT]}
            held.set()
            release.wait(120)  # the process is killed while it waits here
            return {"content": "too late"}
        if text.startswith("did it"):
            return {"content": "Yes: exports/d.md was written before the crash."}
        return {"content": f"answer to {text}"}

    state = StubState(chat_reply=reply)
    env = clean_env()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        cli = [sys.executable, "-c", "from olav.cli.app import main; main()"]
        victim = subprocess.Popen(
            [*cli, "ask", "--thread", "victim-1", "victim: save the device list"],
            cwd=ws,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert held.wait(120), "the victim never reached its second model call"
            others = [
                subprocess.Popen(
                    [*cli, "ask", "--thread", f"other-{i}", f"question {i}", "--json"],
                    cwd=ws,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for i in (1, 2)
            ]
            busy = olav_entry(ws, "ask", "--thread", "victim-1", "hello")  # this process asks too
            assert busy.returncode != 0
            line = busy.stderr.strip()
            assert "\n" not in line and "Traceback" not in line
            assert "thread victim-1 is running in another process" in line
            outs = [p.communicate(timeout=180) for p in others]
            assert all(p.returncode == 0 for p in others), outs
            answers = sorted(json.loads(out)["answer"] for out, _ in outs)
            assert answers == ["answer to question 1", "answer to question 2"]
            victim.send_signal(signal.SIGKILL)
            victim.communicate(timeout=60)
        finally:
            release.set()
            if victim.poll() is None:
                victim.kill()
        assert (ws / "exports" / "d.md").read_text() == DOC  # the completed step stands
        con = sqlite3.connect(ws / ".olav" / "databases" / "threads.sqlite")
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        con.close()
        resumed = olav_entry(ws, "ask", "--thread", "victim-1", "did it save?", "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["answer"].startswith("Yes")
        listed = json.loads(olav_here(ws, "threads", "list", "--json").stdout)
    assert {t["id"] for t in listed} == {"victim-1", "other-1", "other-2"}
    assert not any(t["running"] for t in listed)
    body = chat_bodies(state)[-1]
    roles = [m["role"] for m in body["messages"] if m["role"] != "system"]
    # the victim's first step survived: its request, the call and the tool's result
    assert roles[:3] == ["user", "assistant", "tool"] and roles[-1] == "user"
    victim_thread = json.loads(olav_here(ws, "threads", "show", "victim-1", "--json").stdout)
    assert [t["role"] for t in victim_thread["turns"]] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]


@pytest.mark.slow
def test_a_file_from_an_older_olav_is_migrated_and_its_threads_resume(tmp_path: Path) -> None:
    """Bare LangGraph checkpoints in the layout before ``writes.task_path``, no olav index:
    the threads are indexed, the columns added, and the conversation continues."""
    from tests.stubs.ollama_stub import StubState, ollama_stub

    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [{"content": "BGP ASN is 65001."}, {"content": "Still 65001."}]
        first = olav_here(ws, "ask", "--thread", "old-1", "what is our BGP ASN?")
        assert first.returncode == 0, first.stderr
        db = ws / ".olav" / "databases" / "threads.sqlite"
        con = sqlite3.connect(db)
        con.executescript(
            "DROP TABLE olav_turns; DROP TABLE olav_threads; DROP TABLE olav_meta;"
            "ALTER TABLE writes DROP COLUMN task_path;"
        )
        con.close()
        listed = json.loads(olav_here(ws, "threads", "list", "--json").stdout)
        assert [t["id"] for t in listed] == ["old-1"]
        again = olav_here(ws, "ask", "--thread", "old-1", "and now?", "--json")
        assert again.returncode == 0, again.stderr
    sent = [m["content"] for m in chat_bodies(state)[-1]["messages"]]
    assert "BGP ASN is 65001." in sent
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(writes)")]
    meta = con.execute("SELECT value FROM olav_meta WHERE key = 'schema'").fetchone()
    agent, turns = con.execute("SELECT agent, turns FROM olav_threads").fetchone()
    con.close()
    assert "task_path" in cols and meta == ("4",)
    assert (agent, turns) == ("core", 2)


def test_threads_list_show_search_rename_export_rm(hash_ws: Path, olav: OlavCli) -> None:
    ws = scripted_ws(
        hash_ws,
        [
            {"content": "The border routers are sh1-border01 and sh2-border01."},
            {"content": "OSPF is fine."},
        ],
    )
    session = agent_session(ws)
    session.ask("which border routers do we have?")
    tid = session.thread_id
    session.new_thread()
    session.ask("is OSPF healthy?")
    session.close()
    listed = json.loads(olav("threads", "list", "--json").output)
    assert len(listed) == 2 and {t["turns"] for t in listed} == {1}
    hits = json.loads(olav("threads", "search", "SH2-BORDER", "--json").output)
    assert [h["thread"] for h in hits] == [tid]
    assert hits[0]["turn"]["role"] == "assistant" and hits[0]["before"]["role"] == "user"
    assert olav("threads", "rename", tid[:6], "border inventory").exit_code == 0
    shown = olav("threads", "show", tid)
    assert "border inventory" in shown.output and "sh2-border01" in shown.output
    md = olav("threads", "export", tid, "--format", "md").output
    assert md.startswith("# border inventory") and "## You" in md
    as_json = json.loads(olav("threads", "export", tid, "--format", "json").output)
    assert [t["role"] for t in as_json["turns"]] == ["user", "assistant"]
    bad = olav("threads", "export", tid, "--format", "pdf")
    assert bad.exit_code != 0 and "unknown --format 'pdf'" in str(bad.exception)
    assert olav("threads", "rm", tid, "--yes").exit_code == 0
    assert [t["id"] for t in json.loads(olav("threads", "list", "--json").output)] != [tid]
    gone = olav("threads", "show", tid)
    assert gone.exit_code != 0 and f"no thread {tid!r}" in str(gone.exception)


def test_a_claim_is_refused_while_its_holder_lives_and_taken_over_after(hash_ws: Path) -> None:
    store = ThreadStore.for_workspace(Workspace.open(hash_ws))
    store.claim("t1", "run-a", "core")
    with pytest.raises(ThreadBusyError):
        store.claim("t1", "run-b", "core")  # this process holds it: alive
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    store.conn.execute("UPDATE olav_threads SET run_pid = ? WHERE id = 't1'", [int(dead.stdout)])
    store.claim("t1", "run-b", "core")  # its holder is gone: taken over
    store.release("t1", "run-a")  # a stale release does not free another run's claim
    assert store.get("t1").running == "run-b"
    store.release("t1", "run-b")
    assert store.get("t1").running == ""


# the index of threads as olav wrote it at schema version 1, before olav_runs
SCHEMA_1 = """
CREATE TABLE olav_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE olav_threads (
    id TEXT PRIMARY KEY, agent TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL, updated_at REAL NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0, preview TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}', run_id TEXT, run_pid INTEGER, run_host TEXT,
    run_since REAL
);
CREATE INDEX olav_threads_agent ON olav_threads (agent, updated_at);
CREATE TABLE olav_turns (
    thread_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '', content TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
INSERT INTO olav_meta VALUES ('schema', '1');
INSERT INTO olav_threads (id, agent, owner, name, created_at, updated_at, turns, preview,
    metadata) VALUES ('v1-thread', 'core', 'alice', 'ospf', 1.0, 2.0, 1, 'which area?',
    '{"label": "kept"}');
INSERT INTO olav_turns VALUES ('v1-thread', 0, 'user', '', 'which area?', 1.0);
INSERT INTO olav_turns VALUES ('v1-thread', 1, 'assistant', '', 'area 0', 2.0);
"""


def test_a_schema_1_file_gets_the_runs_table_and_keeps_its_threads(tmp_path: Path) -> None:
    db = tmp_path / "threads.sqlite"
    con = sqlite3.connect(db)
    con.executescript(SCHEMA_1)
    con.close()
    store = ThreadStore(db)
    try:
        # the runs are the server's: it sets up their table
        assert store.migrated == ["4: thread ids per owner"]
        assert "olav_runs" not in store.db.tables()
        RunRecords(store)
        info = store.get("v1-thread")
        assert (info.agent, info.owner, info.name, info.turns, info.preview) == (
            "core",
            "alice",
            "ospf",
            1,
            "which area?",
        )
        assert info.metadata == {"label": "kept"} and info.created_at == 1.0
        assert [(t.role, t.content) for t in store.turns("v1-thread")] == [
            ("user", "which area?"),
            ("assistant", "area 0"),
        ]
        cols = [r[1] for r in store.conn.execute("PRAGMA table_info(olav_runs)")]
        assert cols == [
            "run_id",
            "thread_id",
            "assistant_id",
            "owner",
            "status",
            "metadata",
            "kwargs",
            "multitask_strategy",
            "created_at",
            "updated_at",
            "server_pid",
            "server_host",
            "error",
            "events",
        ]
        (version,) = store.conn.execute(
            "SELECT value FROM olav_meta WHERE key = 'schema'"
        ).fetchone()
        assert version == str(SCHEMA_VERSION) == "4"
        # version 4: the thread is known by its key, and its id is alice's alone
        assert info.known_as == "v1-thread" and store.owned("alice", "v1-thread") == info
        assert store.owned("bob", "v1-thread") is None
        bobs, made = store.insert("core", "v1-thread", owner="bob")
        assert made and bobs.known_as == "v1-thread" and bobs.id != "v1-thread"
        assert store.get("v1-thread") == info  # its key wins over bob's id
        RunRecords(store).record(RunRecord("r1", "v1-thread", "core", "alice", "running", 3.0, 3.0))
    finally:
        store.close()
    again = ThreadStore(db)  # migrated once: nothing to do the second time
    try:
        assert again.migrated == []
        assert [r.run_id for r in RunRecords(again).of_thread("v1-thread")] == ["r1"]
        assert again.get("v1-thread").turns == 1
        assert again.owned("bob", "v1-thread") == bobs
    finally:
        again.close()


def test_a_runs_table_from_before_stream_events_gains_the_column(tmp_path: Path) -> None:
    """A file olav serve wrote at schema version 2: its runs stay, with the events column."""
    db = tmp_path / "threads.sqlite"
    con = sqlite3.connect(db)
    con.executescript(SCHEMA_1.replace("VALUES ('schema', '1')", "VALUES ('schema', '2')"))
    con.executescript(
        "CREATE TABLE olav_runs (run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, "
        "assistant_id TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '', "
        "status TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}', "
        "kwargs TEXT NOT NULL DEFAULT '{}', multitask_strategy TEXT NOT NULL DEFAULT 'reject', "
        "created_at REAL NOT NULL, updated_at REAL NOT NULL, server_pid INTEGER, "
        "server_host TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '');"
        "INSERT INTO olav_runs (run_id, thread_id, status, created_at, updated_at) "
        "VALUES ('r0', 'v1-thread', 'success', 1.0, 2.0);"
    )
    con.close()
    store = ThreadStore(db)
    try:
        runs = RunRecords(store)
        assert "events" in store.db.columns("olav_runs")
        [kept] = runs.of_thread("v1-thread")
        assert (kept.run_id, kept.status, kept.events) == ("r0", "success", 0)
        store.delete("v1-thread")  # whoever deletes the thread: its runs go with it
        assert runs.get("r0") is None
    finally:
        store.close()


def test_runs_are_kept_listed_newest_first_updated_and_deleted_with_their_thread(
    tmp_path: Path,
) -> None:
    store = ThreadStore(tmp_path / "threads.sqlite")
    runs = RunRecords(store)
    try:
        store.create("core", "t1", owner="alice")
        for i, status in enumerate(("success", "error", "running")):
            runs.record(
                RunRecord(
                    f"r{i}",
                    "t1",
                    "core",
                    "alice",
                    status,
                    10.0 + i,
                    10.0 + i,
                    metadata={"n": i},
                    kwargs={"stream_mode": ["values"]},
                )
            )
        assert [r.run_id for r in runs.of_thread("t1")] == ["r2", "r1", "r0"]
        assert [r.run_id for r in runs.of_thread("t1", limit=1, offset=1)] == ["r1"]
        assert [r.run_id for r in runs.of_thread("t1", status=("running", "pending"))] == ["r2"]
        assert runs.of_thread("t1", owner="bob") == []
        assert runs.get("r0", owner="bob") is None
        assert runs.get("r0", thread_id="t2") is None
        kept = runs.get("r0", thread_id="t1", owner="alice")
        assert kept is not None and kept.metadata == {"n": 0} and kept.pid is not None
        assert kept.kwargs == {"stream_mode": ["values"]}
        # only from a status it is in: a finished run is never set back
        assert not runs.update("r0", "error", "late", only_from=("running",))
        assert runs.update("r2", "error", "the server stopped", only_from=("running",))
        changed = runs.get("r2")
        assert changed is not None and (changed.status, changed.error) == (
            "error",
            "the server stopped",
        )
        store.delete("t1")
        assert runs.of_thread("t1") == [] and runs.get("r0") is None
        assert not runs.update("r1", "success")  # a deleted thread's run is not kept again
    finally:
        store.close()
