"""``/openapi.json`` is made from the routes' declarations (olav/serve/routing.py) and their
models; this diffs it against the document olav wrote by hand before (kept as data in
tests/serve/data/openapi_handwritten.json): every route, parameter, request field, required
field and status is the same, but for the differences listed here, each with its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from olav.serve.openapi import document

BEFORE = Path(__file__).parent / "data" / "openapi_handwritten.json"

# what differs from the hand-written document, and why: each is what the server read or sent
# before without the document saying so (the declaration now says it)
INTENDED = {
    ("GET /threads/{thread_id}/history", "parameter", "limit"): "the GET reads ?limit too",
    ("POST /threads/count", "field", "values"): "a non-empty one is a 422 that says so",
    ("POST /threads/search", "field", "values"): "a non-empty one is a 422 that says so",
    ("POST /threads/search", "field", "extract"): "a non-empty one is a 422 that says so",
    ("POST /v1/chat/completions", "field", "presence_penalty"): "passed to the engine",
    ("POST /v1/chat/completions", "field", "frequency_penalty"): "passed to the engine",
    ("POST /v1/chat/completions", "field", "user"): "recorded in the run's audit",
    ("POST /threads/{thread_id}/state", "200 requires", "checkpoint"): "always answered",
    # everything under /v1 answers errors in OpenAI's shape, /v1/models' 401 and 503 too
    ("GET /v1/models", "401 field", "error"): "OpenAI's error shape, as every /v1 route",
    ("GET /v1/models", "503 field", "error"): "OpenAI's error shape, as every /v1 route",
    # fields of an answer the server always sent, which the answer's model now declares
    ("GET /assistants/{assistant_id}/graph", "200 field", "name"): "the agent's name",
    **{
        (route, "200 field", name): "OpenAI's model object has it"
        for route in ("GET /v1/models/{model}", "GET /v1/models/olav/{model}")
        for name in ("created", "owned_by")
    },
}

# what the hand-written document said that the generated one does not, and why
REMOVED = {
    (route, f"{status} requires", "detail"): "either olav's error or OpenAI's, as every /v1 route"
    for route in ("GET /v1/models",)
    for status in ("401", "503")
}


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _fields(doc: dict[str, Any], schema: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The properties of a schema (through $ref, anyOf, items) and the ones it requires."""
    schema = _resolve(doc, schema)
    if schema.get("type") == "array" and "items" in schema:
        schema = _resolve(doc, schema["items"])
    names, required = set(schema.get("properties", {})), set(schema.get("required", []))
    for part in schema.get("anyOf", []):
        more, _ = _fields(doc, part)
        names |= more
    return names, required


def _shape(doc: dict[str, Any]) -> set[tuple[str, str, str]]:
    """Every route's parameters, statuses, media types, body fields and required fields, and
    its answers' fields, as (route, what, name)."""
    out: set[tuple[str, str, str]] = set()
    for path, item in doc["paths"].items():
        shared = item.get("parameters", [])
        for method, op in item.items():
            if method == "parameters":
                continue
            route = f"{method.upper()} {path}"
            out.add((route, "route", ""))
            for param in [*shared, *op.get("parameters", [])]:
                out.add((route, "parameter", param["name"]))
                if param.get("required"):
                    out.add((route, "requires parameter", param["name"]))
            body = op.get("requestBody")
            if body:
                out.add((route, "body", "required" if body["required"] else "optional"))
                names, required = _fields(doc, body["content"]["application/json"]["schema"])
                out |= {(route, "field", n) for n in names}
                out |= {(route, "requires", n) for n in required}
            for status, answer in op["responses"].items():
                out.add((route, "status", status))
                for media, content in answer.get("content", {}).items():
                    out.add((route, f"{status} media", media))
                    names, required = _fields(doc, content["schema"])
                    out |= {(route, f"{status} field", n) for n in names}
                    out |= {(route, f"{status} requires", n) for n in required}
    return out


def test_the_generated_document_differs_from_the_hand_written_one_only_as_listed() -> None:
    before = _shape(json.loads(BEFORE.read_text(encoding="utf-8")))
    now = _shape(document("test"))
    assert now - before == set(INTENDED), sorted((now - before) ^ set(INTENDED))
    assert before - now == set(REMOVED), sorted((before - now) ^ set(REMOVED))


def test_every_bound_of_the_hand_written_document_is_still_said() -> None:
    """The bounds (maxLength, maximum, maxItems…) the old document gave, each still given
    somewhere in the new one for the same route: the models carry them now."""
    keys = (
        "maxLength",
        "minLength",
        "maximum",
        "minimum",
        "maxItems",
        "minItems",
        "pattern",
        "maxProperties",
        "minProperties",
        "enum",
        "const",
    )

    def bounds(doc: dict[str, Any]) -> set[tuple[str, Any]]:
        found: set[tuple[str, Any]] = set()
        todo: list[Any] = [doc]
        while todo:
            node = todo.pop()
            if isinstance(node, dict):
                found |= {(k, json.dumps(node[k])) for k in keys if k in node and k != "enum"}
                if "enum" in node:  # a set of values: in any order
                    found.add(("enum", json.dumps(sorted(node["enum"], key=json.dumps))))
                if "const" in node:  # one value: pydantic's const is the old enum of one
                    found.add(("enum", json.dumps([node["const"]])))  # one value
                todo += node.values()
            elif isinstance(node, list):
                todo += node
        return found

    before = bounds(json.loads(BEFORE.read_text(encoding="utf-8")))
    assert before <= bounds(document("test")), sorted(before - bounds(document("test")))
