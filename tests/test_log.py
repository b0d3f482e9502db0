"""Logs go to the workspace in use, and importing olav changes nothing in the process."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

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
    assert len(ours) == 1 and ours[0].baseFilename == str(second)  # type: ignore[attr-defined]
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
