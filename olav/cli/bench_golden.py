"""``olav bench golden``: what reaches the model on the golden suite (block measures on the
test half, floors calibrated on the other half, ranking, lesson dedup)."""

from __future__ import annotations

from typing import Any

import typer

from olav.cli.common import console, err_console, print_json, rows_table, status_progress
from olav.core.errors import OlavError


def golden(
    embedder: str = typer.Option("e5", "--embedder", help="e5 (bundled) or hash (tests only)."),
    relevance: str = typer.Option(
        "", "--relevance", help="Floors to measure instead of the calibrated ones (six numbers)."
    ),
    misses: bool = typer.Option(False, "--misses", help="List the test-half queries missed."),
    ceiling: bool = typer.Option(
        False, "--ceiling", help="Also replay every combination of floors on the test half."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the report as Markdown."),
) -> None:
    """What reaches the model for the golden set's requests: the expected memory in the block,
    block precision, empty blocks for unrelated requests and stray lessons, per language and
    tier, on the test half; the floors the calibration half suggests; and the lesson dedup
    distance.

    The set ships with olav (English, Chinese and mixed requests, unrelated ones and in-domain
    ones that no memory answers) and is loaded into a temporary memory store; recall runs
    exactly as AutoRecall runs it.
    """
    from olav.bench.embedders import EMBEDDERS, bench_embedder
    from olav.memory.golden import suite as g
    from olav.memory.golden.tables import markdown_golden
    from olav.memory.recall.calibration import parse_floors

    if embedder not in EMBEDDERS:
        raise OlavError(f"unknown embedder {embedder!r}", hint="Use --embedder e5 or hash")
    if as_json and markdown:
        raise OlavError("--json and --markdown exclude each other", hint="Pick one")
    if relevance:
        parse_floors(relevance)  # a typo is a one-line error before minutes of work
    emb = bench_embedder(embedder)
    show = err_console.is_terminal and not (as_json or markdown)
    with status_progress(show) as progress:
        report = g.run_golden(emb, relevance=relevance or None, progress=progress, ceiling=ceiling)
    if as_json:
        print_json(report)
    elif markdown:
        console.print(markdown_golden(report), markup=False, soft_wrap=True)
    else:
        _show(report, misses)


def _show(report: dict[str, Any], misses: bool) -> None:
    from olav.memory.golden import tables as g

    f = report["floors"]
    console.print(g.summary_line(report), markup=False, soft_wrap=True)
    console.print(
        f"configured floors: {g.floors_label(f['configured'])}\n"
        f"suggested by the calibration half: {g.floors_label(f['suggested'])}",
        markup=False,
        soft_wrap=True,
    )
    console.print(rows_table("targets", g.target_rows(report)))
    console.print(
        rows_table("the block, test half", g.block_rows(report["blocks"]["configured"], "test"))
    )
    if report.get("ceiling"):  # the floors column is too wide for a terminal
        table = g.ceiling_rows(report["ceiling"], floors=False)
        console.print(rows_table("what any floors could reach (fitted on the test half)", table))
    if misses and report["misses"]:
        console.print(rows_table("test-half misses (small tier)", g.miss_rows(report["misses"])))
    elif report["misses"]:
        console.print(f"[dim]{len(report['misses'])} test-half misses: --misses lists them[/]")
    console.print(
        rows_table("ranking before the relevance decision", g.retrieval_rows(report["retrieval"]))
    )
    for title, rows in zip(
        ("lesson dedup distances", ""), g.dedup_rows(report["dedup"]), strict=True
    ):
        console.print(rows_table(title, rows))
    sec = report["seconds"]
    console.print(
        f"[dim]load {sec['load']}s, total {sec['total']}s, recall "
        f"{sec['recall_ms_per_query']} ms/query[/]",
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add the ``golden`` command to ``olav bench``."""
    app.command("golden")(golden)
