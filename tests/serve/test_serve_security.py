"""`olav serve`'s guard: every route but /ok needs a live token (a token revoked while the
server runs is refused on its next request); no route, whatever it is sent, shows one
operator's threads, runs or private memories to another; a client's mistake is a 4xx JSON body
that names it, never a 500 or a traceback; every request is audited."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from olav.serve.app import operations
from tests.helpers import olav_here, wait_until
from tests.serve._support import (
    Served,
    chat_bodies,
    http_events,
    human,
    last_user,
    request_for,
    sent_text,
    serving,
)

pytestmark = pytest.mark.slow

ROUTES = [(op.path, op.method) for op in operations() if not op.open]
SECRET = "the quokka vault code is 7718 and it rotates on mondays"  # alice's private memory
SECRET_ID: dict[str, str] = {}  # its row's id, once the server's workspace has it
ALICE_SAYS = "alice confides the walrus migration plan"
MAX_BODY = 20000


def _private_memory(ws: Path) -> None:
    from olav.core.config import Workspace
    from olav.memory.recall.lessons import add_reflection
    from olav.memory.store.scopes import user_scope
    from olav.memory.store.table import MemoryStore

    opened = Workspace.open(ws)
    added, SECRET_ID["id"] = add_reflection(
        MemoryStore.for_workspace(opened),
        SECRET,
        dedup_distance=0.0,
        scope=user_scope(opened.config),
    )
    assert added


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """This module's server: alice has a private memory, bodies are limited to MAX_BODY."""
    root = tmp_path_factory.mktemp("serve-security") / "ws"
    with serving(root, "--max-body", str(MAX_BODY), prepare=_private_memory) as s:
        yield s


@pytest.fixture(scope="module")
def alice_run(served: Served) -> tuple[str, str]:
    """alice's thread and its finished run."""
    client = served.sdk()
    tid = client.threads.create(metadata={"graph_id": "core", "project": "walrus"})["thread_id"]
    run = client.runs.create(tid, "core", input=human(ALICE_SAYS))
    client.runs.join(tid, run["run_id"])
    assert client.runs.get(tid, run["run_id"])["status"] == "success"
    return tid, run["run_id"]


def fill(path: str, thread_id: str, run_id: str, method: str = "", checkpoint: str = "") -> str:
    url = (
        path.replace("{thread_id}", thread_id)
        .replace("{run_id}", run_id)
        .replace("{checkpoint_id}", checkpoint or "no-such-checkpoint")
        .replace("{assistant_id}", "core")
    )
    if method == "GET" and path == "/store/items":  # the store's get names the item in its query
        url += f"?namespace=memories.private.reflection&key={SECRET_ID['id']}"
    return url


def detail_of(response: httpx.Response) -> str:
    """The 4xx body's ``detail`` (or the OpenAI-shaped ``error.message``)."""
    assert "Traceback" not in response.text
    body = response.json()
    detail = body.get("detail") or body.get("error", {}).get("message")
    assert isinstance(detail, str) and detail, body
    return detail


# -- tokens -----------------------------------------------------------------------------------


def test_ok_is_open_and_every_other_route_needs_a_live_token(
    served: Served, alice_run: tuple[str, str]
) -> None:
    tid, rid = alice_run
    forged = "olav_" + served.token_ids["bob"] + "_" + "A" * 43  # bob's id, not his secret
    with served.http(None) as http:
        assert http.get("/ok").json() == {"ok": True}
        for path, method in [*ROUTES, ("/no/such/route", "GET")]:
            url = fill(path, tid, rid)
            for headers in (
                {},
                {"Authorization": "Bearer garbage"},
                {"Authorization": f"Bearer {forged}"},
                {"x-api-key": forged},
                {"Authorization": "Basic " + served.tokens[served.alice]},
            ):
                got = http.request(method, url, headers=headers, json={})
                assert got.status_code == 401, (method, url, headers, got.text)
                assert "token" in detail_of(got)
        # both ways of sending a token work
        assert http.get("/info", headers={"x-api-key": served.tokens["bob"]}).status_code == 200
        bearer = {"Authorization": f"Bearer {served.tokens['bob']}"}
        assert http.get("/info", headers=bearer).json()["operator"] == "bob"


