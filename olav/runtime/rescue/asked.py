"""What a client asked of the model for one run, applied to each of its model calls.

``olav serve``'s ``/v1/chat/completions`` takes ``max_tokens`` (or ``max_completion_tokens``),
``temperature``, ``top_p``, ``stop`` and ``seed`` (olav.serve.openai_api checks them); they
reach :attr:`RunContext.asked`, and every model call of that run goes out with them, as the
engine's client takes them:

- Ollama: its ``options`` (the model's own, with these in place: ``num_predict``,
  ``temperature``, ``top_p``, ``stop``, ``seed``);
- OpenAI-compatible: the request's fields (``max_tokens`` and ``max_completion_tokens`` both,
  as the model factory sends them).

A client's ``max_tokens`` is capped by the agent's own ``llm.num_predict``: it may ask for
less, never more.
"""

from __future__ import annotations

from typing import Any

from olav.llm.tokenize import engine_of

_OLLAMA_OPTIONS = ("mirostat", "mirostat_eta", "mirostat_tau", "num_ctx", "num_gpu", "num_thread",
                   "num_predict", "repeat_last_n", "repeat_penalty", "temperature", "seed",
                   "stop", "tfs_z", "top_k", "top_p", "presence_penalty",
                   "frequency_penalty")  # fmt: skip


def extra_body(request: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """The ``extra_body`` a call's settings send: the model's own (the ``max_tokens`` the model
    factory puts there) under this call's, since a call's ``extra_body`` replaces the model's."""
    own = getattr(engine_of(request.model), "extra_body", None) or {}
    return {**own, **(settings.get("extra_body") or {})}


def with_asked(request: Any, asked: dict[str, Any], provider: str, num_predict: int) -> Any:
    """``request`` with what the client asked for in its model settings."""
    if not asked:
        return request
    wanted = dict(asked)
    if "max_tokens" in wanted:
        wanted["max_tokens"] = min(int(wanted["max_tokens"]), num_predict)
    settings = dict(getattr(request, "model_settings", None) or {})
    if provider == "ollama":
        engine = engine_of(request.model)
        options = {k: getattr(engine, k, None) for k in _OLLAMA_OPTIONS}
        options = {k: v for k, v in options.items() if v is not None}
        if "max_tokens" in wanted:
            options["num_predict"] = wanted.pop("max_tokens")
        options.update(wanted)
        settings["options"] = options
    elif provider == "openai":
        if "max_tokens" in wanted:
            cap = wanted.pop("max_tokens")
            settings["max_completion_tokens"] = cap
            settings["extra_body"] = {**extra_body(request, settings), "max_tokens": cap}
        settings.update(wanted)
    else:
        return request
    return request.override(model_settings=settings)
