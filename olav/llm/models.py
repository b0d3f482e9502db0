"""The model factory: ``ollama`` (default), ``openai`` (any compatible server) and ``scripted``.

``scripted`` replays a YAML/JSON script of assistant turns and tool calls. It exists for tests
and demos only; it sits behind the same factory so tests exercise the real agent code paths.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from olav.core import yamltext
from olav.core.config import Workspace
from olav.core.errors import ConfigError, ModelError
from olav.llm.tiers import model_tier as model_tier  # re-exported


class ScriptedChatModel(BaseChatModel):
    """Replays scripted turns: ``{"content": str, "tool_calls": [{"name", "args"}]}``, or
    ``{"error": str}`` to fail that call.

    A turn may also carry ``when`` (a substring) and ``otherwise`` (another turn): if the last
    human message lacks the substring, ``otherwise`` is replayed in its place. This scripts how
    a model reacts with and without, say, the ``<relevant-memories>`` block. ``echo: true``
    appends the last human message (without that block) to the content, so a benchmark can
    tell which request an answer belongs to. ``usage: {"input_tokens", "output_tokens"}`` is
    the token count a server would report for the call (its ``usage_metadata``).
    ``delay_s`` is how long the call takes (a slow model, for the load benchmarks).

    Every call records the messages it received in ``calls``, so tests can assert exactly
    what the model saw. **For tests and demos only.**
    """

    turns: list[dict[str, Any]] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[list[str]] = Field(default_factory=list)
    position: int = 0
    _lock: Any = None

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._lock = threading.Lock()

    @property
    def _llm_type(self) -> str:
        return "olav-scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        names = [
            getattr(t, "name", None) or (t.get("name") if isinstance(t, dict) else None)
            for t in tools
        ]
        self.bound_tools.append([n for n in names if n])
        return self

    def _next_turn(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self.calls.append(list(messages))
            if self.position >= len(self.turns):
                turn: dict[str, Any] = {"content": "(the script has no more turns)"}
            else:
                turn = self.turns[self.position]
            self.position += 1
        if "when" in turn:
            human = next((m for m in reversed(messages) if m.type == "human"), None)
            if human is None or str(turn["when"]) not in str(human.content):
                turn = turn.get("otherwise") or {}
        if turn.get("delay_s"):
            time.sleep(float(turn["delay_s"]))
        if turn.get("error"):  # scripted failure, e.g. to exercise failed-run handling
            raise RuntimeError(str(turn["error"]))
        content = str(turn.get("content", ""))
        if turn.get("echo"):
            human = next((m for m in reversed(messages) if m.type == "human"), None)
            said = str(human.content) if human is not None else ""
            content += said.rsplit("</relevant-memories>", 1)[-1].strip()
        calls = [
            {
                "name": c["name"],
                "args": c.get("args", {}),
                "id": f"call_{self.position}_{i}",
                "type": "tool_call",
            }
            for i, c in enumerate(turn.get("tool_calls") or [])
        ]
        usage = turn.get("usage")
        meta = {**usage, "total_tokens": sum(usage.values())} if usage else None
        # "done_reason": "length" plays a message that stopped on the token limit
        done = {"done_reason": str(turn["done_reason"])} if turn.get("done_reason") else {}
        return AIMessage(
            content=content, tool_calls=calls, usage_metadata=meta, response_metadata=done
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next_turn(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        msg = self._next_turn(messages)
        text = str(msg.content)
        words = re.findall(r"\S+\s*", text) or [""]
        for i, word in enumerate(words):
            last = i == len(words) - 1
            chunk = AIMessageChunk(
                content=word,
                tool_call_chunks=[
                    {
                        "name": c["name"],
                        "args": json.dumps(c["args"]),
                        "id": c["id"],
                        "index": j,
                        "type": "tool_call_chunk",
                    }
                    for j, c in enumerate(msg.tool_calls)
                ]
                if last
                else [],
                usage_metadata=msg.usage_metadata if last else None,
                response_metadata=dict(msg.response_metadata) if last else {},
            )
            if run_manager:
                run_manager.on_llm_new_token(word, chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)


def load_script(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ConfigError(f"llm.script {path} does not exist", hint="Point llm.script at a file")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix == ".json" else yamltext.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError):
        raise ConfigError(f"{path} is not valid JSON/YAML", hint="Fix the script file") from None
    turns = data.get("turns") if isinstance(data, dict) else data
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise ConfigError(f"{path}: expected a list of turns", hint="See docs/configuration.md")
    return turns


def workspace_chat_model(ws: Workspace, *, model: str | None = None) -> BaseChatModel:
    """The chat model a workspace's configuration names (``model`` overrides its name)."""
    return make_chat_model(ws.config, model=model, root=ws.root)


