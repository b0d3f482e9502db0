"""`olav serve` driven by the real clients. langgraph-sdk: assistants, threads, runs streamed in
every mode, wait, join, cancel, one run per thread (rejected or enqueued), a stream resumed with
Last-Event-ID, more open streams than worker threads, and a thread that goes from the terminal
to a client and back. openai: the
models, a chat completed streaming and not, the conversation's earlier turns, its errors."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from typing import Any

import httpx
import openai
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.helpers import clean_env, olav_here
from tests.serve._support import (
    Served,
    chat_bodies,
    human,
    last_user,
    request_for,
    sent_text,
    sse_events,
)

pytestmark = pytest.mark.slow


def answer_of(values: dict[str, Any]) -> str:
    last = values["messages"][-1]
    assert last["type"] == "ai"
    return str(last["content"])


def test_every_agent_is_an_assistant(served: Served) -> None:
    client = served.sdk()
    found = client.assistants.search(limit=100)
    names = {a["assistant_id"] for a in found}
    assert {"core", "netops"} <= names
    assert all(a["graph_id"] == a["assistant_id"] for a in found)
    core = client.assistants.get("core")
    assert core["graph_id"] == "core" and core["description"]
    assert [a["assistant_id"] for a in client.assistants.search(graph_id="netops")] == ["netops"]
    with pytest.raises(NotFoundError, match="the assistants are"):
        client.assistants.get("nobody")


def test_threads_create_get_search_update_delete(served: Served) -> None:
    client = served.sdk()
    made = client.threads.create(metadata={"graph_id": "core", "project": "e2e-crud"})
    tid = made["thread_id"]
    assert made["status"] == "idle" and made["metadata"]["project"] == "e2e-crud"
    got = client.threads.get(tid)
    assert got["thread_id"] == tid and got["metadata"]["owner"] == served.alice
    assert got["values"] == {}  # no run yet
    found = client.threads.search(metadata={"project": "e2e-crud"})
    assert [t["thread_id"] for t in found] == [tid]
    updated = client.threads.update(tid, metadata={"project": "e2e-renamed", "name": "crud"})
    assert updated["metadata"]["project"] == "e2e-renamed" and updated["metadata"]["name"] == "crud"
    assert client.threads.search(metadata={"project": "e2e-crud"}) == []
    assert client.threads.get(tid)["metadata"]["name"] == "crud"
    again = client.threads.create(thread_id=tid, if_exists="do_nothing")
    assert again["thread_id"] == tid
    with pytest.raises(ConflictError, match="exists"):
        client.threads.create(thread_id=tid)
    client.threads.delete(tid)
    with pytest.raises(NotFoundError, match="no thread"):
        client.threads.get(tid)


def test_stream_values_updates_and_messages(served: Served) -> None:
    client = served.sdk()
    tid = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            tid,
            "core",
            input=human("which OSPF area do we use?"),
            stream_mode=["values", "updates", "messages-tuple"],
        )
    )
    kinds = [p.event for p in parts]
    assert kinds[0] == "metadata" and {"values", "updates", "messages"} <= set(kinds)
    assert "error" not in kinds
    values = [p.data for p in parts if p.event == "values"]
    assert answer_of(values[-1]) == "answer to which OSPF area do we use?"
    assert values[0]["messages"][0]["content"] == "which OSPF area do we use?"
    updates = [p.data for p in parts if p.event == "updates"]
    model_update = next(u["model"] for u in updates if u.get("model"))
    assert model_update["messages"][-1]["content"] == "answer to which OSPF area do we use?"
    messages = [p.data for p in parts if p.event == "messages"]
    chunk, meta = messages[0]
    assert chunk["type"] == "AIMessageChunk" and meta["thread_id"] == tid
    assert "".join(c["content"] for c, _ in messages) == "answer to which OSPF area do we use?"
    # a single mode, as a string: only its events
    single = list(client.runs.stream(tid, "core", input=human("and BGP?"), stream_mode="updates"))
    assert {p.event for p in single} <= {"metadata", "updates", "end"}
    assert any(p.event == "updates" for p in single)

    state = client.threads.get_state(tid)
    texts = [m["content"] for m in state["values"]["messages"]]
    assert texts == [
        "which OSPF area do we use?",
        "answer to which OSPF area do we use?",
        "and BGP?",
        "answer to and BGP?",
    ]
    assert state["checkpoint"]["thread_id"] == tid and state["checkpoint"]["checkpoint_id"]
    history = client.threads.get_history(tid, limit=50)
    assert len(history) >= 2
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    sizes = [len(h["values"].get("messages", [])) for h in history]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] == 4  # newest first
    assert client.threads.get(tid)["values"]["messages"][-1]["content"] == "answer to and BGP?"
    # the second run saw the first one's turn
    assert "answer to which OSPF area do we use?" in sent_text(
        request_for(served.state, "and BGP?")
    )


def test_wait_create_join_and_stateless_runs(served: Served) -> None:
    client = served.sdk()
    tid = client.threads.create()["thread_id"]
    values = client.runs.wait(tid, "netops", input=human("list the border routers"))
    assert answer_of(values) == "answer to list the border routers"
    run = client.runs.create(tid, "netops", input=human("and the core ones?"))
    assert run["thread_id"] == tid and run["status"] in ("pending", "running")
    joined = client.runs.join(tid, run["run_id"])
    assert answer_of(joined) == "answer to and the core ones?"
    assert client.runs.get(tid, run["run_id"])["status"] == "success"
    assert run["run_id"] in [r["run_id"] for r in client.runs.list(tid)]
    # a thread named by the client, made by its first run
    named = "e2e-made-by-its-run"
    values = client.runs.wait(named, "core", input=human("hello there"), if_not_exists="create")
    assert answer_of(values) == "answer to hello there"
    assert client.threads.get(named)["metadata"]["graph_id"] == "core"
    # stateless: a thread of its own, gone once the run ends
    before = {t["thread_id"] for t in client.threads.search(limit=1000)}
    values = client.runs.wait(None, "core", input=human("stateless question"))
    assert answer_of(values) == "answer to stateless question"
    streamed = list(client.runs.stream(None, "core", input=human("stateless stream")))
    assert answer_of([p.data for p in streamed if p.event == "values"][-1]).endswith("stream")
    assert {t["thread_id"] for t in client.threads.search(limit=1000)} == before


def test_cancel_a_held_run(served: Served) -> None:
    client = served.sdk()
    tid = client.threads.create()["thread_id"]
    with served.model.hold("hold-cancel") as gate:
        run = client.runs.create(tid, "core", input=human("hold-cancel this one"))
        gate.wait_held()
        assert client.threads.get(tid)["status"] == "busy"
        assert tid in {t["thread_id"] for t in client.threads.search(status="busy")}
        with pytest.raises(ConflictError, match="run in progress"):
            client.threads.delete(tid)
        queued = client.runs.create(
            tid, "core", input=human("queued, then cancelled"), multitask_strategy="enqueue"
        )
        client.runs.cancel(tid, queued["run_id"])
        client.runs.cancel(tid, run["run_id"])
    client.runs.join(tid, run["run_id"])
    assert client.runs.get(tid, run["run_id"])["status"] == "interrupted"
    client.runs.join(tid, queued["run_id"])
    assert client.runs.get(tid, queued["run_id"])["status"] == "interrupted"
    assert "queued, then cancelled" not in [last_user(b) for b in chat_bodies(served.state)]
    assert client.threads.get(tid)["status"] == "idle"
    assert tid not in {t["thread_id"] for t in client.threads.search(status="busy")}
    values = client.runs.wait(tid, "core", input=human("after the cancel"))  # the thread is free
    assert answer_of(values) == "answer to after the cancel"


def test_one_run_per_thread_rejected_or_enqueued(served: Served) -> None:
    client = served.sdk()
    tid = client.threads.create()["thread_id"]
    with served.model.hold("hold-busy") as gate:
        first = client.runs.create(tid, "core", input=human("hold-busy first"))
        gate.wait_held()
        with pytest.raises(ConflictError, match="already has a run in progress") as refused:
            client.runs.create(tid, "core", input=human("second, refused"))
        assert refused.value.response.status_code == 409
        # runs.wait reads its reply itself: a plain httpx error, with the same 409
        with pytest.raises(httpx.HTTPStatusError) as waited:
            client.runs.wait(tid, "core", input=human("second, refused"))
        assert waited.value.response.status_code == 409
        queued = client.runs.create(
            tid, "core", input=human("third, queued"), multitask_strategy="enqueue"
        )
        assert client.runs.get(tid, queued["run_id"])["status"] == "pending"
        # another thread is not held up by this one
        other = client.threads.create()["thread_id"]
        assert answer_of(client.runs.wait(other, "core", input=human("elsewhere"))).endswith(
            "elsewhere"
        )
    assert answer_of(client.runs.join(tid, queued["run_id"])) == "answer to third, queued"
    assert client.runs.get(tid, first["run_id"])["status"] == "success"
    texts = [last_user(b) for b in chat_bodies(served.state)]
    assert "second, refused" not in texts
    assert texts.index("third, queued") > texts.index("hold-busy first")
    # the queued run continued the thread after the first one's answer
    assert "answer to hold-busy first" in sent_text(request_for(served.state, "third, queued"))


def test_a_stream_resumes_from_last_event_id(served: Served) -> None:
    client = served.sdk()
    tid = client.threads.create()["thread_id"]
    modes = ["values", "updates", "messages-tuple"]
    with served.model.hold("hold-reconnect") as gate:
        run = client.runs.create(tid, "core", input=human("hold-reconnect now"), stream_mode=modes)
        gate.wait_held()
        path = f"/threads/{tid}/runs/{run['run_id']}/stream"
        with served.http() as http, http.stream("GET", path) as response:
            assert response.status_code == 200
            seen = []
            for event in sse_events(response):
                seen.append(event)
                if len(seen) == 2:
                    break  # the client goes away mid-run
        assert [n for n, _, _ in seen] == [1, 2] and seen[0][1] == "metadata"
    with served.http() as http:
        with http.stream("GET", path, headers={"Last-Event-ID": "2"}) as response:
            resumed = list(sse_events(response))
        with http.stream("GET", path) as response:
            everything = list(sse_events(response))
    ids = [n for n, _, _ in resumed]
    assert ids == list(range(3, 3 + len(ids))) and len(ids) >= 3
    assert everything[:2] == seen and everything[2:] == resumed
    assert resumed[-1][1] == "end" and resumed[-1][2]["status"] == "success"
    final = [d for _, e, d in resumed if e == "values"][-1]
    assert answer_of(final) == "answer to hold-reconnect now"
    assert any(e == "messages" for _, e, _ in resumed)
    with served.http() as http:
        after_end = http.get(path, headers={"Last-Event-ID": str(ids[-1])})
        assert after_end.status_code == 200 and after_end.text == ""


def test_many_open_streams_hold_up_no_other_request(served: Served) -> None:
    """More streams wait on a run than anyio's default 40 worker threads: the routes still
    answer, and every stream gets the run's end."""
    client = served.sdk()
    tid = client.threads.create()["thread_id"]
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    with served.model.hold("hold-many") as gate:
        run = client.runs.create(tid, "core", input=human("hold-many streams"))
        gate.wait_held()
        path = f"/threads/{tid}/runs/{run['run_id']}/stream"
        with served.http(limits=limits) as http, contextlib.ExitStack() as streams:
            opened = [streams.enter_context(http.stream("GET", path)) for _ in range(45)]
            assert all(r.status_code == 200 for r in opened)
            with served.http(timeout=8) as other:  # a starved route waits 15 s
                assert other.get(f"/threads/{tid}").json()["status"] == "busy"
                assert other.get(f"/threads/{tid}/state").status_code == 200
            gate.release.set()
            ends = [list(sse_events(r))[-1] for r in opened]
    assert {(e, d["status"]) for _, e, d in ends} == {("end", "success")}


