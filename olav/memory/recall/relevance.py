"""Is a memory relevant to this request? The decision AutoRecall makes for every candidate.

The nearest memories of a request are not necessarily relevant: e5 packs its similarities
into a narrow band, and any Chinese request lies near any Chinese memory. So the raw
similarity is not compared with a fixed number. It is first set against a *background*:
a fixed list of generic requests (chit-chat, general knowledge, other domains, in English,
Chinese and both, ``data/background.txt``). For a memory ``m``::

    level(m)  = mean of the K highest similarities between m and the background requests
    margin(q, m) = cos(q, m) - level(m)

A memory that lies near every request (a hub) has a high level and needs a closer request.
A memory is relevant when its margin clears a floor. Lower floors apply when the request
also names it in words: one of a guide's ``keywords`` as a whole word (Latin) or as a term
(CJK), or the memory is first in both the vector and the full-text ranking; the lowest when
the words are *specific*: two keywords, or one term that generic requests and everyday
English do not use (several words, an acronym or a name, a CJK term of three characters or
more, a word absent from both the background and an everyday English word list: "crontab"
and "Kafka" are specific, "rotate" and "Python" are not). A CJK compound also counts when
the request writes its two halves apart ("故障复盘" in "故障的复盘"), though not as specific
on its own.
Lessons have floors of their own. The floors are calibrated per embedder on the calibration
half of the golden suite (``olav bench golden``) and reported on the other half.

Without a vector (full-text recall when the embedder is down) only words count.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from olav.core.fsutil import atomic_write_bytes
from olav.memory.policy import Floors

DATA = Path(__file__).parent / "data"
BACKGROUND = DATA / "background.txt"
EVERYDAY = DATA / "everyday-words.txt.gz"
LEVEL_K = 10  # the background level of a memory: mean of its K nearest generic requests
# the generic requests a memory's level is measured against, by the language of the request:
# e5 puts any two Chinese texts nearer than a Chinese and an English one, so a Chinese
# request is compared with how near the memory comes to other Chinese requests
LEVEL_LANGUAGES: dict[str, tuple[str, ...]] = {
    "en": ("en",),
    "zh": ("zh", "mixed"),
    "mixed": ("zh", "mixed"),
}
_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]{2,}")
_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_TOKEN = re.compile(r"[\w-]+")
_TITLE = re.compile(r"[A-Z][a-z]+")


@dataclass
class Signals:
    """What the decision saw for one candidate (shown by ``olav memory why``)."""

    margin: float | None = None
    level: float | None = None
    keywords: tuple[str, ...] = ()
    specific: bool = False  # two keywords, or one that generic requests do not use
    agree: bool = False  # first in both the vector and the full-text ranking
    text_match: bool = False  # found by the full-text search at all
    second: float | None = None  # a lesson's margin by the second opinion (already in margin)
    relevant: bool = False
    reason: str = ""
    floor: float | None = None  # the floor its evidence earned (None: decided by words alone)
    # a second look (olav.memory.recall.rerank_judge): the reranker's score in [0, 1], and the chat
    # model's verdict on a close call; None when not asked
    rerank: float | None = None
    judged: bool | None = None
    vouched: bool = False  # relevant on the reranker's or the judge's word, not the margin
    # the learned decision (olav.memory.recall.learned), for a guide: its probability, the
    # model's threshold, and the features that carried it (name, part of the log-odds)
    p: float | None = None
    threshold: float | None = None
    carried: tuple[tuple[str, float], ...] = ()

    @property
    def own_margin(self) -> float | None:
        """The embedder's own margin: ``margin`` with the mean with ``second`` undone."""
        if self.margin is None or self.second is None:
            return self.margin
        return 2 * self.margin - self.second

    @property
    def words(self) -> bool:
        return bool(self.keywords) or self.agree

    def to_json(self) -> dict[str, Any]:
        return {
            "margin": None if self.margin is None else round(self.margin, 4),
            "level": None if self.level is None else round(self.level, 4),
            "keywords": list(self.keywords),
            "specific": self.specific,
            "agree": self.agree,
            "text_match": self.text_match,
            "second": None if self.second is None else round(self.second, 4),
            "relevant": self.relevant,
            "reason": self.reason,
            "floor": self.floor,
            # only when asked: without a reranker or judge the JSON stays as it was
            **({} if self.rerank is None else {"rerank": round(self.rerank, 4)}),
            **({} if self.judged is None else {"judged": self.judged}),
            **(
                {}
                if self.p is None
                else {
                    "p": round(self.p, 4),
                    "threshold": self.threshold,
                    "carried": [{"feature": n, "logit": v} for n, v in self.carried],
                }
            ),
        }


