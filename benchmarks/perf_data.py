"""Synthetic data for ``python -m benchmarks perf``: memory tables, queries and guide files.

Texts come from an English/Chinese vocabulary, and a row's vector is the sum of the e5
embeddings of its words (plus a little noise), so that e5 queries land near the rows they
share words with; building a table needs no per-row embedding.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

AGENT = "netops"
SCOPES = ("global", "netops", "coder")
SEARCH_QUERY = "备份路由器配置"


def words(text: str) -> list[str]:
    return text.split()


EN_WORDS = words(
    "router switch firewall vlan bgp ospf interface backup restore config snapshot rollback "
    "latency packet loss route table neighbor session timeout retry alert incident ticket "
    "deploy release rollout canary health check probe disk memory cpu load queue worker "
    "database index query schema migration replica primary failover cluster node pod "
    "service endpoint certificate token secret rotate audit log trace metric dashboard "
    "threshold window maintenance change approval operator customer tenant region zone "
    "storage volume mount permission user group policy rule acl nat dns dhcp ntp snmp "
    "syslog netconf yaml json report export import schedule cron job backoff cache"
)
ZH_WORDS = words(
    "路由器 交换机 防火墙 备份 恢复 配置 快照 回滚 延迟 丢包 路由表 邻居 会话 超时 告警 "
    "工单 发布 健康检查 磁盘 内存 负载 队列 数据库 索引 查询 迁移 副本 主节点 故障切换 "
    "集群 证书 密钥 审计 日志 指标 阈值 维护窗口 变更 审批 客户 区域 存储 权限 策略 规则"
)
VERBS = words("backup restore check rotate deploy audit export migrate tune monitor")
OBJECTS = words("router switch firewall database cluster certificate queue dns vlan report")
ZH_VERB = words("备份 恢复 检查 轮换 发布 审计 导出 迁移 调优 监控")
ZH_OBJ = words("路由器 交换机 防火墙 数据库 集群 证书 队列 域名解析 虚拟局域网 报表")
METRICS = words("latency error-rate packet-loss cpu disk-usage queue-depth")
AGENTS = words("core netops coder dba sre secops support data")


def sentence(rng: random.Random) -> list[int]:
    """Word indices into EN_WORDS + ZH_WORDS: 8 to 16 words, about 20 % Chinese."""
    n_en = len(EN_WORDS)
    return [
        n_en + rng.randrange(len(ZH_WORDS)) if rng.random() < 0.2 else rng.randrange(n_en)
        for _ in range(rng.randint(8, 16))
    ]


def make_queries(n: int, seed: int = 11) -> list[str]:
    """Distinct two-to-three-word requests (so that no query embedding is a cache hit)."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        words = [rng.choice(EN_WORDS), rng.choice(EN_WORDS)]
        if rng.random() < 0.3:
            words.append(rng.choice(ZH_WORDS))
        out[" ".join(words)] = None
    return list(out)


def build_table(
    path: Path, embedder: Any, word_vecs: np.ndarray, n: int, config: Any, seed: int = 3
) -> tuple[Any, np.ndarray, dict[str, float]]:
    """A MemoryStore of ``n`` synthetic rows, indexed the way ``maintain()`` does it.

    Returns the store, the row vectors (for numpy) and build timings."""
    import pyarrow as pa

    from olav.memory.policy import DEFAULTS
    from olav.memory.store.schema import MemoryRecord
    from olav.memory.store.search import SearchTuning
    from olav.memory.store.table import MemoryStore

    store = MemoryStore(path, embedder, tuning=SearchTuning.of(config))
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    words = EN_WORDS + ZH_WORDS
    cats = [c for c in DEFAULTS.quotas if c != "episode"]
    stamp = datetime.now(UTC)
    vectors = np.zeros((n, word_vecs.shape[1]), dtype=np.float32)
    t0 = time.perf_counter()
    for start in range(0, n, 10000):
        m = min(10000, n - start)
        sents = [sentence(rng) for _ in range(m)]
        flat = np.fromiter((w for s in sents for w in s), dtype=np.int64)
        offsets = np.cumsum([0, *(len(s) for s in sents[:-1])])
        vecs = np.add.reduceat(word_vecs[flat], offsets, axis=0)
        vecs += nrng.standard_normal(vecs.shape).astype(np.float32) * 0.02
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        vectors[start : start + m] = vecs
        rows = []
        for j, sent in enumerate(sents):
            age = timedelta(days=rng.random() * 60)
            rows.append(
                MemoryRecord(
                    id=f"m{start + j:07d}",
                    text=" ".join(words[w] for w in sent),
                    category=cats[(start + j) % len(cats)],
                    scope=SCOPES[(start + j) % len(SCOPES)],
                    confidence=0.5 + 0.5 * rng.random(),
                    created_at=stamp - age,
                    updated_at=stamp - age,
                ).to_row()
            )
        table = pa.Table.from_pylist(rows, schema=store.schema)
        col = pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), vecs.shape[1])
        table = table.set_column(table.schema.get_field_index("vector"), "vector", col)
        with store.write_lock():
            store.table.add(table)
    t1 = time.perf_counter()
    store.maintain(force_optimize=True)
    timings = {"rows_s": round(t1 - t0, 2), "maintain_s": round(time.perf_counter() - t1, 2)}
    if store.size() != n:
        raise RuntimeError(f"built {store.size()} rows, wanted {n}")
    return store, vectors, timings


def guide_doc(i: int, rng: random.Random) -> dict[str, Any]:
    vi, oi = rng.randrange(len(VERBS)), rng.randrange(len(OBJECTS))
    verb, obj, metric = VERBS[vi], OBJECTS[oi], rng.choice(METRICS)
    cmd = f"{obj}-cli {verb} --dry-run"
    en = (
        f"To {verb} the {obj}, run `{cmd}` and check {metric}. "
        f"Roll back with `{obj}-cli undo` if {metric} gets worse."
    )
    zh = (
        f"{ZH_VERB[vi]}{ZH_OBJ[oi]}前先执行 `{cmd}` 并检查{metric}；"
        f"指标变差就用 `{obj}-cli undo` 回滚。"
    )
    r = rng.random()
    body = en if r < 0.5 else zh if r < 0.85 else f"{en}\n{zh}"
    pool = [verb, obj, metric, ZH_VERB[vi], ZH_OBJ[oi], f"{obj}-cli", "rollback", "回滚"]
    return {
        "intent": f"{verb}_{obj}_{i:04d}",
        "agent": AGENTS[i % len(AGENTS)],
        "keywords": rng.sample(pool, rng.randint(3, 6)),
        "body": body,
        "category": "format_guide" if i % 5 == 0 else "usage_guide",
        "source_tier": rng.choice(["vendor", "platform", "team", "user"]),
        "priority": rng.randint(10, 90),
    }


def write_guides(root: Path, n: int) -> list[Path]:
    import yaml

    from olav.memory.ingest.guides import find_guides

    rng = random.Random(42)
    for i in range(n):
        doc = guide_doc(i, rng)
        folder = root / doc["agent"]
        folder.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)
        (folder / f"{doc['intent']}.guide.yaml").write_text(text, encoding="utf-8")
    return find_guides(root)
