from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from olav.memory.embedders import HashEmbedder
from olav.memory.schema import MemoryRecord
from olav.memory.store import MemoryStore


def run_olav(
    *args: str, cwd: Path, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real `olav` entry point in a subprocess (as a user would)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OLAV_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", "from olav.cli.app import main; main()", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        input=input,
        timeout=300,
    )


def hash_store(path: Path, dim: int = 64, **kw: object) -> MemoryStore:
    return MemoryStore(path, HashEmbedder(f"hash-{dim}"), **kw)  # type: ignore[arg-type]


def rec(id: str, text: str, **kw: object) -> MemoryRecord:
    kw.setdefault("category", "fact")
    return MemoryRecord(id=id, text=text, **kw)  # type: ignore[arg-type]


def tool_context(root: Path, agent: str = "core") -> Any:
    """A ToolContext over the workspace at ``root``, as the agent builder makes one."""
    from olav.core.config import Workspace
    from olav.runtime.tools import ToolContext

    ws = Workspace.open(root)
    return ToolContext(
        root=ws.root,
        exports=ws.exports,
        domain_db=ws.domain_path,
        audit_db=ws.audit_path,
        agent=agent,
        store_factory=lambda: MemoryStore.for_workspace(ws),
    )
