"""The OpenAPI 3.1 document of ``olav serve`` (``GET /openapi.json``, with a token like every
route but ``/ok``): every route's parameters, request body and answers, as data.

It says what the server does, bounds included (:mod:`olav.serve.http`), so that a client
generator, a person and the fuzzer (tests/serve/test_serve_fuzz.py) read the same contract; a
test fails when a route is served without its entry here. JSON Schema cannot say everything a
route checks (metadata's size as JSON, how deep it nests, whether an assistant exists), so a
body that fits the schema may still be refused, always with a 4xx this document lists.

One cohesive catalogue (over 500 lines on purpose): the document is data, one entry per route
and schema, kept in one place so that it is read as the contract it is.
"""

from __future__ import annotations

from typing import Any

from olav.serve.http import (
    MAX_DEPTH,
    MAX_ID,
    MAX_KEYS,
    MAX_LABELS,
    MAX_LIMIT,
    MAX_METADATA,
    MAX_NAME,
    MAX_OFFSET,
    MAX_QUERY,
    MAX_STORE_OFFSET,
    MAX_TAGS,
    STREAM_MODES,
)
from olav.serve.run import STATUSES


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


EVENTS = (
    "metadata",
    "values",
    "updates",
    "messages",
    "messages/metadata",
    "messages/partial",
    "messages/complete",
    "custom",
    "events",
    "debug",
    "checkpoints",
    "tasks",
    "error",
    "end",
)


def _events(description: str) -> dict[str, Any]:
    """Server-sent events; the schema is each event's (OpenAPI 3.2's itemSchema, which
    schemathesis reads from the media type's schema)."""
    return {
        "description": description,
        "content": {"text/event-stream": {"schema": _ref("Event")}},
    }


def _empty(description: str) -> dict[str, Any]:
    return {"description": description}


ERRORS = {
    "400": "a field olav does not do (tools, response_format, n > 1…): the error names it",
    "401": "no token, a wrong one or a revoked one",
    "403": "a store delete of a shared memory or a guide",
    "404": "no such route, assistant, thread, run or item (or another operator's)",
    "409": "the thread runs a run already, exists already, or waits for no answer",
    "413": "the body is over --max-body",
    "422": "the request breaks a rule or a bound: the detail names which",
    "503": "the tokens or the memory table cannot be read",
}


def _errors(*codes: str, openai: bool = False) -> dict[str, Any]:
    """The error answers ``codes`` (and 401 and 503, which every route but /ok may give)."""
    schema = {"anyOf": [_ref("Error"), _ref("OpenAIError")]} if openai else _ref("Error")
    wanted = sorted({"401", "503", *codes})
    return {code: _json(schema, ERRORS[code]) for code in wanted}


def _body(name: str, *, required: bool = False) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": _ref(name)}}}


def _path(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_ID},
    }


THREAD = _path("thread_id", "the thread's id (or a unique prefix of it)")
RUN = _path("run_id", "the run's id")
ASSISTANT = _path("assistant_id", "the agent's name")

