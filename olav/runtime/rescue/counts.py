"""A model call's tokens, from whoever can count them.

1. the engine's usage (Ollama's ``prompt_eval_count``; an OpenAI stream's usage when asked);
2. else the engine's tokenizer (olav.llm.tokenize: llama-cpp-python's ``/extras/tokenize``,
   llama-server's ``/tokenize``), asked after the call for the prompt's and the answer's text;
3. else an estimate from the text, said to be one (``tokens_estimated``).

``RescueState.counted_by`` keeps the least exact source of the run.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from olav.llm.tokenize import engine_counts
from olav.runtime.middleware import message_text
from olav.runtime.middleware.run_context import RescueState
from olav.runtime.rescue.response import prompt_text

_EXACTNESS = ("engine", "tokenizer", "estimate")


def call_tokens(state: RescueState, request: Any, msg: AIMessage) -> tuple[int, int]:
    """(prompt, answer) tokens of the call ``request`` made and ``msg`` answered."""
    usage = getattr(msg, "usage_metadata", None) or {}
    prompt = int(usage.get("input_tokens") or 0)
    written = int(usage.get("output_tokens") or 0)
    if prompt or written:
        return prompt, written
    texts = [prompt_text(request), message_text(msg)]
    counts = engine_counts(getattr(request, "model", None), texts) if request else None
    if counts is not None:
        _counted(state, "tokenizer")
        return counts[0], counts[1]
    from olav.memory.store.token_counts import estimate_tokens

    _counted(state, "estimate")
    state.tokens_estimated = True
    return estimate_tokens(texts[0]), estimate_tokens(texts[1])


def _counted(state: RescueState, source: str) -> None:
    if _EXACTNESS.index(source) > _EXACTNESS.index(state.counted_by):
        state.counted_by = source


def cut_warning(limit: int, last_call: tuple[int, int], what: str, provider: str) -> str:
    """What the person is told of an answer that stopped on a limit: ``llm.num_predict``, or,
    on an OpenAI-compatible server when the answer is well short of it, the server's window
    (the prompt and the answer filled it: llama.cpp stops there with the same
    ``finish_reason: length``; Ollama's window is olav's ``num_ctx``, and it cuts the prompt)."""
    prompt, written = last_call
    if provider == "openai" and written and written < 0.9 * limit:
        return (
            f"the model's answer was cut off after {written} tokens, short of llm.num_predict "
            f"({limit}): the server's window was full (the prompt took {prompt}){what}. Start "
            "the server with a larger window (llama.cpp -c / --n_ctx) and set llm.num_ctx to "
            "it, or /new"
        )
    return (
        f"the model's answer was cut off at its token limit (llm.num_predict = {limit}){what}. "
        "Raise llm.num_predict in olav.yaml (and the server's limit), or ask for less at once"
    )
