"""Logs go to the workspace in use, written by a thread of their own (redaction never holds up
the event loop), and importing olav changes nothing in the process."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from olav.core import log


def test_a_second_workspace_takes_the_log_and_the_first_file_is_closed(tmp_path: Path) -> None:
    root = logging.getLogger("olav")
    before = [h for h in root.handlers]
    first = log.configure(tmp_path / "a")
    log.get_logger("t").warning("to a")
    second = log.configure(tmp_path / "b")
    log.get_logger("t").warning("to b")
    assert log.configure(tmp_path / "b") == second  # the same workspace again: no change
    ours = [h for h in root.handlers if h not in before]
    assert len(ours) == 1 and log.log_path() == second
    log.flush()  # the lines are written by a thread of their own
    assert "to a" in first.read_text() and "to b" not in first.read_text()
    assert "to b" in second.read_text() and "to a" not in second.read_text()


def test_importing_the_memory_library_leaves_the_environment_alone() -> None:
    code = (
        "import os; before = dict(os.environ); "
        "import olav.memory.store.table, olav.memory.store.embedders, olav.memory.recall.recaller; "
        "print(sorted(k for k in os.environ if os.environ.get(k) != before.get(k)))"
    )
    env = {k: v for k, v in os.environ.items() if k not in log.NATIVE_DEFAULTS}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_entry_points_apply_the_native_defaults_without_overriding_the_user() -> None:
    code = (
        "import os; from olav.core.log import quiet_native_libraries; quiet_native_libraries(); "
        "print(os.environ['OMP_WAIT_POLICY'], os.environ['LANCE_LOG'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in log.NATIVE_DEFAULTS}
    env["LANCE_LOG"] = "debug"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["PASSIVE", "debug"]


def test_numpy_already_loaded_gets_one_blas_thread_unless_the_user_chose() -> None:
    code = (
        "import numpy; from olav.core.log import blas_threads, quiet_native_libraries; "
        "quiet_native_libraries(); print(blas_threads())"
    )
    env = {k: v for k, v in os.environ.items() if k not in log.NATIVE_DEFAULTS}
    ours = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    env["OPENBLAS_NUM_THREADS"] = "2"
    theirs = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert (ours.stdout.strip(), theirs.stdout.strip()) == ("1", "2")


SECRET = "sk-proj-Abcdefghijklmnop1234567890"


@pytest.fixture
def slow_format(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowFormat]:
    """RedactingFormatter made to wait for the test's word before it formats; the log is
    closed afterwards, so the next test starts its own."""
    slow = SlowFormat(log.RedactingFormatter.format)
    monkeypatch.setattr(log.RedactingFormatter, "format", lambda fmt, record: slow(fmt, record))
    yield slow
    slow.release.set()
    log.stop()


class SlowFormat:
    def __init__(self, original: Any) -> None:
        self.original = original
        self.entered = threading.Event()
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []

    def __call__(self, formatter: logging.Formatter, record: logging.LogRecord) -> str:
        self.threads.append(threading.current_thread())
        self.entered.set()
        self.release.wait(10)  # bounded: a formatter run by the logging thread would hang it
        return str(self.original(formatter, record))


def test_a_record_logged_on_the_event_loop_is_redacted_and_written_by_another_thread(
    tmp_path: Path, slow_format: SlowFormat
) -> None:
    path = log.configure(tmp_path / "logs")

    async def serve_a_request() -> threading.Thread:
        log.get_logger("serve").warning("request failed: token=%s", SECRET)
        assert not slow_format.release.is_set()  # returned while the formatter waits
        return threading.current_thread()

    loop_thread = asyncio.run(serve_a_request())
    assert slow_format.entered.wait(10)  # the writer has the record, and waits
    assert slow_format.threads and loop_thread not in slow_format.threads
    assert SECRET not in path.read_text() and "request failed" not in path.read_text()
    slow_format.release.set()
    log.flush()
    [line] = path.read_text().splitlines()
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING olav.serve request failed: .+", line
    )
    assert SECRET not in line and "[REDACTED" in line


def test_a_full_queue_drops_records_and_says_so_once(
    tmp_path: Path, slow_format: SlowFormat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log, "QUEUE_SIZE", 3)
    path = log.configure(tmp_path / "logs")
    logger = log.get_logger("serve")
    logger.warning("line 0")
    assert slow_format.entered.wait(10)  # the writer holds line 0: three more fit the queue
    for i in range(1, 10):
        logger.warning("line %d", i)  # never waits for the writer
    slow_format.release.set()
    log.flush()
    logger.warning("line 10")
    log.flush()
    lines = [line.split(" ", 4)[-1] for line in path.read_text().splitlines()]
    assert lines == [
        "line 0",
        "line 1",
        "line 2",
        "line 3",
        "6 log records were dropped: the log writer fell behind",
        "line 10",
    ]
