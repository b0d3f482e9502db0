"""The waits a person notices (issue 15), each measured next to its floor in the same run.

- the reply path: what a chat run costs the answering thread after the answer (planning the
  L1 capture and the query pattern, queueing their write, the access-count bumps and the
  recall log), next to what the background writer then spends on the same work;
- cold ``olav memory search`` and ``olav memory why``, next to a bare Python start, the
  same start with the embedder loaded and one query embedded (the floor: these commands
  answer from the snapshot on disk, olav.memory.store.snapfile, without lancedb), and a bare
  ``import lancedb``;
- the share of e5's own batch throughput that a guide import reaches (in perf.measure_guides);
- the chat prompt after ``olav`` under a pseudo-terminal (the engine loads behind it);
- peak RSS next to the size of the table on disk.

``perf.run_perf`` calls these and ``wait_targets`` turns the report into the targets table.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPLY_PATH_MS = 3.0
FIRST_PROMPT_S = 1.5
OVERHEAD_MS = 3.0  # AutoRecall beyond the query embedding, at or below CACHED_ROWS memories
CACHED_ROWS = 20000
OVERHEAD_X_NUMPY = 2.0  # above CACHED_ROWS: overhead within 2x numpy's brute force
COLD_S = 0.6
INIT_S = 2.0
IMPORT_SHARE = 0.85
RSS_MB = 300.0
HELP_S = 0.3


def measure_reply_path(store: Any, root: Path, n: int, tag: str, agent: str) -> dict[str, Any]:
    """Per chat run: the answering thread's cost of the run's memory bookkeeping (a write
    event and a SQL pattern to capture, the access-count bumps of what was injected, the
    recall log), and the background writer's time for the same work."""
    from benchmarks.timing import latencies_ms, summary
    from olav.audit.db import migrate
    from olav.audit.recorder import AuditRecorder
    from olav.memory.ingest.capture import ToolEvent, apply_capture, plan_capture
    from olav.memory.recall.recaller import RecallResult
    from olav.memory.store.filters import BY_ID, SearchFilter
    from olav.memory.store.scopes import EVERYONE
    from olav.memory.store.writer import BackgroundWriter

    migrate(root / "audit.duckdb")
    audit = AuditRecorder(root / "audit.duckdb")
    writer = BackgroundWriter("olav-bench-writer")
    every = SearchFilter(reader=EVERYONE, include_invalid=True)
    ids = [r.id for r in store.rows(every, order=BY_ID, limit=3)]
    busy: list[float] = []

    def timed(fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            busy.append(time.perf_counter() - t0)

    def run(i: int) -> None:
        events = [
            ToolEvent(
                agent,
                "register_service",
                {"name": f"svc_{tag}_{i}", "port": 8000 + i, "token": "s3cr3t"},
                f"registered svc_{tag}_{i} on 10.0.0.{i % 250}:{8000 + i}",
                "success",
            ),
            ToolEvent(agent, "db_query", {"sql": f"SELECT {i} AS n"}, "n\n1", "success"),
        ]
        plan = plan_capture(events, question=f"how many things {tag} {i}", run_id=f"b{i}")
        writer.submit("capture", timed, apply_capture, store, plan)
        result = RecallResult(query=f"q{i}", agent=agent, tier="small")
        writer.submit("recall log", timed, audit.recall, f"b{i}", agent, result)
        # the access-count bumps of the memories AutoRecall injected (as Recaller.flush)
        writer.submit("bumps", timed, store.bump_access, dict.fromkeys(ids, 1))

    lat = latencies_ms(run, n, after=writer.flush)  # the user reads while the writer works
    busy_ms = sum(busy) * 1000.0 / max(len(busy) // 3, 1)
    return {**summary(lat), "writer_ms_per_run": round(busy_ms, 2)}


def _run_s(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[-3:])} failed: {proc.stderr.strip()[-500:]}")
    return time.perf_counter() - t0


def measure_cold(ws: Path, runs: int, query: str) -> dict[str, Any]:
    """Cold ``olav memory why`` in the workspace ``ws``, and the floors of a cold command:
    a bare interpreter, ``import lancedb`` as is, and as olav imports it."""
    from benchmarks.timing import olav_command, p50

    env = {k: v for k, v in os.environ.items() if not k.startswith("OLAV_")}
    py = sys.executable
    deferred = (
        "from olav.core.log import quiet_native_libraries; quiet_native_libraries(); import lancedb"
    )
    # the floor of a cold search: the interpreter, loading the embedder and embedding the query
    embedder = (
        "from olav.core.log import quiet_native_libraries; quiet_native_libraries()\n"
        "from olav.core.config import Config\n"
        "from olav.memory.store.embedders import make_embedder\n"
        f"make_embedder(Config.load(None, environ={{}})).embed_query({query!r})"
    )
    cmds = {
        "why_s": [*olav_command(), "memory", "why", query],
        "python_s": [py, "-c", "pass"],
        "embedder_s": [py, "-c", embedder],
        "import_lancedb_s": [py, "-c", "import lancedb"],
        "import_lancedb_deferred_s": [py, "-c", deferred],
    }
    out: dict[str, Any] = {"runs": runs}
    for key, cmd in cmds.items():
        times = [_run_s(cmd, ws, env) for _ in range(runs)]
        out[key] = {"median": round(p50(times), 3), "min": round(min(times), 3)}
    return out


def _prompt_s(cmd: list[str], cwd: Path, env: dict[str, str], prompt: bytes) -> float:
    """Seconds from starting ``cmd`` under a pseudo-terminal until ``prompt`` is drawn."""
    import pty
    import select
    import signal

    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the chat, on the terminal's other end
        os.chdir(cwd)
        os.execve(cmd[0], cmd, env)
    seen = b""
    try:
        while time.perf_counter() - t0 < 120:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                seen += os.read(fd, 65536)
                if prompt in seen:
                    return time.perf_counter() - t0
        raise RuntimeError(f"no chat prompt under a pty: {seen[-300:]!r}")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def measure_first_prompt(ws: Path, runs: int) -> dict[str, Any]:
    """``olav`` under a pseudo-terminal until the chat prompt is drawn, with the scripted
    model (an Ollama server adds one /api/tags request before the prompt)."""
    from benchmarks.timing import olav_command, p50

    script = ws / "bench-script.yaml"
    script.write_text("- content: hello\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLAV_")}
    env.update({"OLAV_LLM_PROVIDER": "scripted", "OLAV_LLM_SCRIPT": script.name})
    env.update({"TERM": "xterm", "COLUMNS": "120", "LINES": "40"})
    cmd = olav_command()
    if len(cmd) > 1:  # no console script: the interpreter runs the entry point
        cmd = [sys.executable, "-c", "from olav.cli.app import main; main()"]
    times = [_prompt_s(cmd, ws, env, b"core>") for _ in range(runs)]
    return {"runs": runs, "median": round(p50(times), 3), "min": round(min(times), 3)}