ID = {"type": "string", "minLength": 1, "maxLength": MAX_ID}
LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}
OFFSET = {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}
STAMP = {"type": "string", "description": "ISO 8601"}
BOUNDED = f"at most {MAX_KEYS} keys in all, {MAX_DEPTH} levels deep, {MAX_METADATA} bytes as JSON"
METADATA = {"type": "object", "maxProperties": MAX_KEYS, "description": "labels: " + BOUNDED}
LABELS = {
    "type": "array",
    "maxItems": MAX_LABELS,
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_ID},
}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["detail"],
        "properties": {"detail": {"type": "string", "description": "what was wrong"}},
    },
    "OpenAIError": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type", "code"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "code": {"type": "string"},
                },
            }
        },
    },
    "Event": {
        "type": "object",
        "required": ["event", "data", "id"],
        "properties": {
            "event": {"enum": list(EVENTS)},
            "data": {"type": "string", "description": "JSON"},
            "id": {"type": "string", "pattern": "^[0-9]+$"},
        },
    },
    "ChatChunk": {
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"type": "string", "description": "JSON, or [DONE] at the end"}},
    },
    "Ok": {"type": "object", "required": ["ok"], "properties": {"ok": {"const": True}}},
    "Info": {
        "type": "object",
        "required": ["version", "langgraph_py_version", "olav", "flags", "metadata", "operator"],
        "properties": {
            "version": {"type": "string", "description": "olav's version"},
            "langgraph_py_version": {"type": "string"},
            "olav": {"const": True},
            "flags": {"type": "object"},
            "metadata": {"type": "object"},
            "operator": {"type": "string"},
        },
    },
    "Assistant": {
        "type": "object",
        "required": ["assistant_id", "graph_id", "name", "metadata", "created_at"],
        "properties": {
            "assistant_id": {"type": "string"},
            "graph_id": {"type": "string"},
            "name": {"type": "string"},
            "description": {"type": ["string", "null"]},
            "config": {"type": "object"},
            "context": {"type": "object"},
            "metadata": {"type": "object"},
            "version": {"type": "integer"},
            "created_at": STAMP,
            "updated_at": STAMP,
        },
    },
    "Graph": {
        "type": "object",
        "required": ["nodes", "edges"],
        "properties": {"nodes": {"type": "array"}, "edges": {"type": "array"}},
    },
    "AssistantSchemas": {
        "type": "object",
        "required": ["graph_id", "input_schema", "state_schema"],
        "properties": {
            "graph_id": {"type": "string"},
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object"},
            "state_schema": {"type": "object"},
            "config_schema": {"type": "object"},
            "context_schema": {"type": "object"},
        },
    },
    "Thread": {
        "type": "object",
        "required": ["thread_id", "created_at", "updated_at", "metadata", "status"],
        "properties": {
            "thread_id": {"type": "string"},
            "created_at": STAMP,
            "updated_at": STAMP,
            "metadata": {
                "type": "object",
                "description": "the client's labels, and graph_id, assistant_id, owner, name",
            },
            "status": {"enum": ["idle", "busy", "interrupted"]},
            "interrupts": {"type": "object"},
            "values": {"type": "object", "description": "the thread's state (GET only)"},
        },
    },
    "Checkpoint": {
        "type": "object",
        "required": ["thread_id", "checkpoint_ns", "checkpoint_id"],
        "properties": {
            "thread_id": {"type": "string"},
            "checkpoint_ns": {"type": "string"},
            "checkpoint_id": {"type": ["string", "null"]},
        },
    },
    "ThreadState": {
        "type": "object",
        "required": ["values", "next", "tasks", "checkpoint", "interrupts"],
        "properties": {
            "values": {"type": "object"},
            "next": {"type": "array", "items": {"type": "string"}},
            "tasks": {"type": "array"},
            "metadata": {"type": "object"},
            "created_at": {"type": ["string", "null"]},
            "checkpoint": _ref("Checkpoint"),
            "parent_checkpoint": {"anyOf": [_ref("Checkpoint"), {"type": "null"}]},
            "interrupts": {"type": "array"},
        },
    },
    "Run": {
        "type": "object",
        "required": ["run_id", "thread_id", "assistant_id", "status", "created_at"],
        "properties": {
            "run_id": {"type": "string"},
            "thread_id": {"type": "string"},
            "assistant_id": {"type": "string"},
            "created_at": STAMP,
            "updated_at": STAMP,
            "status": {"enum": list(STATUSES)},
            "metadata": {"type": "object"},
            "kwargs": {"type": "object"},
            "multitask_strategy": {"enum": ["reject", "enqueue"]},
            "error": {"type": ["string", "null"], "description": "why it failed, or empty"},
        },
    },
    "Values": {
        "type": "object",
        "description": "the thread's values when the run ended (__error__ when it failed)",
    },
    "StoreItem": {
        "type": "object",
        "required": ["namespace", "key", "value", "created_at", "updated_at"],
        "properties": {
            "namespace": {"type": "array", "items": {"type": "string"}},
            "key": {"type": "string"},
            "value": {
                "type": "object",
                "required": ["text", "category", "scope"],
                "properties": {
                    "text": {"type": "string"},
                    "category": {"type": "string"},
                    "scope": {"type": "string"},
                    "origin": {"type": "string"},
                    "confidence": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "metadata": {"type": "object"},
                },
            },
            "created_at": {"type": ["string", "null"]},
            "updated_at": {"type": ["string", "null"]},
            "score": {"type": "number"},
        },
    },
    "Draft": {
        "type": "object",
        "required": ["draft", "status", "confirm"],
        "properties": {
            "draft": {"type": "string"},
            "status": {"const": "pending"},
            "confirm": {"type": "string", "description": "the command that confirms it"},
        },
    },
    "Model": {
        "type": "object",
        "required": ["id", "object"],
        "properties": {"id": {"type": "string"}, "object": {"const": "model"}},
    },
    "Models": {
        "type": "object",
        "required": ["object", "data"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"$ref": "#/components/schemas/Model"}},
        },
    },
    "ChatCompletion": {
        "type": "object",
        "required": ["id", "object", "model", "choices"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "chat.completion"},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "choices": {"type": "array"},
            "usage": {"type": "object"},
        },
    },
    # -- request bodies -------------------------------------------------------------------------
    "AssistantSearch": {
        "type": "object",
        "properties": {"graph_id": ID, "metadata": METADATA, "limit": LIMIT, "offset": OFFSET},
    },
    "ThreadCreate": {
        "type": "object",
        "properties": {
            "thread_id": ID,
            "metadata": METADATA,
            "if_exists": {"enum": ["raise", "do_nothing"]},
        },
    },
    "ThreadSearch": {
        "type": "object",
        "properties": {
            "metadata": METADATA,
            "status": {"enum": ["idle", "busy", "interrupted", "error"]},
            "ids": {"type": "array", "maxItems": 1000, "items": {"type": "string"}},
            "limit": LIMIT,
            "offset": OFFSET,
            "sort_by": {"enum": ["thread_id", "status", "created_at", "updated_at"]},
            "sort_order": {"enum": ["asc", "desc"]},
            "select": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "enum": [
                        "thread_id",
                        "created_at",
                        "updated_at",
                        "metadata",
                        "status",
                        "values",
                        "interrupts",
                    ]
                },
            },
        },
    },
    "ThreadPatch": {
        "type": "object",
        "required": ["metadata"],
        "properties": {
            "metadata": {
                **METADATA,
                "properties": {"name": {"type": "string", "maxLength": MAX_NAME}},
                "description": f"labels to merge: {BOUNDED}; a name renames the thread",
            }
        },
    },
    "ThreadCount": {
        "type": "object",
        "properties": {
            "metadata": METADATA,
            "status": {"enum": ["idle", "busy", "interrupted", "error"]},
        },
    },
    "StateUpdate": {
        "type": "object",
        "required": ["values"],
        "properties": {
            "values": {
                "type": "object",
                "required": ["messages"],
                "properties": {"messages": {"type": ["array", "object"]}},
                "additionalProperties": False,
                "description": "messages to add through the graph's reducer",
            },
            "as_node": {"type": ["string", "null"]},
            "checkpoint": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            "checkpoint_id": {"anyOf": [ID, {"type": "null"}]},
        },
    },
    "StateAt": {
        "type": "object",
        "properties": {
            "checkpoint": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            "subgraphs": {"type": "boolean"},
        },
    },
    "History": {
        "type": "object",
        "properties": {
            "limit": LIMIT,
            "before": {"anyOf": [ID, {"type": "object"}, {"type": "null"}]},
            "metadata": METADATA,
        },
    },
    "RunCreate": {
        "type": "object",
        "required": ["assistant_id"],
        "properties": {
            "assistant_id": ID,
            "input": {
                "description": 'the request: {"messages": [{"role": "user", "content": …}]}',
                "anyOf": [{"type": "object"}, {"type": "string"}, {"type": "null"}],
            },
            "command": {
                "type": "object",
                "description": "resume: the answer to the approval the thread waits on, e.g. "
                '{"decisions": [{"type": "approve"}]}',
                "properties": {"resume": {}},
            },
            "checkpoint": {
                "description": "start from this checkpoint of the thread (a new branch): "
                "without input again (regenerate), with input forked there (edit)",
                "anyOf": [
                    {"type": "object", "properties": {"checkpoint_id": ID}},
                    {"type": "null"},
                ],
            },
            "checkpoint_id": {"anyOf": [ID, {"type": "null"}]},
            "on_disconnect": {"enum": ["continue", "cancel"]},
            "stream_mode": {
                "anyOf": [
                    {"enum": list(STREAM_MODES)},
                    {"type": "array", "items": {"enum": list(STREAM_MODES)}},
                ]
            },
            "metadata": METADATA,
            "multitask_strategy": {"enum": ["reject", "enqueue"]},
            "if_not_exists": {"enum": ["create", "reject"]},
        },
    },
    "ChatRequest": {
        "type": "object",
        "required": ["model", "messages"],
        "properties": {
            "model": {**ID, "description": "olav/<agent>, or the agent's name"},
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["role"],
                    "properties": {
                        "role": {
                            "enum": ["system", "developer", "user", "assistant", "tool", "function"]
                        },
                        "content": {
                            "anyOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}]
                        },
                        "tool_calls": {"type": "array", "description": "an assistant's calls"},
                        "tool_call_id": {"type": "string", "description": "a tool result's"},
                    },
                },
            },
            "tools": {
                "type": "array",
                "maxItems": 128,
                "description": "the client's tools: olav is the model of the client's own "
                "loop (serve.client_tools)",
                "items": {
                    "type": "object",
                    "required": ["type", "function"],
                    "properties": {
                        "type": {"const": "function"},
                        "function": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
                                "description": {"type": "string"},
                                "parameters": {"type": "object"},
                            },
                        },
                    },
                },
            },
            "tool_choice": {
                "anyOf": [
                    {"enum": ["auto", "none", "required"]},
                    {"type": "object", "required": ["type", "function"]},
                ],
                "description": "with tools only; a named function must be offered",
            },
            "parallel_tool_calls": {"type": "boolean"},
            "stream": {"type": "boolean"},
            "stream_options": {
                "type": "object",
                "properties": {"include_usage": {"type": "boolean"}},
            },
            "max_tokens": {
                "type": "integer",
                "minimum": 1,
                "description": "capped by llm.num_predict",
            },
            "max_completion_tokens": {"type": "integer", "minimum": 1},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "top_p": {"type": "number", "minimum": 0, "maximum": 1},
            "stop": {
                "anyOf": [
                    {"type": "string", "minLength": 1, "maxLength": 200},
                    {
                        "type": "array",
                        "maxItems": 4,
                        "items": {"type": "string", "minLength": 1, "maxLength": 200},
                    },
                ]
            },
            "seed": {"type": "integer"},
        },
    },
    "StorePut": {
        "type": "object",
        "required": ["namespace", "key", "value"],
        "properties": {
            "namespace": {**LABELS, "minItems": 1},
            "key": ID,
            "value": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": MAX_KEYS,
                "description": f"text (else the value as JSON) and tags; {MAX_METADATA} bytes "
                "as JSON at most",
                "properties": {
                    "text": {"type": "string"},
                    "tags": {
                        "type": "array",
                        "maxItems": MAX_TAGS,
                        "items": {"type": "string", "maxLength": MAX_ID},
                    },
                },
            },
            "index": {"description": "ignored: olav indexes the text"},
            "ttl": {"description": "ignored: the category's expiry applies"},
        },
    },
    "StoreDelete": {
        "type": "object",
        "required": ["key"],
        "properties": {"namespace": LABELS, "key": ID},
    },
    "StoreSearch": {
        "type": "object",
        "properties": {
            "namespace_prefix": LABELS,
            "filter": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    name: {"type": "string", "maxLength": MAX_ID}
                    for name in ("category", "scope", "origin")
                },
            },
            "query": {"type": "string", "maxLength": MAX_QUERY},
            "limit": LIMIT,
            "offset": {"type": "integer", "minimum": 0, "maximum": MAX_STORE_OFFSET},
        },
    },
    "StoreNamespaces": {
        "type": "object",
        "properties": {
            "prefix": LABELS,
            "suffix": LABELS,
            "max_depth": {"type": "integer", "minimum": 1, "maximum": MAX_LABELS},
            "limit": LIMIT,
            "offset": {"type": "integer", "minimum": 0, "maximum": MAX_STORE_OFFSET},
        },
    },
}


