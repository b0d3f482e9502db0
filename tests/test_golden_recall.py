"""The golden guide-recall suite with the bundled e5 embedder: hit rates, and the reflection
gates and dedup distance the product calibrates (olav/memory/calibration.py), measured as the
Recaller applies them (Recaller.for_config with the settings' defaults)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from olav.bench.golden import (
    LANGS,
    gate_label,
    language,
    load_golden,
    markdown_golden,
    run_golden,
)
from olav.errors import OlavError
from olav.memory import calibration
from olav.settings import SETTINGS

E5 = "e5:multilingual-e5-small"
DEFAULTS = {s.key: s.default for s in SETTINGS}


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    from olav.memory.embedders import E5Embedder

    return run_golden(E5Embedder())


def test_the_set_is_big_enough_and_consistent() -> None:
    gs = load_golden()
    assert len(gs.guide_files) >= 40
    assert len(gs.queries) >= 80
    assert sum(q.negative for q in gs.queries) >= 25
    assert 8 <= len(gs.reflections) <= 12 and len(gs.precedents) >= 4
    assert len(gs.duplicates) >= 20 and len(gs.distinct) >= 20
    langs = [q.lang for q in gs.queries if not q.negative]
    assert all(langs.count(lang) >= 15 for lang in LANGS), langs
    assert sum(1 for q in gs.queries if q.lesson) >= 12
    texts = {q.text for q in gs.queries}
    assert len(texts) == len(gs.queries), "a query is listed twice"


def test_queries_do_not_copy_the_memories() -> None:
    from olav.memory.guides import load_guide

    gs = load_golden()
    sources = [load_guide(f).embed_text() for f in gs.guide_files]
    sources += [*gs.reflections.values(), *(text for _, text in gs.precedents.values())]

    def shingles(text: str, n: int = 8) -> set[str]:
        toks = re.findall(r"[a-z0-9_.\-]+|[\u3400-\u9fff]", text.lower())
        return {" ".join(toks[i : i + n]) for i in range(len(toks) - n + 1)}

    known = set().union(*(shingles(s) for s in sources))
    copied = [q.text for q in gs.queries if shingles(q.text) & known]
    assert copied == []


def test_language_detection() -> None:
    assert language("restart nginx") == "en"
    assert language("重启服务") == "zh"
    assert language("帮我 restart nginx 服务") == "mixed"
    assert language("计算一下 17 乘以 23") == "zh"  # digits are not words


def test_a_broken_reference_is_a_one_line_error(tmp_path: Any) -> None:
    import shutil

    from olav.bench.golden import DATA

    shutil.copytree(DATA, tmp_path / "g")
    queries = tmp_path / "g" / "queries.yaml"
    queries.write_text("queries:\n  - q: hello\n    lesson: lesson_nope\n", encoding="utf-8")
    with pytest.raises(OlavError, match="unknown lesson 'lesson_nope'"):
        load_golden(tmp_path / "g")


def test_top3_hit_rate(report: dict[str, Any]) -> None:
    ret = report["retrieval"]
    assert report["counts"]["guides"] >= 40  # every guide went through import_guides
    assert ret["overall"]["n"] >= 60
    assert ret["overall"]["top3"] >= 0.90, ret["misses"]
    for lang in LANGS:
        assert ret["by_language"][lang]["top3"] >= 0.85, (lang, ret["misses"])
    assert ret["overall"]["top1"] <= ret["overall"]["top3"] <= ret["overall"]["top5"]


def test_the_gate_is_the_products_value(report: dict[str, Any]) -> None:
    gate = report["gate"]
    cfg = gate["configured"]
    assert cfg["threshold"] == calibration.reflection_gate(DEFAULTS, E5)
    assert cfg["text_threshold"] == calibration.reflection_gate_text(DEFAULTS, E5)
    # the calibration is what this suite suggests; re-calibrate when the data changes
    suggested = gate["suggested"]
    assert (suggested["threshold"], suggested["text_threshold"]) == (
        cfg["threshold"],
        cfg["text_threshold"],
    )
    assert report["dedup"]["suggested"]["threshold"] == calibration.dedup_distance(DEFAULTS, E5)


def test_the_gate_keeps_true_lessons(report: dict[str, Any]) -> None:
    cfg = report["gate"]["configured"]
    assert cfg["keep"] >= 0.85, report["gate"]["misses"]
    assert cfg["injected"] <= cfg["keep"]


def test_the_gate_drops_unrelated_requests(report: dict[str, Any]) -> None:
    cfg = report["gate"]["configured"]
    assert cfg["drop"] >= 0.85, report["gate"]["misses"]
    assert cfg["drop_recaller"] >= cfg["drop"]


def test_the_text_gate_beats_distance_alone(report: dict[str, Any]) -> None:
    gate = report["gate"]
    cfg, alone = gate["configured"], gate["distance_only"]["suggested"]
    assert min(cfg["keep"], cfg["drop"]) >= min(alone["keep"], alone["drop"])


def test_the_text_gate_sweep(report: dict[str, Any]) -> None:
    gate = report["gate"]
    cfg, sweep = gate["configured"], gate["text_sweep"]
    assert sweep[0]["threshold"] == cfg["threshold"] and sweep[-1]["threshold"] >= 0.45
    for name, rising in (("keep", True), ("drop", False), ("stray", True)):
        values = [r[name] for r in sweep]
        assert values == sorted(values, reverse=not rising), name
    # the sweep re-applies the rule to the Recaller's candidates; at the configured text gate
    # it must agree with what Recaller.gate_for let through
    (row,) = [r for r in sweep if r["threshold"] == cfg["text_threshold"]]
    assert {k: row[k] for k in ("keep", "drop", "stray")} == {
        k: cfg[k] for k in ("keep", "drop", "stray")
    }


def test_the_gate_sweep_is_monotonic(report: dict[str, Any]) -> None:
    sweep = report["gate"]["sweep"]
    keeps = [r["keep"] for r in sweep]
    drops = [r["drop"] for r in sweep]
    assert keeps == sorted(keeps) and drops == sorted(drops, reverse=True)
    assert keeps[-1] == 1.0 and drops[0] == 1.0  # the grid brackets the crossing


def test_the_product_rule_on_made_up_rows() -> None:
    from olav.bench.golden import GoldenQuery, _kinds, _passed, suggest_gates

    gs = load_golden()
    queries = [
        GoldenQuery("a", lesson="l1"),
        GoldenQuery("b", lesson="l2"),
        GoldenQuery("c", negative=True),
        GoldenQuery("d", negative=True),
        GoldenQuery("e", expect=("g",)),
    ]
    rows = [
        {"lesson_candidates": [("l1", 0.30, False)]},
        {"lesson_candidates": [("l2", 0.35, True), ("l1", 0.36, False)]},
        {"lesson_candidates": [("l1", 0.35, False)]},
        {"lesson_candidates": [("l2", 0.37, True)]},
        {"lesson_candidates": [("l1", 0.34, True)]},
    ]
    assert _passed(rows[1], 0.32, 0.36) == {"l2"}  # l1 is as close, but no word matched
    assert _passed(rows[1], 0.32, 0.30) == set()  # the text gate is never below the strict one
    small = dataclasses.replace(gs, queries=queries)
    assert _kinds(small, rows, lambda r: _passed(r, 0.32, 0.36)) == {
        "keep": 1.0,
        "drop": 1.0,
        "stray": 1.0,
    }
    assert _kinds(small, rows, lambda r: _passed(r, 0.32, 0.32))["keep"] == 0.5
    strict, text = suggest_gates(small, rows)
    assert strict <= 0.34 and 0.35 <= text < 0.37


def test_dedup_keeps_distinct_lessons(report: dict[str, Any]) -> None:
    dedup = report["dedup"]
    assert dedup["configured"]["threshold"] == calibration.dedup_distance(DEFAULTS, E5)
    assert dedup["configured"]["kept"] == 1.0
    assert dedup["configured"]["skipped"] >= 0.7
    assert dedup["duplicates"]["median"] < dedup["distinct"]["median"]


def test_markdown(report: dict[str, Any]) -> None:
    md = markdown_golden(report)
    top3 = report["retrieval"]["overall"]["top3"]
    assert f"| all | {report['retrieval']['overall']['n']} |" in md
    assert f"{top3 * 100:.1f}%" in md
    assert f"| {gate_label(report['gate']['configured'])} (configured) |" in md
    assert "| text gate | keep | drop | stray |" in md
    assert "Stray lessons at the configured gate by language: en " in md
    assert "| duplicates | 20 |" in md


def test_cli(report: dict[str, Any], olav: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import olav.bench.golden as golden

    seen: list[str] = []

    def fake(embedder: Any, **_: Any) -> dict[str, Any]:
        seen.append(embedder.name)
        return report

    monkeypatch.setattr(golden, "run_golden", fake)
    res = olav("bench", "golden", "--embedder", "hash", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["retrieval"] == report["retrieval"]
    assert seen == ["hash:hash-64"]
    res = olav("bench", "golden")
    assert res.exit_code == 0, res.output
    titles = ("expected guide or precedent found", "reflection gate", "text-gate sweep")
    for title in (*titles, "distance-only gate sweep", "lesson dedup"):
        assert title in res.stdout
    assert seen[-1] == E5
    res = olav("bench", "golden", "--markdown")
    assert res.exit_code == 0 and res.stdout.startswith("Golden guide-recall suite")
    res = olav("bench", "golden", "--embedder", "bert")
    assert res.exit_code != 0
    assert isinstance(res.exception, OlavError) and "unknown embedder" in str(res.exception)
