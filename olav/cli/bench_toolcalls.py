"""``olav bench toolcalls``: tool calls written as text, salvaged by the rescue layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from olav.cli.common import console, print_json


def _table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title="tool calls written as text", title_justify="left")
    table.add_column("family", style="bold")
    for name in ("calls", "exact", "wrong", "missed", "negatives", "executions"):
        table.add_column(name, justify="right")
    rows = [*report["families"].items(), ("all", report["total"])]
    for name, f in rows:
        table.add_row(
            name,
            str(f["calls"]),
            str(f["exact"]),
            f"[red]{f['wrong']}[/]" if f["wrong"] else "0",
            f"[red]{f['missed']}[/]" if f["missed"] else "0",
            str(f["negatives"]),
            f"[red]{f['executions']}[/]" if f["executions"] else "0",
            end_section=name == list(report["families"])[-1],
        )
    return table


def toolcalls(
    path: Path | None = typer.Argument(
        None, help="A JSONL corpus (default: the project's own, shipped with olav)."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="The report as JSON, with the calls olav would run per case."
    ),
    markdown: bool = typer.Option(False, "--markdown", help="The report as Markdown."),
    suite: str = typer.Option(
        "",
        "--suite",
        help="A public conformance suite instead of a corpus: canitoolcall (pip install "
        "canitoolcall).",
    ),
    schema_only: bool = typer.Option(
        False,
        "--schema-only",
        help="Every family grammar off: how far the offered tools' schemas alone read calls.",
    ),
) -> None:
    """Per format family: calls salvaged exactly, wrongly or missed; executions on negatives;
    parse time. Each line of the corpus: {"id", "kind": "call"|"negative"|"narration",
    "request"?, "raw_text", "tools": [{"name", "description", "parameters"}], "expect"}."""
    if suite:
        _suite(suite, as_json=as_json, markdown=markdown, grammars=not schema_only)
        return
    from olav.bench.toolcalls import load_cases, markdown_toolcalls, run_toolcalls, shipped_corpus

    report = run_toolcalls(load_cases(path or shipped_corpus()), grammars=not schema_only)
    if as_json:
        print_json(report)
        return
    if markdown:
        console.print(markdown_toolcalls(report), markup=False, highlight=False)
        return
    console.print(_table(report))
    t, met = report["total"], report["met"]
    rate = t["exact"] / t["calls"] if t["calls"] else 0.0
    parse = report["parse_4kb_ms"]["p95"]
    console.print(
        f"exact {rate:.1%} (target 97%) · executions on negatives {t['executions']} (target 0) "
        f"· parse p95 of a 4 KB message {parse:.3f} ms (target 0.5)",
        markup=False,
    )
    if not all(met.values()):
        raise typer.Exit(1)


def _suite(name: str, *, as_json: bool, markdown: bool, grammars: bool = True) -> None:
    from olav.bench import toolcall_suite as ts
    from olav.core.errors import OlavError

    if name != ts.SUITE:
        raise OlavError(f"unknown suite {name!r}", hint=f"The suite olav replays: {ts.SUITE}")
    report = ts.run_suite(grammars=grammars)
    if as_json:
        print_json(report)
    elif markdown:
        console.print(ts.markdown_suite(report), markup=False, highlight=False)
    else:
        from rich.table import Table

        table = Table(title=report["suite"], title_justify="left")
        for col in ("family", "fixtures", "pass", "calls exact", "unsafe", "leaks", "stream≠"):
            table.add_column(col, justify="left" if col == "family" else "right")
        rows = [*report["families"].items(), ("all", report["total"])]
        for fam, f in rows:
            table.add_row(
                fam,
                str(f["fixtures"]),
                str(f["good"]),
                f"{f['calls_exact']}/{f['calls']}",
                f"[red]{f['unsafe']}[/]" if f["unsafe"] else "0",
                f"[red]{f['leaks']}[/]" if f["leaks"] else "0",
                f"[red]{f['stream_differs']}[/]" if f["stream_differs"] else "0",
                end_section=fam == list(report["families"])[-1],
            )
        console.print(table)
        for miss in report["not_passed"]:
            failed = ", ".join(miss["failed"][:3])
            console.print(f"not passed: {miss['id']} ({failed})", markup=False)
    if not all(report["met"].values()):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``toolcalls`` command to ``olav bench``."""
    app.command("toolcalls")(toolcalls)
