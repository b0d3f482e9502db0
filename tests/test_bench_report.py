"""`olav bench report` (what `make bench` runs) on a tiny configuration: every section present."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_olav
from tests.locomo_sample import synthetic


def test_report_writes_every_section(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(synthetic()), encoding="utf-8")
    out = tmp_path / "benchmarks.md"
    raw = tmp_path / "report.json"
    args = ["--out", str(out), "--json", str(raw), "--locomo", str(data), "--embedder", "hash"]
    res = run_olav(
        "bench",
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
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    text = out.read_text(encoding="utf-8")
    for heading in (
        "## Machine and versions",
        "## How to reproduce",
        "## 1. Recall quality on LoCoMo",
        "## 2. Golden suite: what reaches the model",
        "## 3. Speed and footprint",
        "## 4. Steering a real model",
        "## 5. Tool calls written as text",
        "### The held-out corpus",
        "## 6. Threads: continuing a long conversation",
        "### Three processes, one killed",
        "## 7. Runs as datasets",
        "## 8. `olav serve`: what the server adds",
        "## 9. The web console on a large memory table",
    ):
        assert heading in text
    assert "| **olav** |" in text and "| bm25 |" in text and "| langgraph |" in text
    assert "lancedb" in text and "make bench" in text
    # the command as given: its options, none of the defaults
    (command,) = [line for line in text.splitlines() if line.startswith("olav bench report")]
    given = f"--out {out} --locomo {data} --sizes 60 --queries 2 --guides 2 --json {raw}"
    assert command == (
        f"olav bench report {given} --embedder hash --cli-runs 0 --thread-turns 5 "
        "--export-runs 40 --serve-runs 2 --fault-rounds 1 --console-rows 200"
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
