"""Issue 52's one property, the support: nothing alice wrote reaches bob, whatever bob does,
on any path (tests/serve/test_tenant_property.py, tests/serve/test_tenant_tool_runs.py).

Alice (an operator) plants a canary on every kind of write: a thread's name and its run, a
stateless run, a private fact, a pending draft, a tool's argument (and so its result), the
capture her run derived, and an episode. Then hypothesis drives random sequences of bob's
operations through every path: the Agent Protocol and the store API over HTTP, the console's
pages, an MCP service opened as bob, and every tool of every template agent, called with
arbitrary arguments (alice's ids, SQL over the audit, scopes and words of hers) by a compliant
scripted model in bob's runs. No canary may appear in anything bob receives, or in any message
sent to the model for bob's runs (its prompt, the recalled block, the tools' results).

bob knows alice's ids (thread, run, memory rows, draft): the property is that knowing one
gives nothing. The canaries themselves are never among bob's arguments, so an echo of his
input can never pass for a leak.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import strategies as st

from tests.serve._inprocess import Local, _uvicorn, human, tokens_for

TAG = uuid.uuid4().hex[:10]
CANARIES = {
    kind: f"cnry{kind}{TAG}"
    for kind in ("thread", "run", "stateless", "fact", "draft", "tool", "capture", "episode")
}
AGENTS = ("core", "netops", "admin", "reflector")
LEARNING_SPECS: dict[str, Any] = {}  # the composer's tools (olav.compose.tools), by name


@dataclass
class World:
    local: Local
    model: Any  # the scripted model every session of the server calls
    bob: httpx.Client
    console: httpx.Client
    mcp: Any  # olav.mcp.service.MemoryService, opened as bob
    ids: dict[str, list[str]] = field(default_factory=dict)  # what bob knows of alice's
    tools: dict[str, list[tuple[str, type]]] = field(default_factory=dict)  # per agent
    called: set[tuple[str, str]] = field(default_factory=set)  # (agent, tool) bob's runs ran
    bound: dict[str, dict[str, Any]] = field(default_factory=dict)  # bob's tools, per agent

    def received(self, what: str, text: str) -> None:
        """Fail if ``text``, something bob got, carries any of alice's canaries."""
        found = [kind for kind, canary in CANARIES.items() if canary in text]
        assert not found, f"{what}: bob received alice's {found}"


def _bound(root: Path, tools: dict[str, list[tuple[str, type]]]) -> dict[str, dict[str, Any]]:
    """Per agent, its tools bound to a context of bob's, as his session binds them."""
    from olav.compose.tools import LEARNING_TOOLS
    from olav.core.config import Workspace
    from olav.runtime.tools import build_tools
    from olav.serve.pool import operator_workspace
    from tests.helpers import tool_context

    config = operator_workspace(Workspace.open(root), "bob").config
    out = {}
    for agent, named in tools.items():
        ctx = tool_context(root, agent)
        ctx.config, ctx.agent_dir = config, root / agent
        made = build_tools([n for n, _ in named], ctx, extra=LEARNING_TOOLS)
        out[agent] = {"ctx": ctx, **{t.name: t for t in made}}
    return out


def _tools_of(root: Path) -> dict[str, list[tuple[str, type]]]:
    """Per template agent: its tools and their argument models."""
    from olav.compose.tools import LEARNING_TOOLS
    from olav.core.config import Workspace
    from olav.runtime.skills import load_agents
    from olav.runtime.tools.registry import _SPECS

    specs = {**_SPECS, **LEARNING_TOOLS}
    LEARNING_SPECS.update(specs)
    agents = load_agents(Workspace.open(root))
    out = {}
    for name in AGENTS:
        out[name] = [(n, specs[n].args) for n in agents[name].spec.tools]
    return out


def _script(model: Any, turns: list[dict]) -> None:
    """The scripted model's next calls play ``turns`` (runs are one at a time here)."""
    with model._lock:
        done = model.turns[: model.position]
        model.turns = [*done, *[{}] * (model.position - len(done)), *turns]


