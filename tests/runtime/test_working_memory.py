from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from olav.memory.recall.recaller import Recaller, RecallOptions
from olav.memory.store.scopes import personal_scopes, private_scope
from tests.helpers import SessionFor


def _recaller(session: object) -> Recaller:
    """The operator's recall: the agent's scopes and their own."""
    config = session.ws.config  # type: ignore[attr-defined]
    options = RecallOptions(bump_access=False, extra_scopes=personal_scopes(config))
    return Recaller(session.store, agent="netops", options=options)  # type: ignore[attr-defined]


def test_episode_written_at_session_end_and_recalled_by_last_time(session_for: SessionFor) -> None:
    session, _ = session_for(
        [
            {"tool_calls": [{"name": "list_devices", "args": {"site": "bj1"}}]},
            {"content": "bj1 has 6 devices"},
            {"content": "noted"},
        ],
        agent="netops",
    )
    session.ask("list the devices in bj1")
    session.ask("we still need to back up bj1-core01 tomorrow")
    session.close()
    store = session.store
    episodes = store.list_rows("category = 'episode'")
    assert len(episodes) == 1
    text = episodes[0].text
    assert "list the devices in bj1" in text and "list_devices(site=bj1)" in text
    assert episodes[0].scope == private_scope(session.ws.config)  # it quotes my requests
    recaller = _recaller(session)
    for query in ("上次我们做到哪了？", "continue from last time"):
        result = recaller.recall(query, dry_run=True)
        assert result.injected_ids[0] == episodes[0].id, query
        assert "[earlier session:" in result.block
    other = recaller.recall("what is the BGP hold timer default?", dry_run=True)
    assert episodes[0].id not in other.injected_ids


def test_old_turns_are_compressed_at_the_budget_keeping_confirmed_parameters(
    session_for: SessionFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLAV_LLM_NUM_CTX", "2048")
    monkeypatch.setenv("OLAV_LLM_NUM_PREDICT", "256")
    filler = "Please consider the following context carefully. " * 60
    turns = [
        {"tool_calls": [{"name": "list_devices", "args": {"site": "sh1", "role": "border"}}]},
        {"content": "sh1 has 2 border routers"},
    ] + [{"content": f"answer {i}"} for i in range(6)]
    session, model = session_for(turns, agent="netops")
    session.ask("list the border routers in sh1")
    for i in range(6):
        session.ask(f"question {i}: {filler}")
    last = model.calls[-1]
    first_human = next(m for m in last if isinstance(m, HumanMessage))
    state = str(first_human.content)
    assert state.startswith("[conversation state")
    assert "list_devices.site=sh1" in state and "list_devices.role=border" in state
    assert "list the border routers in sh1" in state
    assert sum(isinstance(m, HumanMessage) for m in last) == 3  # state + the last two turns
    stored = session.built.graph.get_state({"configurable": {"thread_id": session.thread_id}})
    assert sum(isinstance(m, HumanMessage) for m in stored.values["messages"]) == 7


def test_episodes_need_an_explicit_cue_and_stay_within_a_quarter_of_the_budget(
    session_for: SessionFor,
) -> None:
    session, _ = session_for([{"content": f"ok {i}"} for i in range(12)], agent="netops")
    for i in range(12):
        session.ask(f"request {i}: check the uplink on sh1-core0{i % 3} " + "in detail " * 20)
    session.close()
    (episode,) = session.store.list_rows("category = 'episode'")
    assert "; and 6 more" in episode.text  # the asked list is bounded, the rest counted
    recaller = _recaller(session)
    # words common in ordinary requests are not cues for an earlier session
    for query in (
        "继续检查之前那台交换机的上联口",
        "earlier you said the uplink was fine, check again",
    ):
        result = recaller.recall(query, dry_run=True)
        assert episode.id not in [c.hit.record.id for c in result.candidates], query
    result = recaller.recall("上回我们做到哪了", dry_run=True)
    (cand,) = [c for c in result.candidates if c.hit.record.id == episode.id]
    assert cand.decision == "injected"
    assert cand.tokens <= recaller.token_budget // 4


def test_a_resumed_long_thread_is_compressed_like_a_live_one(
    session_for: SessionFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Quit after a long conversation and continue it in a new session (olav chat --continue):
    the model gets the older turns as the compressed state, not a prompt past its window."""
    monkeypatch.setenv("OLAV_LLM_NUM_CTX", "2048")
    monkeypatch.setenv("OLAV_LLM_NUM_PREDICT", "256")
    filler = "Please consider the following context carefully. " * 60
    turns = [
        {"tool_calls": [{"name": "list_devices", "args": {"site": "sh1", "role": "border"}}]},
        {"content": "sh1 has 2 border routers"},
    ] + [{"content": f"answer {i}"} for i in range(5)]
    first, _ = session_for(turns, agent="netops")
    first.ask("list the border routers in sh1")
    for i in range(5):
        first.ask(f"question {i}: {filler}")
    thread = first.thread_id
    first.close()
    again, model = session_for([{"content": "resumed"}], agent="netops", thread=thread)
    assert again.ask("and what about sh2?").answer == "resumed"
    (last,) = model.calls
    state = str(next(m for m in last if isinstance(m, HumanMessage)).content)
    assert state.startswith("[conversation state") and "list_devices.site=sh1" in state
    assert sum(isinstance(m, HumanMessage) for m in last) == 3  # state + the last two turns
