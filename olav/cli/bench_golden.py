"""``olav bench golden``: the golden guide-recall suite (recall hit rates, gate, dedup)."""

from __future__ import annotations

from typing import Any

import typer

from olav.cli.common import console, err_console, print_json, status_progress
from olav.errors import OlavError


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _retrieval_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title="expected guide or precedent found", title_justify="left")
    for name in ("queries", "n", "top-1", "top-3", "top-5", "in block", "search top-1"):
        table.add_column(name, justify="left" if name == "queries" else "right")
    table.add_column("search top-3", justify="right")
    ret = report["retrieval"]
    for name, b in [("all", ret["overall"]), *ret["by_language"].items()]:
        table.add_row(
            name,
            str(b["n"]),
            *(_pct(b[k]) for k in ("top1", "top3", "top5", "in_block")),
            _pct(b["search_top1"]),
            _pct(b["search_top3"]),
            style="bold" if name == "all" else None,
        )
    return table


def _gate_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    from olav.bench.golden import gate_label

    g = report["gate"]
    table = Table(
        title="reflection gate as the product applies it (squared L2: strict / with a text match)",
        title_justify="left",
    )
    table.add_column("gate", style="bold")
    for name in ("keep", "injected", "drop", "drop (recaller)", "stray"):
        table.add_column(name, justify="right")
    for name in ("configured", "suggested"):
        r = g[name]
        table.add_row(
            f"{gate_label(r)} ({name})",
            *(_pct(r[k]) for k in ("keep", "injected", "drop", "drop_recaller", "stray")),
        )
    for name in ("configured", "suggested"):
        r = g["distance_only"][name]
        table.add_row(
            f"[dim]{r['threshold']}, distance only ({name})[/]",
            _pct(r["keep"]),
            "-",
            _pct(r["drop"]),
            "-",
            "-",
        )
    return table


def _text_sweep_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    cfg = report["gate"]["configured"]
    table = Table(title=f"text-gate sweep (strict gate {cfg['threshold']})", title_justify="left")
    for name in ("text gate", "keep", "drop", "stray"):
        table.add_column(name, justify="right")
    for r in report["gate"]["text_sweep"]:
        table.add_row(
            f"{r['threshold']:.2f}",
            *(_pct(r[k]) for k in ("keep", "drop", "stray")),
            style="bold" if r["threshold"] == cfg["text_threshold"] else None,
        )
    return table


def _sweep_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    dist = report["gate"]["distance_only"]
    marked = {dist["configured"]["threshold"], dist["suggested"]["threshold"]}
    table = Table(title="distance-only gate sweep", title_justify="left")
    table.add_column("gate", justify="right")
    table.add_column("keep", justify="right")
    table.add_column("drop", justify="right")
    for r in report["gate"]["sweep"]:
        if round(r["threshold"] * 100) % 4 == 0 or r["threshold"] in marked:
            style = "bold" if r["threshold"] in marked else None
            table.add_row(f"{r['threshold']:.2f}", _pct(r["keep"]), _pct(r["drop"]), style=style)
    return table


def _gate_misses_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    from olav.bench.golden import CASES

    table = Table(title="gate misses (configured gate)", title_justify="left")
    table.add_column("query", overflow="fold")
    table.add_column("case")
    table.add_column("lesson")
    table.add_column("distance", justify="right")
    table.add_column("text match")
    table.add_column("injected", style="dim", overflow="fold")
    for x in report["gate"]["misses"]:
        table.add_row(
            x["query"],
            CASES[x["case"]],
            x["lesson"],
            "-" if x["distance"] is None else str(x["distance"]),
            "yes" if x["text_match"] else "no",
            ", ".join(x["injected"]) or "-",
        )
    return table


def _dedup_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    d = report["dedup"]
    table = Table(title="lesson dedup distance", title_justify="left")
    table.add_column("", style="bold")
    for name in ("n / skipped", "min / kept", "median", "max"):
        table.add_column(name, justify="right")
    for name in ("duplicates", "distinct"):
        s = d[name]
        table.add_row(f"{name} pairs", str(s["n"]), str(s["min"]), str(s["median"]), str(s["max"]))
    for name in ("configured", "suggested"):
        r = d[name]
        table.add_row(f"{r['threshold']} ({name})", _pct(r["skipped"]), _pct(r["kept"]), "", "")
    return table


def _misses_table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title="positive queries outside the top 3", title_justify="left")
    table.add_column("query", overflow="fold")
    for name in ("recall", "search", "vector", "fts"):
        table.add_column(name, justify="right")
    table.add_column("recall's top 3", style="dim", overflow="fold")
    for m in report["retrieval"]["misses"]:
        cells = [m[k] for k in ("rank", "search_rank", "vector_rank", "fts_rank")]
        table.add_row(
            m["query"], *("-" if v is None else str(v) for v in cells), ", ".join(m["top"])
        )
    return table


def golden(
    embedder: str = typer.Option("e5", "--embedder", help="e5 (bundled) or hash (tests only)."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the report as Markdown."),
) -> None:
    """Recall quality on the golden set: guides and precedents found, the reflection gate's
    keep/drop/stray rates as the product applies it (strict gate, or the text gate when the
    full-text search matched the lesson) with sweeps of both gates, and the lesson dedup
    distance.

    The set ships with olav (English, Chinese and mixed queries, 25+ unrelated ones) and is
    loaded into a temporary memory store; recall runs exactly as AutoRecall runs it.
    """
    from olav.bench.golden import markdown_golden, run_golden
    from olav.cli.bench import EMBEDDERS, _embedder

    if embedder not in EMBEDDERS:
        raise OlavError(f"unknown embedder {embedder!r}", hint="Use --embedder e5 or hash")
    if as_json and markdown:
        raise OlavError("--json and --markdown exclude each other", hint="Pick one")
    emb = _embedder(embedder)
    show = err_console.is_terminal and not (as_json or markdown)
    with status_progress(show) as progress:
        report = run_golden(emb, progress=progress)
    if as_json:
        print_json(report)
        return
    if markdown:
        console.print(markdown_golden(report), markup=False, soft_wrap=True)
        return
    c = report["counts"]
    console.print(
        f"golden set: {c['guides']} guides, {c['reflections']} lessons, {c['precedents']} "
        f"precedents; {c['queries']} queries ({c['positive']} expect a guide or precedent, "
        f"{c['lesson']} a lesson, {c['negative']} unrelated); embedder {report['embedder']}",
        soft_wrap=True,
    )
    console.print(_retrieval_table(report))
    if report["retrieval"]["misses"]:
        console.print(_misses_table(report))
    console.print(_gate_table(report))
    stray = report["gate"]["configured"]["stray_by_language"]
    console.print(
        "[dim]stray lessons at the configured gate: "
        + ", ".join(f"{k} {_pct(v)}" for k, v in stray.items())
        + "[/]",
        soft_wrap=True,
    )
    console.print(_text_sweep_table(report))
    if report["gate"]["misses"]:
        console.print(_gate_misses_table(report))
    console.print(_sweep_table(report))
    console.print(_dedup_table(report))
    sec = report["seconds"]
    console.print(
        f"[dim]load {sec['load']}s, total {sec['total']}s, recall "
        f"{sec['recall_ms_per_query']} ms/query[/]",
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add the ``golden`` command to ``olav bench``."""
    app.command("golden")(golden)