def dir_mb(path: Path) -> float:
    """Size of the files under ``path`` in MB (the table on disk)."""
    total = sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    return round(total / 1e6, 1)


def _overhead(block: dict[str, Any]) -> float:
    """AutoRecall with the query's vector already known: everything but the embedding,
    measured directly (AutoRecall minus e5's own median moved by several ms between runs)."""
    return float(block["parts"]["autorecall_cached_vector"]["p50"])


_Row = tuple[str, str, float | None, float, str, bool, str]


def _recall_targets(report: dict[str, Any]) -> list[_Row]:
    """AutoRecall's overhead: in ms up to CACHED_ROWS memories, against numpy beyond."""
    rows: list[_Row] = []
    recall = report.get("recall") or []
    small = [b for b in recall if b["memories"] <= CACHED_ROWS]
    if small:
        worst = max(small, key=_overhead)
        rows.append(
            (
                "overhead_ms",
                f"AutoRecall beyond the query embedding, p50, ≤ {CACHED_ROWS:,} memories "
                f"(worst: {worst['memories']:,})",
                _overhead(worst),
                OVERHEAD_MS,
                "ms",
                False,
                f"e5 query {worst['parts']['e5_query']['p50']} ms",
            )
        )
    big = [b for b in recall if b["memories"] > CACHED_ROWS]
    if big:
        b = big[-1]
        # AutoRecall and numpy timed in turn (reports from before that: timed apart)
        parts = b["parts"]
        paired = "numpy_paired" in parts
        floor = (parts["numpy_paired"] if paired else b["numpy"])["p50"]
        own = parts["autorecall_paired"]["p50"] if paired else _overhead(b)
        rows.append(
            (
                "overhead_x_numpy",
                f"AutoRecall beyond the query embedding at {b['memories']:,} memories, "
                "÷ numpy brute force",
                round(own / floor, 2) if floor else None,
                OVERHEAD_X_NUMPY,
                "×",
                False,
                f"numpy {floor} ms" + (", timed in turn" if paired else "") + _recall_note(b),
            )
        )
    return rows


def _recall_note(block: dict[str, Any]) -> str:
    recall = block.get("vector_recall")
    return "" if recall is None else f"; vector search recall@10 {recall} of exact"


def _write_targets(report: dict[str, Any]) -> list[_Row]:
    """The reply path's bookkeeping and the guide import's throughput."""
    rows: list[_Row] = []
    reply = report.get("reply_path") or []
    if reply:
        last = reply[-1]
        rows.append(
            (
                "reply_path_ms",
                "reply path: capture, patterns, bumps, recall log (p95, answering thread)",
                last["p95"],
                REPLY_PATH_MS,
                "ms",
                False,
                f"the writer then spends {last['writer_ms_per_run']} ms",
            )
        )
    g = report.get("guides") or {}
    if g.get("e5_share_of_batch") is not None:
        rows.append(
            (
                "import_share",
                "guide import throughput ÷ e5's own batch throughput",
                g["e5_share_of_batch"],
                IMPORT_SHARE,
                "",
                True,
                f"e5 alone {g['e5_alone_per_s']} guides/s",
            )
        )
    return rows


