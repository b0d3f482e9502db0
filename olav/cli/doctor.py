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
    from rich.markup import escape

    from olav.core.settings import SETTINGS

    ws = open_workspace()
    calibrated = _calibrated_keys(ws)
    rows = []
    for s in SETTINGS:
        source = ws.config.source(s.key)
        if source == "default" and s.key in calibrated:
            source = "calibration"
        rows.append({"key": s.key, "value": ws.config[s.key], "env": s.env, "source": source})
    if as_json:
        print_json(rows)
        return
    key_w = max(len(r["key"]) for r in rows)
    value_w = min(28, max(len(str(r["value"])) for r in rows))
    source_w = max((len(r["source"]) for r in rows if r["source"] != r["env"]), default=7)
    for r in rows:
        style = "dim" if r["source"] == "default" else "cyan"
        # the variable that could set it; when it does, the source names it already
        where = "" if r["source"] == r["env"] else f"  [dim]{r['env']}[/]"
        console.print(
            f"{r['key']:<{key_w}}  {escape(str(r['value'])):<{value_w}}  "
            f"[{style}]{escape(r['source']):<{source_w}}[/]{where}",
            soft_wrap=True,
        )


def _calibrated_keys(ws: object) -> set[str]:
    """The ``auto`` settings whose numbers this workspace calibrated (``olav memory
    calibrate``): memory.relevance's floors, reranker.floors' accept/reject."""
    from olav.core.config import Workspace

    assert isinstance(ws, Workspace)
    cfg = ws.config
    out: set[str] = set()
    if str(cfg["memory.relevance"]).strip().lower() == "auto":
        from olav.memory.recall.calibration import floors_and_source

        embedder = f"{cfg['embedder.provider']}:{cfg['embedder.model']}"
        _, source = floors_and_source(cfg, embedder, ws.databases)
        if source.endswith("calibration.json"):
            out.add("memory.relevance")
    if cfg["reranker.provider"] != "none" and str(cfg["reranker.floors"]).lower() == "auto":
        from olav.memory.recall.rerank_judge import read_rerank_floors, reranker_key

        if read_rerank_floors(ws.databases, reranker_key(cfg)) is not None:
            out.add("reranker.floors")
    return out
