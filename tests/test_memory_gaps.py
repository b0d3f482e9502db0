"""`olav memory gaps`: the guides that nearly reached the model, from the recall log, and the
operator's way to close a gap (a keyword, `olav kb import-guides`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from olav.learning.gaps import near_misses
from tests.helpers import OlavCli, scripted_ws

REQUEST = "can I change the core switch config at lunchtime today"
GUIDE = "guide_netops_change_window_and_approval"


def _cand(rid: str, margin: float | None, floor: float | None, **kw: Any) -> dict[str, Any]:
    base = {"id": rid, "category": "usage_guide", "decision": "irrelevant"}
    return {**base, "margin": margin, "floor": floor, **kw}


def _log(query: str, cands: list[dict[str, Any]], injected: list[str]) -> tuple[str, str, str]:
    return query, json.dumps(cands), json.dumps(injected)


def test_near_misses_are_the_directives_just_under_their_floor() -> None:
    recalls = [
        _log("q1", [_cand("g1", 0.02, 0.03), _cand("g2", -0.05, 0.03)], []),
        _log("q2", [_cand("g1", 0.025, 0.03), _cand("g3", 0.0, 0.01)], []),
        _log("q1", [_cand("g1", 0.02, 0.03)], []),  # the same request again: listed once
        # a directive reached the model: not a miss, whatever was dropped beside it
        _log(
            "q3", [_cand("g1", 0.029, 0.03), _cand("g4", 0.05, 0.03, decision="injected")], ["g4"]
        ),
        # lessons and episodes have their own rules; a lesson injected is no directive
        _log(
            "q4",
            [
                _cand("l1", 0.03, 0.04, category="reflection"),
                _cand("l2", 0.06, 0.04, category="reflection", decision="injected"),
            ],
            ["l2"],
        ),
        _log("q5", [_cand("g5", 0.02, None), _cand("g6", None, None)], []),  # older log rows
        ("q6", None, None),
    ]
    got = near_misses(recalls)
    assert [(m.memory_id, m.requests) for m in got] == [("g1", ["q1", "q2"]), ("g3", ["q2"])]
    assert (got[0].closest, got[0].floor) == (0.025, 0.03)
    assert [m.memory_id for m in near_misses(recalls, within=0.0)] == []
    assert "g2" in {m.memory_id for m in near_misses(recalls, within=0.1)}


def test_a_gap_from_a_chat_run_closed_by_a_keyword(e5_ws: Path, olav: OlavCli) -> None:
    """A request that recalled nothing shows up with the guide it nearly recalled; the
    operator adds the word the team uses, re-imports, and the same request recalls it."""
    scripted_ws(e5_ws, [{"content": "Ask the change board."}])
    res = olav("ask", "--agent", "netops", REQUEST)
    assert res.exit_code == 0, res.output
    res = olav("memory", "gaps", "--json", "--within", "0.03")
    assert res.exit_code == 0, res.output
    gaps = {g["id"]: g for g in json.loads(res.stdout)}
    assert gaps[GUIDE]["requests"] == [REQUEST]
    assert gaps[GUIDE]["closest_margin"] < gaps[GUIDE]["floor"]
    res = olav("memory", "gaps", "--within", "0.03")
    assert GUIDE in res.stdout and "olav kb import-guides" in res.stdout
    assert "no near misses" in olav("memory", "gaps", "--within", "0").stdout

    guide = e5_ws / "netops" / "guides" / "change_window_and_approval.guide.yaml"
    text = guide.read_text()
    guide.write_text(text.replace("keywords: [change,", "keywords: [change, lunchtime,", 1))
    assert olav("kb", "import-guides").exit_code == 0
    why = json.loads(olav("memory", "why", "--agent", "netops", "--json", REQUEST).stdout)
    assert GUIDE in why["injected"]
