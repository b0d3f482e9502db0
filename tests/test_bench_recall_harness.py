"""The LoCoMo recall harness (`python -m benchmarks recall`) on a tiny synthetic LoCoMo-shaped
file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.locomo import (
    BASELINES,
    RECIPES,
    RecallRun,
    fuse,
    load_locomo,
    parse_ks,
    parse_range,
    recall_at,
    run_recall,
    time_filter,
    window_texts,
)
from olav.core.errors import OlavError
from olav.memory.store.embedders import HashEmbedder
from tests.locomo_sample import RARE_QUESTION, synthetic


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_tiny.json"
    path.write_text(json.dumps(synthetic()))
    return path


@pytest.fixture
def bench(runner: Any) -> Any:
    """``python -m benchmarks ARGS`` in-process, as the ``olav`` fixture runs ``olav``: click's
    Result."""
    from benchmarks.cli import app

    def invoke(*args: str) -> Any:
        return runner.invoke(app, list(args), catch_exceptions=True)

    return invoke


def test_loader_handles_the_data_problems(locomo_file: Path) -> None:
    a, b = load_locomo(locomo_file)
    assert a.sample_id == "syn-a" and len(a.turns) == 8 and len(b.turns) == 5
    assert a.excluded == 1 and a.no_evidence == 1 and a.dropped_ids == ["D9:99"]
    assert [q.evidence for q in a.questions] == [
        ("D1:1",),
        ("D1:2", "D1:4"),
        ("D2:2", "D2:4"),
        ("D2:1",),
    ]
    assert all(q.category != 5 for q in [*a.questions, *b.questions])
    assert a.turns[0].date_label == "8 May 2023" and a.turns[4].session == 2
    assert a.turns[7].caption == "a photo of a loaf of bread"
    # a context window never crosses a session boundary
    win = window_texts(a, 1, 1)
    assert win[3].splitlines() == [
        "Alice: Which trail did you take?",
        "Bob: The ridge trail near the lake, it was beautiful.",
    ]
    assert win[4].startswith("Alice: My sister") and "Biscuit" in win[4]
    assert [c.sample_id for c in load_locomo(locomo_file, [1])] == ["syn-b"]


def test_harness_runs_all_methods(locomo_file: Path, tmp_path: Path) -> None:
    collect: dict[str, Any] = {}
    report = run_recall(
        locomo_file,
        embedder=HashEmbedder("hash-64"),
        run=RecallRun(ks=(1, 5, 10), cache_dir=tmp_path / "cache"),
        collect=collect,
    )
    assert report["questions"] == 6
    assert report["excluded_category_5"] == 1
    assert report["skipped_no_evidence"] == 1
    assert report["dropped_evidence_ids"] == ["D9:99"]
    methods = report["methods"]
    assert set(BASELINES) <= set(methods)
    assert {r.name for r in RECIPES} <= set(methods)
    assert all(methods[m]["experimental"] is False for m in BASELINES)
    for name, m in methods.items():
        for block in [m["overall"], *m["by_category"].values()]:
            for k in (1, 5, 10):
                assert 0.0 <= block[f"R@{k}"] <= 1.0, (name, block)
        # adversarial questions are never asked
        assert not any(cat.startswith("5") for cat in m["by_category"]), name
    questions = collect["questions"]
    assert all(q.category != 5 for q in questions)
    assert "kitten" not in " ".join(q.text for q in questions)
    rare = next(i for i, q in enumerate(questions) if q.text == RARE_QUESTION)
    assert recall_at(collect["rankings"]["bm25"][rare], questions[rare].evidence, 10) == 1.0
    # with only 8 and 5 turns, every turn is within the top 10 of the vector search
    for m in ("vector", "langgraph", "olav"):
        assert methods[m]["overall"]["R@10"] == 1.0, m
    # the control recipe fuses the same two rankings that olav's hybrid search fuses
    assert methods["x-rrf2"]["overall"] == methods["olav"]["overall"]
    # embeddings are cached: a second run embeds nothing new
    again = run_recall(
        locomo_file,
        embedder=HashEmbedder("hash-64"),
        run=RecallRun(experiments=False, cache_dir=tmp_path / "cache"),
    )
    assert again["embedding"]["embedded"] == 0
    assert set(again["methods"]) == set(BASELINES)
    assert again["methods"]["bm25"]["overall"] == methods["bm25"]["overall"]


def test_cli_json(locomo_file: Path, tmp_path: Path, bench: Any) -> None:
    args = ["recall", "--dataset", "locomo", str(locomo_file), "--embedder", "hash"]
    res = bench(*args, "--json", "--no-experiments", "--cache", str(tmp_path / "c"))
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert set(report["methods"]) == set(BASELINES)
    assert report["embedder"] == "hash:hash-64"
    res = bench(*args, "--no-cache", "--convs", "0", "-k", "1,3")
    assert res.exit_code == 0, res.output
    for name in BASELINES:
        assert name in res.stdout
    assert "R@3" in res.stdout and "single-hop" in res.stdout
    res = bench(*args, "--convs", "5")
    assert res.exit_code != 0
    assert isinstance(res.exception, OlavError) and "no conversation 5" in str(res.exception)


def test_helpers() -> None:
    assert parse_range("0-2,4") == [0, 1, 2, 4]
    assert parse_ks("10,1,5") == [1, 5, 10]
    with pytest.raises(OlavError):
        parse_range("a-b")
    with pytest.raises(OlavError):
        parse_ks("0")
    assert recall_at(["a", "b", "c"], ["c", "z"], 2) == 0.0
    assert recall_at(["a", "b", "c"], ["c", "z"], 3) == 0.5
    assert fuse([(["a", "b"], 1.0), (["b", "c"], 1.0)], 60, 30)[0] == "b"
    assert time_filter("What did Maria do on May 3, 2023?") is not None
    assert "2023-12-01" in (time_filter("Which class did she start in December 2023?") or "")
    assert time_filter("May I ask what she likes?") is None
    assert "date_part" in (time_filter("When did Melanie go camping in June?") or "")
    assert time_filter("What does Bob like?") is None


def test_bench_help_imports_no_heavy_library() -> None:
    import subprocess
    import sys

    from benchmarks import child_env

    heavy = ("lancedb", "langgraph", "deepagents", "duckdb", "apscheduler")
    entries = [("olav.cli.app", ["--help"]), ("olav.cli.app", ["bench", "--help"])]
    entries.append(("benchmarks.cli", ["recall", "--help"]))  # python -m benchmarks recall --help
    for module, args in entries:
        code = (
            "import sys\n"
            f"sys.argv = ['olav', *{args!r}]\n"
            f"from {module} import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', [m for m in {heavy!r} if m in sys.modules])\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=child_env()
        )
        assert "LOADED []" in out.stdout, (args, out.stdout[-300:], out.stderr[-300:])
        if args[-2:] == ["recall", "--help"]:
            assert "--embedder" in out.stdout and "--json" in out.stdout
