"""The relevance corpus (issue 53) is in the repo, loads, and is big and varied enough to learn
from and to report leave-one-agent-out and leave-one-language-out on."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.relevance import recall_agent, score
from benchmarks.relevance_corpus import DATA, KINDS, LANGS, load_corpus
from olav.core.errors import OlavError
from olav.memory.store.embedders import HashEmbedder


def test_the_corpus_loads_and_is_big_enough() -> None:
    corpus = load_corpus()
    counts = corpus.counts()
    assert counts["agents"] >= 8 and counts["pairs"] >= 3000, counts
    assert {"netops", "core"} <= set(corpus.agents)  # olav's own templates, named not copied
    for agent in corpus.agents:
        kinds = Counter(r.kind for r in corpus.requests if r.agent == agent)
        assert set(kinds) == set(KINDS), (agent, kinds)
        assert len(corpus.guides[agent]) >= 8, agent
    langs = Counter(r.lang for r in corpus.requests)
    assert all(langs[lang] >= 0.2 * len(corpus.requests) for lang in LANGS), langs
    # each split holds every request once, and never a held-out agent's or language's
    for name, split in (("agent", corpus.by_agent()), ("lang", corpus.by_language())):
        for held, train, test in split:
            assert len(train) + len(test) == len(corpus.requests)
            key = (lambda r: r.agent) if name == "agent" else (lambda r: r.lang)
            assert {key(r) for r in test} == {held} and held not in {key(r) for r in train}


def test_the_router_id_request_is_labelled_for_the_guide_that_answers_it() -> None:
    corpus = load_corpus()
    (req,) = [r for r in corpus.requests if r.text == "what is the router-id convention for sh1?"]
    assert req.agent == "netops" and req.expect == ("lab_addressing_plan",)


def test_a_broken_request_is_one_line_naming_the_file(tmp_path: Path) -> None:
    root = tmp_path / "relevance"
    shutil.copytree(DATA / "security", root / "security")
    path = root / "security" / "requests.yaml"
    path.write_text(
        path.read_text().replace("expect: [access_request_approval]", "expect: [nope]", 1)
    )
    with pytest.raises(OlavError, match=r"requests\.yaml: request \S+: expect names no guide"):
        load_corpus(root)


def test_the_baseline_scores_an_agents_blocks(tmp_path: Path) -> None:
    """The benchmark's path on one agent, with the test embedder (no semantics: only that it
    recalls every request and scores the three figures)."""
    corpus = load_corpus()
    rows = recall_agent(corpus, "security", HashEmbedder("hash-64"))
    assert len(rows) == sum(r.agent == "security" for r in corpus.requests)
    got = score(rows)
    assert set(got) == {"requests", "in_block", "empty", "precision"}
    assert all(0 <= got[k] <= 1 for k in ("in_block", "empty") if got[k] is not None)
