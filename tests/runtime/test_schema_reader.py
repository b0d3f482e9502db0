"""The schema-driven reader: calls of the offered tools in shapes no family grammar lists,
read through :func:`olav.runtime.rescue.salvage` as the agent reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from olav.runtime.rescue import salvage
from olav.runtime.rescue.byschema import read_calls

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
TOOLS: dict[str, dict[str, Any]] = {
    "get_weather": WEATHER,
    "get_time": {"type": "object", "properties": {"tz": {"type": "string"}}},
    "read": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    "brave_search": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["query"],
    },
}
PARIS = ("get_weather", {"city": "Paris"})

# the shapes of the issue (public reports and model cards), each with what must run
SHAPES = [
    ('<|python_tag|>[get_weather(city="Paris"), get_time()]', [PARIS, ("get_time", {})]),
    ('<|python_tag|>brave_search.call(query="weather in Paris")',
     [("brave_search", {"query": "weather in Paris"})]),
    ('<|python_start|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|python_end|>',
     [PARIS]),
    ('Sure, let me check. {"name": "get_weather", "parameters": {"city": "Paris"}} Back soon.',
     [PARIS]),
    ('get_weather(city="Paris"); get_time(tz="UTC")', [PARIS, ("get_time", {"tz": "UTC"})]),
    ('```tool_code\nget_weather(city="Paris")\n```', [PARIS]),
    ('call:get_weather(city="Paris")', [PARIS]),
    ('get_weather({"city": "Paris"})', [PARIS]),
    ('`tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}`/tool_call>', [PARIS]),
    ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}</tool_call>', [PARIS]),
    ("<read>\n<parameter=path>/etc/hosts</parameter>\n</read>", [("read", {"path": "/etc/hosts"})]),
    ("get_weather\ncity: Paris\nunit: c", [("get_weather", {"city": "Paris", "unit": "c"})]),
    ('get_weather("Paris", "f")', [("get_weather", {"city": "Paris", "unit": "f"})]),
    ('brave_search(query="bgp", count="3")', [("brave_search", {"query": "bgp", "count": 3})]),
    ('<invoke name="get_weather"><parameter name="city">Paris</parameter></invoke>', [PARIS]),
]  # fmt: skip


@pytest.mark.parametrize("text,want", SHAPES, ids=[s[0][:40] for s in SHAPES])
def test_a_shape_no_grammar_lists_is_read_by_the_schema(text: str, want: list[Any]) -> None:
    got = salvage(text, TOOLS)
    assert [(c.name, c.args) for c in got.calls] == want
    assert got.answer in ("", "Sure, let me check.  Back soon.")  # prose stays, no markers


@pytest.mark.parametrize("text,want", SHAPES, ids=[s[0][:40] for s in SHAPES])
def test_the_schemas_alone_read_them_too(text: str, want: list[Any]) -> None:
    got = salvage(text, TOOLS, grammars=False)
    assert [(c.name, c.args) for c in got.calls] == want


@pytest.mark.parametrize(
    "text",
    [
        "I could use get_weather to check that.",
        "The get_weather(city) function takes a city name.",
        'Yes, that is right:\n\n>>> get_weather(city="Paris")\n{"temp": 21}\n\nIt is mild.',
        'get_weather("Paris", "c", "extra")',  # more positional values than fields
        'Call it like this, for example: get_weather(city="Paris")',
        '```python\nget_weather(city="Paris")\n```\nThat is how the SDK is used.',
    ],
)
def test_a_mention_an_example_or_a_transcript_runs_nothing(text: str) -> None:
    assert salvage(text, TOOLS).calls == []


@pytest.mark.parametrize(
    "text",
    [
        '[get_weather(city="Paris"), get_weather(city="Ber',
        '{"name": "get_weather", "arguments": {"city": "Par',
        "<read>\n<parameter=path>/etc/ho",
        'get_weather(city="Paris"',
        "<read>\n<parameter=path>/etc/hosts</parameter>\n<parameter=mode>",
    ],
)
def test_a_call_cut_short_is_never_run_even_without_a_finish_reason(text: str) -> None:
    got = salvage(text, TOOLS)
    assert got.calls == []
    assert got.unfinished  # said, so the runner can re-ask instead of guessing


def test_on_the_token_limit_a_call_the_schema_reader_ends_in_is_not_run() -> None:
    text = 'Checking: get_weather(city="Paris")'
    assert salvage(text, TOOLS, finished=False, grammars=False).calls == []
    assert salvage(text, TOOLS, finished=False, grammars=False).unfinished == ["get_weather"]
    assert [c.name for c in salvage(text, TOOLS, grammars=False).calls] == ["get_weather"]


def test_arguments_the_schema_refuses_are_invalid_not_run() -> None:
    got = salvage('get_weather(unit="c")', TOOLS)  # city is required
    assert got.calls == [] and got.invalid and got.invalid[0].name == "get_weather"


def test_a_tool_that_is_not_offered_is_not_read() -> None:
    assert read_calls('delete_everything(path="/")', TOOLS) == []
    assert salvage('delete_everything(path="/")', TOOLS).calls == []


def test_two_calls_apart_keep_the_prose_between_them() -> None:
    text = 'First get_weather(city="Paris") and then, later, get_time(tz="UTC") ok'
    got = salvage(text, TOOLS, grammars=False)
    assert [c.name for c in got.calls] == ["get_weather", "get_time"]
    assert got.answer == "First  and then, later,  ok"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["get_weather", "(", ")", "{", "}", '"', "city", "=", ":", "<read>", "</read>",
             "<parameter=path>", "</parameter>", "\n", " ", "Paris", ",", "[", "]", ";", "`"]
        ),
        max_size=40,
    )
)  # fmt: skip
def test_any_text_is_read_without_error_and_only_offered_valid_calls_run(parts: list[str]) -> None:
    text = "".join(parts)
    got = salvage(text, TOOLS)
    for call in got.calls:
        assert call.name in TOOLS
        if call.name == "get_weather":
            assert isinstance(call.args.get("city"), str)


def test_the_shapes_gathered_from_public_reports_after_the_reader() -> None:
    """70 cases gathered from public bug reports and model cards by someone who had not read
    the reader, run only once it was done (first run: 44 of 53 calls exact, 1 execution;
    docs/benchmarks.md, section 5): the figures after the fixes that run led to."""
    from olav.bench.toolcalls import load_cases, run_toolcalls

    path = Path(__file__).parents[2] / "olav" / "bench" / "data" / "toolcalls" / "gathered.jsonl"
    cases = load_cases(path)
    assert len(cases) == 70 and all(c.source.startswith("https://") for c in cases)
    for grammars in (True, False):
        total = run_toolcalls(cases, repeat=1, grammars=grammars)["total"]
        assert total["exact"] / total["calls"] >= 0.90
        assert total["executions"] <= 1  # g-neg-008: a call written only inside <think>
