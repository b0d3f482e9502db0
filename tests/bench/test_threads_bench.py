"""``benchmarks/threads.py`` runs end to end on a small thread (a smoke test, not a timing:
the measured numbers come from ``make bench``), through Session's public API only."""

from __future__ import annotations

import json

from benchmarks.threads import markdown_threads, run_threads_bench


def test_threads_bench_runs_on_a_small_thread() -> None:
    report = run_threads_bench(turns=3, repeat=1)
    assert json.loads(json.dumps(report)) == report
    assert (report["turns"], report["messages"], report["target_ms"]) == (3, 12, 300)
    assert report["file_bytes"] > 0
    for key in ("to_prompt", "first_turn_state"):
        assert set(report[key]) == {"new", "resumed"}
    assert "A thread of 3 turns (12 messages" in markdown_threads(report)
