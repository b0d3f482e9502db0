"""The rescue layer's pure functions, one behaviour per test: lenient JSON, schema repair,
reasoning kept apart (whole and streamed), and which calls written as text may run.
The middleware in a real Session is tests/runtime/test_rescue_guards.py."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from olav.runtime.rescue.lenient import LenientError, loads, scan_value
from olav.runtime.rescue.salvage import asks_for_example, offered_name, salvage
from olav.runtime.rescue.schema import coerce, example
from olav.runtime.rescue.stream import StreamGuard
from olav.runtime.rescue.think import STREAM_HOLD, ThinkFilter, split_reasoning

# -- lenient JSON ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("{'device': 'sh1-core01', 'n': 2}", {"device": "sh1-core01", "n": 2}),
        ("{'say': 'he said \"hi\"'}", {"say": 'he said "hi"'}),
        ('{"a": True, "b": False, "c": None}', {"a": True, "b": False, "c": None}),
        ('{"a": [1, 2,], "b": 3,}', {"a": [1, 2], "b": 3}),
        (r'{"path": "C:\configs\r1", "re": "\d+"}', {"path": "C:\\configs\r1", "re": "\\d+"}),
        ('{"data": "line one\nline two\tend"}', {"data": "line one\nline two\tend"}),
        ('{device: "r1", max_rows: 5}', {"device": "r1", "max_rows": 5}),
        ('{"a": {"b": [1, 2', {"a": {"b": [1, 2]}}),
        ('{"name": "x", "arguments": {"q": "it\'s"', {"name": "x", "arguments": {"q": "it's"}}),
    ],
    ids=[
        "single-quotes",
        "double-quote-inside-single",
        "python-words",
        "trailing-commas",
        "lone-backslashes",
        "raw-newline-and-tab",
        "unquoted-keys",
        "missing-closers",
        "missing-closers-after-string",
    ],
)
def test_lenient_reads_what_small_models_write(text: str, value: Any) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # each case really is broken JSON
    assert loads(text) == value


def test_lenient_keeps_strict_json_as_it_is() -> None:
    text = '{"s": "True, None, \'x\'", "n": null, "esc": "a\\"b\\\\c\\u00e9"}'
    assert loads(text) == json.loads(text)


def test_python_words_inside_strings_are_not_rewritten() -> None:
    assert loads("{'v': 'None of True', 'k': None,}") == {"v": "None of True", "k": None}


@pytest.mark.parametrize(
    "text", ["I will export the file now.", "", "{'a' 1}", "{'a': 1} {'b': 2}"]
)
def test_what_is_not_json_raises_lenient_error(text: str) -> None:
    with pytest.raises(LenientError):
        loads(text)


def test_lenient_error_is_a_value_error() -> None:
    assert issubclass(LenientError, ValueError)


def test_scan_value_skips_braces_in_strings_and_stops_at_the_end() -> None:
    text = 'call {"a": "}{", \'b\': "]"} and more'
    end = scan_value(text, text.index("{"))
    assert text[text.index("{") : end] == '{"a": "}{", \'b\': "]"}'
    assert scan_value('{"a": [1, 2', 0) == len('{"a": [1, 2')
    # an apostrophe in a word opens no string
    prose = "{don't: 1} tail"
    assert prose[: scan_value(prose, 0)] == "{don't: 1}"


# -- schema repair -----------------------------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "device": {"type": "string", "description": "the host name, e.g. sh1-core01"},
        "mtu": {"type": "integer", "description": "e.g. 9000"},
        "ratio": {"type": "number"},
        "enabled": {"type": "boolean"},
        "options": {"type": "object", "properties": {"depth": {"type": "integer"}}},
        "data": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ports": {"type": "array", "items": {"type": "integer"}},
        "format": {"enum": ["md", "csv"]},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
    },
    "required": ["device", "mtu"],
}


@pytest.mark.parametrize(
    ("field", "given", "wanted"),
    [
        ("mtu", "9000", 9000),
        ("mtu", "9_000", 9000),
        ("mtu", "9000.0", 9000),
        ("mtu", 9000.0, 9000),
        ("ratio", "0.25", 0.25),
        ("ratio", "3", 3),
        ("enabled", "true", True),
        ("enabled", "No", False),
        ("enabled", 1, True),
        ("options", '{"depth": "2"}', {"depth": 2}),
        ("options", "{'depth': 2,}", {"depth": 2}),
        ("data", {"rows": [1, 2]}, '{"rows": [1, 2]}'),
        ("data", 42, "42"),
        ("tags", "core", ["core"]),
        ("tags", '["a", "b"]', ["a", "b"]),
        ("ports", "22", [22]),
        ("ports", ["22", 23], [22, 23]),
        ("device", '"sh1-core01"', "sh1-core01"),
        ("device", "“sh1-core01”", "sh1-core01"),
        ("format", "MD", "md"),
        ("limit", "None", None),
        ("limit", "null", None),
        ("limit", "5", 5),
    ],
)
def test_coerce_repairs_a_wrong_type(field: str, given: Any, wanted: Any) -> None:
    args = {"device": "r1", "mtu": 1500, field: given}
    checked = coerce(args, SCHEMA)
    assert checked.ok, checked.problems
    assert checked.args[field] == wanted
    assert type(checked.args[field]) is type(wanted)
    assert field in checked.repaired


def test_a_value_an_option_takes_as_it_is_stays_as_it_is() -> None:
    checked = coerce({"device": "r1", "mtu": 1, "note": "3", "limit": None}, SCHEMA)
    assert checked.ok and checked.repaired == []
    assert checked.args["note"] == "3" and checked.args["limit"] is None


def test_coerce_leaves_valid_arguments_and_long_content_alone() -> None:
    text = '"quoted" text\nthat is content, not a name'
    checked = coerce({"device": "r1", "mtu": 1500, "data": text}, SCHEMA)
    assert checked.ok and checked.repaired == []
    assert checked.args == {"device": "r1", "mtu": 1500, "data": text}


def test_coerce_reads_arguments_sent_as_one_json_string() -> None:
    checked = coerce("{'device': 'r1', 'mtu': '1500'}", SCHEMA)
    assert checked.ok and checked.args == {"device": "r1", "mtu": 1500}


def test_coerce_matches_keys_by_case_and_dashes() -> None:
    schema = {"type": "object", "properties": {"max_rows": {"type": "integer"}}}
    checked = coerce({"Max-Rows": "5"}, schema)
    assert checked.ok and checked.args == {"max_rows": 5}


def test_a_missing_required_field_is_named_with_an_example() -> None:
    checked = coerce({"device": "r1"}, SCHEMA)
    assert not checked.ok
    assert checked.problems == [
        'argument \'mtu\' is required, e.g. {"device": "sh1-core01", "mtu": 9000}'
    ]


def test_a_wrong_type_names_the_field_the_type_the_value_and_an_example() -> None:
    checked = coerce({"device": "r1", "mtu": "jumbo"}, SCHEMA)
    assert not checked.ok
    assert checked.problems[0] == (
        "argument 'mtu' must be an integer (got \"jumbo\"), "
        'e.g. {"device": "sh1-core01", "mtu": 9000}'
    )
    assert "mtu" not in checked.args


def test_a_wrong_type_for_a_required_field_is_one_problem() -> None:
    checked = coerce({"device": "r1", "mtu": "jumbo"}, SCHEMA)
    assert len(checked.problems) == 1


def test_a_wrong_type_under_a_key_in_another_case_is_one_problem() -> None:
    checked = coerce({"device": "r1", "MTU": "jumbo"}, SCHEMA)
    assert checked.problems == [
        "argument 'mtu' must be an integer (got \"jumbo\"), "
        'e.g. {"device": "sh1-core01", "mtu": 9000}'
    ]
    # a required field that is not given is still named
    assert coerce({"mtu": "jumbo"}, SCHEMA).problems[1].startswith("argument 'device' is required")


@pytest.mark.parametrize(
    ("field", "given", "expected"),
    [
        ("enabled", "maybe", "true or false"),
        ("enabled", 2, "true or false"),
        ("mtu", True, "an integer"),
        ("ratio", "fast", "a number"),
        ("options", "not an object", "an object"),
        ("options", [1], "an object"),
        ("format", "pdf", "one of md, csv"),
        ("ports", ["x"], "an integer"),
    ],
)
def test_values_that_cannot_be_repaired_are_problems(field: str, given: Any, expected: str) -> None:
    checked = coerce({"device": "r1", "mtu": 1, field: given}, SCHEMA)
    assert not checked.ok
    assert any(p.startswith(f"argument {field!r} must be {expected}") for p in checked.problems)
    assert field not in checked.args


def test_unknown_arguments_are_problems_that_list_the_known_ones() -> None:
    checked = coerce({"device": "r1", "mtu": 1, "colour": "red"}, SCHEMA)
    assert checked.problems == [
        "unknown argument 'colour' (the arguments are: " + ", ".join(SCHEMA["properties"]) + ")"
    ]


@pytest.mark.parametrize("args", ["not json at all", [1, 2], 7])
def test_arguments_that_are_not_an_object_are_one_problem(args: Any) -> None:
    checked = coerce(args, SCHEMA)
    assert checked.args == {}
    assert len(checked.problems) == 1
    assert checked.problems[0].startswith("the arguments must be a JSON object")


def test_empty_arguments_are_an_empty_object() -> None:
    schema = {"type": "object", "properties": {"site": {"type": "string"}}}
    assert coerce("", schema).ok and coerce(None, schema).args == {}


def test_refs_into_defs_are_followed() -> None:
    schema = {
        "type": "object",
        "$defs": {"Fmt": {"enum": ["md", "csv"]}},
        "properties": {"format": {"$ref": "#/$defs/Fmt"}},
        "required": ["format"],
    }
    assert coerce({"format": "CSV"}, schema).args == {"format": "csv"}
    assert not coerce({"format": "pdf"}, schema).ok
    assert example(schema) == '{"format": "md"}'


def test_example_takes_required_fields_and_their_hints() -> None:
    assert json.loads(example(SCHEMA)) == {"device": "sh1-core01", "mtu": 9000}
    loose = {
        "type": "object",
        "properties": {
            "a": {"type": "boolean"},
            "b": {"type": "array", "items": {"type": "integer"}},
            "c": {"anyOf": [{"type": "null"}, {"type": "number"}]},
            "d": {"type": "string"},
        },
    }
    # no required field: the first three, each by its type
    assert json.loads(example(loose)) == {"a": True, "b": [1], "c": 1.0}
    assert example({"type": "object"}) == "{}"


# -- reasoning kept apart ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer", "reasoning"),
    [
        ("<think>plan the call</think>\n\nThe answer.", "The answer.", "plan the call"),
        ("<THINKING>a</THINKING>B<reasoning>c</reasoning>", "B", "a\n\nc"),
        ("Partial answer <think>and then it was cut", "Partial answer", "and then it was cut"),
        ("the template opened it</think>\nThe answer.", "The answer.", "the template opened it"),
        (
            "<|channel|>analysis<|message|>hmm<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Hi<|return|>",
            "Hi",
            "hmm",
        ),
        ("a < b and b > c, <b>bold</b>", "a < b and b > c, <b>bold</b>", ""),
        ("", "", ""),
    ],
    ids=["closed", "other-tags", "unclosed", "closing-only", "harmony", "no-tags", "empty"],
)
def test_split_reasoning(text: str, answer: str, reasoning: str) -> None:
    assert split_reasoning(text) == (answer, reasoning)


def _fed(cls: type[ThinkFilter] | type[StreamGuard], chunks: list[str]) -> str:
    f = cls()
    return "".join(f.feed(c) for c in chunks) + f.flush()


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = [0, *sorted(set(cuts)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(points)]


# text from characters that can build `<|`, a JSON line start and a partial tag, but no tag
_PLAIN = st.text(alphabet="ab <>/|\n{[:`\"'", max_size=10)
_TAG = st.sampled_from(["think", "thinking", "reasoning", "THINK", "Think"])
_AFTER = st.sampled_from(["", "\n", "\n\n"])


@st.composite
def _messages(draw: st.DrawFn) -> str:
    """A model message whose reasoning is opened in it: plain text and closed reasoning
    blocks (maybe followed by newlines), maybe an unclosed block at the end."""
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            tag = draw(_TAG)
            parts.append(f"<{tag}>{draw(_PLAIN)}</{tag}>{draw(_AFTER)}")
        else:
            parts.append(draw(_PLAIN))
    if draw(st.booleans()):
        parts.append(f"<{draw(_TAG)}>{draw(_PLAIN)}")
    return "".join(parts)


@st.composite
def _any_messages(draw: st.DrawFn) -> str:
    """Messages with what _messages leaves out: a closing tag whose opening tag was in the
    template (within STREAM_HOLD characters of the start), stray closing tags, tags in any
    case."""
    parts: list[str] = []
    if draw(st.booleans()):
        parts.append(f"{draw(_PLAIN)}</{draw(_TAG)}>{draw(_AFTER)}")
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            tag = draw(_TAG)
            parts.append(f"<{tag}>{draw(_PLAIN)}</{tag}>{draw(_AFTER)}")
        elif kind == 1:
            parts.append(f"</{draw(_TAG)}>{draw(_AFTER)}")
        else:
            parts.append(draw(_PLAIN))
    if draw(st.booleans()):
        parts.append(f"<{draw(_TAG)}>{draw(_PLAIN)}")
    return "".join(parts)


def _streamed_alike(data: st.DataObject, cls: type[Any], text: str) -> str:
    """What ``cls`` shows of ``text``, the same whether it comes whole, a character at a
    time or cut anywhere."""
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    whole = _fed(cls, [text])
    assert _fed(cls, list(text)) == whole
    assert _fed(cls, _chunks(text, cuts)) == whole
    return whole


# The guarantee (olav.runtime.rescue.think): however the stream is cut, what ThinkFilter shows
# is, stripped, split_reasoning(text)[0] for every message whose reasoning is opened in it, and
# for every message whose template-opened reasoning closes within STREAM_HOLD characters; for
# longer template-opened reasoning, what it shows ends with split_reasoning(text)[0].


@settings(max_examples=300, deadline=None, database=None)
@given(data=st.data(), text=_messages())
def test_the_stream_shows_the_answer_of_a_message_that_opens_its_reasoning(
    data: st.DataObject, text: str
) -> None:
    assert _streamed_alike(data, ThinkFilter, text).strip() == split_reasoning(text)[0].strip()


@settings(max_examples=500, deadline=None, database=None)
@given(data=st.data(), text=_any_messages())
def test_the_stream_shows_the_answer_when_template_reasoning_closes_within_the_hold(
    data: st.DataObject, text: str
) -> None:
    assert _streamed_alike(data, ThinkFilter, text).strip() == split_reasoning(text)[0].strip()


@st.composite
def _template_opened(draw: st.DrawFn) -> tuple[str, str]:
    """(reasoning the template opened, of any length, around STREAM_HOLD too; the message)."""
    near = st.integers(STREAM_HOLD - 24, STREAM_HOLD + 4)  # the end of the hold
    size = draw(st.one_of(st.integers(0, 3 * STREAM_HOLD), near))
    # "<thin" may begin a tag; no "k": no tag
    filler = draw(st.text(alphabet="ab <>/|\n{[:thin", min_size=size, max_size=size))
    inside = draw(_PLAIN) + filler + draw(_PLAIN)
    return inside, f"{inside}</{draw(_TAG)}>{draw(_AFTER)}{draw(_any_messages())}"


@settings(max_examples=500, deadline=None, database=None)
@given(data=st.data(), made=_template_opened())
def test_template_opened_reasoning_of_any_length_stays_out_of_the_answer(
    data: st.DataObject, made: tuple[str, str]
) -> None:
    inside, text = made
    answer, reasoning = split_reasoning(text)
    assert reasoning.startswith(inside.strip())  # whatever its length: never the answer
    shown = _streamed_alike(data, ThinkFilter, text)
    if len(inside) <= STREAM_HOLD:  # closed within the hold: hidden from the stream too
        assert shown.strip() == answer.strip()
    else:  # shown as it streamed; the answer follows it, the closing tag never shows
        assert shown.rstrip().endswith(answer)
        assert shown.startswith(inside)
        assert _CLOSE_TAG.search(shown) is None


@settings(max_examples=300, deadline=None, database=None)
@given(data=st.data(), text=st.one_of(_messages(), _any_messages()))
def test_stream_guard_shows_the_same_text_however_the_stream_is_cut(
    data: st.DataObject, text: str
) -> None:
    guarded = _streamed_alike(data, StreamGuard, text)
    # the guard only ever holds back: what it shows begins what the think filter shows
    assert _fed(ThinkFilter, [text]).startswith(guarded)


def test_think_filter_keeps_the_reasoning_it_hid() -> None:
    f = ThinkFilter()
    shown = "".join(f.feed(c) for c in ["Hi <thi", "nk>secret pl", "an</th", "ink>there"])
    assert shown + f.flush() == "Hi there"
    assert "".join(f.reasoning) == "secret plan"


def test_think_filter_flush_returns_a_held_back_tag_start_that_was_no_tag() -> None:
    f = ThinkFilter()
    assert f.feed("<think>plan</think>x <thin") == "x "  # an opening tag ends the hold
    assert f.flush() == "<thin"
    g = ThinkFilter()
    g.feed("<think>never closed </thi")
    assert g.flush() == ""  # inside reasoning: nothing to show


def test_upper_case_reasoning_tags_are_split_like_lower_case_ones() -> None:
    text = "<THINK>plan</THINK>The answer."
    assert _fed(ThinkFilter, [text]) == "The answer."  # the stream hides it
    assert split_reasoning(text) == ("The answer.", "plan")


@pytest.mark.parametrize("cls", [ThinkFilter, StreamGuard])
def test_closing_tag_only_reasoning_is_not_streamed(cls: type[Any]) -> None:
    text = "the template opened it</think>The answer."
    assert _fed(cls, [text]) == "The answer."
    assert _fed(cls, list(text)) == "The answer."


def test_newlines_after_a_closing_tag_are_dropped_however_the_stream_is_cut() -> None:
    text = "<think>plan</think>\n\nThe answer."
    assert _fed(ThinkFilter, [text]) == "The answer."
    assert _fed(ThinkFilter, ["<think>plan</think>", "\n", "\n", "The answer."]) == "The answer."


def test_a_json_call_after_a_leading_space_is_held_back_however_it_is_cut() -> None:
    text = ' {"name": "list_devices", "arguments": {}}'
    assert _fed(StreamGuard, [text]) == ""
    assert _fed(StreamGuard, [" ", text[1:]]) == ""
    assert _fed(StreamGuard, list(text)) == ""
    assert _fed(StreamGuard, [" " * 200 + text]) == ""  # past the think filter's hold too


_CLOSE_TAG = re.compile(r"</(?:think|thinking|reasoning)>", re.I)


def _shown_as_fed(cls: type[Any], text: str) -> list[str]:
    """What ``cls`` shows after each character of ``text``."""
    f = cls()
    return [f.feed(c) for c in text]


def test_an_answer_streams_once_the_hold_has_passed() -> None:
    answer = "BGP is up on all four peers of sh1-core01. " * 10
    shown = _shown_as_fed(ThinkFilter, answer)
    assert "".join(shown[:STREAM_HOLD]) == ""  # held: a </think> may still come
    assert shown[STREAM_HOLD] == answer[: STREAM_HOLD + 1]
    assert shown[STREAM_HOLD + 1 :] == list(answer[STREAM_HOLD + 1 :])  # then as it comes
    guarded = _shown_as_fed(StreamGuard, answer)
    assert "".join(guarded[: STREAM_HOLD + 1]) == answer[: STREAM_HOLD + 1]
    assert "".join(guarded) == answer


def test_a_message_that_opens_its_reasoning_is_not_held() -> None:
    shown = _shown_as_fed(ThinkFilter, "<think>plan</think>\n\nThe answer.")
    assert shown[-len("The answer.") :] == list("The answer.")  # streams from the first letter


def test_template_opened_reasoning_is_hidden_within_the_hold_and_shown_past_it() -> None:
    inside = "r" * STREAM_HOLD
    assert _fed(ThinkFilter, list(inside + "</think>\nB")) == "B"
    assert _fed(StreamGuard, list(inside + "</think>\nB")) == "B"
    assert split_reasoning(inside + "</think>\nB") == ("B", inside)
    past = inside + "r"  # released when the hold filled: the late </think> is only dropped
    f = ThinkFilter()
    assert "".join(f.feed(c) for c in past) == past
    assert f.feed("</think>\nB") + f.flush() == "\nB"
    assert _fed(StreamGuard, list(past + "</think>\nB")) == past + "\nB"
    assert split_reasoning(past + "</think>\nB") == ("B", past)  # the answer is clean


@pytest.mark.parametrize(
    "inside",
    [
        "x" * 5000,
        "They want the peers. <b>bold</b> is not a tag of mine, a < b.\n\nSo: list them.",
        'I will call <tool_call>{"name": "list_devices"}</tool_call> now.',
        "Step 1.\n\n" * 100 + "</thi is no tag </think",
    ],
    ids=["long", "markup", "tool-call", "paragraphs"],
)
def test_template_opened_reasoning_of_any_length_or_content_is_not_the_answer(
    inside: str,
) -> None:
    text = f"{inside}</think>\n\nBGP is up."
    assert split_reasoning(text) == ("BGP is up.", inside.strip())
    assert _fed(ThinkFilter, list(text)).endswith("BGP is up.")
    assert _CLOSE_TAG.search(_fed(ThinkFilter, list(text))) is None


@pytest.mark.parametrize(
    ("text", "answer", "reasoning"),
    [
        ("if a < b and c <= 5 it is fine</think>B", "B", "if a < b and c <= 5 it is fine"),
        ("Use <b>bold</b></think>B", "B", "Use <b>bold</b>"),  # markup is no reasoning tag
        ("A <think>x</think>B", "A B", "x"),
        ("A </think>B <think>x</think>C", "B C", "A\n\nx"),
        ("A <think>x</think>B</think>C", "A BC", "x"),  # a later closing tag is stray
        ("<think>x</think></think>\n\nB", "B", "x"),
        ("</think>\n\nB", "B", ""),
        ("<Think>plan</tHINK>\n\nThe answer.", "The answer.", "plan"),
        ("<think>never closed </thi", "", "never closed </thi"),
    ],
)
def test_the_first_reasoning_tag_decides_template_opened_reasoning(
    text: str, answer: str, reasoning: str
) -> None:
    assert split_reasoning(text) == (answer, reasoning)
    assert _fed(ThinkFilter, [text]) == answer
    f = ThinkFilter()
    assert "".join(f.feed(c) for c in text) + f.flush() == answer
    assert "\n\n".join(t.strip() for t in f.thoughts() if t.strip()) == reasoning


def test_newlines_after_a_closing_tag_inside_the_answer_stay() -> None:
    text = "Checked.<think>plan</think>\n\nAll up."
    assert split_reasoning(text)[0] == "Checked.\n\nAll up."
    assert _fed(ThinkFilter, list(text)) == "Checked.\n\nAll up."


@pytest.mark.parametrize("cut", [None, 1, 2, 5])
def test_a_call_after_held_back_text_is_held_at_the_end_of_the_message(cut: int | None) -> None:
    text = 'Sure.\n{"name": "list_devices", "arguments": {}}'
    chunks = [text] if cut is None else [text[i : i + cut] for i in range(0, len(text), cut)]
    guard = StreamGuard()
    assert "".join(guard.feed(c) for c in chunks) + guard.flush() == "Sure."
    assert guard.shown == "Sure."


@pytest.mark.parametrize("cut", [None, 1, 7])
def test_a_call_after_the_hold_is_held_back(cut: int | None) -> None:
    lead = "Let me look that up for you, one moment. " * 5  # longer than the hold
    text = lead + '<tool_call>{"name": "list_devices", "arguments": {}}</tool_call>'
    chunks = [text] if cut is None else [text[i : i + cut] for i in range(0, len(text), cut)]
    guard = StreamGuard()
    assert "".join(guard.feed(c) for c in chunks) + guard.flush() == lead
    assert guard.shown == lead


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('Exporting.\n<tool_call>{"name": "format_and_export"}</tool_call>', "Exporting.\n"),
        ("Sure <function=list_devices><parameter=site>sh1", "Sure "),
        ('[TOOL_CALLS][{"name": "x", "arguments": {}}]', ""),
        ('{"name": "list_devices", "arguments": {}}', ""),
        ('Here it is:\n  [{"name": "x"}]', "Here it is:"),
        ('```json\n{"name": "x"}\n```', ""),
        ("<think>x</think>Done <|python_tag|>", "Done "),
        ("BGP peers on sh1: 4 are up, [1] is down.\nAll good.", None),
        ("Use a < b, not {a} or a|b.", None),
    ],
)
def test_stream_guard_holds_back_a_call_written_as_text(text: str, shown: str | None) -> None:
    shown = text if shown is None else shown  # None: ordinary text passes through whole
    assert _fed(StreamGuard, [text]) == shown
    assert _fed(StreamGuard, list(text)) == shown
    guard = StreamGuard()
    for ch in text:
        guard.feed(ch)
    guard.flush()
    assert guard.shown == shown


def test_stream_guard_flush_returns_held_text_that_was_no_call() -> None:
    guard = StreamGuard()
    assert guard.feed("<think>plan</think>see <tool") == "see "  # may start <tool_call>
    assert guard.feed("s") == "<tools"  # it did not
    assert guard.feed(" list <fun") == " list "
    assert guard.flush() == "<fun"
    assert guard.shown == "see <tools list <fun"
    held = StreamGuard()
    assert held.feed("<think>plan</think>ok <tool_call>{") == "ok "
    assert held.feed("more text") == ""
    assert held.flush() == ""  # a call: never shown
    start = StreamGuard()  # within the think filter's hold: all of it comes at the end
    assert start.feed("ok <tool_call>{") == ""
    assert start.feed("more text") == ""
    assert start.flush() == "ok "
    assert start.shown == "ok "


# -- salvage: which calls written as text may run ----------------------------------------------

EXPORT = {
    "type": "object",
    "properties": {
        "data": {"type": "string"},
        "format": {"enum": ["md", "csv", "txt"]},
        "filename": {"type": "string"},
    },
    "required": ["data", "format"],
}
TOOLS: dict[str, dict[str, Any]] = {
    "format_and_export": EXPORT,
    "list_devices": {"type": "object", "properties": {"site": {"type": "string"}}},
}
ARGS = {"data": "# Devices", "format": "md", "filename": "devices.md"}
CALL = json.dumps({"name": "format_and_export", "arguments": ARGS})
HERMES = f"<tool_call>\n{CALL}\n</tool_call>"


def _ran(content: str, request: str = "", reasoning: str = "") -> list[tuple[str, Any]]:
    return [
        (c.name, c.args)
        for c in salvage(content, TOOLS, request=request, reasoning=reasoning).calls
    ]


def test_a_valid_hermes_call_runs_and_leaves_the_answer() -> None:
    got = salvage("I will export it now.\n" + HERMES, TOOLS)
    assert [(c.name, c.args, c.family, c.in_reasoning) for c in got.calls] == [
        ("format_and_export", ARGS, "hermes", False)
    ]
    assert got.answer == "I will export it now." and got.invalid == []


def test_hermes_arguments_are_repaired_by_the_schema() -> None:
    text = (
        "<tool_call>{'name': 'functions.Format-And-Export', "
        "'arguments': {'data': 'x', 'format': 'MD',}}"
    )
    assert _ran(text) == [("format_and_export", {"data": "x", "format": "md"})]


@pytest.mark.parametrize(
    "content",
    [
        "<tool_call>" + json.dumps({"name": "delete_everything", "arguments": {}}) + "</tool_call>",
        json.dumps({"name": "shell", "arguments": {"cmd": "rm -rf /"}}),
        "[run_shell(cmd='id')]",
    ],
)
def test_a_tool_that_is_not_offered_never_runs(content: str) -> None:
    got = salvage(content, TOOLS)
    assert got.calls == [] and got.invalid == []
    assert got.skipped.startswith("no offered tool")


def test_nothing_runs_when_no_tool_is_offered() -> None:
    got = salvage(HERMES, {})
    assert got.calls == [] and got.skipped == "no tools offered"


@pytest.mark.parametrize(
    "request_text",
    [
        "show me an example call of format_and_export",
        "what would the JSON for a format_and_export call look like?",
        "how do I call format_and_export?",
        "给我一个 format_and_export 的调用示例",
    ],
)
def test_an_example_the_person_asked_for_runs_nothing(request_text: str) -> None:
    assert asks_for_example(request_text)
    got = salvage(HERMES, TOOLS, request=request_text)
    assert got.calls == [] and got.skipped == "the request asks for an example"


def test_an_ordinary_request_is_no_example_request() -> None:
    assert not asks_for_example("save the device list as a markdown file")
    assert _ran(HERMES, request="save the device list as a markdown file")


def test_bare_json_alone_runs_but_not_inside_long_prose() -> None:
    assert _ran(CALL) == [("format_and_export", ARGS)]
    prose = "The export tool takes the data, a format and a file name. " * 6
    got = salvage(prose + "\n" + CALL + "\n", TOOLS)
    assert got.calls == [] and "content" in got.skipped


@pytest.mark.parametrize(
    "lead",
    ["For example, you could send:", "The payload would look like this:", "Such as:"],
)
def test_bare_json_presented_as_an_illustration_runs_nothing(lead: str) -> None:
    assert _ran(f"{lead}\n{CALL}") == []
    assert _ran(f"{lead}\n```json\n{CALL}\n```") == []


def test_bare_json_after_e_g_runs_nothing() -> None:
    assert _ran(f"e.g.\n{CALL}") == []


@pytest.mark.parametrize(
    "lead", ["E.g.,", "e.g:", "(e.g.)", "eg.", "i.e.", "I.e.:", "例如：", "比如"]
)
def test_bare_json_after_an_abbreviated_or_chinese_lead_in_runs_nothing(lead: str) -> None:
    assert _ran(f"{lead}\n{CALL}") == []
    assert _ran(f"{lead} {CALL}") == []


@pytest.mark.parametrize("lead", ["Exporting now.", "Leg. day is done, exporting.", "好的。"])
def test_bare_json_after_a_plain_lead_in_still_runs(lead: str) -> None:
    assert _ran(f"{lead}\n{CALL}") == [("format_and_export", ARGS)]


def test_a_json_fence_alone_runs() -> None:
    got = salvage(f"```json\n{CALL}\n```", TOOLS)
    assert [c.family for c in got.calls] == ["json_fenced"]


@pytest.mark.parametrize(
    "content",
    [
        f"```python\n{HERMES}\n```",
        f"Here is the code:\n```python\n{CALL}\n```",
        "Run this:\n```python\nformat_and_export(data='# Devices', format='md')\n```",
        f"```python\nprint('x')\n```\n{CALL}",
        f"Quote it as `{HERMES.replace(chr(10), ' ')}` in your prompt.",
    ],
    ids=[
        "hermes-in-python-fence",
        "json-in-python-fence",
        "call-in-python-fence",
        "json-next-to-python-code",
        "inline-code",
    ],
)
def test_a_call_the_answer_shows_as_code_runs_nothing(content: str) -> None:
    assert _ran(content) == []


def test_a_call_in_the_reasoning_is_found() -> None:
    got = salvage(f"<think>They want a file, so: {HERMES}</think>", TOOLS)
    assert [(c.name, c.in_reasoning) for c in got.calls] == [("format_and_export", True)]
    assert got.answer == ""
    # the reasoning channel the server split off counts the same way
    other = salvage("", TOOLS, reasoning=f"I should export. {HERMES}")
    assert [(c.name, c.in_reasoning) for c in other.calls] == [("format_and_export", True)]


def test_the_reasoning_is_not_searched_when_the_answer_is_long() -> None:
    answer = "Here is the full explanation. " * 12
    assert _ran(f"<think>{HERMES}</think>{answer}") == []


def test_invalid_arguments_are_kept_apart_and_never_run() -> None:
    text = "<tool_call>" + json.dumps({"name": "format_and_export", "arguments": {"data": "x"}})
    got = salvage(text, TOOLS)
    assert got.calls == []
    assert [(i.name, i.family) for i in got.invalid] == [("format_and_export", "hermes")]
    assert "'format' is required" in got.invalid[0].problems[0]


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("format_and_export", "format_and_export"),
        ("functions.format_and_export", "format_and_export"),
        ("format_and_export:0", "format_and_export"),
        ("Format-And-Export", "format_and_export"),
        ("format_and_exportjson", "format_and_export"),
        ("`list_devices`", "list_devices"),
        ("export", None),
        ("format_and_export_all", None),
    ],
)
def test_offered_name(written: str, meant: str | None) -> None:
    assert offered_name(written, TOOLS) == meant


def test_an_address_with_example_in_it_is_not_a_request_for_an_example() -> None:
    from olav.runtime.rescue.salvage import asks_for_example

    assert not asks_for_example("mail the backup report to ops@example.com")
    assert not asks_for_example("fetch https://example.org/devices.csv into the inventory")
    assert asks_for_example("show me an example of the export call")
    assert asks_for_example("mail ops@example.com an example of the report")


def test_an_offered_tools_name_is_not_a_request_for_an_example() -> None:
    tools = ["example_tool", "render-template", "backup_device_config"]
    assert not asks_for_example("Run the example tool with value1 and 42.", tools)
    assert not asks_for_example("use example_tool on sh1-border01", tools)
    assert not asks_for_example("render template for the core switches", tools)
    # the word outside the name still asks for one, and without the tool it is the word
    assert asks_for_example("show me an example of calling example_tool", tools)
    assert asks_for_example("Run the example tool with value1 and 42.")
    call = '[TOOL_CALLS]example_tool[ARGS]{"arg1": "value1", "arg2": 42}'
    schema = {
        "type": "object",
        "properties": {"arg1": {"type": "string"}, "arg2": {"type": "integer"}},
    }
    found = salvage(call, {"example_tool": schema}, request="Run the example tool with value1.")
    assert [c.name for c in found.calls] == ["example_tool"]