def _run(w: World, client: httpx.Client, agent: str, text: str, turns: list[dict]) -> str:
    """A stateless run of ``agent`` by ``client``'s operator on the scripted model, which
    plays ``turns`` and then answers; an approval it asks for is given (bob complies with
    himself). What the client got back, every part of it."""
    _script(w.model, [*turns, {"content": "done"}])
    tid = uuid.uuid4().hex
    body = {"assistant_id": agent, "input": human(text), "if_not_exists": "create"}
    got = client.post(f"/threads/{tid}/runs/wait", json=body)
    seen = got.text
    for _ in range(3):  # each consent asked for, answered yes
        state = client.get(f"/threads/{tid}/state")
        seen += state.text
        if not (state.status_code == 200 and state.json().get("interrupts")):
            break
        _script(w.model, [{"content": "done"}])
        again = {"assistant_id": agent, "command": {"resume": "yes"}}
        got = client.post(f"/threads/{tid}/runs/wait", json=again)
        seen += got.text
    return seen


def _plant(w: World) -> None:
    """alice's writes, each checked to have landed where a leak would show."""
    with w.local.http() as alice:
        _plant_as(w, alice)


def _plant_as(w: World, alice: httpx.Client) -> None:
    from olav.core.config import Workspace
    from olav.learning import drafts
    from olav.memory.recall.episodes import SessionLog, write_episode
    from olav.memory.store.table import MemoryStore

    local, root = w.local, w.local.ws
    made = alice.post(
        "/threads",
        json={"metadata": {"graph_id": "core", "name": f"payroll {CANARIES['thread']}"}},
    )
    assert made.status_code == 200, made.text
    tid = made.json()["thread_id"]
    run = alice.post(
        f"/threads/{tid}/runs/wait",
        json={"assistant_id": "core", "input": human(f"payroll password {CANARIES['run']}")},
    )
    assert run.status_code == 200 and CANARIES["run"] in run.text, run.text
    gone = alice.post(
        "/runs/wait", json={"assistant_id": "core", "input": human(CANARIES["stateless"])}
    )
    assert gone.status_code == 200, gone.text
    runs = alice.get(f"/threads/{tid}/runs").json()
    w.ids["thread"], w.ids["run"] = [tid], [r["run_id"] for r in runs]

    put = alice.put(
        "/store/items",
        json={
            "namespace": ["memories", "fact"],
            "key": "payroll-fact",
            "value": {"text": f"the payroll vault code is {CANARIES['fact']}"},
        },
    )
    assert put.status_code == 202, put.text
    fact_draft = put.json()["draft"]
    drafts.confirm(Workspace.open(root), fact_draft)  # the owner's yes: alice's private row
    pending = alice.put(
        "/store/items",
        json={
            "namespace": ["memories", "preference"],
            "key": "payroll-draft",
            "value": {"text": f"payroll runs on {CANARIES['draft']}"},
        },
    )
    assert pending.status_code == 202, pending.text
    w.ids["draft"] = [fact_draft, pending.json()["draft"]]

    sql = f"SELECT '{CANARIES['tool']}' AS payroll_code"
    told = _run(
        w,
        alice,
        "core",
        f"show me the payroll code {CANARIES['capture']}",
        [{"content": "", "tool_calls": [{"name": "db_query", "args": {"sql": sql}}]}],
    )
    assert CANARIES["tool"] in str(w.model.calls[-1]), told  # the tool ran, its result shown

    store = MemoryStore.for_workspace(Workspace.open(root))
    started = datetime.now(UTC)
    asked = (f"r-{TAG}", "core", "completed", f"the payroll episode {CANARIES['episode']}", started)
    log = SessionLog(f"alice-{TAG}", runs=[asked], calls=[])
    assert write_episode(store, log, "core", scope=f"user:{local.alice}")
    rows = store.list_rows(f"scope = 'user:{local.alice}'")
    texts = " ".join(r.text for r in rows)
    for kind in ("fact", "capture", "episode"):
        assert CANARIES[kind] in texts, (kind, [(r.category, r.text[:80]) for r in rows])
    w.ids["memory"] = [r.id for r in rows]


