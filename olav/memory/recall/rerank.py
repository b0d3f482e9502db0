"""A cross-encoder reranker on the user's own server: one request per recall, the request and the
candidates' texts in, a relevance score per candidate out.

The servers that run rerankers (bge-reranker-v2-m3, jina-reranker-v2) speak a handful of close
dialects, chosen with ``reranker.api``:

- ``rerank`` (the Jina/Cohere shape): llama.cpp's server started with ``--reranking``
  (``/v1/rerank``), vLLM (``/rerank`` and ``/v1/rerank``), Infinity (``/rerank``). The body is
  ``{"model", "query", "documents", "top_n", "return_documents": false}``; the answer
  ``{"results": [{"index", "relevance_score"}]}``.
- ``tei``: text-embeddings-inference (``/rerank``): ``{"query", "texts"}`` in, a list of
  ``{"index", "score"}`` out.
- ``score``: vLLM's ``/score``: ``{"model", "text_1": query, "text_2": [...]}`` in,
  ``{"data": [{"index", "score"}]}`` out.

Whatever the dialect, the answer is read leniently: results under ``results``, ``data`` or at
the top level, each score under ``relevance_score`` or ``score``. Scores are mapped into [0, 1]
(``reranker.scores``: llama.cpp answers raw logits, which the logistic maps; TEI, vLLM and
Infinity answer probabilities) so that one floor means the same across servers.

The reranker never fails a recall. A server that is down, slower than ``reranker.timeout_ms``,
or that answers something that is not a score for every candidate gives ``None``, and the caller
keeps the bundled decision (:class:`RerankFailure` says why, once per run).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from olav.core.errors import ConfigError

APIS = ("rerank", "tei", "score")
SCALES = ("auto", "probability", "logit")
DEFAULT_PATHS = {"rerank": "/v1/rerank", "tei": "/rerank", "score": "/score"}
MAX_CHARS = 2000  # a candidate's text sent to the reranker (the block shows no more either)


@dataclass(frozen=True)
class RerankFailure:
    """Why a reranker gave no scores (one line, for the run's warning and the audit)."""

    kind: str  # down | slow | malformed | refused
    detail: str

    def line(self, where: str) -> str:
        return f"the reranker at {where} is {self.kind}: {self.detail}; the bundled decision stands"


@dataclass(frozen=True)
class RerankResult:
    scores: list[float] | None  # one per document, in [0, 1]; None when it failed
    ms: float  # the round trip
    failure: RerankFailure | None = None


class Reranker:
    """The configured reranker (``reranker.*`` keys). Thread-safe: one per process."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "",
        api: str = "rerank",
        path: str = "",
        api_key: str | None = None,
        timeout_ms: int = 800,
        scores: str = "auto",
    ) -> None:
        if api not in APIS:
            raise ConfigError(f"reranker.api is {api!r}", hint="Use one of: " + ", ".join(APIS))
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"reranker.base_url {base_url!r} is not an http(s) URL",
                hint="Give the server's address, e.g. http://127.0.0.1:8080",
            )
        if scores not in SCALES:
            raise ConfigError(
                f"reranker.scores is {scores!r}", hint="Use one of: " + ", ".join(SCALES)
            )
        self.scale = scores
        self.url = base_url.rstrip("/") + (path or DEFAULT_PATHS[api])
        self.model = model
        self.api = api
        self.timeout_s = max(1, timeout_ms) / 1000
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client: Any = None

    @classmethod
    def from_config(cls, cfg: Any) -> Reranker | None:
        """The workspace's reranker, or None when ``reranker.provider`` is ``none``."""
        if str(cfg["reranker.provider"]) == "none":
            return None
        env = str(cfg["reranker.api_key_env"] or "")
        key = os.environ.get(env) if env else None
        if env and not key:
            raise ConfigError(
                f"reranker.api_key_env names {env}, which is not set",
                hint=f"Export {env}, or empty reranker.api_key_env for a server without a key",
            )
        return cls(
            str(cfg["reranker.base_url"]),
            model=str(cfg["reranker.model"]),
            api=str(cfg["reranker.api"]),
            path=str(cfg["reranker.path"]),
            api_key=key,
            timeout_ms=int(cfg["reranker.timeout_ms"]),
            scores=str(cfg["reranker.scores"]),
        )

    @property
    def where(self) -> str:
        return self.url

    def _http(self) -> Any:
        if self._client is None:
            import httpx

            from olav.core.net import tls_context

            self._client = httpx.Client(
                timeout=self.timeout_s, headers=self.headers, verify=tls_context()
            )
        return self._client

    def body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        docs = [d[:MAX_CHARS] for d in documents]
        if self.api == "tei":
            return {"query": query, "texts": docs, "raw_scores": False, "return_text": False}
        if self.api == "score":
            return {"model": self.model, "text_1": query, "text_2": docs}
        out: dict[str, Any] = {
            "query": query,
            "documents": docs,
            "top_n": len(docs),
            "return_documents": False,
        }
        if self.model:
            out["model"] = self.model
        return out

    def score(self, query: str, documents: Sequence[str]) -> RerankResult:
        """A score in [0, 1] for each of ``documents`` against ``query``, in their order."""
        if not documents:
            return RerankResult([], 0.0)
        import httpx

        started = time.perf_counter()

        def failed(kind: str, detail: str) -> RerankResult:
            ms = (time.perf_counter() - started) * 1000
            return RerankResult(None, ms, RerankFailure(kind, detail))

        try:
            resp = self._http().post(self.url, json=self.body(query, documents))
        except httpx.TimeoutException:
            return failed("slow", f"no answer within {self.timeout_s * 1000:.0f} ms")
        except httpx.HTTPError as exc:
            return failed("down", type(exc).__name__)
        if resp.status_code >= 400:
            return failed("refused", f"HTTP {resp.status_code} {_snippet(resp.text)}")
        try:
            data = resp.json()
        except ValueError:
            return failed("malformed", "the answer is not JSON")
        scores = parse_scores(data, len(documents), self.scale)
        if isinstance(scores, str):
            return failed("malformed", scores)
        return RerankResult(scores, (time.perf_counter() - started) * 1000)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Reranker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_scores(data: Any, n: int, scale: str = "auto") -> list[float] | str:
    """The scores of ``n`` documents from a rerank answer, in document order, in [0, 1], or
    what is wrong with it (a string). ``scale``: ``logit`` (llama.cpp answers the model's raw
    output) maps every score through the logistic; ``probability`` takes them as they are;
    ``auto`` maps an answer with any score outside [0, 1]."""
    items = data
    if isinstance(data, dict):
        items = next((data[k] for k in ("results", "data") if isinstance(data.get(k), list)), None)
    if not isinstance(items, list):
        return "no list of results in the answer"
    raw: dict[int, float] = {}
    for item in items:
        if not isinstance(item, dict):
            return "a result is not an object"
        index = item.get("index")
        value = item.get("relevance_score", item.get("score"))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            return f"a result's index is {index!r} (documents: {n})"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"the score of document {index} is {value!r}"
        if not math.isfinite(float(value)):
            return f"the score of document {index} is {value!r}"
        raw[index] = float(value)
    if len(raw) != n:
        return f"scores for {len(raw)} of {n} documents"
    values = [raw[i] for i in range(n)]
    if scale == "probability" or (scale == "auto" and all(0.0 <= v <= 1.0 for v in values)):
        return [min(1.0, max(0.0, v)) for v in values]
    return [1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, v)))) for v in values]  # logits


def _snippet(text: str) -> str:
    return " ".join(text.split())[:120]
