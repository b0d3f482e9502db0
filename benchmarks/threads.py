"""What continuing a long conversation costs (``make bench``, section 6).

A 200-turn thread (800 messages: the person's, a tool call, its result and the answer) is
written into a workspace's thread store through the real agent graph and checkpointer. Then,
in one process, the same measurements for a new chat and for the resume:

- **to the prompt**: what the chat does before its first prompt that a new chat does not
  (find the thread, read its last turns from the index, print them);
- **first turn**: the extra cost of the first model call, which loads the checkpoint (the
  graph reads the thread's state once; the model call itself is the same).
"""

from __future__ import annotations

import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.timing import ms

TURNS = 200
REPEAT = 15


def _messages(turns: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for i in range(turns):
        out.append(HumanMessage(content=f"turn {i}: back up the config of sh1-border{i:02d}"))
        call = {"name": "db_query", "args": {"sql": f"SELECT * FROM devices LIMIT {i}"}}
        out.append(AIMessage(content="", tool_calls=[{**call, "id": f"call_{i}"}]))
        out.append(ToolMessage(content="hostname,site\n" * 20, tool_call_id=f"call_{i}"))
        out.append(AIMessage(content=f"Done: exports/backups/sh1-border{i:02d}.cfg " * 4))
    return out


def run_threads_bench(turns: int = TURNS, repeat: int = REPEAT) -> dict[str, Any]:
    from rich.console import Console
    from rich.text import Text

    from olav.admin.setup import init_workspace
    from olav.compose import agent_session
    from olav.core.config import Workspace
    from olav.llm.models import ScriptedChatModel
    from olav.runtime.threads import ThreadStore

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / ".olav").mkdir(parents=True)
        (root / ".olav" / "olav.yaml").write_text(
            "embedder:\n  provider: hash\n  model: hash-64\nllm:\n  base_url: http://127.0.0.1:9\n"
        )
        init_workspace(root)
        ws = Workspace.open(root)
        model = ScriptedChatModel(turns=[{"content": "ok"}] * (2 * repeat + 2))
        session = agent_session(ws, model=model, learn_from_failures=False)
        session.seed(_messages(turns))  # the thread's history, through its checkpointer
        session.threads.create("core", session.thread_id)
        session.threads.sync(session.thread_id, session.thread_messages())
        thread = session.thread_id
        session.close()

        sink = Console(file=io.StringIO(), width=120)

        def to_prompt(resume: bool) -> float:
            """What `olav chat --thread` does before its prompt that a new chat does not
            (olav.cli.repl.resume_target and show_last_turns: the bench may not import the
            CLI, so the same store calls)."""
            started = time.perf_counter()
            if resume:
                store = ThreadStore.for_workspace(ws)
                try:
                    info = store.get(thread)
                    for turn in store.turns(info.id, last=3):
                        sink.print(Text(f"{turn.role}> ") + Text(turn.content[:400]))
                finally:
                    store.close()
            return time.perf_counter() - started

        def first_turn(resume: bool) -> float:
            fresh = agent_session(
                ws, model=model, learn_from_failures=False, thread=thread if resume else None
            )
            fresh.build()  # before the clock starts, as the chat does
            started = time.perf_counter()
            fresh.thread_messages()  # the graph's read of the thread's state
            took = time.perf_counter() - started
            fresh.close()
            return took

        new_prompt = [to_prompt(False) for _ in range(repeat)]
        resumed_prompt = [to_prompt(True) for _ in range(repeat)]
        new_first = [first_turn(False) for _ in range(max(3, repeat // 3))]
        resumed_first = [first_turn(True) for _ in range(max(3, repeat // 3))]
        size = sum(p.stat().st_size for p in ws.databases.glob("threads.sqlite*") if p.is_file())
    extra = statistics.median(resumed_prompt) - statistics.median(new_prompt)
    load = statistics.median(resumed_first) - statistics.median(new_first)
    return {
        "turns": turns,
        "messages": 4 * turns,
        "file_bytes": size,
        "to_prompt": {"new": ms(new_prompt), "resumed": ms(resumed_prompt)},
        "first_turn_state": {"new": ms(new_first), "resumed": ms(resumed_first)},
        "extra_to_prompt_ms": round(extra * 1000, 2),
        "extra_first_turn_ms": round(load * 1000, 2),
        "target_ms": 300,
        "ok": extra * 1000 <= 300,
    }


def markdown_threads(r: dict[str, Any]) -> str:
    lines = [
        f"A thread of {r['turns']} turns ({r['messages']} messages, "
        f"{r['file_bytes'] / 1e6:.1f} MB on disk), continued with `olav chat --thread`; "
        "the same steps for a new chat, in one process.",
        "",
        "| | new chat | resumed | extra |",
        "|---|---|---|---|",
        f"| before the first prompt (p50 / p95 ms) | {r['to_prompt']['new']['p50_ms']} / "
        f"{r['to_prompt']['new']['p95_ms']} | {r['to_prompt']['resumed']['p50_ms']} / "
        f"{r['to_prompt']['resumed']['p95_ms']} | {r['extra_to_prompt_ms']} ms |",
        f"| first turn: reading the thread's state (p50 / p95 ms) | "
        f"{r['first_turn_state']['new']['p50_ms']} / {r['first_turn_state']['new']['p95_ms']} | "
        f"{r['first_turn_state']['resumed']['p50_ms']} / "
        f"{r['first_turn_state']['resumed']['p95_ms']} | {r['extra_first_turn_ms']} ms |",
        "",
        f"Target: the first prompt of a resumed 200-turn thread within {r['target_ms']} ms of a "
        f"new chat's: {'met' if r['ok'] else 'NOT met'} ({r['extra_to_prompt_ms']} ms).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    import json

    print(json.dumps(run_threads_bench(), indent=2))


_WORKER = """
import sys
from olav.compose import agent_session
from olav.core.config import Workspace
from pathlib import Path
session = agent_session(Workspace.open(Path(sys.argv[1])), learn_from_failures=False)
session.thread_id = sys.argv[2]
for i in range(int(sys.argv[3])):
    session.ask(f"{sys.argv[2]} turn {i}")
    print(i, flush=True)
"""


def run_fault_bench(rounds: int = 3, turns: int = 6) -> dict[str, Any]:
    """Three processes write the thread store at once, each its own thread; one is killed with
    ``kill -9`` while a run holds its thread. Then: the file's integrity, every thread's
    checkpoint read back, the survivors' turns all there, and the victim's thread continued."""
    import signal
    import sqlite3
    import subprocess
    import sys

    from olav.compose import agent_session
    from olav.core.config import Workspace

    results = []
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "ws"
            echo_workspace(root, turns=8 * turns)
            names = [f"round{r}-a", f"round{r}-b", f"round{r}-victim"]
            procs = [
                subprocess.Popen(
                    [sys.executable, "-c", _WORKER, str(root), name, str(turns)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for name in names
            ]
            victim = procs[2]
            db = root / ".olav" / "databases" / "threads.sqlite"
            # wait for the victim's second run to hold its thread, then kill it mid-run
            assert victim.stdout is not None
            victim.stdout.readline()
            held = _wait_claimed(db, names[2])
            victim.send_signal(signal.SIGKILL)
            victim.communicate(timeout=60)
            outs = [p.communicate(timeout=300) for p in procs[:2]]
            survivors_ok = all(p.returncode == 0 for p in procs[:2])
            con = sqlite3.connect(db)
            integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
            con.close()
            ws = Workspace.open(root)
            session = agent_session(ws, learn_from_failures=False)
            humans = {}
            for name in names:
                session.thread_id = name
                humans[name] = sum(1 for m in session.thread_messages() if m.type == "human")
            session.thread_id = names[2]
            session.ask("after the crash")
            resumed = sum(1 for m in session.thread_messages() if m.type == "human")
            session.close()
            lost = sum(max(0, turns - humans[n]) for n in names[:2])
            results.append(
                {
                    "integrity": integrity,
                    "survivors_ok": survivors_ok,
                    "errors": [e[-300:] for _, e in outs if e and "Traceback" in e],
                    "held_when_killed": held,
                    "survivor_turns": [humans[n] for n in names[:2]],
                    "victim_turns_kept": humans[names[2]],
                    "victim_resumed_turns": resumed,
                    "lost": lost,
                }
            )
    return {
        "rounds": rounds,
        "turns_per_process": turns,
        "results": results,
        "threads_lost": sum(x["lost"] for x in results),
        "corrupted": sum(1 for x in results if x["integrity"] != "ok"),
        "resumed": all(x["victim_resumed_turns"] == x["victim_turns_kept"] + 1 for x in results),
    }


def _wait_claimed(db: Path, thread_id: str, timeout: float = 120.0) -> bool:
    """Poll (a condition, not a guess) until a run holds ``thread_id``."""
    import sqlite3

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        con = sqlite3.connect(db, timeout=10)
        try:
            row = con.execute(
                "SELECT run_id FROM olav_threads WHERE id = ?", [thread_id]
            ).fetchone()
        finally:
            con.close()
        if row and row[0]:
            return True
        time.sleep(0.002)
    return False


def echo_workspace(root: Path, turns: int) -> Any:
    """A workspace at ``root`` on the hash embedder and the scripted model, whose ``turns``
    answers each echo their request (so an answer that reached the wrong thread shows)."""
    import yaml

    from olav.admin.setup import init_workspace
    from olav.core.config import Workspace

    (root / ".olav").mkdir(parents=True)
    (root / "script.yaml").write_text(yaml.safe_dump([{"content": "echo: ", "echo": True}] * turns))
    (root / ".olav" / "olav.yaml").write_text(
        "embedder:\n  provider: hash\n  model: hash-64\n"
        "llm:\n  provider: scripted\n  script: script.yaml\nruntime:\n  nudge: false\n"
    )
    init_workspace(root)
    return Workspace.open(root)


def markdown_faults(r: dict[str, Any]) -> str:
    kept = ", ".join(
        f"{x['victim_turns_kept']} kept → {x['victim_resumed_turns']}" for x in r["results"]
    )
    return "\n".join(
        [
            f"{r['rounds']} rounds: three processes run {r['turns_per_process']} turns each on "
            "their own thread of one store; the third is killed with `kill -9` while a run "
            "holds its thread.",
            "",
            "| | measured |",
            "|---|---|",
            f"| turns lost from the survivors' threads | {r['threads_lost']} |",
            f"| rounds with a corrupted file (`PRAGMA integrity_check`) | {r['corrupted']} |",
            f"| the victim's thread continued after the kill (turns kept → after one more) | "
            f"{'yes' if r['resumed'] else '**no**'} ({kept}) |",
            "",
        ]
    )
