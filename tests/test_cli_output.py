"""What the CLI prints when its output is not a terminal (a pipe, a file): not cut to rich's
80 columns (issue 38)."""

from __future__ import annotations

import pytest

from tests.helpers import OlavMain, SessionFor

QUERY = "take a snapshot of sh1-border01 and of sh1-border02 before the change window"


@pytest.fixture
def one_run(session_for: SessionFor) -> str:
    session, _ = session_for([{"content": "Done."}])
    try:
        return session.ask(QUERY).run_id
    finally:
        session.close()


def test_piped_log_list_prints_a_long_query_in_full(
    one_run: str, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # as a pipe from a shell script gets it
    res = olav_main("log", "list")
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if one_run[:8] in x)
    assert QUERY in line
    assert line == line.rstrip()  # not padded out to the pipe's width


def test_piped_log_list_keeps_a_query_over_80_characters(
    session_for: SessionFor, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_query = QUERY + " and then back up the configs of every access switch in sh1"
    session, _ = session_for([{"content": "Done."}])
    try:
        run = session.ask(long_query).run_id
    finally:
        session.close()
    monkeypatch.delenv("COLUMNS", raising=False)
    res = olav_main("log", "list")
    line = next(x for x in res.stdout.splitlines() if run[:8] in x)
    assert long_query in line


def test_piped_output_honours_columns(
    one_run: str, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "70")
    res = olav_main("log", "list")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    line = next(x for x in lines if one_run[:8] in x)
    assert QUERY not in line and "…" in line
    assert max(len(x) for x in lines) <= 70


def test_help_shows_no_type_after_a_flag(olav_main: OlavMain) -> None:
    res = olav_main("ask", "--help")
    assert res.returncode == 0
    assert "<bool>" not in res.stdout
    assert "<str>" in res.stdout  # an option that takes a value still says what it takes
