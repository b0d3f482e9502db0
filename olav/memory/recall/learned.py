"""The learned relevance decision for guides: a logistic model over the signals recall computes.

A guide is injected when the model's probability that it applies to the request clears the
model's threshold. The model is fitted on labelled (request, guide) pairs of the relevance
corpus (``benchmarks/data/relevance``: agents for ten domains, English, Chinese and both) by
``make relevance-model`` (:mod:`benchmarks.relevance_model`), deterministically (Newton's
method on an L2-regularised log loss, no random start), and ships as JSON beside this file.

Why a logistic model and not trees or a cross-encoder: it needs nothing but numpy, which recall
already loads; it costs one dot product per candidate (microseconds); its decision splits into
one contribution per feature, which is what ``olav memory why`` shows; and on the corpus,
leave-one-agent-out, it is as good as anything else measured on these signals
(docs/benchmarks.md, section 2). No package ships a multilingual cross-encoder's weights.

Every feature is relative to the request or its candidates, so the model carries over to a
table it never saw:

- the vector: e5's margin over the background, its cosine, the memory's level, its gap to the
  best and to the next candidate, its vector rank;
- the words: whether full text found it, its rank and its BM25 score against the best; the
  guide's keywords in the request, each weighted by how rare it is among the candidates (IDF:
  ``router-id`` outweighs ``convention``); the intent's words in the request; the request's
  words and CJK character pairs found in the guide, IDF-weighted;
- the request: its language and length;
- the second opinion (``memory.second_opinion``, the bundled USE encoder), when on: its margin,
  its gap to the best, and both encoders' standardised margins. Without it a model fitted
  without these features decides.

Lessons, precedents and patterns keep the calibrated floors (olav.memory.recall.relevance): the
corpus labels guides. ``memory.relevance_model: on`` turns it on; it is off by default while it
loses to the floors on olav's own golden suite (unrelated requests empty 0.906 against 0.962).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from olav.memory.recall.relevance import QueryWords, Signals

MODEL_FILE = Path(__file__).parent / "data" / "relevance-model.json"
EMBEDDER = "e5:multilingual-e5-small"  # the margins the model was fitted on

BASE = (
    "margin",
    "cosine",
    "level",
    "gap_to_best",
    "gap_to_next",
    "vector_rank",
    "text_found",
    "text_rank",
    "bm25",
    "keywords",
    "keyword_idf",
    "keyword_idf_max",
    "specific",
    "agree",
    "intent_words",
    "words_in_guide",
    "latin_in_guide",
    "cjk_in_guide",
    "en",
    "zh",
    "mixed",
    "length",
    "margin_zh",
    "margin_en",
)
SECOND = ("second_margin", "second_gap", "second_z", "e5_z", "both_z")

# what each feature is called when it carries a decision (olav memory why)
SAID = {
    "margin": "vector margin",
    "cosine": "cosine",
    "level": "background level",
    "gap_to_best": "gap to the best",
    "gap_to_next": "lead over the next",
    "vector_rank": "vector rank",
    "text_found": "full-text match",
    "text_rank": "full-text rank",
    "bm25": "BM25",
    "keywords": "keywords",
    "keyword_idf": "rare keywords",
    "keyword_idf_max": "rarest keyword",
    "specific": "specific keywords",
    "agree": "first by both",
    "intent_words": "intent's words",
    "words_in_guide": "request's words in it",
    "latin_in_guide": "request's Latin words in it",
    "cjk_in_guide": "request's Chinese in it",
    "en": "English",
    "zh": "Chinese",
    "mixed": "mixed language",
    "length": "request length",
    "margin_zh": "margin (Chinese)",
    "margin_en": "margin (English)",
    "second_margin": "second encoder",
    "second_gap": "second encoder's gap",
    "second_z": "second encoder, standardised",
    "e5_z": "e5, standardised",
    "both_z": "both encoders",
}

_CJK = re.compile(r"[\u3400-\u9fff]+")
_LATIN = re.compile(r"[a-z0-9][a-z0-9_.\-]+")
_STOP_WORDS = (
    "the and for are this that with you your how what when where which who why can "
    "should does our from have has was were will would could into not but all any get"
)
_STOP = frozenset(_STOP_WORDS.split())


@functools.lru_cache(maxsize=8192)
def latin_words(text: str) -> frozenset[str]:
    """Lower-case Latin words of three characters or more, common function words left out."""
    return frozenset(w for w in _LATIN.findall(text.lower()) if len(w) >= 3 and w not in _STOP)


@functools.lru_cache(maxsize=8192)
def cjk_pairs(text: str) -> frozenset[str]:
    """Every two neighbouring CJK characters: Chinese words are mostly two characters."""
    return frozenset(run[i : i + 2] for run in _CJK.findall(text) for i in range(len(run) - 1))


@dataclass(frozen=True)
class Candidate:
    """What the features read of one guide candidate."""

    text: str
    intent: str
    signals: Signals
    distance: float
    fts_score: float | None
    vector_rank: int | None
    fts_rank: int | None
    second: float | None = None  # the second opinion's margin


def features(query: str, lang: str, pool: Sequence[Candidate], *, second: bool) -> np.ndarray:
    """One row per candidate of ``pool`` (the request's guide candidates, each with a margin),
    in ``BASE`` (+ ``SECOND``) order."""
    n = len(pool)
    width = len(BASE) + (len(SECOND) if second else 0)
    if n == 0:
        return np.zeros((0, width))
    q_latin, q_cjk = latin_words(query), cjk_pairs(query)
    lows = [c.text.lower() for c in pool]
    latins = [latin_words(c.text) for c in pool]
    pairs = [cjk_pairs(c.text) for c in pool]

    def idf(df: int) -> float:
        return math.log((n + 1) / (df + 0.5))

    idf_latin = {w: idf(sum(w in t for t in latins)) for w in q_latin}
    idf_cjk = {p: idf(sum(p in t for t in pairs)) for p in q_cjk}
    q_weight = sum(idf_latin.values()) + sum(idf_cjk.values()) + 1e-6
    margins = np.array([c.signals.margin or 0.0 for c in pool])
    fts = np.array([c.fts_score or 0.0 for c in pool])
    best_fts = float(fts.max()) if fts.max() > 0 else 1.0
    words = QueryWords.of(query)
    length = math.log1p(len(query))
    en, zh, mixed = float(lang == "en"), float(lang == "zh"), float(lang == "mixed")
    if second:
        s = np.array([c.second or 0.0 for c in pool])
        s_z = _z(s)
        e_z = _z(margins)
    rows = []
    for i, c in enumerate(pool):
        m = float(margins[i])
        others = np.delete(margins, i)
        found = [k.lower() for k in c.signals.keywords]
        k_idf = [idf(sum(k in t for t in lows)) for k in found]
        latin = sum(idf_latin[w] for w in q_latin & latins[i])
        cjk = sum(idf_cjk[p] for p in q_cjk & pairs[i])
        intent = {w for w in c.intent.lower().split("_") if w and w not in _STOP}
        row = [
            m,
            1.0 - c.distance / 2.0,
            c.signals.level or 0.0,
            m - float(margins.max()),
            m - (float(others.max()) if len(others) else 0.0),
            1.0 / c.vector_rank if c.vector_rank else 0.0,
            float(c.fts_rank is not None),
            1.0 / c.fts_rank if c.fts_rank else 0.0,
            (c.fts_score or 0.0) / best_fts,
            float(len(found)),
            sum(k_idf),
            max(k_idf, default=0.0),
            float(c.signals.specific),
            float(c.signals.agree),
            sum(words.has(w) for w in intent) / max(1, len(intent)),
            (latin + cjk) / q_weight,
            latin / q_weight,
            cjk / q_weight,
            en,
            zh,
            mixed,
            length,
            m * zh,
            m * en,
        ]
        if second:
            row += [
                float(s[i]),
                float(s[i] - s.max()),
                float(s_z[i]),
                float(e_z[i]),
                float(s_z[i] + e_z[i]),
            ]
        rows.append(row)
    return np.array(rows, dtype=np.float64)


def _z(values: np.ndarray) -> np.ndarray:
    if len(values) < 2:
        return np.zeros_like(values)
    return (values - values.mean()) / (values.std() + 1e-9)


@dataclass(frozen=True)
class Model:
    """A fitted logistic decision: standardise, weigh, squash; inject at ``threshold``."""

    names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    threshold: float
    fitted_on: dict[str, Any]

    @property
    def second(self) -> bool:
        return SECOND[0] in self.names

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        return _sigmoid(self.logits(x))

    def logits(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights + self.bias

    def carried(self, row: np.ndarray, top: int = 3) -> list[tuple[str, float]]:
        """The features that moved this row's decision most, each with its part of the
        log-odds (positive: toward injecting), largest first."""
        parts = (row - self.mean) / self.scale * self.weights
        order = np.argsort(-np.abs(parts), kind="stable")[:top]
        return [(self.names[j], round(float(parts[j]), 2)) for j in order]

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.names),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weights": [round(float(v), 6) for v in self.weights],
            "bias": round(self.bias, 6),
            "threshold": round(self.threshold, 4),
            "fitted_on": self.fitted_on,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Model:
        names = tuple(raw["features"])
        mean, scale, weights = (
            np.array(raw[k], dtype=np.float64) for k in ("mean", "scale", "weights")
        )
        if not len(mean) == len(scale) == len(weights) == len(names):
            raise ValueError("mean, scale and weights must have one value per feature")
        fitted = raw.get("fitted_on", {})
        return cls(names, mean, scale, weights, float(raw["bias"]), float(raw["threshold"]), fitted)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


def fit(x: np.ndarray, y: np.ndarray, *, l2: float = 1.0, rounds: int = 30) -> Model:
    """The logistic model of labels ``y`` on rows ``x`` (Newton's method, L2 penalty ``l2`` on
    the standardised weights): the same data gives the same model, bit for bit."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = l2 * np.eye(z.shape[1])
    penalty[-1, -1] = 0.0  # the bias is not shrunk
    for _ in range(rounds):
        p = _sigmoid(z @ w)
        grad = z.T @ (p - y) + penalty @ w
        hess = z.T @ (z * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    names = BASE + (SECOND if x.shape[1] > len(BASE) else ())
    return Model(names, mean, scale, w[:-1], float(w[-1]), 0.5, {})


@functools.cache
def shipped() -> dict[str, Model]:
    """The shipped models by variant: ``second`` (with the second opinion's features) and
    ``plain``; empty when the file is missing or unreadable (guides go back to the floors)."""
    try:
        raw = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
        return {k: Model.from_json(v) for k, v in raw["models"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def model_for(embedder_name: str, *, second: bool) -> Model | None:
    """The shipped model for this embedder, with or without the second opinion; None for an
    embedder it was not fitted on (its margins are on another scale: the floors decide)."""
    if embedder_name != EMBEDDER:
        return None
    return shipped().get("second" if second else "plain")


def decide(model: Model, query: str, lang: str, pool: Sequence[Candidate]) -> None:
    """Fill in every pool candidate's ``p``, ``relevant`` and ``reason`` from the model."""
    x = features(query, lang, pool, second=model.second)
    if not len(x):
        return
    probs = model.probabilities(x)
    for c, row, p in zip(pool, x, probs, strict=True):
        sig = c.signals
        sig.p, sig.threshold = float(p), model.threshold
        sig.carried = tuple(model.carried(row))
        sig.relevant = sig.p >= model.threshold
        sig.floor = None
        sign = ">=" if sig.relevant else "<"
        parts = ", ".join(f"{SAID.get(n, n)} {v:+.1f}" for n, v in sig.carried)
        sig.reason = f"learned: p {sig.p:.2f} {sign} {model.threshold:g} ({parts})"


def wanted(config: Any) -> bool:
    """Whether the settings leave guides to the learned model (``memory.relevance_model: on``;
    off by default until it holds on the golden suite too: docs/benchmarks.md, section 2)."""
    try:
        return str(config["memory.relevance_model"]).strip().lower() == "on"
    except KeyError:  # settings given in part (tests, benchmarks): the default
        return False


def pool_of(
    query: str, lang: str, cands: Sequence[Any], lesson_margins: Any = None, *, second: bool
) -> tuple[list[Any], list[Candidate]] | None:
    """The Recaller's guide candidates with a margin, and what the features read of each
    (with the second opinion's margins when ``second``); None when the model needs those
    margins and the second encoder gave none (it failed, or it is off)."""
    guides = [
        c for c in cands if c.hit.record.origin == "directive" and c.signals.margin is not None
    ]
    margins: list[float | None] = [None] * len(guides)
    if second and guides:
        got = None
        if lesson_margins is not None:
            got = lesson_margins.margins(query, lang, [c.hit.record.text for c in guides])
        if got is None:
            return None
        margins = [float(m) for m in got]
    pool = [
        Candidate(
            text=c.hit.record.text,
            intent=str(c.hit.record.metadata.get("intent") or c.hit.record.id),
            signals=c.signals,
            distance=c.hit.distance or 0.0,
            fts_score=c.hit.fts_score,
            vector_rank=c.hit.vector_rank,
            fts_rank=c.hit.fts_rank,
            second=m,
        )
        for c, m in zip(guides, margins, strict=True)
    ]
    return guides, pool


def decide_candidates(
    model: Model, query: str, lang: str, cands: Sequence[Any], lesson_margins: Any = None
) -> None:
    """The learned decision for the Recaller's guide candidates; the other candidates keep
    the floors' decision, and so does every candidate of a request whose second-opinion
    margins the model needs but cannot have."""
    found = pool_of(query, lang, cands, lesson_margins, second=model.second)
    if found is not None and found[1]:
        decide(model, query, lang, found[1])


def described(model: Model | None) -> str:
    """What decides guides, for the title of ``olav memory why`` and the console's Why page
    ("" when the floors do)."""
    if model is None:
        return ""
    return f"guides: learned model, threshold {model.threshold:g} · "