def test_a_token_revoked_while_serving_is_refused(served: Served) -> None:
    with served.http("carol") as http:
        assert http.get("/info").status_code == 200
        tid = http.post("/threads", json={}).json()["thread_id"]
        revoked = olav_here(served.ws, "serve", "token", "revoke", served.token_ids["carol"])
        assert revoked.returncode == 0, revoked.stderr
        for method, path in (("GET", "/info"), ("GET", f"/threads/{tid}"), ("GET", "/v1/models")):
            got = http.request(method, path)
            assert got.status_code == 401 and "revoked" in detail_of(got)
        with pytest.raises(httpx.HTTPStatusError):
            http.get("/info", headers={"x-api-key": served.tokens["carol"]}).raise_for_status()
    with served.http("bob") as http:  # the others' tokens still work
        assert http.get("/info").status_code == 200


# -- operators ----------------------------------------------------------------------------------


def test_no_route_shows_one_operators_data_to_another(
    served: Served, alice_run: tuple[str, str]
) -> None:
    """Every route, with alice's thread and run ids (whole, as a prefix, and her run on bob's
    thread) and bodies that would succeed for her, sent with bob's token: bob gets 404, 409,
    422 or his own data, never anything of hers, and changes nothing of hers. Her thread's id
    is no secret of hers: thread ids are per operator, so bob's requests that name it reach,
    or make, a thread of his own with that id."""
    tid, rid = alice_run
    client = served.sdk()
    before = client.threads.get_state(tid)
    head = before["checkpoint"]["checkpoint_id"]  # her checkpoint's id, tried by bob too
    bob_tid = served.sdk("bob").threads.create()["thread_id"]
    question = "bob asks about the quokka vault code"
    full = {
        "assistant_id": "core",
        "input": human(question),
        "if_not_exists": "create",
        "thread_id": tid,
        "if_exists": "do_nothing",
        "metadata": {"graph_id": "core", "hijacked": "by bob"},
        "limit": 1000,
        "stream_mode": ["values", "updates", "messages-tuple"],
        "model": "olav/core",
        "messages": [{"role": "user", "content": question}],
        # the store's: her private row's id, a search for it, a put of bob's own
        "namespace": ["memories", "private", "reflection"],
        "key": SECRET_ID["id"],
        "value": {"text": question},
        "namespace_prefix": ["memories"],
        "query": "the quokka vault code",
        "prefix": ["memories"],
    }
    bodies: list[dict[str, Any]] = [full, {}, {"metadata": {"owner": served.alice}}]
    leaks = [rid, ALICE_SAYS, "answer to " + ALICE_SAYS, SECRET, "code is 7718"]
    requests: set[tuple[str, str]] = set()
    for path, method in ROUTES:
        for thread, run in ((tid, rid), (tid[:6], rid), (bob_tid, rid)):
            requests.add((method, fill(path, thread, run, method, head)))
    tried = 0
    with served.http("bob") as http:
        for method, url in sorted(requests, key=lambda r: (r[0] == "DELETE", r)):
            for body in bodies if method in ("POST", "PATCH", "PUT", "DELETE") else [None]:
                got = http.request(method, url, json=body)
                tried += 1
                where = f"{method} {url} {body}: {got.status_code} {got.text[:300]}"
                assert got.status_code < 500 and "Traceback" not in got.text, where
                if got.status_code < 300:
                    assert not [leak for leak in leaks if leak in got.text], where
                else:
                    assert got.status_code in (404, 409, 422), where
                    detail = detail_of(got)
                    assert ALICE_SAYS not in detail and SECRET not in detail, where
    assert tried > 3 * len(ROUTES)
    # bob's search lists none of her threads, however it filters
    for metadata in ({}, {"graph_id": "core"}, {"project": "walrus"}, {"owner": served.alice}):
        found = served.sdk("bob").threads.search(metadata=metadata, limit=1000)
        assert {t["metadata"]["owner"] for t in found} <= {"bob"}, found
        assert ALICE_SAYS not in str(found) and rid not in str(found)
    # nothing of hers changed: same state, no label of his, her run still hers alone
    after = client.threads.get(tid)
    assert "hijacked" not in after["metadata"] and after["metadata"]["owner"] == served.alice
    assert client.threads.get_state(tid)["values"] == before["values"]
    assert [r["run_id"] for r in client.runs.list(tid)] == [rid]
    # bob's runs ran as bob: the model never saw her thread or her private memory
    bobs = [b for b in chat_bodies(served.state) if last_user(b) == question]
    assert bobs, "none of bob's runs reached the model"
    for body in bobs:
        seen = sent_text(body)
        assert ALICE_SAYS not in seen and SECRET not in seen
    # the same requests with her token do reach her data (the ids above were real)
    with served.http() as http:
        for path, method in ROUTES:
            if method == "GET" and "{thread_id}" in path and not path.endswith("/stream"):
                got = http.get(fill(path, tid, rid, checkpoint=head))
                assert got.status_code == 200, (path, got.text[:300])
                assert tid in got.text or ALICE_SAYS in got.text, (path, got.text[:300])
        got = http.get(fill("/store/items", tid, rid, "GET"))
        assert got.status_code == 200 and SECRET in got.text, got.text[:300]
        found = http.post("/store/items/search", json=full)
        assert found.status_code == 200 and SECRET in found.text, found.text[:300]


