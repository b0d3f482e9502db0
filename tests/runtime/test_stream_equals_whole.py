"""What the chat prints while a message streams, and the calls it runs, equal what the whole
message gives, for any chunking: a property over olav's own corpora (the public suite's
chunkings are in tests/test_toolcall_suite.py)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from olav.bench.toolcall_suite import parse, parse_stream
from olav.bench.toolcalls import heldout_corpus, load_cases, shipped_corpus

CASES = [*load_cases(shipped_corpus()), *load_cases(heldout_corpus())]


@st.composite
def chunked(draw: st.DrawFn) -> tuple[int, list[str]]:
    i = draw(st.integers(0, len(CASES) - 1))
    text = CASES[i].raw_text
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=40))))
    bounds = [0, *cuts, len(text)]
    return i, [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(max_examples=400, deadline=None)
@given(chunked())
def test_any_chunking_shows_and_runs_what_the_whole_message_does(
    drawn: tuple[int, list[str]],
) -> None:
    i, pieces = drawn
    case = CASES[i]
    assert "".join(pieces) == case.raw_text
    assert parse_stream(pieces, case.tools) == parse(case.raw_text, case.tools)


def test_one_character_a_delta_on_every_case() -> None:
    for case in CASES:
        whole = parse(case.raw_text, case.tools)
        assert parse_stream(list(case.raw_text), case.tools) == whole, case.id
