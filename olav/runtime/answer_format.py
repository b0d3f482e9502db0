"""A client's ``response_format``: the answer held to JSON by the engine, then checked.

``json_object`` asks for any JSON object, ``json_schema`` for one that its schema accepts.
The engine does the holding, with its own constrained decoding, as the constrained re-ask
does (olav.runtime.rescue.reask):

- Ollama: ``format``, ``"json"`` or the schema;
- an OpenAI-compatible server: the client's ``response_format`` as it sent it; one that
  refuses ``json_schema`` (llama-cpp-python answers it with a 500) is asked with
  ``json_object`` and the schema beside it, which that server honours, and that is
  remembered for the server.

What comes back is read as JSON and, for ``json_schema``, validated; an answer that fails is
asked for once more with the problem named, and a second failure is the client's error
(:class:`FormatError`), never an invalid answer passed on as valid.
"""

from __future__ import annotations

import json
from typing import Any

from olav.core.errors import OlavError
from olav.llm.tokenize import engine_of, is_openai
from olav.runtime.rescue.reask import refuses_json_schema, remember_refusal

KINDS = ("text", "json_object", "json_schema")


class FormatError(OlavError):
    """The engine's answer did not hold to the client's ``response_format``."""


class FormatUnsupported(FormatError):
    """The engine cannot be held to a format at all, or the format itself is broken."""


def schema_of(response_format: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a ``json_schema`` format names (None for ``json_object``)."""
    if response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema") or {}
    schema = spec.get("schema")
    return schema if isinstance(schema, dict) else {"type": "object"}


def settings_for(model: Any, response_format: dict[str, Any]) -> dict[str, Any] | None:
    """The model settings that hold ``model``'s answer to ``response_format``; None when its
    engine cannot be held (the client is then told, not served unchecked text)."""
    schema = schema_of(response_format)
    engine = engine_of(model)
    if type(engine).__name__ in ("ChatOllama", "ScriptedChatModel"):
        return {"format": schema if schema is not None else "json"}
    if is_openai(engine):
        if schema is not None and refuses_json_schema(model):
            return {"response_format": {"type": "json_object", "schema": schema}}
        return {"response_format": response_format}
    return None


def refused(model: Any, response_format: dict[str, Any]) -> dict[str, Any] | None:
    """After the engine refused ``json_schema``: the settings to ask with instead (None: no
    other way)."""
    if response_format.get("type") != "json_schema" or not is_openai(engine_of(model)):
        return None
    remember_refusal(model)
    return settings_for(model, response_format)


def problem(text: str, response_format: dict[str, Any]) -> str | None:
    """Why ``text`` does not hold to ``response_format`` (None: it does)."""
    import jsonschema

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"the answer is not JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(value, dict):
        return "the answer is JSON but not an object"
    schema = schema_of(response_format)
    if schema is None:
        return None
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the object"
        return f"the answer fails the schema at {where}: {exc.message[:160]}"
    except jsonschema.SchemaError as exc:
        raise FormatUnsupported(
            f"response_format.json_schema.schema is not a JSON schema: {exc.message[:160]}",
            hint="Send a JSON schema (draft 2020-12)",
        ) from None
    return None
