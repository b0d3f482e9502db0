"""`olav bench report` without its LoCoMo file: the report says what it skipped, and a bad
option is one line. (Its own file, so that it runs beside test_bench_report.py.)"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run_olav


def test_report_without_the_dataset_says_it_was_skipped(tmp_path: Path) -> None:
    out = tmp_path / "b.md"
    res = run_olav(
        "bench",
        "report",
        "--out",
        str(out),
        "--locomo",
        str(tmp_path / "missing.json"),
        "--embedder",
        "hash",
        "--sizes",
        "40",
        "--queries",
        "1",
        "--guides",
        "0",
        "--cli-runs",
        "0",
        "--thread-turns",
        "2",
        "--export-runs",
        "5",
        "--serve-runs",
        "1",
        "--fault-rounds",
        "1",
        "--console-rows",
        "200",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert "missing.json does not exist" in res.stderr
    assert "_Not run: LoCoMo file not found" in out.read_text(encoding="utf-8")
    bad = run_olav("bench", "report", "--sizes", "ten", cwd=tmp_path)
    assert bad.returncode != 0 and "--sizes 'ten'" in bad.stderr and "Traceback" not in bad.stderr
