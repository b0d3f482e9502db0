"""olav in front of the engine for a client's own agent loop (``/v1/chat/completions`` with
``tools``), driven by the clients' own packages: openai, openai-agents and LiteLLM. The engine
(the Ollama stub) writes its calls as text, as small models do; the client must receive them
as structured, schema-valid ``tool_calls``, run its tool, and get the answer."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from olav.core.config import Workspace
from olav.memory.store.schema import PENDING_EXTERNAL
from olav.memory.store.scopes import EVERYONE
from tests.serve._support import Served, serving

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
SAVE = {
    "type": "function",
    "function": {
        "name": "save_config",
        "description": "Save a device's running configuration.",
        "parameters": {
            "type": "object",
            "properties": {"device": {"type": "string"}},
            "required": ["device"],
        },
    },
}


def engine(body: dict[str, Any]) -> dict[str, Any]:
    """A small model that writes its calls as text: the weather asked of it is a Hermes-style
    call in its content; once the tool's result is in the conversation, it answers with it."""
    messages = body.get("messages") or []
    asked_json = body.get("format")
    if asked_json:  # the engine's constrained decoding: JSON, of the schema when one is given
        if "never valid" in json.dumps(messages):
            return {"content": "Sure! The weather is nice."}
        return {"content": json.dumps({"city": "Paris", "temp_c": 21})}
    results = [m for m in messages if m.get("role") == "tool"]
    if results:
        return {"content": f"The tool says: {results[-1]['content']}"}
    offered = [t["function"]["name"] for t in body.get("tools") or []]
    asked = str(messages[-1].get("content") or "") if messages else ""
    if "save" in asked and "save_config" in offered:
        device = re.search(r"sh1-\w+", asked)
        call = {"name": "save_config", "arguments": {"device": device.group(0) if device else ""}}
        return {"content": f"<tool_call>\n{json.dumps(call)}\n</tool_call>"}
    if "get_weather" in offered:
        city = "Paris" if "Paris" in asked else "Lyon"
        call = {"name": "get_weather", "arguments": {"city": city}}
        return {"content": f"I will check.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"}
    return {"content": f"answer to {asked}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("client-tools") / "ws") as s:
        s.state.chat_reply = engine
        yield s


def oai(served: Served, operator: str = "") -> openai.OpenAI:
    token = served.tokens[operator or served.alice]
    return openai.OpenAI(base_url=served.url + "/v1", api_key=token, max_retries=0)


def settled() -> None:
    """What the server writes after a reply (the audit, captures) is written."""
    from olav.memory.store.writer import shared_writer

    assert not shared_writer().flush(60)


def chats(served: Served, since: int) -> list[dict[str, Any]]:
    return [b for p, b in served.state.requests[since:] if p == "/api/chat"]


def test_a_call_written_as_text_reaches_the_client_as_a_structured_call(served: Served) -> None:
    before = len(served.state.requests)
    with oai(served) as client:
        done = client.chat.completions.create(
            model="olav/core",
            messages=[
                {"role": "system", "content": "You are the client's weather agent."},
                {"role": "user", "content": "what is the weather in Paris?"},
            ],
            tools=[WEATHER],  # type: ignore[list-item]
        )
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]  # type: ignore[index]
    assert call.type == "function" and call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]
    assert call.id
    # the engine was offered the client's tool and the client's system prompt, not olav's
    sent = chats(served, before)
    assert sent and [t["function"]["name"] for t in sent[0]["tools"]] == ["get_weather"]
    assert sent[0]["messages"][0] == {
        "role": "system",
        "content": "You are the client's weather agent.",
    }
    # audited as the operator's run, once the reply has gone (the server runs in this process)
    settled()
    ws = Workspace.open(served.ws)
    from olav.audit.recorder import AuditRecorder

    rows = AuditRecorder(ws.audit_path).query(
        "SELECT r.operator, e.detail FROM events e JOIN runs r ON r.id = e.run_id "
        "WHERE e.kind = 'client_turn' ORDER BY e.created_at DESC LIMIT 1"
    )
    operator, detail = rows[0]
    assert operator == served.alice
    assert json.loads(detail)["tool_calls"] == ["get_weather"] and json.loads(detail)["salvaged"]


