"""The OpenAPI 3.1 document of ``olav serve`` (``GET /openapi.json``, with a token like every
route but ``/ok``), made from the routes' declarations (:mod:`.routing`) and their models
(:mod:`.schema`, :mod:`.answers`): the document says what the server checks because both are
the same declaration. JSON Schema cannot say everything a route checks (metadata's size as
JSON, how deep it nests, whether an assistant exists), so a body that fits the schema may
still be refused, always with a 4xx the document lists."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, JsonValue, TypeAdapter
from starlette.requests import Request

from olav.serve.answers import Error, Ok, OpenAIError
from olav.serve.http import MAX_ID
from olav.serve.routing import Op, Param, Reply, Routes
from olav.serve.server import Server

REF = "#/components/schemas/{model}"
ERRORS = {
    400: "a field olav does not do (tools, response_format, n > 1…): the error names it",
    401: "no token, a wrong one or a revoked one",
    403: "a store delete of a shared memory or a guide",
    404: "no such route, assistant, thread, run or item (or another operator's)",
    409: "the thread runs a run already, exists already, or waits for no answer",
    413: "the body is over --max-body",
    422: "the request breaks a rule or a bound: the detail names which",
    502: "the run failed",
    503: "the tokens or the memory table cannot be read",
}
PATH_PARAMS = {
    "thread_id": "the thread's id (or a unique prefix of it)",
    "run_id": "the run's id",
    "assistant_id": "the agent's name",
    "checkpoint_id": "the checkpoint's id",
    "model": "the agent's name",
}


OWN = Routes()  # the server's own: its health, and this document


@OWN.get("/ok", "health (no token)", Reply("the server answers", Ok), open=True)
def _ok(server: Server, request: Request, operator: str) -> Ok:
    return Ok(ok=True)


@OWN.get("/openapi.json", "this document", Reply("OpenAPI 3.1", dict[str, JsonValue]))
def _openapi(server: Server, request: Request, operator: str) -> dict[str, JsonValue]:
    from olav import __version__

    return document(__version__)


class _Schemas:
    """The components the document's operations refer to, collected as they are named."""

    def __init__(self) -> None:
        self.found: dict[str, Any] = {}

    def of(self, kind: Any, mode: str = "validation") -> dict[str, Any]:
        """``kind``'s schema (a model: a reference to its component)."""
        schema = TypeAdapter(kind).json_schema(ref_template=REF, mode=mode)  # type: ignore[arg-type]
        for name, found in schema.pop("$defs", {}).items():
            self.found[name] = _plain(found)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            self.found[kind.__name__] = _plain(schema)
            return {"$ref": REF.format(model=kind.__name__)}
        return _plain(schema)


def _plain(schema: Any, *, properties: bool = False) -> Any:
    """``schema`` without pydantic's titles (a property named ``title`` stays)."""
    if isinstance(schema, list):
        return [_plain(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: _plain(value, properties=key == "properties" and not properties)
        for key, value in schema.items()
        if properties or key != "title" or not isinstance(value, str)
    }


def _parameters(op: Op, schemas: _Schemas) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in re.findall(r"{(\w+)}", op.path):
        out.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": PATH_PARAMS.get(name, name),
                "schema": {"type": "string", "minLength": 1, "maxLength": MAX_ID},
            }
        )
    for param in op.params:
        out.append(_parameter(param, schemas))
    if op.query is not None:
        model = op.query.model_json_schema(ref_template=REF)
        for name, schema in model["properties"].items():
            entry: dict[str, Any] = {"name": name, "in": "query"}
            if name in model.get("required", ()):
                entry["required"] = True
            if "description" in schema:
                entry["description"] = schema["description"]
            entry["schema"] = _plain(schema)
            if schema.get("type") == "array":
                entry |= {"style": "form", "explode": True}
            out.append(entry)
    return out


def _parameter(param: Param, schemas: _Schemas) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": param.name, "in": param.where}
    if param.required:
        entry["required"] = True
    if param.description:
        entry["description"] = param.description
    entry["schema"] = schemas.of(param.type)
    if param.repeated:
        entry |= {"style": "form", "explode": True}
    return entry


def _operation(op: Op, schemas: _Schemas) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": op.summary}
    if op.open:
        out["security"] = []
    parameters = _parameters(op, schemas)
    if parameters:
        out["parameters"] = parameters
    if op.body is not None:
        media = {"application/json": {"schema": schemas.of(op.body)}}
        out["requestBody"] = {"required": op.body_required, "content": media}
    responses: dict[str, Any] = {}
    for status, reply in op.replies.items():
        content: dict[str, Any] = {}
        if reply.json is not None:
            content["application/json"] = {"schema": schemas.of(reply.json, "serialization")}
        if reply.events is not None:
            content["text/event-stream"] = {"schema": schemas.of(reply.events, "serialization")}
        responses[str(status)] = {"description": reply.description}
        if content:
            responses[str(status)]["content"] = content
    if not op.open:
        error = schemas.of(Error, "serialization")
        if op.openai:
            error = {"anyOf": [error, schemas.of(OpenAIError, "serialization")]}
        for status in sorted({401, 503, *op.errors}):
            shape = schemas.of(OpenAIError, "serialization") if status == 502 else error
            responses[str(status)] = {
                "description": ERRORS[status],
                "content": {"application/json": {"schema": shape}},
            }
    out["responses"] = responses
    return out


def operations() -> list[Op]:
    """Every route of the server, as declared, in the document's order."""
    from olav.serve import openai_api, protocol, store_api

    return [*OWN.ops, *protocol.ROUTES, *openai_api.V1.ops, *store_api.STORE.ops]


def document(version: str, ops: Iterable[Op] | None = None) -> dict[str, Any]:
    """The whole document (``version``: olav's) of ``ops`` (every route's by default)."""
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    for op in operations() if ops is None else ops:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "olav serve",
            "version": version,
            "description": "The Agent Protocol subset, the LangGraph Store API over olav's "
            "memory, and OpenAI-compatible chat (docs/http-api.md).",
        },
        "security": [{"bearer": []}, {"apiKey": []}],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(schemas.found.items())),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            },
        },
    }
