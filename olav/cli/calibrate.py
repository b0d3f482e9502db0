"""``olav memory calibrate``: relevance floors for the workspace's own embedder.

olav ships floors for the bundled e5. Any other embedder (bge-m3 through Ollama, an
OpenAI-compatible server) spreads its similarities on another scale, so AutoRecall sends the
nearest memories, relevant or not, until floors are measured for it. This command measures
them on the golden suite that ships with olav: the floors are searched on its calibration
half and reported on its test half, next to what relevance off sends. Saved floors are keyed
by the embedder's name, so a later embedder change never inherits them.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from olav.cli.common import (
    console,
    err_console,
    open_workspace,
    print_json,
    rows_table,
    status_progress,
)

# measure key -> (label, higher is better)
SHOWN = {
    "expect": ("expected memory in the block", True),
    "precision": ("block precision", True),
    "empty": ("unrelated requests with no block", True),
    "stray": ("in-domain requests with a stray lesson", False),
    "unrelated_lesson": ("unrelated requests with a lesson", False),
    "lesson_kept": ("expected lesson kept", True),
    "tokens": ("tokens a block", False),
}


def calibrate_cmd(
    yes: bool = typer.Option(False, "--yes", "-y", help="Save the floors without asking."),
    forget: bool = typer.Option(False, "--forget", help="Drop this embedder's saved floors."),
    as_json: bool = typer.Option(False, "--json", help="Print the measures as JSON; save nothing."),
    ceiling: bool = typer.Option(
        False, "--ceiling", help="Also show what any floors could reach with this embedder."
    ),
) -> None:
    """Measure relevance floors for this workspace's embedder, and save them.

    The floors are searched on one half of the golden suite that ships with olav and shown
    on the other half, next to what relevance off sends. About 600 texts are embedded. With
    --ceiling (about a minute more), it also shows the best blocks any floors could give with
    this embedder, fitted on the test half itself: whether it could meet olav's targets."""
    from olav.memory import calibration
    from olav.memory.embedders import make_embedder

    ws = open_workspace()
    embedder = make_embedder(ws.config)
    key = calibration.floors_key(ws.config, embedder.name)
    if forget:
        gone = calibration.forget_workspace_calibration(ws.databases, key)
        what = "dropped" if gone else "there were no saved floors"
        console.print(f"{key}: {what}; `olav doctor` shows what recall uses now.")
        return
    report = _measure(embedder, show=err_console.is_terminal and not as_json, ceiling=ceiling)
    floors = report["floors"]["suggested"]
    test = report["blocks"]["suggested"]["test"]["small"]
    if as_json:
        out = {"embedder": key, "floors": floors, "test_half": test}
        print_json({**out, "ceiling": report.get("ceiling")} if ceiling else out)
        return
    _show(report)
    if report.get("ceiling"):
        from olav.bench.golden_tables import ceiling_rows

        table = ceiling_rows(report["ceiling"], floors=False)
        console.print(rows_table("what any floors could reach (fitted on the test half)", table))
    if not yes and not typer.confirm(f"Save these floors for {key}?", default=False):
        console.print("Nothing saved.")
        return
    from olav.memory.relevance import Floors

    measured = {k: test.get(k) for k in SHOWN}
    path = calibration.save_workspace_calibration(
        ws.databases, key, Floors(**_finite(floors)), measured
    )
    console.print(f"[green]✓[/] saved in {path}; AutoRecall decides relevance with them now.")


def _measure(embedder: Any, *, show: bool, ceiling: bool) -> dict[str, Any]:
    from olav.bench.golden import run_golden

    with status_progress(show) as progress:
        return run_golden(embedder, progress=progress, fresh=True, ceiling=ceiling)


def _finite(floors: dict[str, float | None]) -> dict[str, float]:
    """JSON floors back to numbers: no spread limit is stored as None."""
    return {k: float("inf") if v is None else v for k, v in floors.items()}


def _show(report: dict[str, Any]) -> None:
    from olav.bench.golden_tables import floors_label

    f = report["floors"]["suggested"]
    off = report["blocks"]["off"]
    test = report["blocks"]["suggested"]["test"]["small"]
    n = report["counts"]["split"]
    console.print(
        f"{report['embedder']}: floors searched on {n['cal']} requests of the golden suite, "
        f"measured on the other {n['test']} (small tier).",
        markup=False,
    )
    table = Table(title_justify="left")
    for name in ("measure", "relevance off", "with these floors"):
        table.add_column(name, justify="left" if name == "measure" else "right")
    for key, (label, _higher) in SHOWN.items():
        table.add_row(label, _cell(off.get(key), key), _cell(test.get(key), key))
    console.print(table)
    console.print(f"floors: {floors_label(f)}", markup=False, soft_wrap=True)


def _cell(value: Any, key: str) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if key == "tokens" else f"{100 * value:.1f} %"
