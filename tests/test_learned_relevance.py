"""The learned relevance decision (olav.memory.recall.learned): its fit, the model it ships,
and the guides it decides in the product's Recaller."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from olav.memory.recall import learned
from olav.memory.recall.relevance import Signals

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py)


def _pool(margins: list[float], keywords: list[tuple[str, ...]]) -> list[learned.Candidate]:
    return [
        learned.Candidate(
            text=f"guide {i} about {' '.join(k)}",
            intent=f"guide_{i}",
            signals=Signals(margin=m, level=0.8, keywords=k),
            distance=2 * (1 - (0.8 + m)),
            fts_score=None,
            vector_rank=i + 1,
            fts_rank=None,
        )
        for i, (m, k) in enumerate(zip(margins, keywords, strict=True))
    ]


def test_the_fit_is_deterministic_and_learns_the_signal() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(400, len(learned.BASE)))
    y = (x[:, 0] + 0.2 * rng.normal(size=400) > 0).astype(float)
    a, b = learned.fit(x, y), learned.fit(x, y)
    assert np.array_equal(a.weights, b.weights) and a.bias == b.bias
    assert int(np.argmax(np.abs(a.weights))) == 0  # the margin carries it
    assert ((a.probabilities(x) >= 0.5) == (y == 1)).mean() > 0.9


def test_a_model_survives_its_json_and_names_what_carried_a_row() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, len(learned.BASE)))
    model = learned.fit(x, (x[:, 10] > 0).astype(float))
    again = learned.Model.from_json(json.loads(json.dumps(model.to_json())))
    assert np.allclose(again.probabilities(x), model.probabilities(x), atol=1e-5)
    name, part = model.carried(np.where(np.arange(x.shape[1]) == 10, 3.0, 0.0))[0]
    assert name == "keyword_idf" and part > 0


def test_a_rare_keyword_outweighs_a_common_one_among_the_candidates() -> None:
    """IDF over the candidates: a keyword in one guide's text counts more than one that
    every guide's text uses."""
    pool = _pool([0.02, 0.02, 0.02], [("convention",), ("router-id",), ()])
    pool = [learned.Candidate(**{**c.__dict__, "text": c.text + " convention"}) for c in pool]
    x = learned.features("router-id convention", "en", pool, second=False)
    col = learned.BASE.index("keyword_idf")
    assert x[1, col] > x[0, col] > 0 == x[2, col]


def test_the_shipped_model_is_for_e5_only_and_both_variants_load() -> None:
    assert learned.model_for("hash:64", second=True) is None
    for second in (True, False):
        model = learned.model_for(learned.EMBEDDER, second=second)
        assert model is not None and model.second is second
        assert 0.0 < model.threshold < 1.0
        assert model.fitted_on["script"] == "make relevance-model"


def test_an_unreadable_model_file_gives_guides_back_to_the_floors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "relevance-model.json"
    bad.write_text('{"models": {"plain": {"features": ["margin"], "mean": []}}}')
    monkeypatch.setattr(learned, "MODEL_FILE", bad)
    learned.shipped.cache_clear()
    try:
        assert learned.model_for(learned.EMBEDDER, second=False) is None
    finally:
        learned.shipped.cache_clear()


def test_the_decision_fills_in_the_probability_threshold_and_reasons() -> None:
    model = learned.model_for(learned.EMBEDDER, second=False)
    assert model is not None
    pool = _pool([0.09, -0.01], [("crontab", "cron"), ()])
    learned.decide(model, "add a crontab entry for the nightly cron job", "en", pool)
    top, other = (c.signals for c in pool)
    assert top.p is not None and other.p is not None and top.p > other.p
    assert top.relevant is (top.p >= model.threshold)
    assert top.reason.startswith("learned: p ") and str(model.threshold) in top.reason
    assert len(top.carried) == 3 and top.to_json()["threshold"] == model.threshold


def test_the_learned_decision_is_a_setting_off_by_default() -> None:
    from olav.core.settings import SETTINGS

    (setting,) = [s for s in SETTINGS if s.key == "memory.relevance_model"]
    assert not learned.wanted({setting.key: setting.default}) and not learned.wanted({})
    assert learned.wanted({"memory.relevance_model": "on"})


def test_the_recaller_leaves_guides_to_the_model_when_asked(tmp_path: Path) -> None:
    """On the relevance corpus's netops agent with e5: the learned decision decides every
    guide candidate and the reasons say so; the floors decide with the setting off."""
    from benchmarks.relevance import agent_recaller
    from benchmarks.relevance_corpus import load_corpus
    from olav.memory.store.embedders import E5Embedder

    corpus = load_corpus()
    q = "what is the router-id convention for sh1?"
    for chosen in ("on", "off"):
        with agent_recaller(corpus, "netops", E5Embedder(), memory__relevance_model=chosen) as (
            recaller,
            _intents,
        ):
            res = recaller.recall(q, dry_run=True)
        guides = [c for c in res.candidates if c.hit.record.origin == "directive"]
        assert guides
        if chosen == "on":
            assert all(c.signals.p is not None for c in guides if c.signals.margin)
            assert all(c.signals.reason.startswith("learned: ") for c in guides if c.signals.p)
            shown = [c for c in guides if c.decision == "injected"]
            assert all(c.signals.p >= c.signals.threshold for c in shown)
        else:
            assert all(c.signals.p is None for c in guides)
