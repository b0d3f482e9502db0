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
    from olav.memory.recall import calibration
    from olav.memory.store.embedders import make_embedder

    ws = open_workspace()
    embedder = make_embedder(ws.config)
    key = calibration.floors_key(ws.config, embedder.name)
    if forget:
        gone = calibration.forget_workspace_calibration(ws.databases, key)
        what = "dropped" if gone else "there were no saved floors"
        console.print(f"{key}: {what}; `olav doctor` shows what recall uses now.")
        return
    from olav.memory.store.embedders import CachedEmbedder

    embedder = CachedEmbedder(embedder, size=8192)  # the reranker's pass embeds nothing again
    show = err_console.is_terminal and not as_json
    report = _measure(embedder, show=show, ceiling=ceiling)
    floors = report["floors"]["suggested"]
    test = report["blocks"]["suggested"]["test"]["small"]
    rerank = _rerank(ws.config, embedder, show=show, ceiling=ceiling)
    if as_json:
        out = {"embedder": key, "floors": floors, "test_half": test}
        if ceiling:
            out["ceiling"] = report.get("ceiling")
        print_json({**out, "reranker": rerank} if rerank else out)
        return
    _show(report)
    if rerank:
        _show_rerank(rerank)
    if report.get("ceiling"):
        from olav.memory.golden.tables import ceiling_rows

        table = ceiling_rows(report["ceiling"], floors=False)
        console.print(rows_table("what any floors could reach (fitted on the test half)", table))
    if not yes and not typer.confirm(f"Save these floors for {key}?", default=False):
        console.print("Nothing saved.")
        return
    if rerank:
        from olav.memory.recall.rerank_judge import RerankFloors, save_rerank_floors

        chosen = RerankFloors.from_json(rerank["floors"])
        where = save_rerank_floors(ws.databases, rerank["key"], chosen, rerank["test"])
        console.print(f"[green]✓[/] the reranker's floors saved in {where}.")
    from olav.memory.policy import Floors

    measured = {k: test.get(k) for k in SHOWN}
    path = calibration.save_workspace_calibration(
        ws.databases, key, Floors(**_finite(floors)), measured
    )
    console.print(f"[green]✓[/] saved in {path}; AutoRecall decides relevance with them now.")


def _rerank(cfg: Any, embedder: Any, *, show: bool, ceiling: bool) -> dict[str, Any] | None:
    """With a reranker configured: its floors chosen on the calibration half of the golden
    suite (never any that make a measure worse than without it), the test half with and
    without it, and with ``ceiling`` the best any of its floors reach on the test half."""
    if str(cfg["reranker.provider"]) == "none":
        return None
    from olav.core.errors import OlavError
    from olav.memory.golden.rerank import KEYS, calibrate_rerank, golden_rows, measure
    from olav.memory.recall.rerank import Reranker
    from olav.memory.recall.rerank_judge import RerankFloors, reranker_key

    reranker = Reranker.from_config(cfg)
    assert reranker is not None
    failures: list[str] = []

    def score(query: str, texts: list[str]) -> list[float] | None:
        got = reranker.score(query, texts)
        if got.failure is not None:
            failures.append(got.failure.line(reranker.where))
        return got.scores

    with status_progress(show) as progress:
        if progress:
            progress(f"the golden suite through the reranker at {reranker.where}")
        rows, floors, budget, scores = golden_rows(embedder, rerank=score)
    reranker.close()
    if failures and not scores:
        raise OlavError(failures[0], hint="Start the rerank server or fix reranker.* in olav.yaml")
    chosen, _ = calibrate_rerank(rows, floors, scores, budget)
    without = measure(rows, floors, RerankFloors.off(), scores, budget, "test")
    with_it = measure(rows, floors, chosen, scores, budget, "test")
    out: dict[str, Any] = {
        "key": reranker_key(cfg),
        "reranker": reranker.where,
        "floors": chosen.to_json(),
        "failed_requests": len(failures),
        "without": {k: without.get(k) for k in KEYS},
        "test": {k: with_it.get(k) for k in KEYS},
    }
    if ceiling:
        best, fitted = calibrate_rerank(rows, floors, scores, budget, split="test")
        out["ceiling"] = {"floors": best.to_json(), "test": {k: fitted.get(k) for k in KEYS}}
    return out


def _show_rerank(rerank: dict[str, Any]) -> None:
    def fl(v: float | None) -> str:
        return "never" if v is None else f"{v:g}"

    f = rerank["floors"]
    console.print(
        f"reranker {rerank['reranker']}: injects at {fl(f['accept'])}, leaves out below "
        f"{fl(f['reject'])} (chosen on the calibration half; never worse than without it)",
        markup=False,
        soft_wrap=True,
    )
    table = Table(title_justify="left")
    heads = ["measure", "without the reranker", "with it"]
    if rerank.get("ceiling"):
        heads.append("best any floors reach (fitted on the test half)")
    for name in heads:
        table.add_column(name, justify="left" if name == "measure" else "right")
    for key, (label, _higher) in SHOWN.items():
        row = [label, _cell(rerank["without"].get(key), key), _cell(rerank["test"].get(key), key)]
        if rerank.get("ceiling"):
            row.append(_cell(rerank["ceiling"]["test"].get(key), key))
        table.add_row(*row)
    console.print(table)
    if rerank["failed_requests"]:
        console.print(
            f"[yellow]![/] {rerank['failed_requests']} requests to the reranker failed; "
            "their queries were measured without it"
        )


def _measure(embedder: Any, *, show: bool, ceiling: bool) -> dict[str, Any]:
    from olav.memory.golden.suite import run_golden

    with status_progress(show) as progress:
        return run_golden(embedder, progress=progress, fresh=True, ceiling=ceiling)


def _finite(floors: dict[str, float | None]) -> dict[str, float]:
    """JSON floors back to numbers: no spread limit is stored as None."""
    return {k: float("inf") if v is None else v for k, v in floors.items()}


def _show(report: dict[str, Any]) -> None:
    from olav.memory.golden.tables import floors_label

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
