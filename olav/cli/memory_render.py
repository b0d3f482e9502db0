"""How ``olav memory`` prints what it found: search hits, the table's stats, and the recall
explanation that `olav memory why` and `/why` in chat show."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from olav.cli.common import console, counted, print_json
from olav.memory.recall import learned


def snippet(text: str, width: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def print_hits(hits: list[Any], as_json: bool) -> None:
    if as_json:
        print_json([h.to_json() for h in hits])
        return
    if not hits:
        console.print("no memories match")
        return
    for i, h in enumerate(hits, 1):
        dist = "-" if h.distance is None else f"{h.distance:.3f}"
        fts = "-" if h.fts_score is None else f"{h.fts_score:.2f}"
        # which extra rankings found it: its context window, the period the query names
        via = "".join(
            f" · {label}"
            for label, names in (
                ("context", ("context_vector", "context_fts")),
                ("period", ("time_vector", "time_fts")),
            )
            if any(n in h.ranks for n in names)
        )
        console.print(
            f"[bold]{i}.[/] [cyan]{escape(h.record.id)}[/]  "
            f"[dim]{h.record.category} · {escape(h.record.scope)}"
            f" · dist {dist} · fts {fts} · rrf {h.score:.4f}{via}[/]",
            soft_wrap=True,
        )
        console.print(
            "   " + snippet(h.record.metadata.get("body") or h.record.text, 110),
            markup=False,
            soft_wrap=True,
        )


def print_stats(data: dict[str, Any], ann_threshold: int) -> None:
    """The human form of ``olav memory stats`` (``data`` as ``--json`` prints it)."""
    console.print(f"[bold]{data['rows']}[/] rows · embedder {data['embedder']} ({data['dim']}-d)")
    for title, key in (("category", "by_category"), ("scope", "by_scope")):
        table = Table(box=None, pad_edge=False)
        table.add_column(title)
        table.add_column("rows", justify="right")
        for name, n in data[key].items():
            table.add_row(name, str(n))
        console.print(table)
    fts, vec = data["indexes"]["fts"], data["indexes"]["vector"]
    console.print(
        "full-text index: "
        + (f"{fts['indexed']} indexed, {fts['unindexed']} pending" if fts else "[red]missing[/]")
    )
    console.print(
        "vector index: "
        + (f"{vec['type']}" if vec else f"none (exact search below {ann_threshold} rows)")
    )


def print_why(rec: Any, result: Any, as_json: bool) -> None:
    """`olav memory why`: the recall explained (``--json``: RecallResult.to_json, the shape
    the console's Why page gives too)."""
    if as_json:
        print_json(result.to_json())
        return
    render_why(result, rec)


WHY_COLUMNS = ("decision", "category", "id", "margin", "dist", "fts", "rrf", "why")
WIDE = 120  # columns from which `olav memory why` shows every column of WHY_COLUMNS


def _why_cells(c: Any) -> dict[str, str]:
    d = c.to_json()
    decision = c.decision + (" ↑kw" if c.boosted else "")
    return {
        "decision": ("[green]" if c.decision == "injected" else "[dim]") + decision + "[/]",
        "category": d["category"],
        "id": d["id"],
        "margin": "-" if d["margin"] is None else f"{d['margin']:+.3f}",
        "dist": "-" if d["distance"] is None else f"{d['distance']:.3f}",
        "fts": "-" if d["fts_score"] is None else f"{d['fts_score']:.1f}",
        "rrf": f"{d['score']:.4f}",
        "why": escape(d["reason"]),
        "rerank": "-" if d.get("rerank") is None else f"{d['rerank']:.3f}",
    }


def render_why(result: Any, rec: Any) -> None:
    floors = rec.floors
    relevance = (
        "relevance off: the nearest memories are sent"
        if floors is None
        else ("words only (no background) · " if rec.background is None else "")
        + learned.described(getattr(rec, "model", None))
        + f"floors {floors.directive:g} ({floors.directive_words:g} in words, "
        f"{floors.specific:g} in specific words), "
        f"lessons {floors.lesson:g} ({floors.lesson_words:g}), spread {floors.spread:g}"
    )
    table = Table(
        title=f"recall for {result.query!r} · agent {rec.agent} · tier {rec.tier} · {relevance}",
        box=None,
        pad_edge=False,
    )
    # a narrow terminal keeps every id on one line and drops the ranking numbers (--json
    # has them all)
    wide = console.width >= WIDE
    columns: tuple[str, ...] = WHY_COLUMNS if wide else ("decision", "margin", "id")
    if any(c.signals.rerank is not None for c in result.candidates):
        columns = (*columns[:2], "rerank", *columns[2:])
    for col in columns:
        table.add_column(col, no_wrap=col != ("id" if not wide else "why"), overflow="fold")
    for c in result.candidates[:15]:
        cells = _why_cells(c)
        if not wide:  # the reason goes under the id
            cells["id"] += f"\n[dim]{cells['why']}[/]"
        table.add_row(*(cells[col] for col in columns))
    console.print(table)
    if result.look is not None:
        _print_look(rec, result)
    if not result.injected:
        console.print("nothing is relevant enough: no memory block is sent with this request")
        return
    total = sum(c.tokens for c in result.injected)
    shown = counted(len(result.injected), "memory", "memories")
    console.print(f"injected {shown}, ~{total} tokens (budget {rec.token_budget})")


def _print_look(rec: Any, result: Any) -> None:
    look, got = rec.second_look, result.look
    parts = []
    if look.reranker is not None:
        f = look.floors.to_json()
        accept = "never" if f["accept"] is None else f"{f['accept']:g}"
        reject = "never" if f["reject"] is None else f"below {f['reject']:g}"
        ms = "-" if got.rerank_ms is None else f"{got.rerank_ms:.0f} ms"
        parts.append(
            f"reranker {look.reranker.where} ({ms}): injects at {accept}, leaves out {reject} "
            f"({look.floors_source})"
        )
    if look.judge is not None:
        if got.judged:
            said = ", ".join(f"{i} {'applies' if a else 'does not'}" for i, a in got.judged)
            parts.append(f"judge ({got.judge_ms:.0f} ms): {said}")
        elif got.judge_ms is None:
            parts.append(f"judge: no close call within {look.band:g} of a floor")
    for line in parts:
        console.print(line, markup=False, soft_wrap=True)
    for note in got.notes or []:
        console.print(f"[yellow]![/] {escape(note)}", soft_wrap=True)
