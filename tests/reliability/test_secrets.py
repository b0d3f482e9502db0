"""Secrets never reach disk: a corpus of secret shapes goes through L1 capture (tool arguments
and results), the audit recorder (queries, messages, tool calls, errors, events) and the olav
logger; then every file under .olav/ and exports/ is grepped, as bytes, for each secret.

Each corpus entry is ``(id, text as it appears in a tool call, needles that must not remain)``.
A canary travels with every entry, proving that the grep sees what was written (LanceDB and
DuckDB store these strings uncompressed at this size).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from olav.audit.recorder import AuditRecorder, ToolCallEntry
from olav.core.config import Workspace
from olav.memory.ingest.capture import ToolEvent, capture
from olav.memory.ingest.transfer import export_jsonl
from olav.memory.store.table import MemoryStore
from tests.reliability._support import make_workspace
from tests.secret_corpus import CORPUS


def _xfail(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)


def canary(i: int) -> str:
    return f"CanaryMark{i:03d}Q"


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for base in (root / ".olav", root / "exports"):
        for path in base.rglob("*"):
            if path.is_file() and not path.name.endswith(".log"):
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Send every corpus entry through capture, the audit recorder and an export; return the
    bytes of every file under .olav/ and exports/ (logs excluded)."""
    root = make_workspace(tmp_path_factory.mktemp("secrets") / "ws", prime=False)
    ws = Workspace.open(root)
    store = MemoryStore.for_workspace(ws)
    audit = AuditRecorder(ws.audit_path)
    lines = [f"{text} ({canary(i)})" for i, (_, text, _, _) in enumerate(CORPUS)]
    events = [
        ToolEvent(
            agent="netops",
            tool="write_config",
            args={"device": f"r{i}", "config": line, "lines": [line]},
            result=f"ok, applied: {line}",
            status="success",
        )
        for i, line in enumerate(lines)
    ]
    # one audit write per channel (each opens a DuckDB connection); the entries are joined by
    # newlines, which every redaction pattern treats as a boundary
    joined = "\n".join(lines)
    run = audit.start_run("netops", "sess", f"please apply {joined}", "qwen3:8b")
    audit.message(run, "user", joined)
    audit.message(run, "assistant", f"I will apply:\n{joined}")
    audit.tool_call(
        run,
        "netops",
        ToolCallEntry("write_config", {"config": joined, "lines": lines}, joined, "success", 3.0),
    )
    audit.tool_call(
        run, "netops", ToolCallEntry("ssh_exec", {"cmd": joined}, f"Error: {joined}", "error", 1.0)
    )
    audit.event(run, "note", {"text": joined, "lines": lines})
    audit.memory_event("m1", "import", "cli", {"text": joined, "lines": lines})
    audit.end_run(run, "failed", error=f"RuntimeError: {joined}")
    capture(store, events, question="apply the configs", run_id="run0")
    export_jsonl(store, ws.exports / "memory.jsonl")
    files = _files(root)
    assert any(p.startswith(".olav/databases/memory.lance/") for p in files)
    assert ".olav/databases/audit.duckdb" in files and "exports/memory.jsonl" in files
    return files


def _leaks(files: dict[str, bytes], needles: list[str]) -> list[str]:
    found = []
    for needle in needles:
        for form in {needle, needle.lower()}:
            raw = form.encode("utf-8")
            found += [f"{form!r} in {name}" for name, data in files.items() if raw in data]
    return found


def test_the_grep_sees_what_was_written(stored: dict[str, bytes]) -> None:
    for i in range(len(CORPUS)):
        mark = canary(i).encode()
        for where in (".olav/databases/memory.lance/", ".olav/databases/audit.duckdb", "exports/"):
            assert any(mark in data for name, data in stored.items() if name.startswith(where)), (
                canary(i),
                where,
            )


def _params() -> list[Any]:
    out = []
    for case_id, _, needles, leak in CORPUS:
        marks = [_xfail(f"redact_text: {leak}")] if leak else []  # none left
        out.append(pytest.param(needles, id=case_id, marks=marks))
    return out


@pytest.mark.parametrize("needles", _params())
def test_no_secret_in_memory_audit_or_exports(stored: dict[str, bytes], needles: list[str]) -> None:
    assert _leaks(stored, needles) == []


def test_no_secret_in_captured_sql(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", prime=False)
    store = MemoryStore.for_workspace(Workspace.open(root))
    sql = "SELECT host FROM devices WHERE password = 'SqlSecret4321' OR api_key='SqlKey9876abc'"
    event = ToolEvent("netops", "db_query", {"sql": sql}, "3 rows", "success")
    assert capture(store, [event], question="which hosts use it", run_id="r1")
    leaks = _leaks(_files(root), ["SqlSecret4321", "SqlKey9876abc"])
    assert leaks == []


LOG_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from olav.core.log import configure, get_logger
    logs = Path(sys.argv[1])
    configure(logs)
    log = get_logger("runner")
    for i, text in enumerate(json.loads(sys.stdin.read())):
        log.error("run r%d failed: RuntimeError: %s", i, text)
        get_logger("cron").warning("job.failed message=%s", text)
    """
)


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The corpus logged through olav.core.log (in a child process: configure() is global)."""
    import json

    logs = tmp_path_factory.mktemp("logs") / ".olav" / "logs"
    texts = [f"{text} ({canary(i)})" for i, (_, text, _, _) in enumerate(CORPUS)]
    subprocess.run(
        [sys.executable, "-c", LOG_SCRIPT, str(logs)],
        input=json.dumps(texts),
        text=True,
        check=True,
        timeout=60,
    )
    files = {p.name: p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    assert all(canary(i).encode() in files["olav.core.log"] for i in range(len(CORPUS)))
    return files


def _log_params() -> list[Any]:
    out = []
    for case_id, _, needles, leak in CORPUS:
        reason = f"olav.core.log (RedactingFormatter -> redact_text): {leak}"
        marks = [_xfail(reason)] if leak else []
        out.append(pytest.param(needles, id=case_id, marks=marks))
    return out


@pytest.mark.parametrize("needles", _log_params())
def test_no_secret_in_logs(logged: dict[str, bytes], needles: list[str]) -> None:
    assert _leaks(logged, needles) == []


@pytest.mark.parametrize(("text"), [c[1] for c in CORPUS], ids=[c[0] for c in CORPUS])
def test_redacting_twice_changes_nothing(text: str) -> None:
    """Exports redact the audit's text again: a mask must stay one mask ('token=[REDACTED]'
    once became 'token=[REDACTED]]')."""
    from olav.core.redact import redact_text

    once = redact_text(text)
    assert redact_text(once) == once


def test_a_runs_counters_and_flags_survive_redaction_its_secrets_do_not() -> None:
    """A run's stats are keyed by "tokens…": their counts and flags are no secret, and an
    "(estimated)" read from a masked flag was a lie; a token's value still goes."""
    from olav.core.redact import REDACTED, redact

    stats = {"tokens_in": 812, "tokens_estimated": False, "counted_by": "tokenizer"}
    assert redact(stats) == stats
    kept = redact({"api_token": "hunter2-not-a-flag", "token": True, "token_s": "abc"})
    assert kept == {"api_token": REDACTED, "token": True, "token_s": REDACTED}