def test_the_tool_result_comes_back_and_the_answer_uses_it(served: Served) -> None:
    with oai(served) as client:
        conversation: list[Any] = [{"role": "user", "content": "what is the weather in Lyon?"}]
        first = client.chat.completions.create(
            model="olav/core",
            messages=conversation,
            tools=[WEATHER],  # type: ignore[list-item]
        )
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        conversation += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "21 C and sunny"},
        ]
        second = client.chat.completions.create(
            model="olav/core",
            messages=conversation,
            tools=[WEATHER],  # type: ignore[list-item]
        )
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "The tool says: 21 C and sunny"


def test_streamed_calls_arrive_as_openais_tool_call_deltas(served: Served) -> None:
    with oai(served) as client:
        stream = client.chat.completions.create(
            model="olav/core",
            messages=[{"role": "user", "content": "weather in Paris please"}],
            tools=[WEATHER],  # type: ignore[list-item]
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    parts = [tc for d in deltas for tc in (d.tool_calls or [])]
    name = "".join(p.function.name or "" for p in parts if p.function)
    arguments = "".join(p.function.arguments or "" for p in parts if p.function)
    assert name == "get_weather" and json.loads(arguments) == {"city": "Paris"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None


def test_an_agents_sdk_agent_runs_its_function_tool_and_finishes(served: Served) -> None:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    ran: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather now in a city."""
        ran.append(city)
        return f"18 C and cloudy in {city}"

    async def main() -> Any:
        async with openai.AsyncOpenAI(
            base_url=served.url + "/v1", api_key=served.tokens[served.alice], max_retries=0
        ) as client:
            agent = Agent(
                name="weather",
                instructions="Answer with the weather tool.",
                tools=[get_weather],
                model=OpenAIChatCompletionsModel(model="olav/core", openai_client=client),
            )
            return await Runner.run(agent, "what is the weather in Paris?")

    result = asyncio.run(main())
    assert ran == ["Paris"]
    assert result.final_output == "The tool says: 18 C and cloudy in Paris"


def test_litellm_gets_the_structured_call(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # its own copy: no network here
    import litellm

    done = litellm.completion(
        model="openai/olav/core",
        api_base=served.url + "/v1",
        api_key=served.tokens[served.alice],
        messages=[{"role": "user", "content": "weather in Paris?"}],
        tools=[WEATHER],
    )
    call = done.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_a_reported_write_is_captured_pending_for_its_operator(served: Served) -> None:
    """The client ran save_config and says so: a precedent in the operator's own scope, held
    until a person confirms it (never in another operator's prompt). The agent's recall block
    reaches the engine in the person's turn, before the request, as in olav's own runs."""
    before = len(served.state.requests)
    with oai(served, "bob") as client:
        conversation: list[Any] = [
            {"role": "user", "content": "save the running config of sh1-border01"}
        ]
        first = client.chat.completions.create(
            model="olav/netops",
            messages=conversation,
            tools=[SAVE],  # type: ignore[list-item]
        )
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert json.loads(call.function.arguments) == {"device": "sh1-border01"}  # type: ignore[union-attr]
        conversation += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "saved sh1-border01"},
        ]
        client.chat.completions.create(
            model="olav/netops",
            messages=conversation,
            tools=[SAVE],  # type: ignore[list-item]
        )
    turn = chats(served, before)[0]["messages"][-1]["content"]
    assert turn.startswith("<relevant-memories>") and turn.endswith(
        "save the running config of sh1-border01"
    )
    from olav.memory.store.filters import SearchFilter
    from olav.memory.store.table import MemoryStore

    settled()
    store = MemoryStore.for_workspace(Workspace.open(served.ws))
    held = store.rows(SearchFilter(reader=EVERYONE, pending=True, include_invalid=True))
    rows = [r for r in held if "sh1-border01" in r.text]
    assert rows, "the reported save_config was not captured"
    assert all(r.scope == "user:bob" and r.pending for r in rows)
    assert all(r.superseded_by == PENDING_EXTERNAL for r in rows)


def test_a_bad_tool_choice_or_tool_is_a_422_naming_it(served: Served) -> None:
    with oai(served) as client:
        with pytest.raises(openai.UnprocessableEntityError) as bad:
            client.chat.completions.create(
                model="olav/core",
                messages=[{"role": "user", "content": "hi"}],
                tools=[WEATHER],  # type: ignore[list-item]
                tool_choice={"type": "function", "function": {"name": "launch_rockets"}},
            )
        assert "launch_rockets" in str(bad.value)
        with pytest.raises(openai.UnprocessableEntityError) as named:
            client.chat.completions.create(
                model="olav/core",
                messages=[{"role": "user", "content": "hi"}],
                tools=[{"type": "function", "function": {"name": "bad name!"}}],  # type: ignore[list-item]
            )
        assert "tools[0].function.name" in str(named.value)


def test_a_workspace_that_refuses_client_tools_says_so(tmp_path: Path) -> None:
    def refuse(ws: Path) -> None:
        cfg = ws / ".olav" / "olav.yaml"
        cfg.write_text(cfg.read_text() + "\nserve:\n  client_tools: refuse\n")

    with (
        serving(tmp_path / "ws", prepare=refuse) as s,
        oai(s) as client,
        pytest.raises(openai.BadRequestError) as refused,
    ):
        client.chat.completions.create(
            model="olav/core",
            messages=[{"role": "user", "content": "hello"}],
            tools=[WEATHER],  # type: ignore[list-item]
        )
    body = refused.value.body
    assert isinstance(body, dict) and body["param"] == "tools" and "client_tools" in body["message"]


def test_structured_output_goes_to_the_engines_constrained_decoding(served: Served) -> None:
    """langchain-openai's with_structured_output (json_schema) and the Agents SDK's
    output_type: the schema reaches Ollama as its format, and the answer is validated."""
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    class Weather(BaseModel):
        city: str
        temp_c: int

    before = len(served.state.requests)
    llm = ChatOpenAI(
        model="olav/core",
        base_url=served.url + "/v1",
        api_key=served.tokens[served.alice],  # type: ignore[arg-type]
        max_retries=0,
    )
    got = llm.with_structured_output(Weather, method="json_schema").invoke("weather in Paris?")
    assert got == Weather(city="Paris", temp_c=21)
    sent = chats(served, before)
    assert sent and sent[0]["format"]["properties"]["temp_c"]["type"] == "integer"

    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)

    async def main() -> Any:
        async with openai.AsyncOpenAI(
            base_url=served.url + "/v1", api_key=served.tokens[served.alice], max_retries=0
        ) as client:
            agent = Agent(
                name="weather",
                output_type=Weather,
                model=OpenAIChatCompletionsModel(model="olav/core", openai_client=client),
            )
            return await Runner.run(agent, "weather in Paris as data")

    assert asyncio.run(main()).final_output == Weather(city="Paris", temp_c=21)


def test_an_answer_that_never_holds_to_the_format_is_an_error_not_passed_on(
    served: Served,
) -> None:
    with oai(served) as client, pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(
            model="olav/core",
            messages=[{"role": "user", "content": "never valid json, please"}],
            response_format={"type": "json_object"},
        )
    body = failed.value.body
    assert isinstance(body, dict) and body["param"] == "response_format"
    assert "not JSON" in body["message"] and "twice" in body["message"]


def test_the_clients_user_is_recorded_in_the_audit_of_both_paths(served: Served) -> None:
    """OpenAI's ``user`` (the end user behind the client) is kept with the run, not dropped:
    on the agent's own loop and on the client's."""
    from olav.audit.recorder import AuditRecorder

    with oai(served) as client:
        client.chat.completions.create(
            model="olav/core", messages=[{"role": "user", "content": "hello"}], user="end-1"
        )
        client.chat.completions.create(
            model="olav/core",
            messages=[{"role": "user", "content": "weather in Paris?"}],
            tools=[WEATHER],  # type: ignore[list-item]
            user="end-2",
        )
        with pytest.raises(openai.UnprocessableEntityError):
            client.chat.completions.create(
                model="olav/core", messages=[{"role": "user", "content": "hi"}], user="x" * 300
            )
    settled()
    audit = AuditRecorder(Workspace.open(served.ws).audit_path)
    kinds = ("client_user", "client_turn")
    rows = audit.query("SELECT kind, detail FROM events WHERE kind IN (?, ?)", list(kinds))
    users = {json.loads(d).get("end_user") for _, d in rows}
    assert {"end-1", "end-2"} <= users
