"""olav serve against LangGraph Server's own OpenAPI document (the ``openapi.json`` inside the
``langgraph-api`` wheel, which `make install` downloads into .cache/reference without installing
it): every route olav serves is one of LangGraph's or is named as olav's own; its success
statuses, request fields and stream modes are LangGraph's unless listed below with the reason;
and the answers a real flow gets validate against LangGraph's response schemas. Each listed
difference is named in docs/http-api.md's "What differs from the Agent Protocol"."""

from __future__ import annotations

import json
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.serve._support import human, serving
from tests.serve.test_serve_interrupts import SnapshotModel

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = "langgraph_api-0.16.7-py3-none-any.whl"
DOCS = ROOT / "docs" / "http-api.md"

# routes that are olav's own, not LangGraph's
OLAV_ROUTES = {
    "GET /openapi.json": "olav's OpenAPI document (LangGraph serves its own at /openapi.json too)",
    "GET /v1/models": "the OpenAI-compatible endpoint",
    "GET /v1/models/{model}": "the OpenAI-compatible endpoint (models.retrieve)",
    "GET /v1/models/olav/{model}": "the OpenAI-compatible endpoint (an olav/<agent> id)",
    "POST /v1/chat/completions": "the OpenAI-compatible endpoint",
}
# success statuses that differ, and why
STATUSES = {
    "DELETE /threads/{thread_id}": "204: what LangGraph's server answers (its document: 200)",
    "POST /threads/{thread_id}/runs/{run_id}/cancel": "202 while it ends, 204 once it has ended",
    "PUT /store/items": "202: a put is a draft waiting for a person",
}
# request fields LangGraph's document does not list that olav reads (the SDKs send them)
OLAV_FIELDS = {
    "checkpoint_id",
    "checkpoint",
    "if_not_exists",
    "multitask_strategy",
    "on_disconnect",
}
# LangGraph's request fields olav does not read; docs/http-api.md names each
UNUSED_FIELDS = {
    "name", "select", "sort_by", "sort_order",  # assistant search: the workspace's agents
    "config", "context", "interrupt_before", "interrupt_after", "webhook",
    "ttl", "refresh_ttl", "supersteps", "extract", "values", "checkpoint",
    "after_seconds", "on_completion", "checkpoint_during", "durability", "feedback_keys",
    "stream_resumable", "stream_subgraphs",
}  # fmt: skip
# answer fields that may be null although LangGraph's document says otherwise, because its
# server sends null there too (langgraph_api/schema.py: ``parent_checkpoint: Checkpoint | None``)
# and a task's error, checkpoint and state (ThreadTask: ``error: str | None``, …)
NULLABLE = {"parent_checkpoint", "error", "checkpoint", "state"}
METHODS = ("get", "post", "put", "patch", "delete")


@cache
def reference() -> dict[str, Any]:
    wheel = ROOT / ".cache" / "reference" / REFERENCE
    assert wheel.is_file(), f"{wheel} is missing: `make install` downloads it (pip download)"
    with zipfile.ZipFile(wheel) as z:
        return dict(json.loads(z.read("openapi.json")))


@cache
def ours() -> dict[str, Any]:
    from olav.serve.openapi import document

    return document("test")


def operations(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{method.upper()} {path}": op
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in METHODS
    }


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def fields(doc: dict[str, Any], op: dict[str, Any]) -> set[str]:
    """The properties of an operation's JSON request body (through $ref, allOf and anyOf)."""
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    found: set[str] = set()
    todo = [body.get("schema", {})]
    while todo:
        schema = resolve(doc, todo.pop())
        found |= set(schema.get("properties", {}))
        for key in ("allOf", "anyOf", "oneOf"):
            todo += schema.get(key, [])
    return found


def success(op: dict[str, Any]) -> set[str]:
    return {code for code in op.get("responses", {}) if code.startswith("2")}


def differences_section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("### What differs from the Agent Protocol")
    return text[start : text.index("\n## ", start)]


def test_every_route_olav_serves_is_langgraphs_or_named_as_olavs() -> None:
    theirs, mine = operations(reference()), operations(ours())
    unknown = sorted(set(mine) - set(theirs) - set(OLAV_ROUTES))
    assert not unknown, f"routes LangGraph does not have, not in OLAV_ROUTES: {unknown}"
    stale = sorted(r for r in OLAV_ROUTES if r in theirs or r not in mine)
    assert not stale, stale


def test_success_statuses_are_langgraphs_unless_listed() -> None:
    theirs, mine = operations(reference()), operations(ours())
    differ = {r for r in mine if r in theirs and success(mine[r]) != success(theirs[r])}
    assert differ == set(STATUSES), {
        r: (sorted(success(mine[r])), sorted(success(theirs[r]))) for r in differ ^ set(STATUSES)
    }