def keywords_of(record: Any) -> list[str]:
    """A memory's keywords: a guide's own; for a captured operation or a distilled pattern,
    the words of its tool's name (``register_service``: register, service); for a lesson,
    the words of the tools it names ("when take_snapshot fails": take, snapshot)."""
    own = record.metadata.get("keywords")
    if isinstance(own, list):
        return [str(k) for k in own]
    if record.category == "reflection":
        tools = _SNAKE.findall(record.text)
    else:
        tools = [str(record.metadata.get("tool") or "")]
    # db_query is shared by every SQL precedent: its name is no evidence
    parts = {p for t in tools if t != "db_query" for p in t.split("_") if len(p) >= 3}
    return sorted(parts)


@dataclass(frozen=True)
class QueryWords:
    """A request split once for every keyword test (the recall hot path)."""

    low: str
    tokens: frozenset[str]  # runs of word characters and hyphens: what "a whole word" is
    joined: frozenset[str]  # two neighbouring words written as one: "back up" -> "backup"

    @classmethod
    def of(cls, query: str) -> QueryWords:
        low = query.lower()
        words = re.findall(r"[a-z0-9]+", low)
        return cls(
            low,
            frozenset(re.findall(r"[\w-]+", low)),
            frozenset(a + b for a, b in itertools.pairwise(words)),
        )

    def has(self, keyword: str) -> bool:
        word = keyword.strip().lower()
        if len(word) < 2:
            return False
        if _CJK.search(word):
            return word in self.low or self.has_parts(word)
        if word in self.tokens or word in self.joined:
            return True
        if _TOKEN.fullmatch(word):  # a single word that is not there
            return False
        return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", self.low) is not None

    def has_whole(self, keyword: str) -> bool:
        """The keyword as written (a CJK one not only by its parts)."""
        word = keyword.strip().lower()
        return word in self.low if _CJK.search(word) else self.has(word)

    def has_parts(self, word: str) -> bool:
        """A CJK compound of four or more characters written apart: both halves, each of two
        characters or more, in order ("日志切割" in "日志文件越来越大，怎么按天切割"; "故障复盘"
        in "故障的复盘报告"). Chinese separates a compound's words with particles and objects."""
        if len(word) < 4 or not all(_CJK.match(ch) for ch in word):
            return False
        for cut in range(2, len(word) - 1):
            at = self.low.find(word[:cut])
            if at >= 0 and self.low.find(word[cut:], at + cut) >= 0:
                return True
        return False


def keyword_hits(query: str | QueryWords, keywords: Any) -> tuple[str, ...]:
    """The keywords the request contains: Latin ones as whole words (a compound also as its
    two halves: "backup" in "back up", "setup" in "set up"), CJK ones as terms."""
    if not isinstance(keywords, list | tuple):
        return ()
    words = query if isinstance(query, QueryWords) else QueryWords.of(query)
    return tuple(str(k) for k in keywords if words.has(str(k)))


def specific_keywords(found: tuple[str, ...], query: str | QueryWords | None = None) -> bool:
    """Two keywords, or one that is a term rather than an everyday word: several words, an
    acronym or a name, a flag or a path, a CJK term of three characters or more (written
    whole in the request, when it is given), or a lower-case word that neither generic
    requests nor everyday English use ("crontab", "nginx"; not "rotate" or "patch")."""
    if len(found) >= 2:
        return True
    words = QueryWords.of(query) if isinstance(query, str) else query
    return any(_specific(k) and (words is None or words.has_whole(k)) for k in found)


def _specific(keyword: str) -> bool:
    word = keyword.strip()
    if _CJK.search(word):
        return len(word) >= 3
    if _TITLE.fullmatch(word) and everyday(word.lower()):
        return False  # a capitalised everyday word ("Active", "Python"), not a name
    if " " in word or word.lower() != word or re.search(r"[^a-zA-Z]", word):
        return True  # several words, an acronym or a name, a flag or a path
    return word not in background_words() and not everyday(word)


def everyday(word: str) -> bool:
    """An everyday English word (``data/everyday-words.txt.gz``), a plural included."""
    return _listed(word) or (word.endswith("s") and _listed(word[:-1]))


def _listed(word: str) -> bool:
    words = everyday_words()
    at = bisect.bisect_left(words, word)
    return at < len(words) and words[at] == word


def floor_for(signals: Signals, *, lesson: bool, floors: Floors) -> tuple[float, str]:
    """The floor this candidate's evidence earns, and what earned it."""
    if signals.specific:
        kws = ", ".join(repr(k) for k in signals.keywords[:3])
        alone = floors.lesson if lesson else floors.directive
        return min(alone, floors.specific), f"keywords {kws}"
    if lesson:
        if signals.text_match:
            return min(floors.lesson, floors.lesson_words), "full-text match"
        return floors.lesson, ""
    if signals.keywords:
        return min(floors.directive, floors.directive_words), f"keyword {signals.keywords[0]!r}"
    if signals.agree:
        return min(floors.directive, floors.directive_words), "first by vector and by words"
    return floors.directive, ""