def test_a_private_memory_is_recalled_for_its_operator_only(served: Served) -> None:
    question = "what is the quokka vault code and when does it rotate"
    for operator in (served.alice, "bob"):
        tid = served.sdk(operator).threads.create()["thread_id"]
        served.sdk(operator).runs.wait(tid, "core", input=human(f"{operator}: {question}"))
    assert SECRET in sent_text(request_for(served.state, f"{served.alice}: {question}"))
    assert SECRET not in sent_text(request_for(served.state, f"bob: {question}"))


# -- bad input -----------------------------------------------------------------------------------


def test_bad_input_is_a_4xx_that_names_the_problem(
    served: Served, alice_run: tuple[str, str]
) -> None:
    tid, rid = alice_run
    run = {"assistant_id": "core", "input": human("hi")}
    cases: list[tuple[str, str, Any, int, str]] = [
        # (method, path, body: a dict, or bytes sent as they are, status, what the detail says)
        ("POST", "/threads", b"{not json", 422, "not valid JSON"),
        ("POST", "/threads/search", b"[1, 2]", 422, "must be a JSON object"),
        ("POST", f"/threads/{tid}/runs", b'"just a string"', 422, "must be a JSON object"),
        (
            "POST",
            f"/threads/{tid}/runs",
            {**run, "assistant_id": "nobody"},
            404,
            "the assistants are",
        ),
        ("POST", "/runs/wait", {"input": human("hi")}, 422, "assistant_id is required"),
        ("POST", "/threads", b'{"metadata": {"x": NaN}}', 422, "NaN is not a JSON value"),
        ("PATCH", f"/threads/{tid}", b'{"metadata": {"x": -Infinity}}', 422, "Infinity"),
        ("POST", "/threads", b"[" * 5000 + b"]" * 5000, 422, "nested too deep"),
        ("POST", "/threads", b"\xff\xfe{}", 422, "not valid JSON"),
        ("GET", "/assistants/nobody", None, 404, "no assistant 'nobody'"),
        ("GET", "/threads/no-such-thread", None, 404, "no thread 'no-such-thread'"),
        ("POST", "/threads/no-such-thread/runs", run, 404, "no thread"),
        ("GET", f"/threads/{tid}/runs/no-such-run", None, 404, "no run 'no-such-run'"),
        ("POST", "/threads/search", {"limit": "x"}, 422, "limit"),
        ("POST", "/threads/search", {"limit": 0}, 422, "limit"),
        ("POST", "/assistants/search", {"offset": -1}, 422, "offset"),
        ("POST", "/threads/search", {"metadata": "x"}, 422, "metadata"),
        ("POST", "/threads", {"thread_id": 7}, 422, "thread_id"),
        ("PATCH", f"/threads/{tid}", {"metadata": ["x"]}, 422, "metadata"),
        ("POST", f"/threads/{tid}/runs", {**run, "stream_mode": "bogus"}, 422, "stream_mode"),
        ("POST", f"/threads/{tid}/runs", {**run, "stream_mode": 5}, 422, "stream_mode"),
        ("POST", f"/threads/{tid}/runs", {**run, "stream_mode": [None]}, 422, "stream_mode"),
        ("POST", f"/threads/{tid}/runs", {"assistant_id": "core"}, 422, "input"),
        ("POST", f"/threads/{tid}/runs", {**run, "input": {}}, 422, "input.messages"),
        (
            "POST",
            f"/threads/{tid}/runs",
            {**run, "input": {"messages": "hi"}},
            422,
            "input.messages",
        ),
        ("POST", "/runs/wait", {**run, "input": human("")}, 422, "no text"),
        (
            "POST",
            "/runs/wait",
            {**run, "input": {"messages": [{"role": "ai", "content": "x"}]}},
            422,
            "no user message",
        ),
        (
            "POST",
            "/runs/wait",
            {**run, "input": {"messages": [{"role": "user", "content": 5}]}},
            422,
            "content",
        ),
        (
            "POST",
            "/runs/wait",
            {**run, "multitask_strategy": "rollback"},
            422,
            "multitask_strategy",
        ),
        ("POST", "/runs/wait", {**run, "metadata": "x"}, 422, "metadata"),
        ("POST", "/runs/wait", {**run, "assistant_id": 5}, 422, "assistant_id is required"),
        (
            "GET",
            f"/threads/{tid}/runs/{rid}/stream",
            {"Last-Event-ID": "abc"},
            422,
            "Last-Event-ID",
        ),
        ("GET", "/threads", None, 405, "GET is not allowed"),
        ("GET", "/no/such/route", None, 404, "no route"),
    ]
    with served.http() as http:
        for method, path, body, status, says in cases:
            if isinstance(body, bytes):
                got = http.request(
                    method, path, content=body, headers={"Content-Type": "application/json"}
                )
            elif method == "GET" and isinstance(body, dict):
                got = http.request(method, path, headers=body)
            else:
                got = http.request(method, path, json=body)
            where = f"{method} {path} {body!r}: {got.status_code} {got.text[:300]}"
            assert got.status_code == status, where
            assert got.headers["content-type"].startswith("application/json"), where
            assert says in detail_of(got), where
    assert "hi" not in [last_user(b) for b in chat_bodies(served.state)]  # none of them ran