def make_chat_model(
    config: Any, *, model: str | None = None, root: Path | None = None
) -> BaseChatModel:
    """Build the configured chat model; ``model`` overrides the name (per-agent override)."""
    provider = config["llm.provider"]
    name = model or config["llm.model"]
    if provider == "ollama":
        from langchain_ollama import ChatOllama

        from olav.core.net import tls_context

        return ChatOllama(
            model=name,
            base_url=config["llm.base_url"],
            client_kwargs={"verify": tls_context()},
            num_ctx=config["llm.num_ctx"],
            num_predict=config["llm.num_predict"],
            temperature=config["llm.temperature"],
            reasoning=config["llm.thinking"],
        )
    if provider == "openai":
        try:
            from olav.llm.openai_chat import OpenAIChat
        except ImportError:
            raise ConfigError(
                "llm.provider openai needs the langchain-openai package",
                hint="Run `pip install langchain-openai` in olav's environment",
            ) from None
        key = os.environ.get(config["llm.api_key_env"]) or "not-needed"
        from pydantic import SecretStr

        return OpenAIChat(
            model=name,
            base_url=config["llm.base_url"],
            api_key=SecretStr(key),
            temperature=config["llm.temperature"],
            max_completion_tokens=config["llm.num_predict"],
            # and the older name beside it: llama-cpp-python's server (and others that
            # predate max_completion_tokens) honour only max_tokens (asked for 5 tokens with
            # the new name alone, it wrote 627); the body carries both, the same value
            extra_body={"max_tokens": config["llm.num_predict"]},
            # usage in the stream from servers that send it when asked (vLLM, llama-server);
            # where none comes, the rescue layer estimates and says so (tokens_estimated)
            stream_usage=True,
        )
    if provider == "scripted":
        script = Path(config["llm.script"])
        if not script.is_absolute() and root is not None:
            script = root / script
        return ScriptedChatModel(turns=load_script(script))
    raise ModelError(f"unknown llm.provider {provider!r}")


def verdict_model(config: Any, *, root: Path | None = None) -> BaseChatModel | None:
    """The chat model as recall's judge of close calls (``memory.judge: model``): its thinking
    off and a short answer, since a verdict is a few tokens. None when the judge is off."""
    if str(config["memory.judge"]) == "off":
        return None
    model = make_chat_model(config, root=root)
    tuned = {
        k: v
        for k, v in {"reasoning": False, "num_predict": 64, "temperature": 0.0}.items()
        if k in type(model).model_fields
    }
    return model.model_copy(update=tuned) if tuned else model


def is_connection_error(exc: BaseException) -> bool:
    """Ollama down raises builtin ConnectionError or httpx.ConnectError (unrelated classes)."""
    import httpx

    return isinstance(
        exc, ConnectionError | httpx.ConnectError | httpx.RemoteProtocolError | httpx.ReadError
    )


_OPENAI_START = (
    "Start the server (e.g. `llama-server -m MODEL.gguf --port 8080`, `vllm serve MODEL` "
    "or LM Studio's local server), or set llm.base_url to its URL ending in /v1"
)


def _cause_names(exc: BaseException) -> set[str]:
    """Class names along an exception's cause chain (openai wraps its transport's errors)."""
    names: set[str] = set()
    seen: BaseException | None = exc
    while seen is not None and len(names) < 20:
        names.add(type(seen).__name__)
        seen = seen.__cause__ or seen.__context__
    return names


def never_reached(exc: BaseException) -> bool:
    """The model server could not be connected to at all: Ollama's client raises the builtin
    ConnectionError, httpx ConnectError, openai an APIConnectionError caused by one."""
    return is_connection_error(exc) or bool(
        _cause_names(exc) & {"ConnectError", "ConnectionRefusedError"}
    )