@contextlib.contextmanager
def planted(template: Path, root: Path) -> Iterator[World]:
    """alice's canaries planted on a copy of the workspace ``template`` at ``root``, and bob's
    clients on its in-process server (the HTTP API, the console, MCP, his bound tools)."""
    from olav.access.tokens import TokenStore
    from olav.core.config import Workspace
    from olav.llm.models import ScriptedChatModel
    from olav.mcp.service import MemoryService
    from olav.serve.app import Server, create_app
    from olav.serve.gate import guarded
    from olav.serve.pool import operator_workspace

    shutil.copytree(template, root)
    alice, tokens = tokens_for(root, "bob")
    ws = Workspace.open(root)
    model = ScriptedChatModel(turns=[])
    server = Server(ws, model=model, tokens=TokenStore.for_workspace(ws, touch_interval=None))
    try:
        with (
            _uvicorn(guarded(create_app(server), server), log_level="warning") as url,
            contextlib.ExitStack() as stack,
        ):
            local = Local(url, server, root, alice, tokens)
            bob = stack.enter_context(local.http("bob"))
            console = stack.enter_context(local.console("bob"))
            mcp = MemoryService.open(operator_workspace(ws, "bob"))
            w = World(local, model, bob, console, mcp)
            w.tools = _tools_of(root)
            w.bound = _bound(root, w.tools)
            _plant(w)
            yield w
    finally:
        server.close()
        server.threads.close()


# -- bob's operations ---------------------------------------------------------------------------

WORDS = st.sampled_from(
    [
        "payroll",
        "password",
        "vault code",
        "alice",
        "user:alice",
        "global",
        "core",
        "%",
        "*",
        "' OR 1=1 --",
        "episode",
        "show me the payroll code",
        "SELECT * FROM messages",
        "SELECT content FROM messages",
        "SELECT m.content FROM runs r JOIN messages m ON m.run_id = r.id",
        "SELECT block FROM recalls",
        "SELECT args, result FROM tool_calls",
        "SELECT * FROM audit.runs",
        "SELECT detail FROM events",
        "SELECT * FROM memory_events",
        "SELECT query FROM runs",
        "",
    ]
)


def _text(w: World) -> st.SearchStrategy[str]:
    """Something bob might type: a word of alice's world, one of her ids, or noise."""
    known = [i for ids in w.ids.values() for i in ids]
    return st.one_of(WORDS, st.sampled_from(known), st.text(max_size=20))


def _value(w: World) -> st.SearchStrategy[Any]:
    text = _text(w)
    return st.one_of(
        text,
        st.integers(-5, 50),
        st.booleans(),
        st.none(),
        st.lists(text, max_size=3),
        st.dictionaries(st.sampled_from(["scope", "category", "sql", "q"]), text, max_size=2),
    )


@st.composite
def _http(draw: st.DrawFn, w: World) -> tuple[str, str, Any]:
    t = draw(_text(w))
    tid = quote(draw(st.sampled_from(w.ids["thread"] + [draw(_text(w))])), safe="") or "x"
    rid = draw(st.sampled_from(w.ids["run"]))
    ns = draw(st.sampled_from([["memories"], ["memories", "fact"], ["memories", "team"], []]))
    return draw(
        st.sampled_from(
            [
                ("GET", f"/threads/{tid}", None),
                ("GET", f"/threads/{tid}/state", None),
                ("POST", f"/threads/{tid}/history", {"limit": 10}),
                ("GET", f"/threads/{tid}/runs", None),
                ("GET", f"/threads/{tid}/runs/{rid}", None),
                ("GET", f"/threads/{tid}/runs/{rid}/join", None),
                ("POST", f"/threads/{tid}/copy", {}),
                ("PATCH", f"/threads/{tid}", {"metadata": {"x": t}}),
                ("POST", "/threads", {"thread_id": tid, "metadata": {"graph_id": "core"}}),
                ("POST", "/threads/search", {"metadata": {"name": t}, "limit": 100}),
                ("POST", "/threads/search", {"limit": 100}),
                ("POST", "/store/items/search", {"namespace_prefix": ns, "query": t}),
                ("POST", "/store/items/search", {"namespace_prefix": ns, "limit": 100}),
                ("GET", "/store/items", {"namespace": "memories", "key": t}),
                ("POST", "/store/namespaces", {}),
                ("GET", "/info", None),
                ("POST", "/assistants/search", {}),
                ("POST", "/v1/chat/completions", {"model": "core", "messages": [human(t)]}),
            ]
        )
    )