def test_a_terminal_thread_continues_from_a_client_and_back(served: Served) -> None:
    tid = "e2e-terminal-1"
    client = served.sdk()
    cli = [sys.executable, "-c", "from olav.cli.app import main; main()"]
    with served.model.hold("zebra vlans") as gate:
        terminal = subprocess.Popen(
            [*cli, "ask", "--thread", tid, "terminal asks about zebra vlans"],
            cwd=served.ws,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            gate.wait_held()
            # while the terminal runs it, the thread is busy to a client too
            assert client.threads.get(tid)["status"] == "busy"
            with pytest.raises(ConflictError, match="another process"):
                client.runs.create(tid, "core", input=human("too early"))
        finally:
            gate.release.set()
            out, err = terminal.communicate(timeout=120)
    assert terminal.returncode == 0, err
    assert "answer to terminal asks about zebra vlans" in out
    thread = client.threads.get(tid)
    assert thread["metadata"]["owner"] == served.alice
    assert [m["content"] for m in client.threads.get_state(tid)["values"]["messages"]] == [
        "terminal asks about zebra vlans",
        "answer to terminal asks about zebra vlans",
    ]
    values = client.runs.wait(tid, "core", input=human("client follows up on zebra"))
    assert answer_of(values) == "answer to client follows up on zebra"
    seen = sent_text(request_for(served.state, "client follows up on zebra"))
    assert "terminal asks about zebra vlans" in seen
    assert "answer to terminal asks about zebra vlans" in seen
    back = olav_here(served.ws, "ask", "--thread", tid, "terminal again", "--json")
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["answer"] == "answer to terminal again"
    seen = sent_text(request_for(served.state, "terminal again"))
    assert "client follows up on zebra" in seen and "answer to client follows up on zebra" in seen
    shown = json.loads(olav_here(served.ws, "threads", "show", tid, "--json").stdout)
    assert [t["content"] for t in shown["turns"] if t["role"] == "user"] == [
        "terminal asks about zebra vlans",
        "client follows up on zebra",
        "terminal again",
    ]
    # the terminal's thread is its operator's: bob does not see it
    with pytest.raises(NotFoundError):
        served.sdk("bob").threads.get(tid)


# -- the OpenAI-compatible endpoint ---------------------------------------------------------------


def oai(served: Served, operator: str = "") -> openai.OpenAI:
    return openai.OpenAI(
        base_url=served.url + "/v1", api_key=served.tokens[operator or served.alice], max_retries=0
    )


def test_openai_streaming_sends_the_text_as_the_model_writes_it(served: Served) -> None:
    """Not the whole answer in one delta at the end: each piece the model streams is a delta
    of its own, past the rescue layer's short hold on call-shaped text."""
    request = " ".join(f"configuration-line-{i:02d}" for i in range(30))
    served.state.word_delay = 0.005  # the stub streams word by word, as a model does
    try:
        with oai(served) as client:
            stream = client.chat.completions.create(
                model="olav/core", messages=[{"role": "user", "content": request}], stream=True
            )
            pieces = [c.choices[0].delta.content for c in stream if c.choices]
    finally:
        served.state.word_delay = 0.0
    text = [p for p in pieces if p]
    assert "".join(text) == f"answer to {request}"
    assert len(text) >= 20, text  # 33 words: most of them deltas of their own


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tool_choice", "required"),  # without tools: the agent chooses among its own
        ("functions", [{"name": "get_weather", "parameters": {}}]),
        ("response_format", {"type": "json_sometimes"}),
        ("n", 2),
        ("logprobs", True),
        ("logit_bias", {"50256": -100}),
        ("store", True),
    ],
)
def test_a_field_olav_does_not_do_is_refused_by_name_never_dropped(
    served: Served, field: str, value: object
) -> None:
    with oai(served) as client, pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="olav/core",
            messages=[{"role": "user", "content": "hello"}],
            extra_body={field: value},
        )
    error = refused.value.body
    assert isinstance(error, dict) and error["param"] == field and field in error["message"]
    assert error["code"] == "unsupported_parameter"  # a string, as OpenAI's codes are