def _cold_floor(c: dict[str, Any], cold: dict[str, Any]) -> str:
    """What a cold search or why cannot go below, measured in the same run."""
    floor = (
        f"python + embedder + query {cold['embedder_s']['median']} s (python "
        f"{cold['python_s']['median']} s); import lancedb {cold['import_lancedb_s']['median']}"
        f" s ({cold['import_lancedb_deferred_s']['median']} s deferred), skipped when the "
        "snapshot on disk is current"
    )
    first = c["memory_search_s"].get("first")
    if first is not None:
        floor += f"; the first search after a write {first} s (LanceDB, then the snapshot)"
    return floor


def _cli_targets(report: dict[str, Any]) -> list[_Row]:
    """The cold ``olav`` subprocesses and the chat prompt."""
    rows: list[_Row] = []
    c, cold = report.get("cli") or {}, report.get("cold") or {}
    if c:
        rows.append(("init_s", "`olav init`", c["init_s"], INIT_S, "s", False, "-"))
        rows.append(
            ("help_s", "`olav --help` (median)", c["help_s"]["median"], HELP_S, "s", False, "-")
        )
    if c and cold:
        floor = _cold_floor(c, cold)
        med = c["memory_search_s"]["median"]
        rows.append(
            ("search_s", "cold `olav memory search` (median)", med, COLD_S, "s", False, floor)
        )
        why = cold["why_s"]["median"]
        rows.append(("why_s", "cold `olav memory why` (median)", why, COLD_S, "s", False, floor))
    fp = report.get("first_prompt")
    if fp:
        what = "chat prompt after `olav`, under a pty (median)"
        floor = f"python {cold['python_s']['median']} s" if cold else "-"
        rows.append(("first_prompt_s", what, fp["median"], FIRST_PROMPT_S, "s", False, floor))
    return rows


def _rss_targets(report: dict[str, Any]) -> list[_Row]:
    r = report.get("rss")
    if not r:
        return []
    what = f"peak RSS at {r['memories']:,} memories"
    floor = f"table {r.get('table_mb')} MB on disk"
    if r.get("data_mb") is not None:  # reports from before it was measured lack it
        floor += f" ({r['data_mb']} MB the current version's data)"
    return [("rss_mb", what, r["vmhwm_mb"], RSS_MB, "MB", False, floor)]


def _target(row: _Row) -> dict[str, Any]:
    key, what, value, limit, unit, higher, floor = row
    met = None if value is None else (value >= limit if higher else value <= limit)
    return {
        "key": key,
        "what": what,
        "value": value,
        "limit": limit,
        "unit": unit,
        "met": met,
        "floor": floor,
    }


def wait_targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets of issue 15, each with its measured value and its floor."""
    rows = [
        *_recall_targets(report),
        *_write_targets(report),
        *_cli_targets(report),
        *_rss_targets(report),
    ]
    return [_target(row) for row in rows]


def measure_audit(root: Path, n: int) -> dict[str, Any]:
    """What opening audit.duckdb costs (olav.audit.host attaches the file to the process's
    one DuckDB), beside what a DuckDB instance of its own costs (how every opening was made
    before), and a chat run's audit as the Session writes it: its start in one opening, a
    recall log and a tool call on their own, its end in one opening."""
    import duckdb

    from benchmarks.timing import latencies_ms, summary
    from olav.audit.db import connect, migrate
    from olav.audit.recorder import AuditRecorder, ToolCallEntry
    from olav.memory.recall.recaller import RecallResult

    path = root / "audit-bench.duckdb"
    migrate(path)
    audit = AuditRecorder(path, migrated=True)

    def attached(_: int) -> None:
        with connect(path) as con:
            con.execute("SELECT count(*) FROM runs").fetchall()

    def own_instance(_: int) -> None:
        con = duckdb.connect(str(path))
        try:
            con.execute("SELECT count(*) FROM runs").fetchall()
        finally:
            con.close()

    def chat_run(i: int) -> None:
        with audit.batch():
            run_id = audit.start_run("core", "bench", f"q{i}", "m", thread_id="t")
            audit.message(run_id, "user", f"q{i}")
        audit.recall(run_id, "core", RecallResult(query=f"q{i}", agent="core", tier="small"))
        audit.tool_call(
            run_id, "core", ToolCallEntry("db_query", {"sql": "SELECT 1"}, "1", "success", 2.0)
        )
        with audit.batch():
            audit.message(run_id, "assistant", "done")
            audit.end_run(run_id, "completed", outcome="completed")

    return {
        "attached": summary(latencies_ms(attached, n)),
        "own_instance": summary(latencies_ms(own_instance, n)),
        "chat_run": summary(latencies_ms(chat_run, n)),
    }