def decide(signals: Signals, *, lesson: bool, floors: Floors) -> Signals:
    """Fill in ``relevant`` and ``reason`` from the signals and the floors."""
    if signals.margin is None:  # no vector: words alone decide
        ok = signals.agree if lesson else signals.words
        signals.relevant = ok
        signals.reason = "named in words (no vector)" if ok else "no vector and no word match"
        return signals
    floor, evidence = floor_for(signals, lesson=lesson, floors=floors)
    m = signals.margin
    signals.floor = floor
    signals.relevant = m >= floor
    sign = ">=" if signals.relevant else "<"
    signals.reason = (
        f"{evidence}, " if evidence else ""
    ) + f"margin {_shown(m, floor)} {sign} {floor:g}"
    if signals.second is not None:
        own, second = signals.own_margin, signals.second
        signals.reason += f" (mean of {own:.3f} and {second:.3f} by a second encoder)"
    return signals


def _shown(margin: float, floor: float) -> str:
    """The margin to 3 decimals, or to as many more as it takes to differ from the floor
    (0.0099 is not "0.010 < 0.01")."""
    for places in (3, 4, 5, 6):
        text = f"{margin:.{places}f}"
        if float(text) != floor or margin == floor:
            return text
    return f"{margin:.6f}"


# -- the background --------------------------------------------------------------------------


@functools.cache
def background_texts() -> list[str]:
    lines = BACKGROUND.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@functools.cache
def background_languages() -> list[str]:
    return [language(text) for text in background_texts()]


@functools.cache
def everyday_words() -> list[str]:
    """The everyday words, sorted (the file is written sorted, after its notice): a few ms
    to read, where a set of them would take tens of ms on a cold command."""
    import gzip

    with gzip.open(EVERYDAY, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return [w for w in lines[start:] if w]


@functools.cache
def background_words() -> frozenset[str]:
    """Latin words of the generic requests, lower-cased."""
    return frozenset(re.findall(r"[a-z]+", " ".join(background_texts()).lower()))


def language(text: str) -> str:
    """``zh`` (Chinese only), ``mixed`` (Chinese and Latin words) or ``en``."""
    if not _CJK.search(text):
        return "en"
    return "mixed" if _LATIN.search(text) else "zh"


class Background:
    """The generic requests embedded with one embedder, and the language of each."""

    def __init__(self, vectors: np.ndarray, languages: list[str] | None = None) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._by_lang: dict[str, np.ndarray] = {}
        if languages is not None and len(languages) == len(self.vectors):
            langs = np.array(languages)
            for lang, group in LEVEL_LANGUAGES.items():
                rows = self.vectors[np.isin(langs, group)]
                if len(rows) >= LEVEL_K:
                    self._by_lang[lang] = np.ascontiguousarray(rows)

    def level(self, vectors: np.ndarray, lang: str | None = None) -> np.ndarray:
        """Per row: the mean of its LEVEL_K highest similarities to the background, or to
        the part of it in the request's language ``lang`` (``LEVEL_LANGUAGES``)."""
        bg = self._by_lang.get(lang, self.vectors) if lang else self.vectors
        sims = np.atleast_2d(vectors) @ bg.T
        k = min(LEVEL_K, sims.shape[1])
        return np.partition(sims, -k, axis=1)[:, -k:].mean(axis=1)


_LOADED: dict[str, Background] = {}
_LOCK = threading.Lock()


def _key(embedder_name: str, texts: list[str]) -> str:
    digest = hashlib.sha256(embedder_name.encode())
    for text in texts:
        digest.update(b"\0" + text.encode("utf-8"))
    return digest.hexdigest()[:16]


def _slug(embedder_name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", embedder_name.lower()).strip("-")


def shipped_path(embedder_name: str) -> Path:
    """Where a precomputed background for an embedder ships inside the package."""
    return DATA / f"background-{_slug(embedder_name)}.npz"


def _read(path: Path, key: str) -> Background | None:
    try:
        with np.load(path) as data:
            if str(data["key"]) != key:
                return None
            return Background(data["vectors"].astype(np.float32), background_languages())
    except (OSError, KeyError, ValueError):
        return None


def save_background(path: Path, key: str, vectors: np.ndarray) -> None:
    import io

    buf = io.BytesIO()
    np.savez_compressed(buf, key=np.array(key), vectors=vectors.astype(np.float16))
    atomic_write_bytes(path, buf.getvalue())


def load_background(embedder: Any, cache_dir: Path | None = None) -> Background:
    """The background for ``embedder``: from this process, the package (precomputed for the
    bundled e5) or ``cache_dir``; otherwise embedded now (a few seconds, once) and cached."""
    texts = background_texts()
    key = _key(embedder.name, texts)
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
        paths = [shipped_path(embedder.name)]
        if cache_dir is not None:
            paths.append(cache_dir / f"background-{key}.npz")
        bg = next((b for p in paths if p.is_file() and (b := _read(p, key))), None)
        if bg is None:
            vectors = np.vstack([embedder.embed_query(t) for t in texts])
            bg = Background(vectors, background_languages())
            if cache_dir is not None:
                save_background(cache_dir / f"background-{key}.npz", key, vectors)
        _LOADED[key] = bg
        return bg
