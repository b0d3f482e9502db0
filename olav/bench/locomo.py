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

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from olav.core.errors import OlavError
from olav.memory.embedders import Embedder

CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
EXCLUDED_CATEGORY = 5  # adversarial: the answer is not in the conversation
BASELINES = ("bm25", "vector", "langgraph", "olav")
OLAV_FTS = "icu"  # the FTS config MemoryStore creates: FTS(base_tokenizer="icu")

Progress = Callable[[str], None]


# -- the data ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    position: int  # index of the turn inside its session
    when: datetime | None  # the session's date and time (UTC, as written in the data)
    date_label: str  # e.g. "8 May 2023"; the raw session string when it does not parse
    caption: str | None = None  # BLIP caption of a shared photo, when there is one


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    excluded: int = 0  # category-5 questions left out
    no_evidence: int = 0  # questions left out because none of their evidence ids exist
    dropped_ids: list[str] = field(default_factory=list)  # evidence ids that match no turn


_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")


def parse_session_date(raw: str) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` -> a UTC datetime; None when it does not parse."""
    text = " ".join(str(raw).split())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %B %Y", "%d %B, %Y", "%d %B %Y"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def parse_range(spec: str) -> list[int]:
    """``"0-4"`` / ``"0,2,3"`` / ``"1-2,4"`` -> sorted indices."""
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError(part)
                out.update(range(lo, hi + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise OlavError(
                f"{spec!r} is not a list of conversation numbers",
                hint="Use a range or a list, e.g. --convs 0-4 or --convs 0,2",
            ) from None
    if not out or min(out) < 0:
        raise OlavError(f"{spec!r} selects no conversation", hint="e.g. --convs 0-4")
    return sorted(out)


def parse_ks(spec: str) -> list[int]:
    """``"1,5,10"`` -> [1, 5, 10]."""
    try:
        ks = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        raise OlavError(f"{spec!r} is not a list of k values", hint="e.g. -k 1,5,10") from None
    if not ks or ks[0] < 1 or ks[-1] > 100:
        raise OlavError(f"k values must be within 1 and 100, got {spec!r}", hint="e.g. -k 1,5,10")
    return ks


def load_locomo(path: Path, convs: Sequence[int] | None = None) -> list[Conversation]:
    """Read a LoCoMo JSON file (a list of samples with ``conversation`` and ``qa``)."""
    path = Path(path)
    if not path.is_file():
        raise OlavError(
            f"{path} does not exist", hint="Pass the LoCoMo JSON file, e.g. locomo_dev.json"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OlavError(
            f"{path} is not valid JSON: {exc}", hint="Pass a LoCoMo JSON file"
        ) from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(
        isinstance(s, dict) and isinstance(s.get("conversation"), dict) for s in data
    ):
        raise OlavError(
            f"{path} is not in the LoCoMo format",
            hint="Expected a list of samples with 'conversation' and 'qa' keys",
        )
    chosen = range(len(data)) if convs is None else convs
    missing = [i for i in chosen if i >= len(data)]
    if missing:
        raise OlavError(
            f"{path} has {len(data)} conversations; there is no conversation {missing[0]}",
            hint=f"Use --convs 0-{len(data) - 1}",
        )
    return [_conversation(data[i], i) for i in chosen]


def _conversation(sample: dict[str, Any], index: int) -> Conversation:
    conv = sample["conversation"]
    sample_id = str(sample.get("sample_id") or f"conv-{index}")
    sessions = sorted(
        (int(m.group(1)), key)
        for key in conv
        if (m := _SESSION.fullmatch(key)) and isinstance(conv[key], list)
    )
    turns: list[Turn] = []
    for num, key in sessions:
        raw_date = str(conv.get(f"{key}_date_time") or "")
        when = parse_session_date(raw_date)
        label = f"{when.day} {when:%B %Y}" if when else raw_date
        for pos, t in enumerate(conv[key]):
            if not isinstance(t, dict) or not t.get("dia_id"):
                continue
            turns.append(
                Turn(
                    dia_id=str(t["dia_id"]),
                    speaker=str(t.get("speaker") or "?"),
                    text=str(t.get("text") or ""),
                    session=num,
                    position=pos,
                    when=when,
                    date_label=label,
                    caption=(str(t["blip_caption"]) if t.get("blip_caption") else None),
                )
            )
    ids = {t.dia_id for t in turns}
    out = Conversation(sample_id, turns, [])
    for qa in sample.get("qa") or []:
        category = int(qa.get("category") or 0)
        if category == EXCLUDED_CATEGORY:
            out.excluded += 1
            continue
        raw = qa.get("evidence") or []
        if isinstance(raw, str):
            raw = [raw]
        evidence: list[str] = []
        for item in raw:
            for tok in _EVIDENCE_SPLIT.split(str(item)):
                if not tok:
                    continue
                if tok in ids:
                    if tok not in evidence:
                        evidence.append(tok)
                else:
                    out.dropped_ids.append(tok)
        if not evidence:
            out.no_evidence += 1
            continue
        out.questions.append(Question(str(qa.get("question") or ""), tuple(evidence), category))
    return out


# -- representations of a turn -----------------------------------------------------------------


def render_turn(t: Turn, *, date: bool = False) -> str:
    """``Speaker: text``, optionally after the session date: ``[8 May 2023] Speaker: text``."""
    text = f"{t.speaker}: {t.text}"
    return f"[{t.date_label}] {text}" if date else text


def window_texts(conv: Conversation, before: int, after: int, *, date: bool = False) -> list[str]:
    """Each turn with its neighbours in the same session (the turn itself stays in the middle)."""
    out: list[str] = []
    turns = conv.turns
    for i, t in enumerate(turns):
        lo, hi = i, i
        while lo > 0 and i - lo < before and turns[lo - 1].session == t.session:
            lo -= 1
        while hi + 1 < len(turns) and hi - i < after and turns[hi + 1].session == t.session:
            hi += 1
        body = "\n".join(render_turn(x) for x in turns[lo : hi + 1])
        out.append(f"[{t.date_label}]\n{body}" if date else body)
    return out


REPRESENTATIONS: dict[str, Callable[[Conversation], list[str]]] = {
    "turn": lambda c: [render_turn(t) for t in c.turns],
    "turn+date": lambda c: [render_turn(t, date=True) for t in c.turns],
    "win1": lambda c: window_texts(c, 1, 1),
    "win2": lambda c: window_texts(c, 2, 2),
    "win2+date": lambda c: window_texts(c, 2, 2, date=True),
}


# -- FTS tokenizer settings --------------------------------------------------------------------

# A general English stop list plus question words. LanceDB's default English list (on in
# olav's ICU index) already drops most of them, "what", "when", "how" and "did" included; this
# one adds the rest ("why", "would", "could", "whose", ...).
_STOP_TEXT = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom whose why will
with would you your yours yourself yourselves s t don ll ve re m d also ever kind type many much
might may must shall
"""
STOP_WORDS = sorted(set(_STOP_TEXT.split()))

FTS_CONFIGS: dict[str, dict[str, Any]] = {
    "icu": {"base_tokenizer": "icu"},  # what MemoryStore builds today (stem + stop words on)
    "icu-plain": {"base_tokenizer": "icu", "stem": False, "remove_stop_words": False},
    "simple": {"base_tokenizer": "simple"},
    "icu-stop": {"base_tokenizer": "icu", "custom_stop_words": STOP_WORDS},
}


# -- time expressions in a question ------------------------------------------------------------


def time_filter(question: str) -> str | None:
    """The period a question names (olav's own parser, olav.memory.timeq) as a pre-filter on
    ``created_at``, which holds the session date here; None when it names none."""
    from olav.memory.timeq import query_period

    period = query_period(question)
    return period.sql("created_at") if period else None


# -- experimental recipes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """RRF over rankings. A source is ``"<representation>/<kind>"`` where kind is ``vector``,
    ``fts:<config>``, or either with ``@time`` (the same search with the question's time
    window as pre-filter; no ranking when the question names no period)."""

    name: str
    description: str
    sources: tuple[tuple[str, float], ...]
    rrf_k: int = 60


def _r(name: str, description: str, *sources: tuple[str, float], rrf_k: int = 60) -> Recipe:
    return Recipe(name, description, tuple(sources), rrf_k)


# Measured on the LoCoMo dev split (760 questions, e5-small), R@1/R@5/R@10:
#   olav today 0.335/0.543/0.641; x-win1 0.370/0.622/0.722; x-win2-k20 0.362/0.649/0.750;
#   x-best 0.379/0.669/0.776; x-best-alldate 0.386/0.670/0.770; x-best-w 0.375/0.686/0.784.
V, F = "turn/vector", "turn/fts:icu"  # what olav's hybrid search fuses today
FD = "turn+date/fts:icu"  # the same FTS over "[8 May 2023] Speaker: text"
TIME = ("turn/vector@time", 1.0), ("turn+date/fts:icu@time", 1.0)

RECIPES: tuple[Recipe, ...] = (
    _r("x-rrf2", "control: olav's RRF(vector, FTS) recomputed from the rankings", (V, 1), (F, 1)),
    # (a) context windows: a second representation of each turn
    _r(
        "x-win1",
        "(a) RRF of 4: vector + FTS over the turn and over the turn ±1 neighbour",
        (V, 1),
        (F, 1),
        ("win1/vector", 1),
        ("win1/fts:icu", 1),
    ),
    _r(
        "x-win2",
        "(a) RRF of 4 with ±2 neighbours (same session)",
        (V, 1),
        (F, 1),
        ("win2/vector", 1),
        ("win2/fts:icu", 1),
    ),
    # (b) dates
    _r(
        "x-date",
        "(b) RRF(vector, FTS), both over '[8 May 2023] Speaker: text'",
        ("turn+date/vector", 1),
        (FD, 1),
    ),
    _r("x-date-fts", "(b) RRF(vector over the turn, FTS over the dated turn)", (V, 1), (FD, 1)),
    _r(
        "x-time",
        "(b) RRF(vector, FTS) + both again pre-filtered to the period the question names",
        (V, 1),
        (F, 1),
        ("turn/vector@time", 1),
        ("turn/fts:icu@time", 1),
    ),
    # fairness: the baselines over the same dated text that olav stores
    _r("x-bm25-date", "BM25 alone over '[8 May 2023] Speaker: text'", (FD, 1)),
    _r("x-vector-date", "vector alone over '[8 May 2023] Speaker: text'", ("turn+date/vector", 1)),
    # (c) tokenisation (BM25 alone; olav's ICU index already stems and drops stop words)
    _r("x-bm25-plain", "(c) BM25, ICU without stemming or stop words", ("turn/fts:icu-plain", 1)),
    _r(
        "x-bm25-simple",
        "(c) BM25, simple tokenizer, stemming, stop words",
        ("turn/fts:simple", 1),
    ),
    _r("x-bm25-stop", "(c) BM25, ICU + stemming + a longer stop list", ("turn/fts:icu-stop", 1)),
    # (d) fusion
    _r("x-rrf2-k20", "(d) olav's two rankings, RRF k=20", (V, 1), (F, 1), rrf_k=20),
    _r(
        "x-win2-k20",
        "(a+d) x-win2 with RRF k=20",
        (V, 1),
        (F, 1),
        ("win2/vector", 1),
        ("win2/fts:icu", 1),
        rrf_k=20,
    ),
    _r(
        "x-win2-k20-wv",
        "(a+d) x-win2-k20, window rankings weighted 1.5",
        (V, 1),
        (F, 1),
        ("win2/vector", 1.5),
        ("win2/fts:icu", 1.5),
        rrf_k=20,
    ),
    # combinations
    _r(
        "x-win2-fdate",
        "(a+b+d) x-win2-k20 with the session date in the FTS texts only",
        (V, 1),
        (FD, 1),
        ("win2/vector", 1),
        ("win2+date/fts:icu", 1),
        rrf_k=20,
    ),
    _r(
        "x-best",
        "(a+b+d) x-win2-fdate + vector/FTS pre-filtered to the question's period",
        (V, 1),
        (FD, 1),
        ("win2/vector", 1),
        ("win2+date/fts:icu", 1),
        *TIME,
        rrf_k=20,
    ),
    _r(
        "x-best-alldate",
        "(a+b+d) x-best with the date in every text (embedded too): no FTS-only column",
        ("turn+date/vector", 1),
        (FD, 1),
        ("win2+date/vector", 1),
        ("win2+date/fts:icu", 1),
        *TIME,
        rrf_k=20,
    ),
    _r(
        "x-best-w",
        "(d) x-best with the window rankings weighted 1.5 (weight chosen on this dev split)",
        (V, 1),
        (FD, 1),
        ("win2/vector", 1.5),
        ("win2+date/fts:icu", 1.5),
        *TIME,
        rrf_k=20,
    ),
    _r(
        "x-best-alldate-w",
        "(d) x-best-alldate with the window rankings weighted 1.5",
        ("turn+date/vector", 1),
        (FD, 1),
        ("win2+date/vector", 1.5),
        ("win2+date/fts:icu", 1.5),
        *TIME,
        rrf_k=20,
    ),
    _r(
        "x-best-k60",
        "(a+b) x-best with olav's RRF k=60",
        (V, 1),
        (FD, 1),
        ("win2/vector", 1),
        ("win2+date/fts:icu", 1),
        *TIME,
    ),
)


# -- embedding once, cached on disk ------------------------------------------------------------


class VectorCache:
    """Embeddings keyed by embedder name + kind (query/passage) + SHA-1 of the text.

    With ``directory=None`` nothing touches the disk (vectors are still computed once per run).
    """

    def __init__(self, embedder: Embedder, directory: Path | None, progress: Progress) -> None:
        self.embedder = embedder
        self.directory = directory
        self.progress = progress
        self._mem: dict[str, dict[str, np.ndarray]] = {}
        self.embedded = 0
        self.reused = 0

    def _file(self, kind: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.embedder.name)
        assert self.directory is not None
        return self.directory / f"{slug}.{kind}.npz"

    def _load(self, kind: str) -> dict[str, np.ndarray]:
        if kind in self._mem:
            return self._mem[kind]
        table: dict[str, np.ndarray] = {}
        if self.directory is not None and self._file(kind).is_file():
            try:
                with np.load(self._file(kind)) as npz:
                    keys, vecs = npz["keys"], npz["vecs"]
                if vecs.ndim == 2 and vecs.shape[1] == self.embedder.dim:
                    table = {str(k): v for k, v in zip(keys, vecs, strict=True)}
            except (OSError, ValueError, KeyError):
                table = {}  # a damaged cache is rebuilt
        self._mem[kind] = table
        return table

    def _save(self, kind: str) -> None:
        if self.directory is None:
            return
        table = self._mem[kind]
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self._file(kind).with_suffix(".tmp.npz")
        keys = np.array(list(table), dtype="U40")
        vecs = np.vstack(list(table.values())).astype(np.float32)
        np.savez(tmp, keys=keys, vecs=vecs)
        tmp.replace(self._file(kind))

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def get(self, texts: Sequence[str], kind: str, batch: int = 64) -> np.ndarray:
        table = self._load(kind)
        todo = list(dict.fromkeys(t for t in texts if self.key(t) not in table))
        self.reused += len(set(texts)) - len(todo)
        started = saved = time.monotonic()
        for i in range(0, len(todo), batch):
            chunk = todo[i : i + batch]
            if kind == "query":
                vecs = np.vstack([self.embedder.embed_query(t) for t in chunk])
            else:
                vecs = self.embedder.embed_passages(chunk)
            for text, vec in zip(chunk, vecs, strict=True):
                table[self.key(text)] = np.asarray(vec, dtype=np.float32)
            done = min(i + batch, len(todo))
            rate = done / max(time.monotonic() - started, 1e-6)
            self.progress(f"embedding {kind} texts: {done}/{len(todo)} ({rate:.0f}/s)")
            if time.monotonic() - saved > 60:  # an interrupted run keeps most of its work
                self._save(kind)
                saved = time.monotonic()
        if todo:
            self.embedded += len(todo)
            self._save(kind)
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.vstack([table[self.key(t)] for t in texts])


def default_cache_dir() -> Path:
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "olav" / "bench"


# -- scoring -----------------------------------------------------------------------------------


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of the evidence ids among the first k ranked ids."""
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def fuse(rankings: Sequence[tuple[Sequence[str], float]], rrf_k: int, depth: int) -> list[str]:
    """The product's fusion (olav.memory.fusion.rrf) over the first ``depth`` ids of each
    weighted ranking, as ``MemoryStore.search`` fuses its own candidates."""
    from olav.memory.fusion import rrf

    lists = {str(i): list(r[:depth]) for i, (r, _w) in enumerate(rankings)}
    weights = {str(i): w for i, (_r, w) in enumerate(rankings)}
    return rrf(lists, k=rrf_k, weights=weights).order


def _summarise(
    rankings: Sequence[Sequence[str]], questions: Sequence[Question], ks: Sequence[int]
) -> dict[str, Any]:
    per_cat: dict[int, list[int]] = {}
    for i, q in enumerate(questions):
        per_cat.setdefault(q.category, []).append(i)

    def block(idx: Sequence[int]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(idx)}
        for k in ks:
            vals = [recall_at(rankings[i], questions[i].evidence, k) for i in idx]
            out[f"R@{k}"] = round(float(np.mean(vals)), 4) if vals else None
        return out

    return {
        "overall": block(range(len(questions))),
        "by_category": {
            f"{c} {CATEGORY_NAMES.get(c, '?')}": block(idx) for c, idx in sorted(per_cat.items())
        },
    }


# -- the run -----------------------------------------------------------------------------------


def _records(conv: Conversation, texts: Sequence[str], vectors: np.ndarray) -> list[Any]:
    from olav.memory.schema import MemoryRecord

    fallback = datetime(2000, 1, 1, tzinfo=UTC)
    return [
        MemoryRecord(
            id=t.dia_id,
            text=text,
            category="fact",
            scope="global",
            origin="user",
            metadata={
                "conversation": conv.sample_id,
                "dia_id": t.dia_id,
                "speaker": t.speaker,
                "session": t.session,
                "session_date": t.date_label,
            },
            created_at=t.when or fallback,
            updated_at=t.when or fallback,
            vector=[float(x) for x in vec],
        )
        for t, text, vec in zip(conv.turns, texts, vectors, strict=True)
    ]


def _set_fts(store: Any, config: str) -> None:
    from lancedb.index import FTS

    store.table.create_index("text", config=FTS(**FTS_CONFIGS[config]), replace=True)


def _langgraph_rankings(
    conv: Conversation,
    texts: Sequence[str],
    vectors: np.ndarray,
    qvecs: np.ndarray,
    dim: int,
    k: int,
) -> list[list[str]]:
    """LangGraph's InMemoryStore with an embedding index over the same vectors.

    The index gets a LangChain ``Embeddings`` object wrapping the same embedder: documents are
    embedded as passages and questions as queries, exactly as olav does. (A bare
    ``list[str] -> list[list[float]]`` function would embed the questions as passages too.)
    """
    from langchain_core.embeddings import Embeddings
    from langgraph.store.memory import InMemoryStore

    by_text = {t: v for t, v in zip(texts, vectors, strict=True)}
    by_query = {q.text: v for q, v in zip(conv.questions, qvecs, strict=True)}

    class SameVectors(Embeddings):
        def embed_documents(self, docs: list[str]) -> list[list[float]]:
            return [by_text[d].tolist() for d in docs]

        def embed_query(self, text: str) -> list[float]:
            return list(by_query[text].tolist())

    store = InMemoryStore(index={"embed": SameVectors(), "dims": dim, "fields": ["text"]})
    ns = ("locomo", conv.sample_id)
    for t, text in zip(conv.turns, texts, strict=True):
        store.put(ns, t.dia_id, {"text": text, "session_date": t.date_label})
    return [[item.key for item in store.search(ns, query=q.text, limit=k)] for q in conv.questions]


def run_recall(
    path: Path,
    *,
    embedder: Embedder,
    convs: Sequence[int] | None = None,
    ks: Sequence[int] = (1, 5, 10),
    experiments: bool = True,
    recipes: Sequence[Recipe] | None = None,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    collect: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every method on the chosen conversations; returns the report as a JSON-safe dict.

    ``collect``, when given, receives the raw material for further analysis: ``questions``,
    ``rankings`` (per baseline method) and ``sources`` (per experimental ranking).
    """
    from olav.memory.store import MemoryStore

    say: Progress = progress or (lambda _msg: None)
    started = time.monotonic()
    ks = sorted(set(ks))
    kmax = ks[-1]
    depth = max(3 * kmax, 30)  # candidates per ranking, as MemoryStore.search(mode="hybrid")
    conversations = load_locomo(path, convs)
    questions = [q for c in conversations for q in c.questions]
    chosen = list(recipes if recipes is not None else RECIPES) if experiments else []

    # which rankings are needed: representation -> set of kinds
    needed: dict[str, set[str]] = {}
    for recipe in chosen:
        for source, _w in recipe.sources:
            rep, kind = source.split("/", 1)
            if rep not in REPRESENTATIONS:
                raise OlavError(f"recipe {recipe.name}: unknown representation {rep!r}")
            needed.setdefault(rep, set()).add(kind)
    needed.setdefault("turn", set())
    vector_reps = {
        rep for rep, kinds in needed.items() if rep == "turn" or any("vector" in k for k in kinds)
    }

    cache = VectorCache(embedder, cache_dir, say)
    t0 = time.monotonic()
    texts = {rep: {c.sample_id: REPRESENTATIONS[rep](c) for c in conversations} for rep in needed}
    qvecs_all = cache.get([q.text for q in questions], "query")
    vectors: dict[str, dict[str, np.ndarray]] = {}
    for rep in sorted(vector_reps, key=lambda r: r != "turn"):
        flat = [t for c in conversations for t in texts[rep][c.sample_id]]
        say(f"embedding representation {rep} ({len(flat)} passages)")
        mat = cache.get(flat, "passage")
        vectors[rep], pos = {}, 0
        for c in conversations:
            vectors[rep][c.sample_id] = mat[pos : pos + len(c.turns)]
            pos += len(c.turns)
    embed_s = time.monotonic() - t0

    rankings: dict[str, list[list[str]]] = {m: [] for m in BASELINES}
    sources: dict[str, list[list[str]]] = {}
    seconds: dict[str, float] = dict.fromkeys(BASELINES, 0.0)
    source_seconds: dict[str, float] = {}
    qpos = 0
    with tempfile.TemporaryDirectory(prefix="olav-bench-") as tmp:
        for ci, conv in enumerate(conversations):
            qv = qvecs_all[qpos : qpos + len(conv.questions)]
            qpos += len(conv.questions)
            say(
                f"conversation {conv.sample_id} ({ci + 1}/{len(conversations)}): "
                f"{len(conv.turns)} turns, {len(conv.questions)} questions"
            )
            for rep in sorted(needed, key=lambda r: r != "turn"):
                vecs = vectors[rep if rep in vectors else "turn"][conv.sample_id]
                store = MemoryStore(Path(tmp) / f"c{ci}" / rep.replace("+", "_"), embedder)
                store.upsert(_records(conv, texts[rep][conv.sample_id], vecs))
                store.maintain(force_optimize=True)
                if rep == "turn":
                    _baselines(store, conv, qv, kmax, rankings, seconds)
                    _olav(Path(tmp) / f"c{ci}" / "olav", conv, qv, cache, kmax, rankings, seconds)
                    t1 = time.monotonic()
                    rankings["langgraph"].extend(
                        _langgraph_rankings(
                            conv, texts["turn"][conv.sample_id], vecs, qv, embedder.dim, kmax
                        )
                    )
                    seconds["langgraph"] += time.monotonic() - t1
                kinds = needed[rep]
                for kind in sorted(kinds, key=lambda k: (k.split("@")[0] != f"fts:{OLAV_FTS}", k)):
                    base, _, timed = kind.partition("@")
                    if base.startswith("fts:"):
                        cfg = base[4:]
                        if cfg not in FTS_CONFIGS:
                            raise OlavError(f"unknown FTS config {cfg!r}")
                        _set_fts(store, cfg)
                    out = sources.setdefault(f"{rep}/{kind}", [])
                    t1 = time.monotonic()
                    for q, vec in zip(conv.questions, qv, strict=True):
                        where = time_filter(q.text) if timed else None
                        if timed and where is None:
                            out.append([])
                            continue
                        mode = "vector" if base == "vector" else "fts"
                        hits = store.search(
                            q.text, mode=mode, k=depth, query_vector=vec, where=where
                        )
                        out.append([h.record.id for h in hits])
                    key = f"{rep}/{kind}"
                    source_seconds[key] = source_seconds.get(key, 0.0) + time.monotonic() - t1

    if collect is not None:
        collect.update(questions=questions, rankings=rankings, sources=sources, depth=depth)
    methods: dict[str, Any] = {}
    labels = {
        "bm25": "BM25 (LanceDB FTS, olav's ICU index)",
        "vector": "vector search alone",
        "langgraph": "LangGraph InMemoryStore (embedding index)",
        "olav": "olav default: dated turns with ±2 context, hybrid search (up to 6 rankings)",
    }
    for m in BASELINES:
        methods[m] = {
            "label": labels[m],
            "experimental": False,
            **_summarise(rankings[m], questions, ks),
            "search_ms_per_question": round(1000 * seconds[m] / max(len(questions), 1), 2),
        }
    for recipe in chosen:
        fused = [
            fuse([(sources[s][i], w) for s, w in recipe.sources], recipe.rrf_k, depth)
            for i in range(len(questions))
        ]
        methods[recipe.name] = {
            "label": recipe.description,
            "experimental": True,
            "sources": [{"source": s, "weight": w} for s, w in recipe.sources],
            "rrf_k": recipe.rrf_k,
            **_summarise(fused, questions, ks),
            # the searches one after another (olav's hybrid search runs its two concurrently)
            "search_ms_per_question": round(
                1000 * sum(source_seconds[s] for s, _w in recipe.sources) / max(len(questions), 1),
                2,
            ),
        }
    timed_q = sum(1 for q in questions if time_filter(q.text))
    return {
        "dataset": "locomo",
        "path": str(path),
        "conversations": [c.sample_id for c in conversations],
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "excluded_category_5": sum(c.excluded for c in conversations),
        "skipped_no_evidence": sum(c.no_evidence for c in conversations),
        "dropped_evidence_ids": [i for c in conversations for i in c.dropped_ids],
        "questions_with_time_window": timed_q,
        "embedder": embedder.name,
        "ks": list(ks),
        "candidates_per_ranking": depth,
        "methods": methods,
        "embedding": {
            "seconds": round(embed_s, 1),
            "embedded": cache.embedded,
            "reused_from_cache": cache.reused,
            "cache": str(cache_dir) if cache_dir else None,
        },
        "seconds": round(time.monotonic() - started, 1),
    }


def _baselines(
    store: Any,
    conv: Conversation,
    qv: np.ndarray,
    k: int,
    rankings: dict[str, list[list[str]]],
    seconds: dict[str, float],
) -> None:
    for mode, name in (("fts", "bm25"), ("vector", "vector")):
        t1 = time.monotonic()
        for q, vec in zip(conv.questions, qv, strict=True):
            hits = store.search(q.text, mode=mode, k=k, query_vector=vec)
            rankings[name].append([h.record.id for h in hits])
        seconds[name] += time.monotonic() - t1


def olav_records(conv: Conversation) -> list[Any]:
    """The conversation as olav stores it (olav.memory.context.conversation_records)."""
    from olav.memory.context import Utterance, conversation_records

    turns = [Utterance(t.dia_id, t.speaker, t.text, t.session, t.when) for t in conv.turns]
    return conversation_records(turns, metadata={"conversation": conv.sample_id})


def _olav(
    path: Path,
    conv: Conversation,
    qv: np.ndarray,
    cache: VectorCache,
    k: int,
    rankings: dict[str, list[list[str]]],
    seconds: dict[str, float],
) -> None:
    """olav's default: the product's records (dated text, context window, event time) and
    ``MemoryStore.search(mode="hybrid")``, with vectors from the cache."""
    from olav.memory.store import MemoryStore

    records = olav_records(conv)
    texts = cache.get([r.text for r in records], "passage")
    with_ctx = [r for r in records if r.context]
    contexts = cache.get([str(r.context) for r in with_ctx], "passage")
    for r, v in zip(records, texts, strict=True):
        r.vector = [float(x) for x in v]
    for r, v in zip(with_ctx, contexts, strict=True):
        r.context_vector = [float(x) for x in v]
    store = MemoryStore(path, cache.embedder)
    store.upsert(records)
    store.maintain(force_optimize=True)
    t1 = time.monotonic()
    for q, vec in zip(conv.questions, qv, strict=True):
        hits = store.search(q.text, mode="hybrid", k=k, query_vector=vec)
        rankings["olav"].append([h.record.id for h in hits])
    seconds["olav"] += time.monotonic() - t1


def best_method(report: dict[str, Any], k: int | None = None) -> str:
    """The method with the highest R@k (the largest k by default), ties to R@ smaller ks."""
    ks = sorted(report["ks"], reverse=True)
    if k is not None:
        ks = [k, *[x for x in ks if x != k]]

    def key(name: str) -> tuple[float, ...]:
        o = report["methods"][name]["overall"]
        return tuple(o[f"R@{x}"] or 0.0 for x in ks)

    return max(report["methods"], key=key)


def method_names(report: dict[str, Any], experimental: bool) -> Iterable[str]:
    return [m for m, v in report["methods"].items() if v["experimental"] == experimental]


def markdown_recall(report: dict[str, Any]) -> str:
    """The recall report as Markdown tables: baselines, olav by category, experiments."""
    ks = report["ks"]
    head = "| method | " + " | ".join(f"R@{k}" for k in ks) + " | ms/question | what |"
    rule = "|---|" + "---|" * (len(ks) + 2)

    def row(name: str) -> str:
        m = report["methods"][name]
        vals = " | ".join(
            "-" if m["overall"][f"R@{k}"] is None else f"{m['overall'][f'R@{k}']:.3f}" for k in ks
        )
        bold = "**" if name == "olav" else ""
        return f"| {bold}{name}{bold} | {vals} | {m['search_ms_per_question']} | {m['label']} |"

    lines = [
        f"LoCoMo conversations {', '.join(report['conversations'])}: {report['turns']} turns, "
        f"{report['questions']} questions ({report['excluded_category_5']} adversarial "
        f"excluded), embedder `{report['embedder']}`, {report['candidates_per_ranking']} "
        "candidates per ranking.",
        "",
        head,
        rule,
        *(row(m) for m in BASELINES),
        "",
        "olav by question category:",
        "",
        "| category | questions | " + " | ".join(f"R@{k}" for k in ks) + " |",
        "|---|---|" + "---|" * len(ks),
    ]
    olav = report["methods"]["olav"]
    for cat, block in [*olav["by_category"].items(), ("all", olav["overall"])]:
        vals = " | ".join("-" if block[f"R@{k}"] is None else f"{block[f'R@{k}']:.3f}" for k in ks)
        lines.append(f"| {cat} | {block['n']} | {vals} |")
    extra = list(method_names(report, experimental=True))
    if extra:
        lines += ["", "Experimental recipes (rankings fused by RRF; not olav's default):", ""]
        lines += [head, rule, *(row(m) for m in extra)]
    return "\n".join(lines) + "\n"
