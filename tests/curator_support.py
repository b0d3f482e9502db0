"""What the curator tests share: a long runbook, the workspace's store and audit, its drafts,
and a proposed draft."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from olav.core.config import Workspace
from olav.learning.curator import DRAFTS, DraftRequest, propose_draft
from olav.memory.store.table import MemoryStore

RUNBOOK = "\n\n".join(
    [
        "# BGP flap runbook",
        "What to do when the eBGP session between sh1-border01 and bj1-border01 flaps.",
        "## Symptoms",
        " ".join(
            f"Symptom {i}: the session resets and the prefixes are withdrawn." for i in range(60)
        ),
        "## Steps",
        " ".join(f"Step {i}: check the interface counters and the BGP log." for i in range(60)),
        "## 升级",
        "联系网络值班工程师，并在工单里附上 show ip bgp summary 的输出。" * 20,
    ]
)


def open_store(root: Path) -> MemoryStore:
    return MemoryStore.for_workspace(Workspace.open(root))


def drafts_in(root: Path) -> list[str]:
    folder = root / DRAFTS
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def propose(root: Path, *, run_id: str | None = None, **kw: Any) -> str:
    args: dict[str, Any] = {
        "intent": "r1_loopback",
        "keywords": ["R1", "loopback", "环回"],
        "body": "R1's loopback is 10.255.1.1",
        "category": "fact",
    }
    return propose_draft(root, DraftRequest(**{**args, **kw}), run_id=run_id)
