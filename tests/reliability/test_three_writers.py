"""Three processes at once: the chat (scripted model, capturing events and auditing), the cron
daemon (a per-minute job writing reflections, plus gc), and a loop of guide and JSONL imports
(`olav kb import-guides` and `olav kb import`, run by one process one after the other).
Afterwards every row is present exactly once in memory and audit, no lock error reached any
process, and the counts match what each process reported."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from olav.core.config import Workspace
from olav.cron.jobfile import get_job
from olav.memory.ingest.transfer import export_jsonl
from olav.memory.store.table import MemoryStore
from tests.helpers import CRON_SERVE, clean_env, olav_here, wait_until

ROOT = Path(__file__).resolve().parents[2]
CHAT_RUNS = 12

CHAT = f"""
import json, sys
from olav.core.config import Workspace
from olav.llm.models import ScriptedChatModel
from olav.compose import agent_session
from tests.helpers import clean_env
ws = Workspace.open()
done = []
for i in range({CHAT_RUNS}):
    turns = [{{"tool_calls": [{{"name": "format_and_export", "args": {{
                "data": f"report {{i}}", "format": "md", "filename": f"r{{i}}.md"}}}}]}},
             {{"content": f"saved {{i}}"}}]
    session = agent_session(ws, model=ScriptedChatModel(turns=turns), learn_from_failures=False)
    result = session.ask(f"save report {{i}}")
    done.append(result.run_id)
print(json.dumps(done))
"""


# until the chat is done (the test creates argv[1]) and at least six imports ran
IMPORTS = """
import json, pathlib, sys, time
from typer.testing import CliRunner
from olav.cli.app import app
stop, dump = pathlib.Path(sys.argv[1]), sys.argv[2]
runner, n, errors = CliRunner(), 0, []
deadline = time.monotonic() + 70
while time.monotonic() < deadline and (n < 6 or not stop.exists()):
    for args in (["kb", "import-guides"], ["kb", "import", dump]):
        r = runner.invoke(app, args)
        if r.exit_code != 0:
            errors.append(r.output.strip()[-2000:])
        n += 1
print(json.dumps({"imports": n, "errors": errors}))
"""


def cron_reflection_job(ws: Any) -> str:
    """A per-minute job: one reflection per firing, then gc."""
    from datetime import UTC, datetime

    from olav.memory.lifecycle.decay import gc
    from olav.memory.recall.lessons import add_reflection

    store = MemoryStore.for_workspace(ws)
    stamp = datetime.now(UTC).strftime("%H%M%S%f")
    added, rid = add_reflection(
        store, f"When cron tick {stamp} fires, record it.", dedup_distance=0.0
    )
    gc(store)
    return f"reflection {rid} added={added}"


def env() -> dict[str, str]:
    out = clean_env()
    out["PYTHONPATH"] = str(ROOT)
    return out


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_chat_cron_and_imports_at_once_lose_and_duplicate_nothing(hash_ws: Path) -> None:
    ws = Workspace.open(hash_ws)
    dump = hash_ws / "exports" / "seed.jsonl"
    export_jsonl(MemoryStore.for_workspace(ws), dump)
    res = olav_here(
        hash_ws,
        "cron",
        "enable",
        "tick",
        "--at",
        "* * * * *",
        "--target",
        "tests.reliability.test_three_writers:cron_reflection_job",
    )
    assert res.returncode == 0, res.stderr
    # `olav cron serve` with a seconds field: the per-minute job fires every 3 s, all through
    # the chat and the imports, and the daemon stops when they are done (not after a window)
    daemon = subprocess.Popen(
        [sys.executable, "-c", CRON_SERVE, "*/3"],
        cwd=hash_ws,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    chat = subprocess.Popen(
        [sys.executable, "-c", CHAT],
        cwd=hash_ws,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop = hash_ws / "chat-done"
    importer = subprocess.Popen(
        [sys.executable, "-c", IMPORTS, str(stop), str(dump)],
        cwd=hash_ws,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    chat_out, chat_err = chat.communicate(timeout=300)
    stop.touch()
    import_out, import_err = importer.communicate(timeout=300)
    assert importer.returncode == 0, import_err[-2000:]
    imported = json.loads(import_out.strip().splitlines()[-1])
    ws = Workspace.open(hash_ws)
    wait_until(
        lambda: daemon.poll() is not None or get_job(ws, "tick").last_result,
        60,
        "the daemon to run the tick job",
    )
    assert daemon.poll() is None, "the cron daemon stopped by itself"
    daemon.send_signal(signal.SIGTERM)
    _, daemon_err = daemon.communicate(timeout=120)
    assert chat.returncode == 0, chat_err[-2000:]
    assert daemon.returncode == 0, daemon_err[-2000:]
    assert imported["errors"] == [] and imported["imports"] >= 6, imported
    for text in (chat_err, daemon_err, import_err):
        assert "lock" not in text.lower() and "Traceback" not in text, text[-2000:]

    run_ids = json.loads(chat_out.strip().splitlines()[-1])
    assert len(run_ids) == CHAT_RUNS
    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    ids = store.column_values(["id"]).column("id").to_pylist()
    assert len(ids) == len(set(ids)), "duplicate memory ids"
    events = store.list_rows("category = 'operational_event'")
    assert len(events) == CHAT_RUNS  # one capture per distinct export, none twice
    jobs = json.loads(olav_here(hash_ws, "cron", "list", "--json").stdout)
    tick = next(j for j in jobs["jobs"] if j["name"] == "tick")
    assert tick["last_result"] and tick["last_result"]["status"] == "ok", tick
    reflections = store.list_rows("category = 'reflection'")
    assert len(reflections) >= 1
    con = duckdb.connect(str(hash_ws / ".olav/databases/audit.duckdb"), read_only=True)
    try:
        runs = con.execute("SELECT id, status FROM runs").fetchall()
        calls = con.execute("SELECT run_id, count(*) FROM tool_calls GROUP BY 1").fetchall()
    finally:
        con.close()
    assert sorted(r[0] for r in runs) == sorted(run_ids)
    assert {r[1] for r in runs} == {"completed"}
    assert sorted(c[0] for c in calls) == sorted(run_ids) and {c[1] for c in calls} == {1}
