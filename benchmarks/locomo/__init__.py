"""Evidence recall on LoCoMo: olav's memory search next to BM25, vectors and LangGraph's store.

LoCoMo (snap-research/LoCoMo) holds long two-person conversations split into dated sessions, and
questions whose ``evidence`` names the turns (``dia_id``) that answer them. Recall@k of that
evidence needs no LLM: index one conversation's turns, ask each question, and count the share of
its evidence turns among the top k results.

Every method runs on the same data with the same embedder, and every text is embedded once per
run (and cached on disk by embedder name and text hash, so reruns are fast):

* ``bm25``      LanceDB full-text search alone: ``MemoryStore.search(mode="fts")``
* ``vector``    vector search alone: ``MemoryStore.search(mode="vector")``
* ``langgraph`` ``langgraph.store.memory.InMemoryStore`` with an embedding index (what
  LangMem-style memory uses), ``put`` per turn and ``search(query=...)``
* ``olav``      olav's own search, exactly the default recall path:
  ``MemoryStore.search(mode="hybrid")`` (vector + FTS fused with RRF)

The **experimental** methods (``x-*``) are not what olav does today. They fuse rankings
computed through ``MemoryStore`` from other representations of the same turns (a context window
of neighbouring turns, the session date in the text), other FTS tokenizer settings, a
time-window pre-filter taken from dates in the question, and fusion weights. They exist to
decide what olav's default search should become; see :data:`RECIPES`.
"""

from benchmarks.locomo.cache import LocomoVectors, default_cache_dir
from benchmarks.locomo.data import (
    CATEGORY_NAMES,
    EXCLUDED_CATEGORY,
    REPRESENTATIONS,
    Conversation,
    DialogTurn,
    Question,
    load_locomo,
    parse_ks,
    parse_range,
    parse_session_date,
    render_turn,
    time_filter,
    window_texts,
)
from benchmarks.locomo.markdown import best_method, markdown_recall, method_names
from benchmarks.locomo.measure import BASELINES, olav_records
from benchmarks.locomo.recipes import FTS_CONFIGS, RECIPES, STOP_WORDS, STORE_FTS, Recipe
from benchmarks.locomo.run import RecallRun, run_recall
from benchmarks.locomo.scoring import fuse, recall_at

__all__ = [
    "BASELINES",
    "CATEGORY_NAMES",
    "EXCLUDED_CATEGORY",
    "FTS_CONFIGS",
    "RECIPES",
    "REPRESENTATIONS",
    "STOP_WORDS",
    "STORE_FTS",
    "Conversation",
    "DialogTurn",
    "LocomoVectors",
    "Question",
    "RecallRun",
    "Recipe",
    "best_method",
    "default_cache_dir",
    "fuse",
    "load_locomo",
    "markdown_recall",
    "method_names",
    "olav_records",
    "parse_ks",
    "parse_range",
    "parse_session_date",
    "recall_at",
    "render_turn",
    "run_recall",
    "time_filter",
    "window_texts",
]