def _openai_error(exc: BaseException, config: Any, model: str) -> ModelError | None:
    """The failures of an OpenAI-compatible server (llama.cpp, vLLM, LM Studio) in one line."""
    try:
        import openai
    except ImportError:  # pragma: no cover - langchain-openai depends on it
        return None
    base = config["llm.base_url"]
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(
            f"the model server at {base} did not answer in time",
            hint="Check that it is running and not overloaded, then retry",
        )
    if isinstance(exc, openai.APIConnectionError):
        if _cause_names(exc) & {"ConnectError", "ConnectionRefusedError"}:
            return ModelError(f"cannot reach the model server at {base}", hint=_OPENAI_START)
        return ModelError(
            f"the connection to {base} broke off mid-response",
            hint="Check that the server is still running (it may have crashed), then retry",
        )
    if isinstance(exc, openai.NotFoundError):
        return ModelError(
            f"the server at {base} has no model {model!r} (404)",
            hint=f"List its models with `curl {base.rstrip('/')}/models` and set llm.model; "
            "llm.base_url must end in /v1",
        )
    if isinstance(exc, openai.BadRequestError):
        return _too_long(exc, base)
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return ModelError(
            f"the server at {base} refused the API key ({exc.status_code})",
            hint=f"Export the key as {config['llm.api_key_env']} (named by llm.api_key_env)",
        )
    return None


# OpenAI's wording, which llama-cpp-python's server and vLLM use too
_WINDOW = re.compile(r"maximum context length is (\d++) tokens")
_ASKED = re.compile(r"(?<!\d)(\d++) in the messages")


def _too_long(exc: Any, base: str) -> ModelError | None:
    """A prompt longer than the server's window (``400 context_length_exceeded``): the window
    as the server says it, and what to do."""
    message = str(getattr(exc, "message", "") or exc)
    body = getattr(exc, "body", None)
    code = (body.get("code") if isinstance(body, dict) else None) or getattr(exc, "code", None)
    window = _WINDOW.search(message)
    if code != "context_length_exceeded" and window is None:
        return None
    said = f" ({window.group(1)} tokens, as the server says)" if window else ""
    asked = _ASKED.search(message)
    size = f" ({asked.group(1)} tokens)" if asked else ""
    return ModelError(
        f"the prompt{size} is longer than the model's window at {base}{said}",
        hint="Start the server with a larger window (llama.cpp -c / --n_ctx, vLLM "
        "--max-model-len) and set llm.num_ctx to it, shorten the request, or /new",
    )


def translate_model_error(
    exc: BaseException, config: Any, model: str, *, answering: bool = False
) -> ModelError | None:
    """A one-line, actionable ModelError for known failures, else None. ``answering``: the
    model had begun to answer, so a lost connection is a server that broke off, not one
    that cannot be reached."""
    base = config["llm.base_url"]
    if (
        answering
        and config["llm.provider"] != "openai"  # its own errors say so (_openai_error)
        and (is_connection_error(exc) or _broke_off(exc))
    ):
        return ModelError(
            f"the model server at {base} broke off its answer ({type(exc).__name__}): what "
            "was shown is incomplete",
            hint="Retry; if it happens again, look at the server's log (it may have run out of "
            "memory or been restarted)",
        )
    if config["llm.provider"] == "openai":
        # the server's own error may sit beneath another's (deepagents' summarization raises
        # ContextOverflowError from the 400 it could not recover from)
        seen: BaseException | None = exc
        for _ in range(8):
            if seen is None:
                break
            translated = _openai_error(seen, config, model)
            if translated is not None:
                return translated
            seen = seen.__cause__ or seen.__context__
        return None
    if isinstance(exc, json.JSONDecodeError) and config["llm.provider"] == "ollama":
        return ModelError(
            f"the connection to {base} broke off mid-response",
            hint="Check that `ollama serve` is still running, then retry",
        )
    if is_connection_error(exc):
        return ModelError(
            f"cannot reach the model server at {base} ({type(exc).__name__})",
            hint="Start it with `ollama serve`, or set llm.base_url",
        )
    try:
        import ollama

        if isinstance(exc, ollama.ResponseError) and exc.status_code == 404:
            return ModelError(f"Ollama has no model {model!r}", hint=f"Run `ollama pull {model}`")
    except ImportError:  # pragma: no cover - ollama is a dependency
        pass
    return None


def _broke_off(exc: BaseException) -> bool:
    """An HTTP stream that ended before its answer did (the server closed it mid-way)."""
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx comes with ollama
        return False
    return isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | json.JSONDecodeError)


def warm_up(cfg: Any, model: str) -> bool:
    """Ask the Ollama server to load ``model`` now (an empty generate loads it and answers
    at once), so that the chat's first request does not wait for the load. Best effort:
    False when the provider is not Ollama or the server did not answer."""
    if cfg["llm.provider"] != "ollama":
        return False
    try:
        import ollama

        from olav.core.net import tls_context

        client = ollama.Client(host=cfg["llm.base_url"], timeout=30, verify=tls_context())
        client.generate(model=model, prompt="")
    except Exception:  # the first request reports a real problem, with its fix
        return False
    return True
