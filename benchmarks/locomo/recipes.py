"""The experimental recipes (``x-*``): rankings of other representations, FTS settings and
time filters, fused by RRF. They exist to decide what olav's default search should become."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STORE_FTS = "icu"  # the FTS config MemoryStore creates: FTS(base_tokenizer="icu")

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
# x-win2-fdate's rankings, which x-best pre-filters to the question's period on top
WIN2_FDATE = (V, 1), (FD, 1), ("win2/vector", 1), ("win2+date/fts:icu", 1)

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
        *WIN2_FDATE,
        rrf_k=20,
    ),
    _r(
        "x-best",
        "(a+b+d) x-win2-fdate + vector/FTS pre-filtered to the question's period",
        *WIN2_FDATE,
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
