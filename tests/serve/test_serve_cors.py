"""No CORS unless asked: a browser page from another origin gets no allow header, and with
`--cors ORIGIN` exactly that origin does (preflight included); a token is still required."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.serve._support import serving

pytestmark = pytest.mark.slow
UI = "http://localhost:3000"
PREFLIGHT = {
    "Origin": UI,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type",
}


def test_cors_only_for_the_origins_given(tmp_path: Path) -> None:
    with serving(tmp_path / "plain") as served, served.http() as http:
        res = http.get("/info", headers={"Origin": UI})
        assert res.status_code == 200 and "access-control-allow-origin" not in res.headers
        pre = http.options("/threads", headers=PREFLIGHT)
        assert "access-control-allow-origin" not in pre.headers
    with serving(tmp_path / "cors", "--cors", UI) as served:
        with served.http() as http:
            pre = http.options("/threads", headers=PREFLIGHT)
            assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == UI
            res = http.get("/info", headers={"Origin": UI})
            assert res.headers["access-control-allow-origin"] == UI
            other = http.get("/info", headers={"Origin": "http://evil.example"})
            assert "access-control-allow-origin" not in other.headers
        with served.http(None) as anonymous:  # CORS never stands in for a token
            assert anonymous.get("/info", headers={"Origin": UI}).status_code == 401


def test_the_preflight_allows_the_headers_the_sdks_send(tmp_path: Path) -> None:
    """agent-chat-ui's "Agent Builder" sends X-Auth-Scheme; the SDKs send x-api-key and, on a
    reconnect, Last-Event-ID: a browser asks for each, and each is allowed; the run's id is
    in Content-Location, which the page may read."""
    from tests.serve._inprocess import serving_here

    with serving_here(tmp_path / "ws", cors=[UI]) as here, here.http(None) as http:
        asked = "x-api-key, x-auth-scheme, content-type, last-event-id, accept"
        pre = http.options(
            "/threads/search", headers={**PREFLIGHT, "Access-Control-Request-Headers": asked}
        )
        assert pre.status_code == 200, pre.text
        allowed = {
            h.strip() for h in pre.headers["access-control-allow-headers"].lower().split(",")
        }
        assert {h.strip() for h in asked.split(",")} <= allowed
        odd = http.options(
            "/threads", headers={**PREFLIGHT, "Access-Control-Request-Headers": "x-not-a-header"}
        )
        assert odd.status_code == 400  # a header nobody sends is still refused
        res = http.get(
            "/info",
            headers={"Origin": UI, "x-api-key": here.tokens[here.alice], "X-Auth-Scheme": "x"},
        )
        assert res.status_code == 200
        assert "content-location" in res.headers["access-control-expose-headers"].lower()
