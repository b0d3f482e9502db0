"""Token counts from the engine's own tokenizer, for servers whose stream carries no usage.

Ollama counts every call (``prompt_eval_count``, ``eval_count``), and vLLM and llama.cpp's
``llama-server`` put usage in the stream when asked. llama-cpp-python's server does not, but it
tokenizes on request, as ``llama-server`` does:

- llama-cpp-python: ``POST /extras/tokenize/count`` ``{"input": text}`` → ``{"count": n}``;
- llama-server: ``POST /tokenize`` ``{"content": text}`` → ``{"tokens": [...]}``.

Which of them a server answers is found on the first count and remembered per base URL; a
server with neither (or one that is down) is remembered too, and the caller estimates. The
prompt is counted as the text of its messages: the chat template's few tokens per message are
not in it, so a tokenizer count is a close lower bound, not the engine's own usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from olav.core.log import get_logger

log = get_logger("llm.tokenize")
TIMEOUT_S = 2.0
# base URL → the route that counted there ("" for none); found once per process
_ROUTES: dict[str, str] = {}
_TRIED = ("extras", "tokenize")


def engine_of(model: Any) -> Any:
    """The chat model behind bindings and wrappers (``RunnableBinding.bound``)."""
    seen = 0
    while hasattr(model, "bound") and seen < 4:
        model, seen = model.bound, seen + 1
    return model


def is_openai(model: Any) -> bool:
    """``model`` (behind its bindings) is langchain-openai's chat model or a subclass of it."""
    names = {c.__name__ for c in type(engine_of(model)).__mro__}
    return bool(names & {"ChatOpenAI", "AzureChatOpenAI", "BaseChatOpenAI"})


def openai_base(model: Any) -> str:
    """The base URL (``…/v1``) of an OpenAI-compatible chat model, "" for any other."""
    if not is_openai(model):
        return ""
    return str(getattr(engine_of(model), "openai_api_base", "") or "").rstrip("/")


def engine_counts(model: Any, texts: Sequence[str]) -> list[int] | None:
    """Each text's length in the engine's tokens, or None when its server cannot tell."""
    base = openai_base(model)
    if not base or _ROUTES.get(base) == "":
        return None
    import httpx

    from olav.core.net import tls_context

    engine = engine_of(model)
    server = base[: -len("/v1")] if base.endswith("/v1") else base
    name = str(getattr(engine, "model_name", "") or "")
    routes = [_ROUTES[base]] if base in _ROUTES else list(_TRIED)
    try:
        with httpx.Client(timeout=TIMEOUT_S, verify=tls_context()) as client:
            for route in routes:
                counts: list[int] = []
                for text in texts:
                    count = _count(client, server, route, name, text)
                    if count is None:
                        break  # not this route: the next one, from the first text
                    counts.append(count)
                if len(counts) == len(texts):
                    _ROUTES[base] = route
                    return counts
    except (httpx.HTTPError, ValueError) as exc:
        log.info("the engine at %s did not count tokens: %s", base, exc)
    _ROUTES[base] = ""
    return None


def _count(client: Any, server: str, route: str, model: str, text: str) -> int | None:
    if not text:
        return 0
    if route == "extras":
        res = client.post(f"{server}/extras/tokenize/count", json={"input": text, "model": model})
        value = res.json().get("count") if res.status_code == 200 else None
    else:
        res = client.post(f"{server}/tokenize", json={"content": text})
        tokens = res.json().get("tokens") if res.status_code == 200 else None
        value = len(tokens) if isinstance(tokens, list) else None
    return value if isinstance(value, int) and value >= 0 else None
