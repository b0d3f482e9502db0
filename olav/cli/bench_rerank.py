"""``olav bench rerank``: what rerankers of known quality would do to the block (a simulation on
the golden suite; :mod:`olav.memory.golden.rerank`)."""

from __future__ import annotations

from typing import Any

import typer

from olav.cli.common import console, err_console, print_json, status_progress

SHOWN = ("expect", "precision", "empty", "stray", "unrelated_lesson", "lesson_kept", "tokens")


def _cell(value: Any, key: str) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if key == "tokens" else f"{100 * value:.1f}"


def _floors(chosen: list[dict[str, float | None]]) -> str:
    def one(v: float | None) -> str:
        return "never" if v is None else f"{v:g}"

    return "; ".join(f"{one(c['accept'])}/{one(c['reject'])}" for c in chosen)


def markdown_rerank(report: dict[str, Any]) -> str:
    head = "| reranker | AUC | accept/reject per seed | " + " | ".join(SHOWN) + " | targets met |"
    lines = [head, "|" + "---|" * (len(SHOWN) + 4)]
    b = report["bundled"]
    lines.append(
        "| none (bundled decision) | - | - | "
        + " | ".join(_cell(b.get(k), k) for k in SHOWN)
        + " | - |"
    )
    for r in report["rerankers"]:
        t = r["test"]
        lines.append(
            f"| simulated, d'={r['quality']:g} | {r['auc']:.3f} | {_floors(r['floors'])} | "
            + " | ".join(_cell(t.get(k), k) for k in SHOWN)
            + f" | {r['targets_met']}/6 |"
        )
    return "\n".join(lines)


def rerank(
    as_json: bool = typer.Option(False, "--json", help="The report as JSON."),
    markdown: bool = typer.Option(False, "--markdown", help="The report as Markdown."),
    seeds: int = typer.Option(3, "--seeds", min=1, help="Simulated rerankers per quality."),
) -> None:
    """Simulated rerankers of known quality on the golden suite: each candidate's score is
    drawn from whether its query accepts it, plus noise. The accept/reject floors are chosen
    on the calibration half; the test half's measures (%, small tier) are shown beside the
    bundled decision alone. A simulation: it says nothing about any real model."""
    from olav.core.config import Config
    from olav.memory.golden.rerank import golden_rows, simulate
    from olav.memory.store.embedders import make_embedder

    with status_progress(err_console.is_terminal and not as_json) as progress:
        if progress:
            progress("recalling the golden suite")
        rows, floors, budget, _ = golden_rows(make_embedder(Config.load(None)))
        report = simulate(rows, floors, budget, seeds=range(1, seeds + 1), progress=progress)
    if as_json:
        print_json(report)
        return
    if markdown:
        console.print(markdown_rerank(report), markup=False, highlight=False)
        return
    from rich.table import Table

    table = Table(title="simulated rerankers, golden test half (%)", title_justify="left")
    for name in ("reranker", "AUC", "accept/reject", *SHOWN, "targets"):
        table.add_column(name, justify="left" if name == "reranker" else "right")
    b = report["bundled"]
    table.add_row("none", "-", "-", *(_cell(b.get(k), k) for k in SHOWN), "-")
    for r in report["rerankers"]:
        t = r["test"]
        table.add_row(
            f"d'={r['quality']:g}",
            f"{r['auc']:.3f}",
            _floors(r["floors"]),
            *(_cell(t.get(k), k) for k in SHOWN),
            f"{r['targets_met']}/6",
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add the ``rerank`` command to ``olav bench``."""
    app.command("rerank")(rerank)
