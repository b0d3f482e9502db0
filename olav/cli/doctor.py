"""``olav doctor`` and ``olav config``."""

from __future__ import annotations

import typer

from olav.cli.common import console, open_workspace, print_json

_MARK = {"ok": "[green]✓[/]", "warn": "[yellow]![/]", "fail": "[red]✗[/]"}


def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    repair: bool = typer.Option(
        False, "--repair", help="Remove leftovers of interrupted work; make olav's files private."
    ),
) -> None:
    """Check the workspace, config, file modes, embedder, memory, indexes, audit DB and Ollama."""
    from dataclasses import asdict

    from olav.admin.doctor import run_checks

    checks = run_checks(repair=repair)
    if as_json:
        print_json([asdict(c) for c in checks])
    else:
        for c in checks:
            console.print(f"{_MARK[c.status]} {c.name:<16} {c.detail}", soft_wrap=True)
            if c.fix and c.status != "ok":
                console.print(f"  [dim]fix:[/] {c.fix}", soft_wrap=True)
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(1)


def show_config(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show the resolved configuration and where each value comes from."""
    import os

    from olav.core.settings import SETTINGS

    ws = open_workspace()
    rows = []
    for s in SETTINGS:
        source = "env" if s.env in os.environ else "olav.yaml/default"
        rows.append({"key": s.key, "value": ws.config[s.key], "env": s.env, "source": source})
    if as_json:
        print_json(rows)
        return
    for r in rows:
        console.print(f"{r['key']:<24} {r['value']!s:<28} [dim]{r['env']} ({r['source']})[/]")