def test_a_body_over_max_body_is_413(served: Served) -> None:
    big = {"metadata": {"pad": "x" * MAX_BODY}}
    with served.http() as http:
        got = http.post("/threads", json=big)
        assert got.status_code == 413 and str(MAX_BODY) in detail_of(got)

        def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts as it reads
            yield b'{"metadata": {"pad": "'
            for _ in range(MAX_BODY // 1000 + 1):
                yield b"x" * 1000
            yield b'"}}'

        got = http.post("/threads", content=chunks(), headers={"Content-Type": "application/json"})
        assert got.status_code == 413 and str(MAX_BODY) in detail_of(got)
        assert http.post("/threads", json={"metadata": {"pad": "x" * 1000}}).status_code == 200


# -- the audit ---------------------------------------------------------------------------------


def test_every_request_is_audited(served: Served) -> None:
    with served.http("bob") as http:
        assert http.get("/threads/audited-missing-thread").status_code == 404
        assert http.post("/assistants/search", json={}).status_code == 200
    with served.http(None) as http:
        assert http.get("/threads/audited-no-token").status_code == 401

    def found() -> list[dict[str, Any]]:
        events = http_events(served.ws)
        wanted = [
            ("bob", "GET", "/threads/{thread_id}", 404),
            ("bob", "POST", "/assistants/search", 200),
            ("", "GET", "/threads/{thread_id}", 401),  # the template, though refused unrouted
        ]
        keys = {
            (e.get("operator"), e.get("method"), e.get("route"), e.get("status")) for e in events
        }
        return events if all(w in keys for w in wanted) else []

    events = wait_until(found, 30, "the http_request audit rows")
    assert all(isinstance(e["ms"], int | float) and e["ms"] >= 0 for e in events)
    assert all(set(e) >= {"operator", "method", "route", "status", "ms"} for e in events)
    assert not any("audited-missing-thread" in e["route"] for e in events)  # the route, not the id
