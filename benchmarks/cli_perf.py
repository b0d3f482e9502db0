"""``python -m benchmarks perf``: recall latency, capture cost, guide import, start-up time and
RSS."""

from __future__ import annotations

from typing import Any

import typer

from olav.core.errors import OlavError


def parse_sizes(text: str) -> list[int]:
    """``--sizes`` as row counts (``100_000`` allowed), each at least 20."""
    try:
        sizes = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 20:
        raise OlavError(
            f"--sizes {text!r} is not a list of row counts",
            hint="Use e.g. --sizes 1000,10000,100000 (each at least 20)",
        )
    return sizes


def _recall_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    from benchmarks.perf import fmt, recall_rows

    s = report["settings"]
    recall = Table(
        title=f"recall latency (ms), {s['queries']} queries per cell, k={s['k']}",
        title_justify="left",
    )
    for col in ("memories", "vector index", "search", "p50", "p95", "p50 / numpy"):
        recall.add_column(col, justify="left" if col in ("vector index", "search") else "right")
    for row in recall_rows(report):
        recall.add_row(*(f"{row[0]:,}", *(fmt(v) for v in row[1:])))
    return recall


def _parts_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    from benchmarks.perf import fmt

    parts = Table(title="AutoRecall pieces (ms, p50), in the order measured", title_justify="left")
    for col in (
        "memories",
        "e5 query",
        "hybrid (candidates)",
        "no bump",
        "cached vector",
        "AutoRecall",
        "cached, after bumps",
        "after maintain",
        "fragments",
    ):
        parts.add_column(col, justify="right")
    for b in report["recall"]:
        p = b["parts"]
        parts.add_row(
            f"{b['memories']:,}",
            fmt(p["e5_query"]["p50"]),
            fmt(p["hybrid_k_candidates"]["p50"]),
            fmt(p["autorecall_no_bump"]["p50"]),
            fmt(p["autorecall_cached_vector"]["p50"]),
            fmt(b["modes"]["autorecall"]["p50"]),
            fmt(p["autorecall_cached_vector_after_bumps"]["p50"]),
            fmt(p["autorecall_cached_vector_after_maintain"]["p50"]),
            " → ".join(
                fmt(b["fragments"][key])
                for key in ("before_autorecall", "after_autorecall", "after_maintain")
            ),
        )
    return parts


def _other_table(report: dict[str, Any]) -> Any:
    """Capture, guide import, the reply path, start-up and RSS."""
    from rich.table import Table

    from benchmarks.perf import fmt

    other = Table(title="capture, guides, start-up, memory", title_justify="left")
    other.add_column("what")
    other.add_column("value", justify="right")
    for c in report["capture"]:
        other.add_row(
            f"L1 capture per event, {c['memories']:,} memories (p50 / p95)",
            f"{fmt(c['p50'])} / {fmt(c['p95'])} ms (e5 {fmt(c['embed_ms_per_event'])} ms)",
        )
    g = report.get("guides")
    if g:
        other.add_row(
            f"import {g['guides']} guides with e5",
            f"{fmt(g['guides_per_s'])} guides/s ({fmt(g['seconds'])} s, e5 share "
            f"{fmt(g['embed_share'])})",
        )
    for rp in report.get("reply_path") or []:
        other.add_row(
            f"reply path, {rp['memories']:,} memories (p50 / p95, answering thread)",
            f"{fmt(rp['p50'])} / {fmt(rp['p95'])} ms (writer {fmt(rp['writer_ms_per_run'])} ms)",
        )
    c = report.get("cli")
    if c:
        other.add_row("olav --help (median)", f"{fmt(c['help_s']['median'])} s")
        other.add_row("olav memory search (median)", f"{fmt(c['memory_search_s']['median'])} s")
    r = report.get("rss")
    if r:
        other.add_row(
            f"peak RSS, {r['memories']:,} memories, {r['recalls']} recalls",
            f"{fmt(r['vmhwm_mb'])} MB",
        )
    return other


def _targets_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    from benchmarks.perf import fmt

    targets = Table(title="targets", title_justify="left")
    for col in ("target", "limit", "measured", "floor", ""):
        targets.add_column(col)
    for t in report["targets"]:
        mark = "-" if t["met"] is None else ("[green]met[/]" if t["met"] else "[red]missed[/]")
        targets.add_row(
            t["what"],
            f"{fmt(t['limit'])} {t['unit']}",
            f"{fmt(t['value'])} {t['unit']}",
            t.get("floor", "-"),
            mark,
        )
    return targets


def _tables(report: dict[str, Any]) -> list[Any]:
    return [
        _recall_table(report),
        _parts_table(report),
        _other_table(report),
        _targets_table(report),
    ]


def register(app: typer.Typer) -> None:
    """Add the ``perf`` command to ``python -m benchmarks``."""

    @app.command("perf")
    def perf(
        sizes: str = typer.Option(
            "1000,10000,100000", "--sizes", help="Table sizes (memories), comma-separated."
        ),
        queries: int = typer.Option(100, "--queries", min=1, help="Timed queries per cell."),
        guides: int = typer.Option(200, "--guides", min=0, help="Guides to import (0: skip)."),
        captures: int = typer.Option(30, "--captures", min=0, help="Capture events per size."),
        as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON."),
        remote: bool = typer.Option(
            False,
            "--remote",
            help="Also measure the team table on a local S3 server (needs the dev extras).",
        ),
    ) -> None:
        """Latency of recall (vector, FTS, hybrid, AutoRecall) against numpy brute force,
        L1 capture cost, guide import rate, cold start-up of the CLI and peak RSS.

        Builds synthetic tables in a temporary folder; 100k memories take minutes (most of
        it building the vector index).
        """
        from benchmarks.perf import PerfOptions, machine_line, run_perf
        from olav.cli.common import console, err_console, print_json, status_progress

        size_list = parse_sizes(sizes)
        show = err_console.is_terminal and not as_json
        with status_progress(show) as progress:
            opts = PerfOptions(size_list, queries, guides, captures=captures, remote=remote)
            report = run_perf(opts, progress)
        if as_json:
            print_json(report)
            return
        console.print(machine_line(report), soft_wrap=True)
        for table in _tables(report):
            console.print(table)
        console.print(f"[dim]total {report['seconds']} s[/]")