def test_openai_models_retrieve_and_errors_in_openais_shape(served: Served) -> None:
    with oai(served) as client:
        assert client.models.retrieve("olav/core").id == "olav/core"
        assert client.models.retrieve("netops").id == "olav/netops"
        with pytest.raises(openai.NotFoundError) as missing:
            client.models.retrieve("olav/nobody")
        assert "olav/core" in str(missing.value)  # the models there are
    stranger = openai.OpenAI(base_url=served.url + "/v1", api_key="olav_wrong", max_retries=0)
    with stranger, pytest.raises(openai.AuthenticationError) as refused:
        stranger.models.list()
    body = refused.value.body
    assert isinstance(body, dict) and body["code"] == "invalid_api_key"  # not {"detail": …}
    assert body["type"] == "authentication_error" and body["message"]


def test_the_clients_max_tokens_temperature_stop_and_seed_reach_the_engine(
    served: Served,
) -> None:
    """Honoured, not dropped: the model call goes out with them (Ollama's options), capped by
    the agent's own num_predict, and a reply cut on the limit finishes with "length"."""
    before = len(served.state.requests)
    reply = served.state.chat_reply
    served.state.chat_reply = lambda body: {"content": "cut", "done_reason": "length"}
    try:
        with oai(served) as client:
            done = client.chat.completions.create(
                model="olav/core",
                messages=[{"role": "user", "content": "describe the border routers"}],
                max_tokens=7, temperature=0.3, top_p=0.9, stop=["END"], seed=5,
                presence_penalty=0.5, frequency_penalty=-0.25,
            )  # fmt: skip
            huge = client.chat.completions.create(
                model="olav/core",
                messages=[{"role": "user", "content": "and again"}],
                max_completion_tokens=10**6,
            )
            with pytest.raises(openai.UnprocessableEntityError) as bad:
                client.chat.completions.create(
                    model="olav/core",
                    messages=[{"role": "user", "content": "hello"}],
                    temperature=7,
                )
    finally:
        served.state.chat_reply = reply
    assert done.choices[0].finish_reason == "length"
    assert huge.choices[0].finish_reason == "length"
    assert "temperature" in str(bad.value)
    chats = [b for p, b in served.state.requests[before:] if p == "/api/chat"]
    options = [b["options"] for b in chats if "describe the border routers" in str(b)]
    assert options and all(o["num_predict"] == 7 and o["temperature"] == 0.3 for o in options)
    assert all(o["top_p"] == 0.9 and o["stop"] == ["END"] and o["seed"] == 5 for o in options)
    assert all(o["presence_penalty"] == 0.5 and o["frequency_penalty"] == -0.25 for o in options)
    again = [b["options"] for b in chats if "and again" in str(b)]
    assert again and all(o["num_predict"] == 4096 for o in again)  # the agent's own cap holds


