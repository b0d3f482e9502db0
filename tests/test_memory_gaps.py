"""`olav memory gaps`: the requests that a guide nearly answered, from the recall log, and the
operator's way to close such a gap (a keyword, `olav kb import-guides`)."""

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


def test_near_misses_are_requests_with_a_directive_just_under_its_floor() -> None:
    recalls = [
        _log("q1", [_cand("g1", 0.02, 0.03), _cand("g2", -0.05, 0.03)], []),
        _log("q2", [_cand("g3", 0.0, 0.01), _cand("g1", 0.025, 0.03)], []),
        _log("q1", [_cand("g1", 0.02, 0.03)], []),  # asked again: counted, listed once
        # a directive reached the model: not a miss, whatever was dropped beside it
        _log(
            "q3", [_cand("g1", 0.029, 0.03), _cand("g4", 0.05, 0.03, decision="injected")], ["g4"]
        ),
        # lessons have their own rules; a lesson injected is no directive
        _log(
            "q4",
            [
                _cand("l1", 0.03, 0.04, category="reflection"),
                _cand("l2", 0.06, 0.04, category="reflection", decision="injected"),
                _cand("g5", 0.015, 0.03),
            ],
            ["l2"],
        ),
        _log("q5", [_cand("g6", 0.02, None), _cand("g7", None, None)], []),  # older log rows
        ("q6", None, None),
    ]
    got = near_misses(recalls)
    assert [(m.request, m.times) for m in got] == [("q1", 2), ("q2", 1), ("q4", 1)]
    # the nearest first (floors differ with the evidence), the far one left out
    assert [(n.memory_id, n.margin, n.floor) for n in got[1].near] == [
        ("g1", 0.025, 0.03),
        ("g3", 0.0, 0.01),
    ]
    assert [n.memory_id for n in got[0].near] == ["g1"]
    assert near_misses(recalls, within=0.0) == []
    assert "g2" in {n.memory_id for n in near_misses(recalls, within=0.1)[0].near}
    many = [_log("q", [_cand(f"g{i}", 0.02 - i / 1000, 0.03) for i in range(6)], [])]
    assert [n.memory_id for n in near_misses(many)[0].near] == ["g0", "g1", "g2"]


def test_a_gap_from_a_chat_run_closed_by_a_keyword(e5_ws: Path, olav: OlavCli) -> None:
    """A request that recalled nothing shows up with the guide it nearly recalled; the
    operator adds the word the team uses, re-imports, and the same request recalls it."""
    scripted_ws(e5_ws, [{"content": "Ask the change board."}])
    res = olav("ask", "--agent", "netops", REQUEST)
    assert res.exit_code == 0, res.output
    res = olav("memory", "gaps", "--json", "--within", "0.03")
    assert res.exit_code == 0, res.output
    [gap] = json.loads(res.stdout)
    assert (gap["request"], gap["times"]) == (REQUEST, 1)
    near = {n["id"]: n for n in gap["near"]}
    assert near[GUIDE]["margin"] < near[GUIDE]["floor"] <= near[GUIDE]["margin"] + 0.03
    res = olav("memory", "gaps", "--within", "0.03")
    assert "can I change the" in res.stdout and "olav kb import-guides" in res.stdout
    assert "no near misses" in olav("memory", "gaps", "--within", "0").stdout

    guide = e5_ws / "netops" / "guides" / "change_window_and_approval.guide.yaml"
    text = guide.read_text()
    guide.write_text(text.replace("keywords: [change,", "keywords: [change, lunchtime,", 1))
    assert olav("kb", "import-guides").exit_code == 0
    why = json.loads(olav("memory", "why", "--agent", "netops", "--json", REQUEST).stdout)
    assert GUIDE in why["injected"]