@st.composite
def _page(draw: st.DrawFn, w: World) -> tuple[str, dict[str, str]]:
    t = draw(_text(w))
    some = quote(draw(st.sampled_from(w.ids["run"] + w.ids["memory"] + w.ids["draft"])))
    return draw(
        st.sampled_from(
            [
                ("/memory", {"q": t}),
                ("/memory", {"scope": "user:alice"}),
                (f"/memory/{some}", {}),
                ("/drafts", {}),
                ("/runs", {}),
                (f"/runs/{some}", {}),
                ("/health", {}),
                ("/lessons", {}),
                ("/why", {"q": t}),
            ]
        )
    )


@st.composite
def _mcp(draw: st.DrawFn, w: World) -> tuple[str, tuple[Any, ...]]:
    t = draw(_text(w))
    some = draw(st.sampled_from(w.ids["memory"] + w.ids["draft"]))
    return draw(
        st.sampled_from(
            [
                ("recall", (t,)),
                ("search", (t,)),
                ("get", (some,)),
                ("preview", (some,)),
                ("guides", ()),
                ("lessons", ()),
                ("episodes", ()),
            ]
        )
    )


@st.composite
def _tool(draw: st.DrawFn, w: World) -> tuple[str, str, dict[str, Any], str]:
    agent = draw(st.sampled_from(AGENTS))
    name, model = draw(st.sampled_from(w.tools[agent]))
    fields = list(model.model_fields)
    args = {f: draw(_value(w)) for f in fields if draw(st.booleans()) or fields[0] == f}
    return agent, name, args, draw(_text(w))


def _ops(w: World) -> st.SearchStrategy[list[tuple[str, Any]]]:
    op = st.one_of(
        st.tuples(st.just("http"), _http(w)),
        st.tuples(st.just("page"), _page(w)),
        st.tuples(st.just("mcp"), _mcp(w)),
        st.tuples(st.just("http"), _http(w)),
        st.tuples(st.just("tool"), _tool(w)),
        st.tuples(st.just("tool"), _tool(w)),
    )
    return st.lists(op, min_size=1, max_size=3)


def _do(w: World, kind: str, op: Any) -> None:
    if kind == "http":
        method, path, body = op
        if method == "GET":
            got = w.bob.get(path, params=body)
        else:
            got = w.bob.request(method, path, json=body)
        w.received(f"{method} {path}", got.text + json.dumps(dict(got.headers)))
    elif kind == "page":
        path, params = op
        got = w.console.get(path, params=params)
        w.received(f"console {path} {params}", got.text)
    elif kind == "mcp":
        name, args = op
        try:
            out: Any = getattr(w.mcp, name)(*args)
        except Exception as exc:  # a refusal is an answer too: it may not quote her rows
            out = f"{type(exc).__name__}: {exc} {getattr(exc, 'hint', '')}"
        w.received(f"mcp {name}{args}", json.dumps(out, default=str))
    elif kind == "tool":  # the tool as bob's session binds it, called directly
        agent, name, args, _text = op
        try:
            out = str(w.bound[agent][name].invoke(args))
        except Exception as exc:  # the tool node answers the model with the error
            out = f"{type(exc).__name__}: {exc}"
        spec = LEARNING_SPECS.get(name)
        if spec is not None and spec.describe is not None:  # what its approval would show
            try:
                asked = spec.describe(w.bound[agent]["ctx"], args)
                out += f"{asked.subject} {asked.preview} {asked.refusal}"
            except Exception as exc:
                out += f"{type(exc).__name__}: {exc}"
        w.received(f"{agent}.{name}({args})", out)
    else:
        agent, name, args, text = op
        calls = len(w.model.calls)
        turn = {"content": "", "tool_calls": [{"name": name, "args": args}]}
        seen = _run(w, w.bob, agent, text, [turn])
        w.called.add((agent, name))
        w.received(f"{agent}.{name}({args})", seen)
        prompts = "\n".join(str(m.content) for c in w.model.calls[calls:] for m in c)
        w.received(f"the prompts of bob's {agent}.{name} run", prompts)
