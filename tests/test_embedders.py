from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from olav.core.config import Config
from olav.core.errors import EmbedderError
from olav.memory.store.embedders import (
    CachedEmbedder,
    E5Embedder,
    HashEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    make_embedder,
    prefixes_for,
)
from olav.memory.store.table import MemoryStore
from tests.helpers import EVERY_ROW, rec
from tests.stubs.ollama_stub import StubState, ollama_stub


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


def test_e5_is_offline_384d_normalised_and_multilingual(e5: E5Embedder) -> None:
    assert e5.name == "e5:multilingual-e5-small" and e5.dim == 384
    q = e5.embed_query("备份路由器配置")
    p = e5.embed_passages(["把路由器的配置备份到 exports 目录", "删除一个过期的用户账号"])
    assert q.shape == (384,) and p.shape == (2, 384)
    assert np.allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-4)
    sims = p @ q
    assert sims[0] > sims[1]


def test_e5_uses_query_and_passage_prefixes(e5: E5Embedder) -> None:
    text = "router backup"
    assert not np.allclose(e5.embed_query(text), e5.embed_passages([text])[0])


def test_e5_rejects_other_models() -> None:
    with pytest.raises(EmbedderError, match="provider ollama or openai"):
        E5Embedder("bge-m3")


def test_hash_embedder_is_deterministic() -> None:
    a, b = HashEmbedder("hash-64"), HashEmbedder("hash-64")
    assert np.array_equal(a.embed_query("x y"), b.embed_query("x y"))
    with pytest.raises(EmbedderError, match="hash-<dim>"):
        HashEmbedder("hash")


def test_query_cache_is_lru() -> None:
    cached = CachedEmbedder(HashEmbedder("hash-16"), size=2)
    cached.embed_query("a")
    cached.embed_query("b")
    cached.embed_query("a")  # hit; "b" becomes least recent
    cached.embed_query("c")  # evicts "b"
    cached.embed_query("b")  # miss
    assert (cached.hits, cached.misses) == (1, 4)


def test_prefixes_by_model_name() -> None:
    assert prefixes_for("nomic-embed-text") == ("search_query: ", "search_document: ")
    assert prefixes_for("intfloat/multilingual-e5-large") == ("query: ", "passage: ")
    assert prefixes_for("bge-m3") == ("", "")


def test_ollama_embedder_through_the_real_client(tmp_path: Path) -> None:
    with ollama_stub() as (url, state):
        emb = OllamaEmbedder("bge-m3", url)
        assert emb.dim == 32 and emb.name == "ollama:bge-m3"  # probed, not assumed
        store = MemoryStore(tmp_path / "m.lance", emb)
        store.upsert([rec("a", "backup router config"), rec("b", "rotate user passwords")])
        assert (
            store.search("router config", mode="vector", k=1, filter=EVERY_ROW)[0].record.id == "a"
        )
        assert any(path == "/api/embed" for path, _ in state.requests)


def test_nomic_prefixes_are_sent_to_ollama() -> None:
    with ollama_stub(StubState(models={"nomic-embed-text": 16})) as (url, state):
        emb = OllamaEmbedder("nomic-embed-text", url)
        emb.embed_query("where is r1")
        emb.embed_passages(["r1 is in sh1"])
        sent = [body["input"] for path, body in state.requests if path == "/api/embed"]
        assert sent[-2:] == [["search_query: where is r1"], ["search_document: r1 is in sh1"]]


def test_ollama_errors_say_how_to_fix() -> None:
    with ollama_stub() as (url, _), pytest.raises(EmbedderError, match="ollama pull nomic"):
        OllamaEmbedder("nomic-embed-text", url)
    with pytest.raises(EmbedderError, match="ollama serve"):
        OllamaEmbedder("bge-m3", "http://127.0.0.1:9")


def test_openai_compatible_embedder() -> None:
    state = StubState(models={"text-embedding-3-small": 24}, api_key="sk-test")
    with ollama_stub(state) as (url, _):
        emb = OpenAIEmbedder("text-embedding-3-small", url, "sk-test")
        assert emb.dim == 24
        assert emb.embed_passages(["a", "b", "c"]).shape == (3, 24)
        with pytest.raises(EmbedderError, match="HTTP 401"):
            OpenAIEmbedder("text-embedding-3-small", url, "wrong")
    with pytest.raises(EmbedderError, match="not reachable"):
        OpenAIEmbedder("x", "http://127.0.0.1:9/v1", None)


def test_factory_selects_by_configuration(tmp_path: Path) -> None:
    with ollama_stub() as (url, _):
        cfg = Config.load(
            None,
            environ={
                "OLAV_EMBEDDER_PROVIDER": "ollama",
                "OLAV_EMBEDDER_MODEL": "bge-m3",
                "OLAV_LLM_BASE_URL": url,
            },
        )
        emb = make_embedder(cfg)
        assert emb.name == "ollama:bge-m3" and emb.dim == 32
    cfg = Config.load(None, environ={})
    assert make_embedder(cfg).name == "e5:multilingual-e5-small"  # the default


def test_the_http_clients_share_one_tls_context() -> None:
    """The chat model's two clients and each embedder's load the certificate bundle once per
    process between them (olav.core.net.tls_context), not once each."""
    from olav.core.net import tls_context
    from olav.llm.models import make_chat_model

    def context(client: Any) -> Any:  # httpx's connection pool keeps the client's context
        return client._transport._pool._ssl_context

    chat = make_chat_model(Config.load(None, environ={}))
    with ollama_stub(StubState(api_key="sk-test")) as (url, _):
        ollama_emb = OllamaEmbedder("bge-m3", url)
        openai_emb = OpenAIEmbedder("bge-m3", url, "sk-test")
    shared = [chat._client._client, chat._async_client._client, ollama_emb._client._client]
    assert all(context(c) is tls_context() for c in [*shared, openai_emb._http])
