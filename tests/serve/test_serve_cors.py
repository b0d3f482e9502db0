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
