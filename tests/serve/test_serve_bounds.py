"""Bounds on what a client sends `olav serve`, and what a mistake costs: text no store can keep
(a lone surrogate, a NUL), ids, metadata, limits and offsets, search queries past their bounds
are each a 4xx that names the field and the bound, and change nothing; a 500 (olav's own bug)
leaves the connection usable; OPTIONS needs a token unless it is an allowed CORS preflight;
the audit records route templates, never a client's path; /openapi.json lists every route."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from olav.serve.http import (
    MAX_DEPTH,
    MAX_ID,
    MAX_KEYS,
    MAX_LABELS,
    MAX_METADATA,
    MAX_NAME,
    MAX_OFFSET,
    MAX_QUERY,
    MAX_STORE_OFFSET,
    MAX_TAGS,
)
from tests.helpers import wait_until
from tests.serve._inprocess import Here, serving_here
from tests.serve._support import human

JSON = {"Content-Type": "application/json"}
UI = "http://localhost:3000"
PREFLIGHT = {"Origin": UI, "Access-Control-Request-Method": "POST"}


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Here]:
    with serving_here(tmp_path_factory.mktemp("bounds") / "ws", max_body=1 << 20) as h:
        yield h


@pytest.fixture(scope="module")
def thread_id(here: Here) -> str:
    with here.http() as http:
        return str(
            http.post("/threads", json={"metadata": {"graph_id": "core"}}).json()["thread_id"]
        )


def detail_of(response: httpx.Response) -> str:
    assert "Traceback" not in response.text
    body = response.json()
    detail = body.get("detail") or body.get("error", {}).get("message")
    assert isinstance(detail, str) and detail, body
    assert len(detail) < 400, detail  # a client's value is never echoed whole
    return detail


def refused(http: httpx.Client, method: str, path: str, body: Any, *says: str) -> None:
    """``body`` (a dict, or bytes sent as they are) is a 4xx whose detail says ``says``; the
    next request on the same connection still works."""
    if isinstance(body, bytes):
        got = http.request(method, path, content=body, headers=JSON)
    else:
        got = http.request(method, path, json=body)
    where = f"{method} {path[:80]} {str(body)[:120]}: {got.status_code} {got.text[:300]}"
    assert 400 <= got.status_code < 500, where
    detail = detail_of(got)
    for part in says:
        assert part in detail, where
    assert http.get("/ok").json() == {"ok": True}


def alices_threads(http: httpx.Client) -> set[str]:
    found = http.post("/threads/search", json={"limit": 1000}).json()
    return {t["thread_id"] for t in found}


# -- text no store can keep ---------------------------------------------------------------------


def test_a_lone_surrogate_or_a_nul_is_a_422_that_names_the_field_and_makes_nothing(
    here: Here, thread_id: str
) -> None:
    from olav.core.config import Workspace
    from olav.learning.drafts import pending

    with here.http() as http:
        before = alices_threads(http)
        for escape in (b"\\ud800", b"\\udfff", b"\\u0000"):
            meta = b'{"metadata": {"label": "a' + escape + b'b"}}'
            refused(http, "POST", "/threads", meta, "metadata.label", "surrogate or a NUL")
            refused(http, "PATCH", f"/threads/{thread_id}", meta, "metadata.label")
            put = b'{"namespace": ["memories", "fact"], "key": "k", "value": {"text": "' + escape
            refused(http, "PUT", "/store/items", put + b'"}}', "value.text")
            key = b'{"metadata": {"' + escape + b'": 1}}'
            refused(http, "POST", "/threads", key, "a key of metadata")
            run = {"assistant_id": "core", "input": human("x")}
            raw = json.dumps(run).encode().replace(b'"x"', b'"' + escape + b'"')
            refused(http, "POST", "/runs/wait", raw, "input.messages[0].content")
        # none of them made a thread, a label or a draft
        assert alices_threads(http) == before
        assert "label" not in http.get(f"/threads/{thread_id}").json()["metadata"]
        assert pending(Workspace.open(here.ws)) == []
        # a surrogate pair is one valid character, and kept
        pair = b'{"metadata": {"emoji": "\\ud83d\\ude00"}}'
        got = http.post("/threads", content=pair, headers=JSON)
        assert got.status_code == 200 and got.json()["metadata"]["emoji"] == "\U0001f600"


# -- a 500 is olav's bug, and the connection survives it ----------------------------------------


def test_a_500_leaves_the_keep_alive_connection_usable(
    here: Here, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("a bug of olav's")

    monkeypatch.setattr(here.server.threads, "recent", broken)
    with here.http() as http:
        first = http.post("/threads/search", json={})
        assert first.status_code == 500
        assert first.json() == {"detail": "internal error: RuntimeError"}
        after = http.get("/ok")  # on the old code: ReadError, connection reset by peer
        assert after.json() == {"ok": True}
        local = [
            r.extensions["network_stream"].get_extra_info("client_addr") for r in (first, after)
        ]
        assert local[0] == local[1]  # one connection, kept open
    assert "a bug of olav's" in caplog.text  # logged for the operator, with its traceback
    assert "Exception in ASGI application" not in caplog.text  # never re-raised to uvicorn


# -- ids, names, metadata -----------------------------------------------------------------------


def test_ids_over_their_bound_are_422_and_never_looked_up(here: Here, thread_id: str) -> None:
    long = "a" * 60_000  # SQLite's LIKE refuses a pattern this long: it was a 500
    over = "b" * (MAX_ID + 1)
    bound = str(MAX_ID)
    with here.http() as http:
        for path in (
            f"/threads/{long[:5000]}",  # in a URL: a head over 16 KiB may be uvicorn's 400
            f"/threads/{over}/state",
            f"/threads/{thread_id}/runs/{over}",
            f"/assistants/{over}",
        ):
            refused(http, "GET", path, None, bound)
        refused(http, "POST", "/threads", {"thread_id": long}, "thread_id", bound)
        refused(http, "POST", "/runs/wait", {"assistant_id": over, "input": human("x")}, bound)
        store = {"namespace": ["memories"], "key": over, "value": {"text": "x"}}
        refused(http, "PUT", "/store/items", store, "key", bound)
        refused(http, "PUT", "/store/items", {**store, "key": "k", "namespace": [over]}, bound)
        many = ["memories"] * (MAX_LABELS + 1)
        refused(http, "PUT", "/store/items", {**store, "key": "k", "namespace": many}, "namespace")
        refused(http, "GET", f"/store/items?key={over}", None, "key", bound)
        refused(http, "POST", "/store/items/search", {"filter": {"scope": over}}, bound)
        chat = {"model": over, "messages": [{"role": "user", "content": "x"}]}
        refused(http, "POST", "/v1/chat/completions", chat, "model", bound)
        # exactly at the bound is an id like any other
        at = "c" * MAX_ID
        assert http.post("/threads", json={"thread_id": at}).status_code == 200
        assert http.get(f"/threads/{at}").json()["thread_id"] == at


def test_metadata_past_its_bounds_is_422_and_within_them_is_kept(
    here: Here, thread_id: str
) -> None:
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(MAX_DEPTH - 1):
        deep = {"in": deep}  # MAX_DEPTH objects, the metadata itself the first
    too_deep = {"in": deep}
    wide = {f"k{i}": i for i in range(MAX_KEYS + 1)}
    nested_wide = {"a": {f"k{i}": i for i in range(MAX_KEYS)}}  # 257 keys in all
    big = {"pad": "x" * MAX_METADATA}
    with here.http() as http:
        before = alices_threads(http)
        for metadata, says in (
            (too_deep, f"deeper than {MAX_DEPTH}"),
            (wide, f"more than {MAX_KEYS} keys"),
            (nested_wide, f"more than {MAX_KEYS} keys"),
            (big, f"the most is {MAX_METADATA}"),
        ):
            refused(http, "POST", "/threads", {"metadata": metadata}, "metadata", says)
            refused(http, "PATCH", f"/threads/{thread_id}", {"metadata": metadata}, says)
            run = {"assistant_id": "core", "input": human("x"), "metadata": metadata}
            refused(http, "POST", f"/threads/{thread_id}/runs", run, "metadata", says)
            value = {"text": "x", "extra": metadata}
            store = {"namespace": ["memories"], "key": "k", "value": value}
            refused(http, "PUT", "/store/items", store, "value", says)
        assert alices_threads(http) == before
        name = "n" * (MAX_NAME + 1)
        refused(http, "PATCH", f"/threads/{thread_id}", {"metadata": {"name": name}}, str(MAX_NAME))
        tags = {"text": "x", "tags": ["t"] * (MAX_TAGS + 1)}
        store = {"namespace": ["memories"], "key": "k", "value": tags}
        refused(http, "PUT", "/store/items", store, "value.tags", str(MAX_TAGS))
        # patches add up: past the bound once merged with the thread's, however small each
        half = {f"h{i}": i for i in range(MAX_KEYS // 2 + 1)}
        other = {f"o{i}": i for i in range(MAX_KEYS // 2 + 1)}
        assert http.patch(f"/threads/{thread_id}", json={"metadata": half}).status_code == 200
        refused(http, "PATCH", f"/threads/{thread_id}", {"metadata": other}, "merged")
        # within the bounds: kept as sent
        made = http.post("/threads", json={"metadata": {**deep, "pad": "x" * 1000}})
        assert made.status_code == 200, made.text[:300]
        assert made.json()["metadata"]["in"] == deep["in"]


# -- limits, offsets, queries, event ids --------------------------------------------------------


def test_integers_past_their_bounds_are_422_naming_the_bound(here: Here, thread_id: str) -> None:
    huge = 2**63  # SQLite's integers stop below it: it was a 500
    with here.http() as http:
        refused(http, "GET", f"/threads/{thread_id}/runs?offset={huge}", None, str(MAX_OFFSET))
        refused(http, "GET", f"/threads/{thread_id}/runs?limit=1001", None, "1000")
        for path in ("/threads/search", "/assistants/search"):
            refused(http, "POST", path, {"offset": huge}, "offset", str(MAX_OFFSET))
            refused(http, "POST", path, {"offset": True}, "offset")
            refused(http, "POST", path, {"limit": 1001}, "limit", "1000")
        refused(http, "POST", f"/threads/{thread_id}/history", {"limit": huge}, "limit")
        for path in ("/store/items/search", "/store/namespaces"):
            body = {"offset": MAX_STORE_OFFSET + 1}
            refused(http, "POST", path, body, "offset", str(MAX_STORE_OFFSET))
        refused(http, "POST", "/store/namespaces", {"max_depth": huge}, str(MAX_LABELS))
        assert http.get(f"/threads/{thread_id}/runs?offset={MAX_OFFSET}").json() == []


def test_a_search_query_over_its_bound_is_422_and_at_it_is_searched(here: Here) -> None:
    with here.http() as http:
        over = {"query": "ospf " * (MAX_QUERY // 5) + "x" * 5}
        refused(http, "POST", "/store/items/search", over, "query", str(MAX_QUERY))
        at = http.post("/store/items/search", json={"query": "q" * MAX_QUERY})
        assert at.status_code == 200 and "items" in at.json(), at.text[:300]


def test_a_last_event_id_that_is_no_event_number_is_422(here: Here) -> None:
    with here.http() as http:
        tid = http.post("/threads", json={}).json()["thread_id"]
        run = http.post(
            f"/threads/{tid}/runs", json={"assistant_id": "core", "input": human("events")}
        ).json()
        path = f"/threads/{tid}/runs/{run['run_id']}/stream"
        # "²" is a digit to str.isdigit() but not to int(): it was a 500
        for raw in (b"\xb2", b"1" * 40, b"-1"):
            got = http.get(path, headers={"Last-Event-ID": raw})
            assert got.status_code == 422 and "Last-Event-ID" in detail_of(got), got.text
        assert http.get(f"/threads/{tid}/runs/{run['run_id']}/join").status_code == 200


def test_an_unknown_long_path_is_a_short_404(here: Here) -> None:
    with here.http() as http:
        got = http.get("/no/such/" + "z" * 20_000)
        assert got.status_code == 404 and detail_of(got).startswith("no route /no/such/zzz")
        got = http.put("/threads/" + "z" * 20_000, json={})
        assert got.status_code == 405 and "PUT is not allowed" in detail_of(got)


# -- OPTIONS ------------------------------------------------------------------------------------


def test_options_needs_a_token_unless_it_is_a_preflight_from_an_allowed_origin(
    here: Here, tmp_path: Path
) -> None:
    with here.http(None) as anonymous:  # no --cors: every OPTIONS needs a token
        for path in ("/threads", "/no/such/route", "/store/items"):
            for headers in ({}, PREFLIGHT):
                got = anonymous.options(path, headers=headers)
                assert got.status_code == 401 and "token" in detail_of(got), (path, got.text)
                assert "access-control-allow-origin" not in got.headers
    with here.http() as http:  # with one, it is an ordinary request
        assert http.options("/threads").status_code == 405
    with serving_here(tmp_path / "cors", cors=[UI]) as cors, cors.http(None) as anonymous:
        pre = anonymous.options("/threads", headers=PREFLIGHT)
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == UI
        evil = {**PREFLIGHT, "Origin": "http://evil.example"}
        for headers in ({}, {"Origin": UI}, evil):
            got = anonymous.options("/threads", headers=headers)
            assert got.status_code == 401, (headers, got.text)
        assert anonymous.get("/info", headers={"Origin": UI}).status_code == 401


# -- the audit's route --------------------------------------------------------------------------


def test_the_audit_records_the_route_template_never_the_clients_path(here: Here) -> None:
    marker = "audit" + "q" * 3000
    with here.http() as http:
        assert http.get(f"/threads/{marker}").status_code == 422
        assert http.get(f"/no/such/{marker}").status_code == 404
        http.get(f"/memory/{marker}/x/y")  # the console's, no route of it
    with here.http(None) as http:
        assert http.get(f"/threads/{marker}").status_code == 401
        assert http.get(f"/nothing/{marker}").status_code == 401
    prefixes = ("(no route) /no/such/auditqq", "(no route) /nothing/auditqq", "(no route) /memory/")

    def recorded() -> set[str]:
        routes = {str(e["route"]) for e in here.http_events()}
        return routes if all(any(r.startswith(p) for r in routes) for p in prefixes) else set()

    routes = wait_until(recorded, 30, "the audit rows of the long paths")
    assert all(len(r) <= 64 for r in routes), max(routes, key=len)[:100]
    assert not any("q" * 60 in r for r in routes)
    templated = {
        (e["route"], e["status"]) for e in here.http_events() if e["route"].startswith("/threads/")
    }
    assert {("/threads/{thread_id}", 422), ("/threads/{thread_id}", 401)} <= templated


# -- the OpenAPI document -----------------------------------------------------------------------


def test_openapi_json_needs_a_token_and_lists_every_route_served(here: Here) -> None:
    from starlette.routing import Route

    with here.http(None) as anonymous:
        assert anonymous.get("/openapi.json").status_code == 401
    with here.http() as http:
        doc = http.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    served = {
        (route.path, method.lower())
        for route in here.api.routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }
    listed = {
        (path, method)
        for path, item in doc["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert served == listed, (served - listed, listed - served)
    for path, method in listed:
        op = doc["paths"][path][method]
        assert "200" in op["responses"] or "202" in op["responses"] or "204" in op["responses"]
        if path != "/ok":
            assert "401" in op["responses"], (path, method)
            assert op["responses"]["401"]["content"]["application/json"]["schema"]


def test_the_request_audit_never_makes_a_request_wait(tmp_path: Path) -> None:
    """A stalled audit (its writer held) fills its bounded queue; further requests are counted
    as dropped instead of waiting, and once the writer runs one event says how many."""
    import threading

    from olav.audit.db import connect, migrate
    from olav.serve.server import RequestAudit

    db = tmp_path / "audit.duckdb"
    migrate(db)
    held = threading.Event()
    go = threading.Event()

    class Stalled(RequestAudit):
        QUEUE = 5

        def _write(self, batch: Any) -> None:
            held.set()
            go.wait(30)
            super()._write(batch)

    audit = Stalled(db)
    audit.record({"route": "/first"})
    assert held.wait(30)  # the writer holds the first batch, the queue is empty
    for i in range(12):
        audit.record({"route": f"/r{i}"})  # returns at once, full or not
    assert audit.dropped == 7
    go.set()
    audit.close()
    with connect(db) as con:
        rows = con.execute("SELECT kind, detail FROM events ORDER BY created_at").fetchall()
    kinds = [k for k, _ in rows]
    assert kinds.count("http_request") == 6
    (lost,) = [json.loads(d) for k, d in rows if k == "http_audit_dropped"]
    assert lost == {"dropped": 7, "queue": 5}