def test_request_fields_are_langgraphs_and_the_unused_ones_are_documented() -> None:
    theirs, mine = operations(reference()), operations(ours())
    extra: dict[str, set[str]] = {}
    unused: set[str] = set()
    for route, op in mine.items():
        if route not in theirs:
            continue
        given, known = fields(ours(), op), fields(reference(), theirs[route])
        if given - known - OLAV_FIELDS:
            extra[route] = given - known - OLAV_FIELDS
        unused |= known - given
    assert not extra, f"fields LangGraph's document does not have: {extra}"
    assert unused <= UNUSED_FIELDS, sorted(unused - UNUSED_FIELDS)
    section = differences_section()
    missing = sorted(f for f in UNUSED_FIELDS if f"`{f}`" not in section)
    assert not missing, f"docs/http-api.md's differences section does not name {missing}"


def test_the_stream_modes_are_langgraphs() -> None:
    def modes(doc: dict[str, Any], name: str) -> set[str]:
        schema = resolve(doc, {"$ref": f"#/components/schemas/{name}"})["properties"]
        found: set[str] = set()
        todo = [schema["stream_mode"]]
        while todo:
            part = todo.pop()
            found |= set(part.get("enum", []))
            todo += part.get("anyOf", []) + ([part["items"]] if "items" in part else [])
        return found

    assert modes(ours(), "RunCreate") == modes(reference(), "RunCreateStateful")


def test_a_real_flows_answers_fit_langgraphs_response_schemas(tmp_path: Path) -> None:
    doc = reference()
    resource = Resource.from_contents(doc, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:ref", resource)

    def check(route: str, answer: Any) -> None:
        method, path = route.split(" ", 1)
        parts = ["paths", path, method.lower(), "responses", "200", "content"]
        parts += ["application/json", "schema"]
        pointer = "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)
        wrapped = {"$ref": "urn:ref#" + pointer}  # its $refs resolve in the whole document
        validator = jsonschema.Draft202012Validator(wrapped, registry=registry)
        errors = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(answer)
            if not (e.instance is None and e.absolute_path and e.absolute_path[-1] in NULLABLE)
        ]
        assert not errors, (route, errors[:5])

    with serving(tmp_path / "ws", model=SnapshotModel()) as served, served.http() as http:
        checked = 0

        def get(route: str, url: str, **kw: Any) -> Any:
            nonlocal checked
            method = route.split(" ", 1)[0]
            res = http.request(method, url, **kw)
            assert res.status_code == 200, (route, res.text)
            check(route, res.json())
            checked += 1
            return res.json()

        thread = get("POST /threads", "/threads", json={"metadata": {"graph_id": "netops"}})
        tid = thread["thread_id"]
        run = {"assistant_id": "netops", "input": human("take a snapshot of sh1-border01")}
        get("POST /threads/{thread_id}/runs/wait", f"/threads/{tid}/runs/wait", json=run)
        get("GET /threads/{thread_id}", f"/threads/{tid}")  # interrupted, with its interrupts
        state = get("GET /threads/{thread_id}/state", f"/threads/{tid}/state")
        head = state["checkpoint"]["checkpoint_id"]
        at = f"/threads/{tid}/state/{head}"
        get("GET /threads/{thread_id}/state/{checkpoint_id}", at)
        get(
            "POST /threads/{thread_id}/state/checkpoint",
            f"/threads/{tid}/state/checkpoint",
            json={"checkpoint": state["checkpoint"]},
        )
        get("POST /threads/{thread_id}/history", f"/threads/{tid}/history", json={"limit": 5})
        get("GET /threads/{thread_id}/history", f"/threads/{tid}/history")
        runs = get("GET /threads/{thread_id}/runs", f"/threads/{tid}/runs")
        get("GET /threads/{thread_id}/runs/{run_id}", f"/threads/{tid}/runs/{runs[0]['run_id']}")
        resume = {"assistant_id": "netops", "command": {"resume": [{"type": "accept"}]}}
        get("POST /threads/{thread_id}/runs/wait", f"/threads/{tid}/runs/wait", json=resume)
        get("POST /threads/search", "/threads/search", json={"metadata": {"graph_id": "netops"}})
        get("POST /threads/count", "/threads/count", json={"metadata": {"graph_id": "netops"}})
        get("PATCH /threads/{thread_id}", f"/threads/{tid}", json={"metadata": {"tag": "x"}})
        get("POST /assistants/search", "/assistants/search", json={})
        get("GET /assistants/{assistant_id}", "/assistants/netops")
        get("GET /info", "/info")
        get("POST /store/items/search", "/store/items/search", json={"namespace_prefix": []})
    assert checked == 18
