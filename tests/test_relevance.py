"""The relevance decision: its signals, its rule, the background, and what a new user sees in
the template workspace with the bundled e5 embedder."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from olav.core.errors import ConfigError
from olav.memory.recall import relevance
from olav.memory.recall.calibration import parse_floors, relevance_floors
from olav.memory.recall.relevance import (
    Floors,
    Signals,
    decide,
    everyday_words,
    keyword_hits,
    keywords_of,
    load_background,
    specific_keywords,
)
from olav.memory.store.schema import MemoryRecord

FLOORS = Floors(0.03, 0.0, -0.04, 0.03, 0.02, 0.005)


def test_keywords_match_whole_words_compounds_and_cjk_terms() -> None:
    kws = ["backup", "VLAN", "config backup", "备份", "ip"]
    assert keyword_hits("back up the switch before the change", kws) == ("backup",)
    assert keyword_hits("add vlan 230 to the trunk", kws) == ("VLAN",)
    assert keyword_hits("take a config backup of r1", kws) == ("backup", "config backup")
    assert keyword_hits("帮我备份一下路由器", kws) == ("备份",)
    assert keyword_hits("the backups folder is full", kws) == ()  # not a whole word
    assert keyword_hits("vlans", kws) == ()
    assert keyword_hits("anything", "not a list") == ()


def test_the_everyday_words_are_sorted_lower_case_and_unique() -> None:
    words = everyday_words()  # looked up by bisection
    assert len(words) > 50_000 and all(a < b for a, b in itertools.pairwise(words))
    assert all(w.isalpha() and w.islower() for w in words)


def test_a_cjk_compound_written_apart_is_a_keyword_but_not_a_specific_one() -> None:
    kws = ["故障复盘", "日志切割", "查日志"]
    query = "帮我写一份昨天故障的复盘报告"
    assert keyword_hits(query, kws) == ("故障复盘",)
    assert not specific_keywords(("故障复盘",), query)
    assert specific_keywords(("故障复盘",), "写一份故障复盘")  # written whole
    assert keyword_hits("日志文件越来越大，怎么按天切割", kws) == ("日志切割",)
    assert keyword_hits("切割日志", kws) == ()  # the halves out of order
    assert keyword_hits("查一下日志", kws) == ()  # three characters: whole only


def test_specific_words_are_rare_in_generic_requests() -> None:
    assert specific_keywords(("VLAN",))  # an acronym
    assert specific_keywords(("load average",))  # several words
    assert specific_keywords(("交换机",))  # a CJK term of three characters
    assert not specific_keywords(("服务",))
    assert specific_keywords(("crontab",))  # neither generic requests nor everyday English
    assert not specific_keywords(("rotate",))  # "how do I rotate a PDF page"
    assert not specific_keywords(("patches",))  # an everyday word in the plural
    assert specific_keywords(("Kafka",))  # a name
    assert not specific_keywords(("Active",))  # a capitalised everyday word (a BGP state)
    assert not specific_keywords(("config",))  # "explain this config file to me"
    assert specific_keywords(("config", "restart"))  # two keywords


def test_keywords_of_guides_captures_and_lessons() -> None:
    guide = MemoryRecord(id="g", text="t", category="usage_guide", metadata={"keywords": ["a"]})
    capture = MemoryRecord(
        id="c", text="t", category="operational_event", metadata={"tool": "register_service"}
    )
    sql = MemoryRecord(id="q", text="t", category="query_pattern", metadata={"tool": "db_query"})
    lesson = MemoryRecord(
        id="l", text="When take_snapshot fails, ask for db_query access.", category="reflection"
    )
    assert keywords_of(guide) == ["a"]
    assert keywords_of(capture) == ["register", "service"]
    assert keywords_of(sql) == []  # every SQL precedent shares it
    assert keywords_of(lesson) == ["snapshot", "take"]


@pytest.mark.parametrize(
    ("signals", "lesson", "relevant", "reason"),
    [
        (Signals(margin=0.05), False, True, "margin 0.050 >= 0.03"),
        (Signals(margin=0.01), False, False, "margin 0.010 < 0.03"),
        (Signals(margin=0.01, keywords=("trunk",)), False, True, "keyword 'trunk'"),
        (Signals(margin=-0.01, keywords=("trunk",)), False, False, "margin -0.010 < 0"),
        (Signals(margin=-0.03, keywords=("a", "b"), specific=True), False, True, "keywords"),
        (Signals(margin=0.01, agree=True), False, True, "first by vector and by words"),
        (Signals(margin=0.025, text_match=True), True, True, "full-text match"),
        (Signals(margin=0.025), True, False, "margin 0.025 < 0.03"),
        (Signals(margin=None, keywords=("vlan",)), False, True, "no vector"),
        (Signals(margin=None), False, False, "no vector and no word match"),
    ],
)
def test_the_rule(signals: Signals, lesson: bool, relevant: bool, reason: str) -> None:
    out = decide(signals, lesson=lesson, floors=FLOORS)
    assert out.relevant is relevant
    assert reason in out.reason


def test_floors_from_the_settings() -> None:
    e5 = "e5:multilingual-e5-small"
    # lessons decided with the second opinion have floors of their own ...
    assert relevance_floors({"memory.relevance": "auto"}, e5) == Floors(
        0.03, 0.01, -0.02, 0.04, 0.04, 0.005
    )
    # ... and without it, e5's alone
    off = {"memory.relevance": "auto", "memory.second_opinion": "off"}
    assert relevance_floors(off, e5) == Floors(0.03, 0.01, -0.02, 0.04, 0.03, 0.005)
    assert relevance_floors({"memory.relevance": "off"}, e5) is None
    # nobody calibrated these: the nearest memories are sent, and doctor says so
    assert relevance_floors({"memory.relevance": "auto"}, "ollama:bge-m3") is None
    assert relevance_floors({"memory.relevance": "auto"}, "hash:hash-64") is None
    given = relevance_floors({"memory.relevance": "0.1, 0, 0, 0.2, 0.1, inf"}, "ollama:x")
    assert given == Floors(0.1, 0.0, 0.0, 0.2, 0.1, math.inf)
    with pytest.raises(ConfigError, match=r"6 comma-separated numbers .* got '0.1,x'"):
        parse_floors("0.1,x")


def test_the_shipped_background_is_e5s_own(tmp_path: Path) -> None:
    from olav.memory.store.embedders import E5Embedder

    e5 = E5Embedder()
    relevance._LOADED.clear()
    shipped = load_background(e5)  # read from the package, not embedded
    texts = relevance.background_texts()
    assert shipped.vectors.shape == (len(texts), e5.dim) and len(texts) >= 200
    for i in (0, len(texts) // 2, len(texts) - 1):  # float16 on disk
        assert np.allclose(shipped.vectors[i], e5.embed_query(texts[i]), atol=2e-3)


def test_another_embedder_embeds_the_background_once_and_caches_it(tmp_path: Path) -> None:
    from olav.memory.store.embedders import HashEmbedder

    class Counting(HashEmbedder):
        calls = 0

        def embed_query(self, text: str) -> np.ndarray:
            Counting.calls += 1
            return super().embed_query(text)

    relevance._LOADED.clear()
    first = load_background(Counting("hash-32"), tmp_path)
    n = Counting.calls
    assert n == len(relevance.background_texts())
    assert len(list(tmp_path.glob("background-*.npz"))) == 1
    relevance._LOADED.clear()  # a new process reads the cache
    again = load_background(Counting("hash-32"), tmp_path)
    assert Counting.calls == n and np.allclose(first.vectors, again.vectors, atol=1e-3)
    level = again.level(again.vectors[:2])
    assert level.shape == (2,) and np.all(level <= 1.0 + 1e-3)


def test_the_level_is_measured_among_requests_in_the_requests_language() -> None:
    # twelve English and twelve Chinese generic requests; a memory near the Chinese ones
    rng = np.random.default_rng(7)
    en, zh = rng.normal(size=(12, 8)), rng.normal(size=(12, 8)) + 3.0
    vectors = np.vstack([en, zh])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    bg = relevance.Background(vectors, ["en"] * 12 + ["zh"] * 12)
    memory = vectors[12:].mean(axis=0, keepdims=True)
    memory /= np.linalg.norm(memory)
    whole, english, chinese = bg.level(memory), bg.level(memory, "en"), bg.level(memory, "zh")
    # a Chinese request is held to how near the memory comes to Chinese requests
    assert chinese[0] > english[0] and chinese[0] >= whole[0] - 1e-6
    sims = (vectors[:12] @ memory.T).ravel()
    assert english[0] == pytest.approx(np.sort(sims)[-relevance.LEVEL_K :].mean(), abs=1e-5)
    # without languages (an old cache) every request is measured against the whole set
    unlabelled = relevance.Background(vectors)
    assert unlabelled.level(memory, "zh")[0] == pytest.approx(whole[0], abs=1e-6)
    assert relevance.language("重启 nginx") == "mixed" and relevance.language("重启服务") == "zh"


def _why(olav: Any, query: str, agent: str = "core") -> dict[str, Any]:
    res = olav("memory", "why", query, "--agent", agent, "--tier", "small", "--json")
    assert res.exit_code == 0, res.output
    return dict(json.loads(res.stdout))


@pytest.mark.parametrize(
    "query", ["tell me a joke about cats", "今天午饭吃什么", "推荐一部周末看的电影"]
)
def test_unrelated_requests_get_no_block_in_the_template(
    e5_ws: Path, olav: Any, query: str
) -> None:
    out = _why(olav, query)
    assert out["injected"] == [] and out["block"] == ""
    assert out["candidates"] and all(c["decision"] == "irrelevant" for c in out["candidates"])
    assert all(c["reason"] and c["margin"] is not None for c in out["candidates"])


def test_a_request_the_template_answers_gets_its_directive(e5_ws: Path, olav: Any) -> None:
    out = _why(olav, "save the border routers as csv")
    assert out["injected"] == ["guide_core_export_when_asked_to_save"]
    kept = out["candidates"][0]
    assert kept["relevant"] and "save" in kept["keywords"]


def test_why_shows_the_reason_for_every_candidate(e5_ws: Path, olav: Any) -> None:
    res = olav("memory", "why", "tell me a joke about cats", "--tier", "small")
    assert res.exit_code == 0, res.output
    assert "floors 0.03" in res.stdout and "irrelevant" in res.stdout
    assert "nothing is relevant enough: no memory block is sent" in res.stdout


@pytest.mark.parametrize("width", [80, 130])
def test_why_keeps_every_id_on_one_line(
    e5_ws: Path, olav: Any, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a narrow terminal the reason goes under the id; an id is never broken."""
    from olav.cli import common

    monkeypatch.setattr(common.console, "_width", width)
    query = "back up the config of sh1-border01"
    res = olav("memory", "why", query, "--agent", "core", "--tier", "small")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= width
    for cand in _why(olav, query)["candidates"][:15]:
        assert any(cand["id"] in line for line in lines), cand["id"]
    # a margin just under its floor is not shown rounded onto it
    assert "0.010 < 0.01" not in res.stdout


