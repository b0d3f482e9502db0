"""`python -m benchmarks report` (what `make bench` runs).

In `make test`: docs/benchmarks.md rendered from a committed report (tests/bench/report.json,
the raw JSON of the tiny run below) has every section; without its LoCoMo file the report says
what it skipped; a bad option is one line. Each benchmark's own logic has its tests on small
inputs (tests/test_bench_*.py, tests/bench/).

Under the ``bench`` marker (`make bench-pytest`): the whole report run on a tiny configuration
through the CLI (a minute of CPU on two cores). ``OLAV_BENCH_REPORT_FIXTURE=1`` makes it rewrite
tests/bench/report.json with what it measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchmarks import child_env
from tests.helpers import clean_env
from tests.locomo_sample import synthetic

COMMITTED = Path(__file__).parent / "bench" / "report.json"
HEADINGS = (
    "## Machine and versions",
    "## How to reproduce",
    "## 1. Recall quality on LoCoMo",
    "## 2. Golden suite: what reaches the model",
    "## 3. Speed and footprint",
    "## 4. Steering a real model",
    "## 5. Tool calls written as text",
    "### The held-out corpus",
    "### When the rescue layer asks again",
    "## 6. Threads: continuing a long conversation",
    "### Three processes, one killed",
    "## 7. Runs as datasets",
    "## 8. `olav serve`: what the server adds",
    "**What the stream modes cost.**",
    "## 9. The web console on a large memory table",
    "## 10. Hostile input",
)


def run_benchmarks(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks ARGS`` in a subprocess in ``cwd``, as a developer runs it from a
    checkout (the checkout on its path, no OLAV_* variable)."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=cwd,
        env=child_env(clean_env()),
        capture_output=True,
        text=True,
        timeout=300,
    )


def committed() -> dict[str, Any]:
    return dict(json.loads(COMMITTED.read_text(encoding="utf-8")))


def test_the_committed_report_renders_every_section() -> None:
    from benchmarks.report import markdown

    command = ["python", "-m", "benchmarks", "report", "--sizes", "60", "--serve-runs", "2"]
    text = markdown(committed(), command=command)
    for heading in HEADINGS:
        assert heading in text
    assert "| **olav** |" in text and "| bm25 |" in text and "| langgraph |" in text
    assert "lancedb" in text and "make bench" in text
    assert "python -m benchmarks report --sizes 60 --serve-runs 2" in text.splitlines()
    assert "Not run: no workspace with a model" in text
    assert "| all modes add ≤ 10 ms p50 to a run |" in text


@dataclass
class Report:
    data: Path
    out: Path
    raw: Path


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    tmp_path = tmp_path_factory.mktemp("report")
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(synthetic()), encoding="utf-8")
    out = tmp_path / "benchmarks.md"
    raw = tmp_path / "report.json"
    args = ["--out", str(out), "--json", str(raw), "--locomo", str(data), "--embedder", "hash"]
    res = run_benchmarks(
        "report",
        *args,
        "--sizes",
        "60",
        "--queries",
        "2",
        "--guides",
        "2",
        "--cli-runs",
        "0",
        "--thread-turns",
        "5",
        "--export-runs",
        "40",
        "--serve-runs",
        "2",
        "--fault-rounds",
        "1",
        "--console-rows",
        "200",
        "--hostile-samples",
        "3",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    if os.environ.get("OLAV_BENCH_REPORT_FIXTURE") == "1":
        found = json.loads(raw.read_text(encoding="utf-8"))
        COMMITTED.write_text(json.dumps(found, separators=(",", ":"), sort_keys=True) + "\n")
    return Report(data, out, raw)


@pytest.mark.bench
def test_report_writes_every_section(report: Report) -> None:
    data, out, raw = report.data, report.out, report.raw
    text = out.read_text(encoding="utf-8")
    for heading in HEADINGS:
        assert heading in text
    assert "| **olav** |" in text and "| bm25 |" in text and "| langgraph |" in text
    assert "lancedb" in text and "make bench" in text
    # the command as given: its options, none of the defaults
    report_line = "python -m benchmarks report"
    (command,) = [line for line in text.splitlines() if line.startswith(report_line)]
    given = f"--out {out} --locomo {data} --sizes 60 --queries 2 --guides 2 --json {raw}"
    assert command == (
        f"{report_line} {given} --embedder hash --cli-runs 0 --thread-turns 5 "
        "--export-runs 40 --serve-runs 2 --fault-rounds 1 --console-rows 200 --hostile-samples 3"
    )
    assert "Not run: no workspace with a model" in text
    report = json.loads(raw.read_text(encoding="utf-8"))
    assert report["recall"]["questions"] > 0 and report["golden"]["counts"]["guides"] >= 40
    assert [b["memories"] for b in report["perf"]["recall"]] == [60]
    assert report["threads"]["turns"] == 5 and report["threads"]["ok"] is True
    assert report["log_export"]["runs"] == 40
    assert report["serve"]["concurrent"]["errors"] == 0
    console = report["console"]
    assert console["rows"] == 200 and console["memory_newest"]["p50_ms"] > 0
    assert console["why_page"]["p50_ms"] > 0 and set(console["met"]) == {"memory", "why"}
    faults = report["thread_faults"]
    assert faults["threads_lost"] == 0 and faults["corrupted"] == 0 and faults["resumed"]


def test_a_report_without_the_dataset_says_it_was_skipped() -> None:
    from benchmarks.report import markdown

    raw = committed()
    raw["recall"] = None
    raw["skipped"]["recall"] = "LoCoMo file not found: missing.json"
    command = ["python", "-m", "benchmarks", "report", "--locomo", "missing.json"]
    text = markdown(raw, command=command)
    assert "_Not run: LoCoMo file not found: missing.json._" in text
    assert "## 2. Golden suite: what reaches the model" in text and "| **olav** |" not in text


def test_a_bad_option_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The entry point of ``python -m benchmarks`` (benchmarks.cli.main) in this process:
    the refusal is olav's one red line and a non-zero status, no process needed."""
    from benchmarks.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["python -m benchmarks", "report", "--sizes", "ten"])
    with pytest.raises(SystemExit) as exited:
        main()
    stderr = capsys.readouterr().err
    assert exited.value.code not in (0, None)
    assert "--sizes 'ten'" in stderr and "Traceback" not in stderr
    (line,) = stderr.strip().splitlines()  # the one line: the value and what to give instead
    assert "--sizes 1000,10000,100000" in line
