"""The console's pages for a person who is logged in but lost: whose runs the runs page lists
(the terminal's belong to the workspace's own operator), and a page the console does not
have (its own Not found page, not the API's JSON 401) (issue 38). In-process server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import SessionFor
from tests.serve._inprocess import Local, local_server, tokens_for

REQUEST = "list the border routers of site sh1"


@pytest.fixture
def local(hash_ws: Path, session_for: SessionFor) -> Iterator[Local]:
    """A terminal run (the workspace's own operator's, the login name), then a server with
    tokens for that operator and for alice, as the docs name her."""
    session, _ = session_for([{"content": "two of them"}])
    try:
        session.ask(REQUEST)
    finally:
        session.close()
    owner, tokens = tokens_for(hash_ws, "alice")
    assert owner != "alice"
    with local_server(hash_ws, tokens, owner) as served:
        yield served


def test_the_runs_page_says_the_terminal_s_runs_are_the_login_name_s(local: Local) -> None:
    with local.console("alice") as alice:
        page = alice.get("/runs")
        assert page.status_code == 200
        assert REQUEST not in page.text  # not hers
        assert "The runs of operator <strong>alice</strong>" in page.text
        assert f"belong to operator <strong>{local.alice}</strong>" in page.text
        assert f"olav serve token create {local.alice}" in page.text
        data = alice.get("/runs", params={"format": "json"}).json()
        assert (data["operator"], data["terminal_operator"]) == ("alice", local.alice)
        assert data["total"] == 0
        home = alice.get("/").text  # no runs of hers: the dashboard says why
        assert f"belong to operator <strong>{local.alice}</strong>" in home
    with local.console() as owner:
        page = owner.get("/runs")
        assert REQUEST in page.text
        assert "you are this workspace's own operator" in page.text.replace("&#x27;", "'")
        assert "token create" not in page.text


def test_an_unknown_page_is_the_console_s_not_found_page(local: Local) -> None:
    with local.console("alice") as alice:
        got = alice.get("/memry")  # a typo
        assert got.status_code == 404
        assert got.headers["content-type"].startswith("text/html")
        assert "Not found" in got.text and 'href="/"' in got.text
        assert "alice" in got.text and "Log out" in got.text  # the console's layout, logged in
        assert got.headers["x-frame-options"] == "DENY"  # the console's headers
        # the API's paths keep the API's answers: the cookie authenticates none of them
        for path in ("/info", "/threads/abc", "/threads", "/v1/models", "/threads/a/runs/b/stream"):
            got = alice.get(path)
            assert got.status_code == 401, (path, got.text)
            assert got.headers["content-type"].startswith("application/json"), path
    with local.http() as api:  # a script's token: the API's JSON 404
        got = api.get("/memry")
        assert got.status_code == 404 and got.headers["content-type"].startswith("application/json")
    import httpx

    with httpx.Client(base_url=local.url) as stranger:  # no session: nothing to learn
        got = stranger.get("/memry")
        assert got.status_code == 401
        assert got.headers["content-type"].startswith("application/json")
