"""Random sequences of what two operators do with a few thread ids (make one, run on it in one
of three ways, delete it, make it again, a stateless run), through the real HTTP API of an
in-process server. After every step, everything one operator can reach (their threads found
by search, each id's runs, state and history, the other's runs got, joined and streamed, the
console's runs and chat pages) holds nothing of the other's: no text either said, no run id,
and no thread's key where it differs from its id. Thread ids are per operator: the model
keeps each operator's own ids, and a step's status codes are checked against it, so another
operator's thread with the same id must change no answer.

Seeded, so a failure names a sequence that can be run again; SEQUENCES x STEPS steps."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.serve._inprocess import Local, human, local_server, sse, tokens_for

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py)

IDS = ("t-a", "t-b", "t-c")
SEQUENCES = 3
STEPS = 8
ACTIONS = ("create", "create", "run", "run", "delete", "delete", "stateless")


@dataclass
class World:
    """What the test expects: which ids each operator has, and what each has said and run
    (in every sequence so far: the audit keeps it all)."""

    held: set[tuple[str, str]] = field(default_factory=set)  # (operator, thread id)
    said: dict[str, list[str]] = field(default_factory=dict)  # operator -> their texts
    runs: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # -> (thread, run id)
    # per (operator, thread id): the texts of its present incarnation (the state's messages)
    texts: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    both: int = 0  # steps after which both operators had a thread with one id
    log: list[str] = field(default_factory=list)


@pytest.fixture
def local(hash_ws: Path) -> Iterator[Local]:
    alice, tokens = tokens_for(hash_ws, "bob")
    with local_server(hash_ws, tokens, alice) as server:
        yield server


def _step(rng: random.Random, w: World, http: dict[str, Any], op: str, n: str) -> str:
    """One thing ``op`` does; the thread id it names."""
    action = rng.choice(ACTIONS)
    tid = rng.choice(IDS)
    mine = (op, tid) in w.held  # whether the other has this id must change nothing
    client = http[op]
    w.log.append(f"{op} {action} {tid}")
    if action == "create":
        got = client.post("/threads", json={"thread_id": tid, "metadata": {"graph_id": "core"}})
        assert got.status_code == (409 if mine else 200), (w.log, got.text)
        if not mine:
            w.held.add((op, tid))
            w.texts[op, tid] = []
            assert got.json()["thread_id"] == tid, (w.log, got.text)
        return tid
    if action == "delete":
        got = client.delete(f"/threads/{tid}")
        assert got.status_code == (204 if mine else 404), (w.log, got.text)
        if mine:
            w.held.discard((op, tid))
            del w.texts[op, tid]
        return tid
    text = f"secret of {op} number {n}."
    body: dict[str, Any] = {"assistant_id": "core", "input": human(text)}
    if action == "stateless":
        got = client.post("/runs/wait", json=body)
        assert got.status_code == 200, (w.log, got.text)
        w.said.setdefault(op, []).append(text)
        return tid
    create = rng.random() < 0.3
    if create:
        body["if_not_exists"] = "create"
    how = rng.choice(("create+join", "stream", "wait"))
    path = {"create+join": "runs", "stream": "runs/stream", "wait": "runs/wait"}[how]
    got = client.post(f"/threads/{tid}/{path}", json=body)
    want = 200 if mine or create else 404
    assert got.status_code == want, (w.log, how, got.text)
    if want != 200:
        return tid
    if not mine:
        w.held.add((op, tid))
        w.texts[op, tid] = []
    w.said.setdefault(op, []).append(text)
    w.texts[op, tid] += [text, f"answer to {text}"]
    if how == "create+join":
        rid = got.json()["run_id"]
        assert client.get(f"/threads/{tid}/runs/{rid}/join").status_code == 200
    elif how == "stream":
        rid = sse(got.text)[0][2]["run_id"]
    else:
        rid = client.get(f"/threads/{tid}/runs", params={"limit": 1}).json()[0]["run_id"]
    w.runs.setdefault(op, []).append((tid, rid))
    return tid


def _leaks(
    w: World, http: dict[str, Any], consoles: dict[str, Any], touched: str, server: Any
) -> list[str]:
    """What each operator can reach of the other's (the console's chat page: of the thread
    id the step touched, when it is theirs), and where a view differs from the model."""
    out: list[str] = []
    threads = server.threads.recent(limit=1000)
    keys = {t.id for t in threads if t.id != t.known_as}  # shown to nobody, ever
    if sorted((t.owner, t.known_as) for t in threads) != sorted(w.held):
        out.append(f"the store holds {[(t.owner, t.known_as, t.id) for t in threads]}")
    if len({t for _, t in w.held}) < len(w.held):
        w.both += 1

    def check(op: str, other: str, where: str, text: str, asked: str = "") -> None:
        for key in keys:
            if key in text:
                out.append(f"{op} sees a thread's key {key} at {where}")
        for said in w.said.get(other, []):
            if said in text:
                out.append(f"{op} sees {other}'s {said!r} at {where}")
        for _, rid in w.runs.get(other, []):
            if rid in text and rid != asked:  # a 404 names the id it was asked for
                out.append(f"{op} sees {other}'s run {rid} at {where}")

    for op, client in http.items():
        other = next(o for o in http if o != op)
        found = client.post("/threads/search", json={"limit": 100})
        check(op, other, "threads/search", found.text)
        ids = sorted(t["thread_id"] for t in found.json())
        if ids != sorted(t for o, t in w.held if o == op):
            out.append(f"{op} finds threads {ids}")
        for tid in IDS:
            mine = (op, tid) in w.held
            for path in (f"/threads/{tid}/runs", f"/threads/{tid}/state"):
                got = client.get(path)
                if got.status_code != (200 if mine else 404):
                    out.append(f"{op} gets {got.status_code} from {path}")
                check(op, other, path, got.text)
            got = client.post(f"/threads/{tid}/history", json={"limit": 100})
            check(op, other, f"/threads/{tid}/history", got.text)
            if mine:
                named = {c["checkpoint"]["thread_id"] for c in got.json()}
                if not named <= {tid}:
                    out.append(f"{op}'s {tid} history names threads {named}")
                state = client.get(f"/threads/{tid}/state").json()["values"]
                texts = [m["content"] for m in state.get("messages", [])]
                if texts != w.texts[op, tid]:
                    out.append(f"{op}'s {tid} holds {texts}")
                listed = {r["run_id"] for r in client.get(f"/threads/{tid}/runs").json()}
                if not listed <= {rid for t, rid in w.runs.get(op, []) if t == tid}:
                    out.append(f"{op}'s {tid} lists runs that are not theirs")
        for tid, rid in w.runs.get(other, []):
            base = f"/threads/{tid}/runs/{rid}"
            for got in (
                client.get(base),
                client.get(base + "/join"),
                client.get(base + "/stream", headers={"Last-Event-ID": "0"}),
            ):
                if got.status_code != 404:
                    out.append(f"{op} reaches {other}'s run at {got.request.url.path}")
                check(op, other, str(got.request.url.path), got.text, asked=rid)
        page = consoles[op].get("/runs", params={"format": "json", "limit": 200})
        check(op, other, "console /runs", page.text)
        queries = {r["query"] for r in page.json()["runs"]}
        if not queries <= set(w.said.get(op, [])):
            out.append(f"{op}'s console lists runs of others: {queries - set(w.said.get(op, []))}")
        if (op, touched) in w.held:
            chat = consoles[op].get("/chat", params={"thread": touched, "format": "json"})
            check(op, other, f"console /chat?thread={touched}", chat.text)
    return out


def test_nothing_of_one_operator_is_ever_reachable_by_the_other(local: Local) -> None:
    http = {local.alice: local.http(), "bob": local.http("bob")}
    steps = 0
    try:
        with local.console() as alice_console, local.console("bob") as bob_console:
            consoles = {local.alice: alice_console, "bob": bob_console}
            w = World()
            for seed in range(SEQUENCES):
                rng = random.Random(seed)
                w.log = [f"sequence {seed}"]
                for n in range(STEPS):
                    op = rng.choice(sorted(http))
                    touched = _step(rng, w, http, op, f"{seed}.{n}")
                    steps += 1
                    leaks = _leaks(w, http, consoles, touched, local.server)
                    assert not leaks, (w.log, leaks)
                for o, tid in sorted(w.held):  # the next sequence starts from none
                    assert http[o].delete(f"/threads/{tid}").status_code == 204
                w.held.clear()
                w.texts.clear()
    finally:
        for client in http.values():
            client.close()
    assert steps == SEQUENCES * STEPS
    assert w.both > 0  # the sequences did reach one id held by both operators