def test_chat_without_a_model_previews_what_recall_would_send(e5_ws: Path, olav_main: Any) -> None:
    """The offline preview is AutoRecall's decision, not the nearest rows: the router request
    gets the guide that sends it to netops, the joke gets nothing."""
    out = olav_main().stdout  # `olav`: no model server is reachable here
    assert "Memory works without the model" in out and "ollama serve" in out
    router, joke = out.split("tell me a joke about cats")
    assert "guide_core_delegate_network_tasks_to_netops" in router
    assert "guide_netops_bgp" not in router and router.count("(usage_guide)") == 1
    assert "nothing relevant: no memory block is sent" in joke
    assert "relevance is off" not in out


def test_without_a_background_words_alone_decide(tmp_path: Path) -> None:
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.embedders import CachedEmbedder, HashEmbedder
    from olav.memory.store.table import MemoryStore

    class Down(HashEmbedder):
        def embed_query(self, text: str) -> np.ndarray:
            raise ConnectionError("embedding server down")

    store = MemoryStore(tmp_path / "m.lance", CachedEmbedder(HashEmbedder("hash-32")))
    store.upsert(
        [
            MemoryRecord(
                id="guide_ops_vlan",
                text="vlan change procedure: add the vlan to both trunk ends",
                category="usage_guide",
                scope="ops",
                metadata={"keywords": ["vlan", "trunk"]},
            )
        ]
    )
    store.embedder = CachedEmbedder(Down("hash-32"))
    relevance._LOADED.clear()
    config = {
        "memory.relevance": "0.03,0,-0.04,0.03,0.02,0.005",
        "memory.token_budget": 1000,
        "memory.half_life_days": 30.0,
    }
    rec = Recaller.for_config(store, config, agent="ops", tier="small")
    assert rec.relevance_on and rec.background is None  # the background could not be embedded
    hit = rec.recall("add vlan 30 to the trunk", dry_run=True, search_mode="fts")
    assert hit.injected_ids == ["guide_ops_vlan"]
    assert "no vector" in hit.candidates[0].signals.reason
    miss = rec.recall("change procedure for the office", dry_run=True, search_mode="fts")
    assert miss.injected_ids == [] and miss.block == ""
