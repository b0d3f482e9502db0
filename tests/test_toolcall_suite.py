"""The rescue layer against CanIToolCall, a public conformance suite olav did not write.

Every fixture of the suite (raw outputs of nine open model families, from engine test
suites, official chat-template renders and bug reports) goes through the parser the agent
runs, once whole and once streamed under each of the suite's chunkings, and is judged by the
suite's own checks. A fixture of a family olav cannot read fails like any other.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from canitoolcall.fixtures import Fixture, load_families, load_fixtures

from olav.bench import toolcall_suite as ts

FIXTURES = load_fixtures()
FAMILIES = load_families()


def test_the_whole_suite_is_replayed() -> None:
    assert len(FIXTURES) == 469
    assert set(FAMILIES) == {
        "deepseek", "gemma4", "glm", "gpt-oss", "kimi", "llama", "mistral", "qwen3-hermes",
        "qwen3-xml",
    }  # fmt: skip


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.id for f in FIXTURES])
def test_fixture(fixture: Fixture) -> None:
    verdict = ts.judge(fixture, FAMILIES.get(fixture.family))
    assert verdict["status"] in ("pass", "soft_pass"), verdict["failed"]
    assert not verdict["unsafe"], "a call ran from output the model did not finish"
    assert not verdict["leak"] and not verdict["stream_differs"]
    assert not verdict["stress_failed"], verdict["stress_failed"]  # one character a delta


def test_a_cut_call_is_never_completed() -> None:
    """The suite's worst cases, spelled out: a parameter or JSON string cut by the token
    limit would otherwise become a complete and dangerous call."""
    tools = {
        "write_file": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        }
    }
    cut = [
        "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/b.sh\n</parameter>\n"
        "<parameter=content>\nrm -rf /",
        '[TOOL_CALLS]write_file[ARGS]{"path": "/tmp/b.sh", "content": "rm -rf /',
        '<tool_call>\n{"name": "write_file", "arguments": {"path": "/tmp/b.sh"}',
        '{"name": "write_file", "arguments": {"path": "/tmp/b.sh", "content": "rm"}',
    ]
    for text in cut:
        for finished in (True, False):
            got = ts.parse(text, tools, finished=finished)
            assert got.calls == (), (text, finished)


def test_a_closed_call_before_the_cut_runs_and_the_cut_one_does_not() -> None:
    text = (
        '<tool_call>\n{"name": "get", "arguments": {"city": "Zürich"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get", "arguments": {"city": "Par'
    )
    tools = {"get": {"type": "object", "properties": {"city": {"type": "string"}}}}
    got = ts.parse(text, tools, finished=False)
    assert [json.loads(a) for _, a in got.calls] == [{"city": "Zürich"}]
    assert got.content is None  # nothing of either call is shown


def test_an_unsupported_family_fails_rather_than_skips() -> None:
    """A fixture in a grammar olav has no reader for is judged, and fails."""
    raw = FIXTURES[0].to_dict()
    raw.update(
        id="made-up/one-call",
        family="made-up",
        raw_output="@@call get_weather ~~ city=Paris @@",
        expected={
            "content": None,
            "reasoning_content": None,
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
        },
    )
    raw.pop("expected_error", None)
    fixture = Fixture.from_dict(raw, source=Path("made-up.jsonl"), line=1)
    assert ts.judge(fixture, None)["status"] == "fail"


def test_stream_units_rejoin_to_the_text() -> None:
    for fixture in FIXTURES:
        markers = FAMILIES[fixture.family].markers
        for strategy in (*ts.STRATEGIES, *ts.STRESS):
            assert "".join(ts.chunks(fixture.raw_output, markers, strategy)) == fixture.raw_output


def test_the_held_out_quarter_is_fixed_by_id() -> None:
    held = [f.id for f in FIXTURES if ts.held_out(f.id)]
    assert 0.2 < len(held) / len(FIXTURES) < 0.3
    assert held == [f.id for f in load_fixtures() if ts.held_out(f.id)]


def test_the_report_and_its_markdown() -> None:
    report = ts.run_suite()
    assert report["total"]["fixtures"] == 469
    assert report["dev"]["fixtures"] + report["held_out"]["fixtures"] == 469
    assert all(report["met"].values()), report["not_passed"]
    md = ts.markdown_suite(report)
    assert "| **all** | 469 |" in md and "vLLM 0.30.0 354/469" in md


def test_cli_unknown_suite_names_the_one_there_is(tmp_path: Path) -> None:
    from olav.core.errors import OlavError
    from tests.helpers import olav_here

    with pytest.raises(OlavError, match="unknown suite 'nope'") as err:
        olav_here(tmp_path, "bench", "toolcalls", "--suite", "nope")
    assert "canitoolcall" in (err.value.hint or "")


def test_cli_suite_table(tmp_path: Path) -> None:
    from tests.helpers import olav_here

    result = olav_here(tmp_path, "bench", "toolcalls", "--suite", "canitoolcall", "--json")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["total"]["calls_exact"] == report["total"]["calls"] == 359


def test_the_schemas_alone_read_most_of_the_suite_and_run_nothing_cut() -> None:
    """Every family grammar off: the offered tools' names and schemas read the calls of
    families they were never told about, and nothing from a cut or broken message."""
    calls = [f for f in FIXTURES if ts._kind(f) == "call"]
    exact = 0
    for f in calls:
        tools = ts.tool_schemas(f.tools)
        got = ts.parse(f.raw_output, tools, finished=not f.truncated, grammars=False)
        want = [(c.name, c.arguments) for c in f.expected.tool_calls]
        exact += [(n, json.loads(a)) for n, a in got.calls] == want
    assert exact / len(calls) >= 0.85
    alone = ts.read_alone(FIXTURES, FAMILIES, grammars=True)
    assert alone == {"fixtures": 54, "calls_from": []}  # no finish reason: still nothing runs
