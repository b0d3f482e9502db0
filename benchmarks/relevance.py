"""``python -m benchmarks relevance``: what reaches the model on the relevance corpus (issue 53),
agent by agent, with today's decision (the product's Recaller, its calibrated floors and rules,
the small tier), as the baseline a learned decision is reported against.

Nothing here was tuned on the corpus: every agent is held out from the decision by
construction, so the per-agent rows are leave-one-agent-out figures of the hand-set decision.
Each agent's guides go into a fresh store through ``import_guides`` (the product's path), each
request is recalled as the agent's AutoRecall would (dry run), and the block is scored:

- ``in_block``: a request that a guide answers has one of its expected guides in the block;
- ``empty``: small talk, another agent's request and in-domain requests no guide covers get
  an empty block;
- ``precision``: of the guides injected for requests that expect one, the share expected.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.relevance_corpus import EMPTY_KINDS, LANGS, Corpus, Request, load_corpus

TIER = "small"


def _rate(hits: Sequence[bool]) -> float | None:
    return round(sum(hits) / len(hits), 3) if hits else None


def score(rows: Sequence[tuple[Request, list[str]]]) -> dict[str, Any]:
    """The block figures of (request, injected guide intents) rows."""
    found = [bool(set(got) & set(r.expect)) for r, got in rows if r.expect]
    empty = [not got for r, got in rows if r.kind in EMPTY_KINDS]
    shown = [(r, got) for r, got in rows if r.expect and got]
    right = sum(len(set(got) & set(r.expect)) for r, got in shown)
    total = sum(len(got) for _, got in shown)
    return {
        "requests": len(rows),
        "in_block": _rate(found),
        "empty": _rate(empty),
        "precision": round(right / total, 3) if total else None,
    }


@contextlib.contextmanager
def agent_recaller(
    corpus: Corpus, agent: str, embedder: Any, **settings: Any
) -> Iterator[tuple[Any, dict[str, str]]]:
    """A Recaller (small tier, default settings but ``settings``) on a fresh store of
    ``agent``'s guides, imported as ``olav kb import-guides`` does, and the intent of each
    guide's id."""
    from olav.core.settings import SETTINGS
    from olav.memory.ingest.guides import import_guides
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.table import MemoryStore

    config: dict[str, Any] = {s.key: s.default for s in SETTINGS}
    config.update({k.replace("__", "."): v for k, v in settings.items()})
    files = corpus.files[agent]
    with tempfile.TemporaryDirectory(prefix="olav-relevance-") as tmp:
        store = MemoryStore(Path(tmp) / "memory.lance", embedder)
        summary = import_guides(store, files, base=files[0].parent.parent)
        if summary.errors:
            raise RuntimeError(summary.errors[0].one_line())
        store.maintain(force_optimize=True)
        recaller = Recaller.for_config(store, config, agent=agent, tier=TIER)
        yield recaller, {f"guide_{agent}_{g.intent}": g.intent for g in corpus.guides[agent]}


def recall_agent(
    corpus: Corpus, agent: str, embedder: Any, model: Any = "shipped"
) -> list[tuple[Request, list[str]]]:
    """Every request of ``agent`` through the product's Recaller on a store of its guides:
    (request, the intents of the guides injected). ``model``: the learned decision's model
    (the shipped one by default; None: the floors decide guides too)."""
    chosen = "off" if model is None else "on"
    with agent_recaller(corpus, agent, embedder, memory__relevance_model=chosen) as (
        recaller,
        intent_of,
    ):
        if model not in (None, "shipped"):
            recaller.model = model
        rows = []
        for req in (r for r in corpus.requests if r.agent == agent):
            res = recaller.recall(req.text, dry_run=True)
            got = [intent_of.get(i, i) for i in res.injected_ids if i in intent_of]
            rows.append((req, got))
    return rows


def run_relevance(
    embedder: Any = None, progress: Callable[[str], None] | None = None, *, learned: bool = True
) -> dict:
    """The baseline report: per agent, per language and per kind, and over every request."""
    from olav.memory.store.embedders import CachedEmbedder, E5Embedder

    say = progress or (lambda _m: None)
    started = time.perf_counter()
    corpus = load_corpus()
    emb = embedder or CachedEmbedder(E5Embedder(), size=8192)
    rows: list[tuple[Request, list[str]]] = []
    per_agent = {}
    for agent in corpus.agents:
        say(f"recalling {agent}")
        got = recall_agent(corpus, agent, emb, "shipped" if learned else None)
        per_agent[agent] = score(got)
        rows += got
    by_lang = {lang: score([x for x in rows if x[0].lang == lang]) for lang in LANGS}
    kinds: dict[str, list[tuple[Request, list[str]]]] = defaultdict(list)
    for x in rows:
        kinds[x[0].kind].append(x)
    return {
        "embedder": getattr(emb, "name", str(emb)),
        "decision": "learned" if learned else "floors",
        "tier": TIER,
        "corpus": corpus.counts(),
        "all": score(rows),
        "agents": per_agent,
        "languages": by_lang,
        "kinds": {k: score(v) for k, v in sorted(kinds.items())},
        "misses": [
            {"id": r.id, "q": r.text, "expect": list(r.expect), "got": got}
            for r, got in rows
            if (r.expect and not set(got) & set(r.expect)) or (r.kind in EMPTY_KINDS and got)
        ][:400],
        "seconds": round(time.perf_counter() - started, 1),
    }
