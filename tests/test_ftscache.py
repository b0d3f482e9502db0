"""Full-text rankings from the snapshot (olav.memory.store.ftscache): LanceDB's tokens, LanceDB's
BM25 scores and order, and any write, from any process, retires the postings."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from lancedb import tokenize

from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.ftscache import FTS_TOKENIZER, Analyzer
from olav.memory.store.schema import MemoryRecord, now
from olav.memory.store.table import MemoryStore, live_filter
from olav.memory.store.timeq import Period
from olav.memory.store.vcache import CachedQuery
from tests.helpers import EVERY_ROW, write_from_another_process

ENGLISH = [
    "Restart the {x} service before the nightly backup runs",
    "The routers were restarted after the {x} config changed",
    "Always call take_snapshot_when_db_stale before migrating {x}",
    "registerService fails when the {x} port is already in use",
    "Disk alerts on {x} mean the log volume is full; rotate the logs",
    "Use HTTPServer with TLS certificates for {x}, never plain HTTP",
    "Deploying {x} on Friday is not allowed by the release policy",
    "The café's naïve résumé parser broke the {x} import",
    "{x} queries should use the read replica, not the primary",
    "BGP sessions to {x} flap when the MTU is wrong",
]
CHINESE = [
    "先备份{x}的路由器配置，再重启服务",
    "磁盘告警说明{x}的日志卷已满，请清理日志",
    "证书过期会导致{x}的发布失败",
    "交换机{x}的端口配置需要变更审批",
    "每周五不允许发布{x}，这是发布策略",
    "查询{x}时请使用只读副本",
]
NAMES = ["payments", "edge-gw", "ledger_db", "search", "auth", "报表", "计费", "网关"]
SCOPES = ("global", "netops", "coder", "team:sre")
CATS = ("fact", "usage_guide", "reflection", "query_pattern")
QUERIES = [
    "restart the router",
    "how do I restart payments after a backup?",
    "disk alert log volume",
    "snapshot",
    "take_snapshot_when_db_stale",
    "register service port",
    "TLS certificate HTTP server",
    "cafe resume parser",
    "release policy friday deploy",
    "备份路由器配置",
    "磁盘告警",
    "证书过期 发布",
    "交换机 端口",
    "payments 报表 查询",
    "the and of",  # stop words only: no full-text ranking at all
    "router router backup",  # a repeated word counts twice
    "zebra quarantine firmware",  # words no row holds
]


def _text(rng: random.Random, i: int) -> str:
    pool = CHINESE if i % 3 == 0 else ENGLISH
    parts = [rng.choice(pool).format(x=rng.choice(NAMES)) for _ in range(1 + i % 3)]
    if i % 5 == 0:
        parts.append(rng.choice(ENGLISH if pool is CHINESE else CHINESE).format(x="mixed"))
    return " ".join(parts)


def _rows(n: int) -> list[MemoryRecord]:
    rng = random.Random(11)
    nrng = np.random.default_rng(11)
    stamp = datetime(2026, 6, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        vec = nrng.standard_normal(64)
        out.append(
            MemoryRecord(
                id=f"r{i:04d}",
                text=_text(rng, i),
                category=CATS[i % len(CATS)],
                scope=SCOPES[i % len(SCOPES)],
                origin="user",
                vector=[float(x) for x in vec / np.linalg.norm(vec)],
                context=" ".join(_text(rng, i + j) for j in range(3)) if i % 4 == 0 else None,
                event_at=stamp - timedelta(days=i % 120),
                expires_at=stamp - timedelta(days=1) if i % 17 == 0 else None,
                invalidated_at=stamp if i % 19 == 0 else None,
            )
        )
    return out


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "memory.lance", HashEmbedder("hash-64"))
    s.upsert(_rows(360))
    # LanceDB scores from its index's statistics; with every row indexed they are the
    # table's, which the snapshot uses
    s.maintain(force_optimize=True)
    return s


FILTERS = [
    {},
    {"scopes": ["netops", "global"]},
    {"categories": ["usage_guide", "fact"], "scopes": ["team:sre", "coder"]},
    {"include_invalid": True},
    {"period": Period(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 5, 1, tzinfo=UTC))},
    {"period": Period(months=(4,))},
]


def _lancedb_ranking(store: MemoryStore, column: str, query: str, kw: dict) -> list:
    pred = live_filter(
        scopes=kw.get("scopes"),
        categories=kw.get("categories"),
        include_invalid=kw.get("include_invalid", False),
    )
    period = kw.get("period")
    parts = [p for p in (pred, period.sql("event_at") if period else None) if p]
    q = store.table.search(query, query_type="fts", fts_columns=column).select(["id", "_score"])
    if parts:
        q = q.where(" AND ".join(f"({p})" for p in parts), prefilter=True)
    got = q.limit(10).to_arrow()
    return list(zip(got["id"].to_pylist(), got["_score"].to_pylist(), strict=True))


def _snapshot_ranking(store: MemoryStore, column: str, query: str, kw: dict) -> list:
    snap = store.vcache.snapshot
    assert snap is not None
    cq = CachedQuery(
        kw.get("scopes"),
        kw.get("categories"),
        kw.get("include_invalid", False),
        now(),
        kw.get("period"),
    )
    tokens = Analyzer().query(query)
    got = snap.rank_text(column, tokens, 10, cq, with_vector=False)
    return list(zip(got.ids, got.values, strict=True))


def assert_same_ranking(want: list, have: list) -> None:
    """Same ids, same order and the same scores (float32 sums in another order may differ
    in the last bit). Rows with equal scores may come in any order (LanceDB's order within a
    tie is an accident of its walk), and at the cut any of them may be the ones kept."""
    assert len(have) == len(want), (want, have)
    for (_i, sw), (_j, sh) in zip(want, have, strict=True):
        assert sh == pytest.approx(sw, rel=1e-5, abs=1e-6), (want, have)
    pos = 0
    while pos < len(want):
        end = pos + 1
        while end < len(want) and want[end][1] == pytest.approx(want[pos][1], rel=1e-5):
            end += 1
        if end < len(want):  # a tie band inside the list: the same rows
            assert {i for i, _s in want[pos:end]} == {i for i, _s in have[pos:end]}, (want, have)
        pos = end


def test_query_tokens_are_lancedbs_own() -> None:
    analyzer = Analyzer(FTS_TOKENIZER)
    rng = random.Random(3)
    docs = [_text(rng, i) for i in range(60)]

    def lancedb_tokens(text: str) -> list[str]:
        return [t.text for t in tokenize(text, base_tokenizer=FTS_TOKENIZER)]

    # unknown words: tokenized in full; then the same words from the learned table
    for text in QUERIES + docs[:5]:
        assert analyzer.query(text) == lancedb_tokens(text)
        assert analyzer.query(text) == lancedb_tokens(text)
    for text, tokens in zip(docs, analyzer.documents(docs), strict=True):
        assert tokens == lancedb_tokens(text)
    mixed = "Restarting 路由器 routers; take_snapshot_when_db_stale 证书 résumés"
    assert analyzer.query(mixed) == lancedb_tokens(mixed)
    assert analyzer.query("the of and a") == [] == lancedb_tokens("the of and a")


def test_a_document_holding_the_separator_is_still_tokenized_alone() -> None:
    from olav.memory.store.ftscache import SEPARATOR

    docs = ["backup the router", f"restart {SEPARATOR} service", "磁盘告警"]
    got = Analyzer().documents(docs)
    assert got == [[t.text for t in tokenize(d, base_tokenizer=FTS_TOKENIZER)] for d in docs]


@pytest.mark.parametrize("column", ["text", "context"])
def test_the_snapshot_ranks_full_text_as_lancedb_does(store: MemoryStore, column: str) -> None:
    assert store.vcache.refresh(store.table) is not None
    compared = 0
    for query in QUERIES:
        for kw in FILTERS:
            want = _lancedb_ranking(store, column, query, kw)
            have = _snapshot_ranking(store, column, query, kw)
            assert_same_ranking(want, have)
            compared += len(want)
    assert compared > 300  # the queries do find rows


def test_search_serves_full_text_from_the_snapshot(store: MemoryStore) -> None:
    store.vcache.max_rows = 0
    expected = [store.search(q, mode="fts", k=8, filter=EVERY_ROW) for q in QUERIES]
    assert store.vcache.served == 0
    store.vcache.max_rows = 20000
    store.vcache.refresh(store.table)
    got = [store.search(q, mode="fts", k=8, filter=EVERY_ROW) for q in QUERIES]
    assert store.vcache.served == len(QUERIES)
    for want, have in zip(expected, got, strict=True):
        assert_same_ranking(
            [(h.record.id, h.fts_score) for h in want], [(h.record.id, h.fts_score) for h in have]
        )
        assert all(h.vector is None for h in have)  # as LanceDB: fts mode computes no vector


def test_a_write_from_another_process_retires_the_postings(store: MemoryStore) -> None:
    query = "zebra firmware quarantine"
    store.vcache.refresh(store.table)
    assert store.search(query, mode="fts", k=3, filter=EVERY_ROW) == []
    served = store.vcache.served
    write_from_another_process(store.path, query)

    after = store.search(query, mode="fts", k=3, filter=EVERY_ROW)
    assert [h.record.id for h in after] == ["fresh"]
    assert store.vcache.served == served, "the stale postings must not answer"
    store.vcache.wait(60)  # the second search at the new version started a fresh load
    again = store.search(query, mode="fts", k=3, filter=EVERY_ROW)
    assert store.vcache.served == served + 1 and [h.record.id for h in again] == ["fresh"]
