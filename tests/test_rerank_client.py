"""The reranker client against a local server speaking each rerank dialect: scores come back in
the documents' order, in [0, 1]; a server that is down, slow, refuses or answers garbage gives
no scores and says why, in one line, without raising."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from olav.core.config import Config
from olav.core.errors import ConfigError
from olav.memory.recall.rerank import Reranker, parse_scores
from tests.stubs.rerank_stub import RerankStubState, overlap_score, rerank_stub

QUERY = "rotate the nginx logs daily"
DOCS = [
    "Kafka consumer lag alerts page the on-call",
    "nginx logs rotate daily with logrotate, keep 14",
    "the nginx reload needs a config test first",
]
EXPECTED = [overlap_score(QUERY, d) for d in DOCS]


@pytest.mark.parametrize(
    ("api", "path"), [("rerank", ""), ("rerank", "/rerank"), ("tei", "/tei/rerank"), ("score", "")]
)
def test_every_dialect_gives_scores_in_document_order(api: str, path: str) -> None:
    state = RerankStubState()
    with (
        rerank_stub(state) as url,
        Reranker(url, model="bge-reranker-v2-m3", api=api, path=path) as rr,
    ):
        got = rr.score(QUERY, DOCS)
    assert got.failure is None
    assert got.scores == pytest.approx(EXPECTED)
    assert got.scores is not None and got.scores.index(max(got.scores)) == 1
    sent_path, body = state.requests[-1]
    assert sent_path == (path or {"rerank": "/v1/rerank", "score": "/score"}[api])
    assert QUERY in body.values()


def test_raw_logits_are_mapped_into_zero_to_one_keeping_the_order() -> None:
    state = RerankStubState(logits=True)
    with rerank_stub(state) as url, Reranker(url, api="tei", path="/tei/rerank") as rr:
        got = rr.score(QUERY, DOCS)
    assert got.scores is not None and all(0.0 < s < 1.0 for s in got.scores)
    assert sorted(range(3), key=lambda i: got.scores[i]) == sorted(
        range(3), key=lambda i: EXPECTED[i]
    )


@pytest.mark.parametrize(
    ("mode", "kind", "words"),
    [
        ("garbage", "malformed", "not JSON"),
        ("wrong", "malformed", "index is 6"),
        ("nan", "malformed", "score of document"),
        ("short", "malformed", "scores for 2 of 3"),
        ("error", "refused", "HTTP 500"),
    ],
)
def test_a_broken_answer_gives_no_scores_and_says_why(mode: str, kind: str, words: str) -> None:
    with rerank_stub(RerankStubState(mode=mode)) as url, Reranker(url) as rr:
        got = rr.score(QUERY, DOCS)
    assert got.scores is None and got.failure is not None
    assert got.failure.kind == kind and words in got.failure.detail
    line = got.failure.line(url)
    assert "\n" not in line and "bundled decision stands" in line


def test_a_slow_server_times_out_and_a_closed_port_is_down() -> None:
    state = RerankStubState(mode="slow")
    with rerank_stub(state) as url:
        with Reranker(url, timeout_ms=150) as rr:
            got = rr.score(QUERY, DOCS)
        state.release.set()
    assert got.scores is None and got.failure is not None
    assert got.failure.kind == "slow" and "150 ms" in got.failure.detail
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with Reranker(f"http://127.0.0.1:{port}") as rr:
        down = rr.score(QUERY, DOCS)
    assert down.scores is None and down.failure is not None and down.failure.kind == "down"


def test_the_key_is_sent_from_its_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = RerankStubState(api_key="s3cret")
    with rerank_stub(state) as url:
        cfg_path = tmp_path / "olav.yaml"
        cfg_path.write_text(
            f"reranker:\n  provider: rerank\n  base_url: {url}\n  api_key_env: RR_KEY\n"
        )
        monkeypatch.delenv("RR_KEY", raising=False)
        with pytest.raises(ConfigError, match="RR_KEY, which is not set"):
            Reranker.from_config(Config.load(cfg_path))
        monkeypatch.setenv("RR_KEY", "wrong")
        refused = Reranker.from_config(Config.load(cfg_path))
        assert refused is not None
        with refused:
            failure = refused.score(QUERY, DOCS).failure
        assert failure is not None and failure.kind == "refused"
        monkeypatch.setenv("RR_KEY", "s3cret")
        rr = Reranker.from_config(Config.load(cfg_path))
        assert rr is not None
        with rr:
            assert rr.score(QUERY, DOCS).scores == pytest.approx(EXPECTED)
    assert Reranker.from_config(Config.load(None)) is None  # provider none by default


def test_bad_settings_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not an http"):
        Reranker("127.0.0.1:8080")
    with pytest.raises(ConfigError, match=r"reranker\.api"):
        Reranker("http://127.0.0.1:8080", api="cohere-v9")
    cfg = tmp_path / "olav.yaml"
    cfg.write_text("reranker:\n  api: jina\n")
    with pytest.raises(ConfigError, match=r"reranker\.api is 'jina'"):
        Config.load(cfg)


def test_logits_are_mapped_whatever_their_values_when_the_server_says_so() -> None:
    answer = {"results": [{"index": 0, "relevance_score": 0.2}, {"index": 1, "score": 0.9}]}
    assert parse_scores(answer, 2, "probability") == [0.2, 0.9]
    assert parse_scores(answer, 2, "auto") == [0.2, 0.9]  # in 0..1: taken as probabilities
    mapped = parse_scores(answer, 2, "logit")
    assert isinstance(mapped, list) and mapped == pytest.approx([0.5498, 0.7109], abs=1e-4)
    with pytest.raises(ConfigError, match="reranker"):
        Reranker("http://127.0.0.1:8080", scores="percent")


def test_parse_scores_accepts_both_field_names_and_refuses_gaps() -> None:
    assert parse_scores(
        {"results": [{"index": 1, "score": 0.2}, {"index": 0, "score": 0.9}]}, 2
    ) == [
        0.9,
        0.2,
    ]
    assert parse_scores([{"index": 0, "relevance_score": 1}], 1) == [1.0]
    assert (
        parse_scores({"data": [{"index": 0, "score": True}]}, 1)
        == "the score of document 0 is True"
    )
    assert parse_scores({"results": "x"}, 1) == "no list of results in the answer"
    assert (
        parse_scores({"results": [{"index": 0, "score": 0.5}] * 2}, 2)
        == "scores for 1 of 2 documents"
    )
