"""The model's context window, as the server reports it.

``llm.num_ctx`` is what olav asks Ollama for; it is not always what the model gets. A model
trained on 8k tokens stays an 8k model at ``num_ctx: 32768``, and an OpenAI-compatible server
decides its window when it starts (llama.cpp's ``-c``, vLLM's ``--max-model-len``), whatever the
client wants. Older turns are compressed, and truncation is warned about, against the window
this module finds:

- Ollama: ``POST /api/show`` → ``model_info["<arch>.context_length"]``; the window is the
  smaller of that and ``num_ctx``;
- OpenAI-compatible: vLLM's ``max_model_len`` and LM Studio's context lengths in
  ``GET /v1/models``, else llama.cpp's ``GET /props`` (``n_ctx``); the window is what the server
  says, else ``num_ctx``.

One short request per process and model, cached; a server that is down or does not say leaves
``num_ctx``, and the first model call reports the real problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from olav.core.log import get_logger

log = get_logger("llm.window")
TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Window:
    tokens: int  # the window compression and the truncation warning work against
    requested: int  # llm.num_ctx
    reported: int | None  # what the server said (None: it did not)
    source: str  # where ``reported`` came from ("" when nowhere)


_cache: dict[tuple[str, str, str], tuple[int | None, str]] = {}


def model_window(cfg: Any, model: str | None = None) -> Window:
    """The effective context window of ``model`` (default: ``llm.model``)."""
    requested = int(cfg["llm.num_ctx"])
    provider = str(cfg["llm.provider"])
    name = model or str(cfg["llm.model"])
    if provider not in ("ollama", "openai"):
        return Window(requested, requested, None, "")
    key = (provider, str(cfg["llm.base_url"]), name)
    if key not in _cache:
        _cache[key] = _ask(provider, str(cfg["llm.base_url"]), name)
    reported, source = _cache[key]
    if reported is None:
        return Window(requested, requested, None, "")
    tokens = min(requested, reported) if provider == "ollama" else reported
    return Window(tokens, requested, reported, source)


def _ask(provider: str, base_url: str, model: str) -> tuple[int | None, str]:
    import httpx

    from olav.core.net import tls_context

    try:
        with httpx.Client(timeout=TIMEOUT_S, verify=tls_context()) as client:
            if provider == "ollama":
                return _ollama(client, base_url, model)
            return _openai(client, base_url, model)
    except (httpx.HTTPError, ValueError) as exc:  # down, or it said something else
        log.info("context window of %s not reported: %s", model, exc)
        return None, ""


def _ollama(client: Any, base_url: str, model: str) -> tuple[int | None, str]:
    res = client.post(base_url.rstrip("/") + "/api/show", json={"model": model})
    if res.status_code != 200:
        return None, ""
    info = res.json().get("model_info") or {}
    for key, value in info.items():
        if key.endswith(".context_length") and isinstance(value, int) and value > 0:
            return value, "/api/show"
    return None, ""


def _openai(client: Any, base_url: str, model: str) -> tuple[int | None, str]:
    root = base_url.rstrip("/")
    res = client.get(root + "/models")
    if res.status_code == 200:
        for entry in res.json().get("data") or []:
            if not isinstance(entry, dict) or entry.get("id") != model:
                continue
            for field in ("max_model_len", "loaded_context_length", "max_context_length"):
                value = entry.get(field)
                if isinstance(value, int) and value > 0:
                    return value, f"/models {field}"
    server = root[: -len("/v1")] if root.endswith("/v1") else root
    res = client.get(server + "/props")
    if res.status_code == 200:
        body = res.json()
        settings = body.get("default_generation_settings") or {}
        value = settings.get("n_ctx") or body.get("n_ctx")
        if isinstance(value, int) and value > 0:
            return value, "/props n_ctx"
    return None, ""