def test_openai_models_and_completions(served: Served) -> None:
    with oai(served) as client:
        ids = [m.id for m in client.models.list()]
        assert {"olav/core", "olav/netops"} <= set(ids)
        done = client.chat.completions.create(
            model="olav/core", messages=[{"role": "user", "content": "what is our ASN?"}]
        )
        assert done.choices[0].message.content == "answer to what is our ASN?"
        assert done.choices[0].finish_reason == "stop" and done.model == "olav/core"
        assert done.usage is not None and done.usage.total_tokens > 0
        pieces = []
        stream = client.chat.completions.create(
            model="olav/netops",
            messages=[{"role": "user", "content": "stream the device count"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        finish = []
        for chunk in stream:
            for choice in chunk.choices:
                pieces.append(choice.delta.content or "")
                finish.append(choice.finish_reason)
        assert "".join(pieces) == "answer to stream the device count"
        assert finish[-1] == "stop"
        # the bare agent name is a model too
        bare = client.chat.completions.create(
            model="core", messages=[{"role": "user", "content": "bare name"}]
        )
        assert bare.choices[0].message.content == "answer to bare name"


def test_openai_earlier_turns_reach_the_model(served: Served) -> None:
    with oai(served) as client:
        before = {t["thread_id"] for t in served.sdk().threads.search(limit=1000)}
        done = client.chat.completions.create(
            model="olav/core",
            messages=[
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "which vendor are the walrus switches?"},
                {"role": "assistant", "content": "The walrus switches are Arista."},
                {"role": "user", "content": [{"type": "text", "text": "and their OS?"}]},
            ],
        )
        assert done.choices[0].message.content == "answer to and their OS?"
    body = request_for(served.state, "and their OS?")
    turns = [(m["role"], str(m["content"])) for m in body["messages"] if m["role"] != "system"]
    assert ("assistant", "The walrus switches are Arista.") in turns
    assert "which vendor are the walrus switches?" in turns[0][1]
    # each completion's thread is its own, and is gone once it is answered
    assert {t["thread_id"] for t in served.sdk().threads.search(limit=1000)} == before


def test_openai_errors(served: Served) -> None:
    with oai(served) as client:
        with pytest.raises(openai.NotFoundError) as unknown:
            client.chat.completions.create(
                model="olav/nobody", messages=[{"role": "user", "content": "hi"}]
            )
        assert "olav/core" in str(unknown.value) and "olav/netops" in str(unknown.value)
        bad_requests: list[dict[str, Any]] = [
            {"messages": [{"role": "user", "content": "no model"}]},
            {"model": "olav/core", "messages": "not a list"},
            {"model": "olav/core", "messages": []},
            {"model": "olav/core", "messages": [{"role": "wizard", "content": "hi"}]},
            {"model": "olav/core", "messages": [{"role": "assistant", "content": "last"}]},
            {"model": "olav/core", "messages": [{"role": "user", "content": {"a": 1}}]},
            {"model": "olav/core", "messages": [{"role": "user", "content": "x"}], "stream": "y"},
            {
                "model": "olav/core",
                "messages": [{"role": "user", "content": "x"}],
                "stream": True,
                "stream_options": "usage please",
            },
        ]
        for body in bad_requests:
            with pytest.raises(openai.APIStatusError) as refused:
                client.post("/chat/completions", body=body, cast_to=httpx.Response)
            status = refused.value.status_code
            assert 400 <= status < 500, (body, status, refused.value)
            assert isinstance(
                refused.value, openai.BadRequestError | openai.UnprocessableEntityError
            )
            assert refused.value.message and "Traceback" not in str(refused.value.body)
    texts = [last_user(b) for b in chat_bodies(served.state)]
    assert "x" not in texts and "no model" not in texts  # nothing reached the model
