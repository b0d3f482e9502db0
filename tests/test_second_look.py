"""A second look at recall's candidates, end to end: a reranker on a local server speaking the
rerank protocol, and the chat model (the Ollama stub, through the real client) as judge of close
calls. `olav memory why` shows their scores and verdicts and decides with them; a reranker or
judge that is down, slow or talks nonsense leaves the floors' decision, with one line why, once
per run, audited; `olav memory calibrate --ceiling` measures a reranker's floors."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    HASH_CONFIG,
    OlavCli,
    audit_rows,
    olav_entry,
    olav_here,
    scripted_ws,
    workspace_from_template,
)
from tests.stubs.rerank_stub import RerankStubState, rerank_stub

pytestmark = pytest.mark.slow  # a module of 10 s or more: scheduled first (conftest.py)

QUERY = "how do we rotate the nginx logs"
MEMORIES = {
    "fact_logrotate": "nginx logs rotate daily with logrotate and 14 are kept",
    "fact_kafka": "Kafka consumer lag over 10k pages the on-call engineer",
    "fact_reload": "an nginx reload needs nginx -t to pass first",
}
NOTHING = "1,1,1,1,1,inf"  # floors nothing clears: the margin alone injects nothing
EVERYTHING = "-1,-1,-1,-1,-1,inf"  # floors everything clears


def oracle(query: str, document: str) -> float:
    return 0.97 if "logrotate" in document else 0.01


def _workspace(root: Path, extra: str) -> Path:
    from olav.core.config import Workspace
    from olav.memory.store.schema import MemoryRecord
    from olav.memory.store.table import MemoryStore

    workspace_from_template(root, "hash", HASH_CONFIG + extra)  # what olav init makes
    store = MemoryStore.for_workspace(Workspace.open(root))
    store.upsert(
        [
            MemoryRecord(id=i, text=t, category="fact", scope="core", origin="user")
            for i, t in MEMORIES.items()
        ]
    )
    return root


def _config(relevance: str, reranker: str = "", judge: str = "") -> str:
    # HASH_CONFIG ends inside its runtime: section; these are top-level sections
    memory = f"memory:\n  relevance: '{relevance}'\n" + judge
    return memory + reranker


def _reranker(url: str, floors: str = "0.9 0.05", extra: str = "") -> str:
    return (
        f"reranker:\n  provider: rerank\n  base_url: {url}\n  floors: '{floors}'\n"
        f"  timeout_ms: 300\n{extra}"
    )


def _why(root: Path, query: str = QUERY) -> dict[str, Any]:
    """`olav memory why --json` in this process (the real command and clients, without a
    fresh interpreter's seconds of imports)."""
    done = olav_here(root, "memory", "why", query, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _ours(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in report["candidates"] if c["id"] in MEMORIES}


@pytest.fixture
def stub() -> Iterator[tuple[str, RerankStubState]]:
    state = RerankStubState(score_fn=oracle)
    with rerank_stub(state) as url:
        yield url, state


def test_the_reranker_injects_what_it_is_sure_of_and_leaves_out_the_rest(
    tmp_path: Path, stub: tuple[str, RerankStubState]
) -> None:
    url, state = stub
    strict = _why(_workspace(tmp_path / "strict", _config(NOTHING, _reranker(url))))
    ours = _ours(strict)
    assert ours["fact_logrotate"]["rerank"] == 0.97
    assert ours["fact_logrotate"]["decision"] == "injected"
    assert "relevant by the reranker (0.970 >= 0.9)" in ours["fact_logrotate"]["reason"]
    assert strict["injected"] == ["fact_logrotate"]  # the margin alone injects nothing
    look = strict["second_look"]
    assert look["reranker"] == f"{url}/v1/rerank"
    assert look["rerank_floors"] == {"accept": 0.9, "reject": 0.05}
    assert look["rerank_floors_from"] == "reranker.floors"
    assert look["rerank_ms"] is not None and look["notes"] == []
    path, body = state.requests[-1]
    assert path == "/v1/rerank" and body["query"] == QUERY
    assert set(MEMORIES.values()) <= set(body["documents"])

    lax = _why(_workspace(tmp_path / "lax", _config(EVERYTHING, _reranker(url))))
    ours = _ours(lax)
    assert ours["fact_kafka"]["decision"] == "irrelevant"
    assert "left out by the reranker (0.010 < 0.05)" in ours["fact_kafka"]["reason"]
    assert "fact_logrotate" in lax["injected"] and "fact_kafka" not in lax["injected"]

    plain = _why(_workspace(tmp_path / "plain", _config(EVERYTHING)))
    assert "second_look" not in plain  # without a reranker the JSON is as it was
    assert all("rerank" not in c and "judged" not in c for c in plain["candidates"])
    assert _ours(plain)["fact_kafka"]["relevant"] is True  # the floors alone let it through


def test_an_uncalibrated_reranker_decides_with_the_policy_s_floors(
    tmp_path: Path, stub: tuple[str, RerankStubState]
) -> None:
    url, _ = stub
    policy = "  policy:\n    second_look: {uncalibrated: [0.5, 0.02]}\n"
    root = _workspace(tmp_path / "ws", _config(NOTHING, _reranker(url, floors="auto"), policy))
    why = _why(root)
    look = why["second_look"]
    assert look["rerank_floors"] == {"accept": 0.5, "reject": 0.02}
    assert look["rerank_floors_from"] == "uncalibrated"
    assert "relevant by the reranker (0.970 >= 0.5)" in _ours(why)["fact_logrotate"]["reason"]
    assert why["injected"] == ["fact_logrotate"]


@pytest.mark.parametrize(
    ("mode", "words"),
    [("slow", "is slow: no answer within 300 ms"), ("garbage", "is malformed"), ("", "is down")],
)
def test_a_broken_reranker_leaves_the_floors_decision_with_one_line_why(
    tmp_path: Path, mode: str, words: str
) -> None:
    plain = _why(_workspace(tmp_path / "plain", _config(EVERYTHING)))
    state = RerankStubState(score_fn=oracle, mode=mode)
    with rerank_stub(state) as url:
        if not mode:  # down: a port nobody listens on
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        broken = _why(_workspace(tmp_path / "broken", _config(EVERYTHING, _reranker(url))))
        state.release.set()
    assert broken["injected"] == plain["injected"]
    assert [c["decision"] for c in broken["candidates"]] == [
        c["decision"] for c in plain["candidates"]
    ]
    (note,) = broken["second_look"]["notes"]
    assert words in note and note.endswith("the bundled decision stands")


def test_a_run_warns_once_and_the_audit_says_why(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    root = _workspace(tmp_path / "ws", _config(EVERYTHING, _reranker(url)))
    scripted_ws(root, [{"content": "Rotate them daily with logrotate."}])
    done = olav_entry(root, "ask", QUERY)
    assert done.returncode == 0, done.stderr
    assert "Rotate them daily" in done.stdout
    warned = [line for line in done.stderr.splitlines() if "reranker" in line]
    assert len(warned) == 1 and "Traceback" not in done.stderr
    assert warned[0].startswith("memory: the reranker at") and "is down" in warned[0]
    events = audit_rows(root, "SELECT kind, detail FROM events WHERE kind LIKE 'recall_%'")
    kinds = sorted(kind for kind, _ in events)
    assert kinds == ["recall_degraded", "recall_second_look"]
    degraded = json.loads(next(d for k, d in events if k == "recall_degraded"))
    assert degraded["stage"] == "rerank" and "is down" in degraded["message"]
    (recorded,) = audit_rows(root, "SELECT candidates FROM recalls")
    assert all("rerank" not in c for c in json.loads(recorded[0]))


def test_the_judge_decides_the_close_calls_through_the_real_ollama_client(
    tmp_path: Path,
) -> None:
    from tests.stubs.ollama_stub import StubState, ollama_stub

    say = {"mode": "pick"}

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        if say["mode"] == "ramble":
            return {"content": "They all look useful to me."}
        if say["mode"] == "none":
            return {"content": '{"apply": []}'}
        numbered = dict(re.findall(r"^\[(\d+)\] (.*)$", prompt, re.M))
        picked = [int(n) for n, text in numbered.items() if "logrotate" in text]
        return {"content": f'<think>only the rotation note</think>{{"apply": {picked}}}'}

    state = StubState(chat_reply=reply)
    with ollama_stub(state) as (url, _):
        llm = f"llm:\n  provider: ollama\n  base_url: {url}\n  model: qwen3:8b\n"
        root = _workspace(tmp_path / "ws", "")
        cfg = root / ".olav" / "olav.yaml"

        def configure(floor: float) -> None:
            relevance = ",".join([f"{floor:.6f}"] * 3 + ["1", "1", "inf"])
            judge = "  judge: model\n  judge_band: 0.001\n"
            cfg.write_text(HASH_CONFIG.split("llm:")[0] + llm + _config(relevance, judge=judge))

        configure(-1.0)  # every margin clears it, and none is a close call
        margin = _ours(_why(root))["fact_logrotate"]["margin"]
        assert [b for p, b in state.requests if p == "/api/chat"] == []  # nothing to ask

        configure(margin + 0.0005)  # the floors would leave it out by a hair
        why = _why(root)
        look = why["second_look"]
        assert look["judge"] is True and look["reranker"] is None
        assert look["judge_ms"] is not None and look["notes"] == []
        verdicts = {v["id"]: v["applies"] for v in look["judged"]}
        assert verdicts["fact_logrotate"] is True
        ours = _ours(why)
        assert ours["fact_logrotate"]["judged"] is True
        assert "the judge says it applies" in ours["fact_logrotate"]["reason"]
        assert "fact_logrotate" in why["injected"]
        calls = [b for p, b in state.requests if p == "/api/chat"]
        assert len(calls) == 1 and calls[0]["think"] is False  # one short call per request

        configure(margin - 0.0005)  # the floors would let it in by a hair
        say["mode"] = "none"
        denied = _why(root)
        assert _ours(denied)["fact_logrotate"]["judged"] is False
        assert "the judge says it does not apply" in _ours(denied)["fact_logrotate"]["reason"]
        assert "fact_logrotate" not in denied["injected"]

        say["mode"] = "ramble"
        rambling = _why(root)
        (note,) = rambling["second_look"]["notes"]
        assert "the judge (the chat model) gave no verdict (malformed:" in note
        assert all("judged" not in c for c in rambling["candidates"])
        assert "fact_logrotate" in rambling["injected"]  # the floors decided: in by a hair


def test_calibrate_measures_the_reranker_and_its_ceiling(
    tmp_path: Path,
    olav: OlavCli,
    stub: tuple[str, RerankStubState],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through `olav memory calibrate` with an embedder on the Ollama stub (the golden suite's
    600 texts embed in seconds) and grids cut small (the full ones take a minute)."""
    import olav.memory.golden.ceiling as golden_ceiling
    import olav.memory.golden.rerank as golden_rerank
    from tests.stubs.ollama_stub import StubState, ollama_stub

    small = {"directive": (0.0, 0.03), "directive_words": (0.01,), "specific": (-0.02,)}
    small |= {"spread": (0.005,), "lesson": (0.04,), "lesson_words": (0.04,)}
    monkeypatch.setattr(golden_ceiling, "GRID", small)
    monkeypatch.setattr(golden_rerank, "ACCEPT", (0.4, 0.9, float("inf")))
    monkeypatch.setattr(golden_rerank, "REJECT", (float("-inf"), 0.1, 0.6))
    url, state = stub
    state.score_fn = lambda q, d: 0.5  # a reranker that cannot tell: it must change nothing
    with ollama_stub(StubState(models={"bge-m3": 32})) as (embed_url, _):
        root = workspace_from_template(  # what olav init makes with this embedder
            tmp_path / "ws",
            "ollama",
            f"embedder:\n  provider: ollama\n  model: bge-m3\n  base_url: {embed_url}\n"
            f"llm:\n  base_url: http://127.0.0.1:9\n"
            f"reranker:\n  provider: rerank\n  base_url: {url}\n",
        )
        monkeypatch.chdir(root)
        done = olav("memory", "calibrate", "--ceiling", "--yes")
        assert done.exit_code == 0, done.output
        assert f"reranker {url}/v1/rerank: injects at never, leaves out below never" in (
            done.output.replace("\n", " ")
        )
        assert "without the reranker" in done.output and "best any floors reach" in done.output
        assert "the reranker's floors saved" in done.output
        assert len([r for r in state.requests if r[0] == "/v1/rerank"]) >= 300  # one a query
        saved = json.loads((root / ".olav" / "databases" / "rerank-floors.json").read_text())
        (entry,) = saved.values()
        assert entry["accept"] is None and entry["reject"] is None  # never decides
        why = olav("memory", "why", QUERY, "--json")
        assert why.exit_code == 0, why.output
        look = json.loads(why.output)["second_look"]
        assert look["rerank_floors_from"] == "calibrated"
        assert look["rerank_floors"] == {"accept": None, "reject": None}