def _op(summary: str, responses: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"summary": summary, **more, "responses": responses}


def _array(name: str) -> dict[str, Any]:
    return {"type": "array", "items": _ref(name)}


def _run_ops(thread: bool) -> dict[str, dict[str, Any]]:
    """POST …/runs/stream and …/runs/wait, on a thread or stateless."""
    params = {"parameters": [THREAD]} if thread else {}
    codes = ("404", "409", "413", "422")
    return {
        "stream": _op(
            "start a run and stream its events",
            {"200": _events("the run's events"), **_errors(*codes)},
            requestBody=_body("RunCreate", required=True),
            **params,
        ),
        "wait": _op(
            "start a run and return the thread's values when it ends",
            {"200": _json(_ref("Values"), "the values"), **_errors(*codes)},
            requestBody=_body("RunCreate", required=True),
            **params,
        ),
    }


def paths() -> dict[str, dict[str, Any]]:
    thread_runs, stateless = _run_ops(True), _run_ops(False)
    on_thread = {"parameters": [THREAD]}
    on_run = {"parameters": [THREAD, RUN]}
    on_assistant = {"parameters": [ASSISTANT]}
    states = {"200": _json(_array("ThreadState"), "the states")}
    history = "the thread's checkpoints, newest first (limit)"
    return {
        "/ok": {
            "get": {
                "summary": "health (no token)",
                "security": [],
                "responses": {"200": _json(_ref("Ok"), "the server answers")},
            }
        },
        "/openapi.json": {
            "get": _op(
                "this document",
                {"200": _json({"type": "object"}, "OpenAPI 3.1"), **_errors()},
            )
        },
        "/info": {
            "get": _op(
                "the version and the request's operator",
                {"200": _json(_ref("Info"), "the server"), **_errors()},
            )
        },
        "/assistants/search": {
            "post": _op(
                "the agents",
                {"200": _json(_array("Assistant"), "the agents"), **_errors("413", "422")},
                requestBody=_body("AssistantSearch"),
            )
        },
        "/assistants/{assistant_id}": {
            "get": _op(
                "one agent",
                {"200": _json(_ref("Assistant"), "the agent"), **_errors("404", "422")},
                **on_assistant,
            )
        },
        "/assistants/{assistant_id}/graph": {
            "get": _op(
                "the agent's graph",
                {"200": _json(_ref("Graph"), "nodes and edges"), **_errors("404", "422")},
                **on_assistant,
            )
        },
        "/assistants/{assistant_id}/schemas": {
            "get": _op(
                "the agent's state schemas",
                {"200": _json(_ref("AssistantSchemas"), "schemas"), **_errors("404", "422")},
                **on_assistant,
            )
        },
        "/threads": {
            "post": _op(
                "create a thread",
                {
                    "200": _json(_ref("Thread"), "the thread"),
                    **_errors("404", "409", "413", "422"),
                },
                requestBody=_body("ThreadCreate"),
            )
        },
        "/threads/search": {
            "post": _op(
                "the operator's threads",
                {"200": _json(_array("Thread"), "the threads"), **_errors("413", "422")},
                requestBody=_body("ThreadSearch"),
            )
        },
        "/threads/count": {
            "post": _op(
                "how many of the operator's threads the filters keep",
                {"200": _json({"type": "integer"}, "the count"), **_errors("413", "422")},
                requestBody=_body("ThreadCount"),
            )
        },
        "/threads/{thread_id}": {
            **on_thread,
            "get": _op(
                "the thread with its values",
                {"200": _json(_ref("Thread"), "the thread"), **_errors("404", "422")},
            ),
            "patch": _op(
                "merge metadata (a name renames the thread)",
                {
                    "200": _json(_ref("Thread"), "the thread"),
                    **_errors("404", "413", "422"),
                },
                requestBody=_body("ThreadPatch", required=True),
            ),
            "delete": _op(
                "delete the thread and its checkpoints",
                {"204": _empty("deleted"), **_errors("404", "409", "422")},
            ),
        },
        "/threads/{thread_id}/state": {
            **on_thread,
            "get": _op(
                "the thread's state",
                {"200": _json(_ref("ThreadState"), "the state"), **_errors("404", "422")},
            ),
            "post": _op(
                "add messages to the thread as a new checkpoint",
                {
                    "200": _json(
                        {"type": "object", "properties": {"checkpoint": _ref("Checkpoint")}},
                        "the new checkpoint",
                    ),
                    **_errors("404", "409", "413", "422"),
                },
                requestBody=_body("StateUpdate", required=True),
            ),
        },
        "/threads/{thread_id}/state/checkpoint": {
            "post": _op(
                "the thread's state at a checkpoint (none: the head)",
                {"200": _json(_ref("ThreadState"), "the state"), **_errors("404", "413", "422")},
                requestBody=_body("StateAt"),
                **on_thread,
            )
        },
        "/threads/{thread_id}/state/{checkpoint_id}": {
            "get": _op(
                "the thread's state at a checkpoint",
                {"200": _json(_ref("ThreadState"), "the state"), **_errors("404", "422")},
                parameters=[THREAD, _path("checkpoint_id", "the checkpoint's id")],
            )
        },
        "/threads/{thread_id}/history": {
            **on_thread,
            "post": _op(
                history, {**states, **_errors("404", "413", "422")}, requestBody=_body("History")
            ),
            "get": _op(history, {**states, **_errors("404", "422")}),
        },
        "/threads/{thread_id}/runs": {
            **on_thread,
            "post": _op(
                "start a run in the background",
                {"200": _json(_ref("Run"), "the run"), **_errors("404", "409", "413", "422")},
                requestBody=_body("RunCreate", required=True),
            ),
            "get": _op(
                "the thread's runs, newest first",
                {"200": _json(_array("Run"), "the runs"), **_errors("404", "422")},
                parameters=[
                    {"name": "limit", "in": "query", "schema": LIMIT},
                    {"name": "offset", "in": "query", "schema": OFFSET},
                    {"name": "status", "in": "query", "schema": {"enum": list(STATUSES)}},
                ],
            ),
        },
        "/threads/{thread_id}/runs/stream": {"post": thread_runs["stream"]},
        "/threads/{thread_id}/runs/wait": {"post": thread_runs["wait"]},
        "/threads/{thread_id}/runs/{run_id}": {
            "get": _op(
                "one run",
                {"200": _json(_ref("Run"), "the run"), **_errors("404", "422")},
                **on_run,
            )
        },
        "/threads/{thread_id}/runs/{run_id}/join": {
            "get": _op(
                "wait for the run; the thread's values",
                {"200": _json(_ref("Values"), "the values"), **_errors("404", "422")},
                **on_run,
            )
        },
        "/threads/{thread_id}/runs/{run_id}/stream": {
            "get": _op(
                "the run's events again, after Last-Event-ID",
                {"200": _events("the run's events"), **_errors("404", "422")},
                parameters=[
                    THREAD,
                    RUN,
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "schema": {"type": "string", "pattern": "^[0-9]{1,15}$"},
                    },
                    {
                        "name": "stream_mode",
                        "in": "query",
                        "schema": {"type": "array", "items": {"enum": list(STREAM_MODES)}},
                        "style": "form",
                        "explode": True,
                    },
                    {
                        "name": "cancel_on_disconnect",
                        "in": "query",
                        "schema": {"enum": ["0", "1", "true", "false"]},
                    },
                ],
            )
        },
        "/threads/{thread_id}/runs/{run_id}/cancel": {
            "post": _op(
                "cancel the run",
                {
                    "204": _empty("it has ended"),
                    "202": _empty("it will end at its next step"),
                    **_errors("404", "409", "422"),
                },
                parameters=[
                    THREAD,
                    RUN,
                    {
                        "name": "wait",
                        "in": "query",
                        "schema": {"enum": ["true", "1", "false", "0"]},
                    },
                    {"name": "action", "in": "query", "schema": {"enum": ["interrupt"]}},
                ],
            )
        },
        "/runs/stream": {"post": stateless["stream"]},
        "/runs/wait": {"post": stateless["wait"]},
        "/v1/models": {
            "get": _op(
                "every agent as a model olav/<agent>",
                {"200": _json(_ref("Models"), "the models"), **_errors()},
            )
        },
        "/v1/models/{model}": {
            "get": _op(
                "one agent as a model, by its name",
                {"200": _json(_ref("Model"), "the model"), **_errors("404", "422", openai=True)},
                parameters=[_path("model", "the agent's name")],
            )
        },
        "/v1/models/olav/{model}": {
            "get": _op(
                "one agent as a model, by its id olav/<agent>",
                {"200": _json(_ref("Model"), "the model"), **_errors("404", "422", openai=True)},
                parameters=[_path("model", "the agent's name")],
            )
        },
        "/v1/chat/completions": {
            "post": _op(
                "the agent's answer, streamed or not",
                {
                    "200": {
                        "description": "the answer (server-sent events when stream is true)",
                        "content": {
                            "application/json": {"schema": _ref("ChatCompletion")},
                            "text/event-stream": {"schema": _ref("ChatChunk")},
                        },
                    },
                    "502": _json(_ref("OpenAIError"), "the run failed"),
                    **_errors("400", "404", "409", "413", "422", openai=True),
                },
                requestBody=_body("ChatRequest", required=True),
            )
        },
        "/store/items": {
            "put": _op(
                "a memory draft, for a person to confirm",
                {"202": _json(_ref("Draft"), "the draft"), **_errors("413", "422")},
                requestBody=_body("StorePut", required=True),
            ),
            "get": _op(
                "one item",
                {"200": _json(_ref("StoreItem"), "the item"), **_errors("404", "422")},
                parameters=[
                    {
                        "name": "namespace",
                        "in": "query",
                        "description": "the labels, joined by dots",
                        "schema": {"type": "string", "maxLength": MAX_ID},
                    },
                    {"name": "key", "in": "query", "required": True, "schema": ID},
                ],
            ),
            "delete": _op(
                "retire one of the operator's own private memories",
                {"204": _empty("retired"), **_errors("403", "404", "413", "422")},
                requestBody=_body("StoreDelete", required=True),
            ),
        },
        "/store/items/search": {
            "post": _op(
                "items: the hybrid search with a query, else the newest",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["items"],
                            "properties": {"items": _array("StoreItem")},
                        },
                        "the items",
                    ),
                    **_errors("413", "422"),
                },
                requestBody=_body("StoreSearch"),
            )
        },
        "/store/namespaces": {
            "post": _op(
                "the namespaces that hold items the operator may read",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["namespaces"],
                            "properties": {
                                "namespaces": {
                                    "type": "array",
                                    "items": {"type": "array", "items": {"type": "string"}},
                                }
                            },
                        },
                        "the namespaces",
                    ),
                    **_errors("413", "422"),
                },
                requestBody=_body("StoreNamespaces"),
            )
        },
    }


def document(version: str) -> dict[str, Any]:
    """The whole document (``version``: olav's)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "olav serve",
            "version": version,
            "description": "The Agent Protocol subset, the LangGraph Store API over olav's "
            "memory, and OpenAI-compatible chat (docs/http-api.md).",
        },
        "security": [{"bearer": []}, {"apiKey": []}],
        "paths": paths(),
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            },
        },
    }
