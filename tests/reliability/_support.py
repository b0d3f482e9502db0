"""Helpers shared by the reliability tests (not a test module).

- :func:`make_workspace` builds a hash-embedder workspace without the ``hash_ws`` fixture, so
  module-scoped fixtures and hypothesis tests can use it.
- :func:`assert_one_line_error` is the contract of every refused CLI input: non-zero exit,
  exactly one ``error:`` line on stderr naming what is wrong, no traceback, no "internal error".
- :func:`memory_state` reads the table version and row count without going through olav, so
  "nothing was written" is checked independently of the code under test.
- :func:`start_olav` / :func:`kill_when` run the real CLI and SIGKILL it once a marker shows that
  it has started writing (polling the file system, never sleeping as synchronisation).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from olav.memory.store.schema import MemoryRecord, now
from tests.helpers import HASH_CONFIG, clean_env, workspace_from_template, write_config

HASH32_CONFIG = HASH_CONFIG.replace("hash-64", "hash-32")


def make_workspace(root: Path, config: str = HASH_CONFIG, *, prime: bool = True) -> Path:
    """A workspace at ``root`` (template agents copied; guides primed unless ``prime=False``)."""
    from olav.admin.setup import init_workspace

    if prime and config == HASH_CONFIG:  # a copy of what olav init makes, made once
        return workspace_from_template(root, "hash", config)
    write_config(root, config)
    init_workspace(root, prime=prime)
    return root


def memory_path(root: Path) -> Path:
    return root / ".olav" / "databases" / "memory.lance"


def table_dir(root: Path) -> Path:
    return memory_path(root) / "memory.lance"


def memory_state(root: Path, table: str = "memory") -> tuple[int, int]:
    """(version, rows) of a memory table, read with lancedb directly."""
    import lancedb

    tbl = lancedb.connect(str(memory_path(root))).open_table(table)
    return int(tbl.version), int(tbl.count_rows())


def olav_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = clean_env()
    env.update(extra or {})
    return env


def run_cli(
    *args: str, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Like ``tests.helpers.run_olav`` with a caller-chosen timeout."""
    return subprocess.run(
        [sys.executable, "-c", "from olav.cli.app import main; main()", *args],
        cwd=cwd,
        env=olav_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_no_crash(result: subprocess.CompletedProcess[str]) -> None:
    both = result.stdout + result.stderr
    assert "Traceback" not in both, both
    assert "internal error" not in both, both


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The refused-input contract; returns the error line."""
    assert result.returncode not in (0, None), (result.returncode, result.stdout, result.stderr)
    assert_no_crash(result)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, result.stderr
    line = errors[0]
    for needle in needles:
        assert needle in line, (needle, line)
    return line


# -- a mixed-origin corpus --------------------------------------------------------------------

WORDS = (
    "router",
    "backup",
    "vlan",
    "bgp",
    "firewall",
    "交换机",
    "备份",
    "snapshot",
    "uplink",
    "o'reilly",
)


def mixed_records(per_origin: int = 100) -> list[MemoryRecord]:
    """``3 * per_origin`` rows from three origins (user, agent, directive) with every column
    populated in some row: scopes, tags, unicode metadata, expiry, invalidation, supersession."""
    out: list[MemoryRecord] = []
    future = now() + timedelta(days=30)
    for i in range(per_origin):
        w = WORDS[i % len(WORDS)]
        out.append(
            MemoryRecord(
                id=f"user_{i:03d}",
                text=f"user fact {i}: the {w} rule number {i} applies on site s{i % 7}",
                category=("fact", "preference", "decision")[i % 3],
                scope=("global", "netops", "team:noc")[i % 3],
                origin="user",
                confidence=1.0,
                tags=[w, f"t{i % 5}"],
                metadata={"n": i, "note": "ü 备份 \"quoted\" 'single'", "nested": {"k": [1, 2]}},
            )
        )
        out.append(
            MemoryRecord(
                id=f"op_{i:03d}",
                text=f'Action: write_config\nArgs: {{"device": "r{i}"}}\nResult: ok {w}',
                category="operational_event",
                scope=("netops", "core", "admin")[i % 3],
                origin="agent",
                confidence=0.5,
                tags=["write_config"],
                expires_at=future if i % 4 == 0 else None,
                invalidated_at=now() if i % 9 == 0 else None,
                superseded_by=f"op_{i + 1:03d}" if i % 9 == 0 else None,
                metadata={"tool": "write_config", "run_id": f"run{i}"},
            )
        )
        out.append(
            MemoryRecord(
                id=f"guide_core_seed_{i:03d}",
                text=f"seed {i} (seed_{i:03d})\n{w}, seed\n\nWhen asked about {w}, do step {i}.",
                category="usage_guide" if i % 5 else "format_guide",
                scope="global",
                origin="directive",
                confidence=0.9,
                tags=["core", w],
                metadata={"intent": f"seed_{i:03d}", "agent": "core", "body": f"step {i}"},
            )
        )
    return out


def snapshot(store: Any) -> dict[str, dict[str, Any]]:
    """Every row of a store as JSON, without the vector, keyed by id."""
    out = {}
    for rec in store.list_rows():
        data = rec.to_json()
        data.pop("vector", None)
        out[rec.id] = data
    return out


# -- killing the real CLI mid-write ------------------------------------------------------------


def files_under(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


def start_olav(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "from olav.cli.app import main; main()", *args],
        cwd=cwd,
        env=olav_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_when(
    proc: subprocess.Popen[str], marker: Callable[[], bool], *, deadline_s: float = 120
) -> bool:
    """SIGKILL ``proc`` as soon as ``marker()`` is true; True if it was killed by us.

    Polls the file system every millisecond; this observes the child, it never waits for it.
    """
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            break
        if marker():
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.001)
    else:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    if proc.stderr is not None:
        proc.stderr.close()
    return proc.returncode == -signal.SIGKILL
