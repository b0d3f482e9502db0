"""Rows for the vector-snapshot tests (test_vcache.py, test_snapfile.py)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np

from olav.memory.store.schema import MemoryRecord

WORDS = [
    "router",
    "switch",
    "backup",
    "config",
    "vlan",
    "bgp",
    "ospf",
    "disk",
    "cpu",
    "memory",
    "alert",
    "deploy",
    "release",
    "cert",
    "dns",
    "queue",
    "cache",
    "index",
    "路由器",
    "交换机",
    "备份",
    "配置",
    "告警",
    "磁盘",
    "证书",
    "发布",
]
SCOPES = ("global", "netops", "coder", "user:alice", "user:bob", "team:netops", "team:x")
CATS = ("fact", "usage_guide", "reflection", "operational_event")


def unit_vector(nrng: np.random.Generator) -> list[float]:
    vec = nrng.standard_normal(64)
    return [float(x) for x in vec / np.linalg.norm(vec)]


def rows(n: int) -> list[MemoryRecord]:
    """Rows with random vectors of their own, and texts of different lengths: no two are
    equally near a query, by vector or by BM25."""
    rng = random.Random(7)
    nrng = np.random.default_rng(7)
    stamp = datetime(2026, 6, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        # 7 words make 7 to 14 tokens, so 15 pads a row keep every length apart
        text = " ".join(rng.sample(WORDS, 7)) + f" item{i}" + " pad" * (15 * i)
        out.append(
            MemoryRecord(
                id=f"m{i:04d}",
                text=text,
                category=CATS[i % len(CATS)],
                scope=SCOPES[i % len(SCOPES)],
                origin="user",
                vector=unit_vector(nrng),
                context=f"before {text} after" if i % 3 == 0 else None,
                context_vector=unit_vector(nrng) if i % 3 == 0 else None,
                event_at=stamp - timedelta(days=i % 90),
                expires_at=stamp - timedelta(days=1) if i % 11 == 0 else None,
                invalidated_at=stamp if i % 13 == 0 else None,
            )
        )
    return out
