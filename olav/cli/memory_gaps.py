"""``olav memory gaps``: guides and precedents that nearly reached the model
(:mod:`olav.learning.gaps`), from the recall log."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from olav.cli.common import console, open_workspace, print_json
from olav.learning.gaps import WITHIN


def gaps_cmd(
    limit: int = typer.Option(
        500, "--limit", "-n", min=1, help="How many of the newest recalls to read."
    ),
    within: float = typer.Option(
        WITHIN, "--within", min=0.0, help="How far under its floor a margin counts as near."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Requests of the recall log that got no directive, though a guide or precedent came
    within --within of its relevance floor, each with the ones that came nearest. A keyword
    found in a request lowers its guide's floor: add the words the request uses to the
    guide's `keywords:`, then run `olav kb import-guides`."""
    from olav.audit.queries import recall_candidates
    from olav.learning.gaps import near_misses

    ws = open_workspace()
    misses = near_misses(recall_candidates(ws.audit_path, limit=limit), within)
    if as_json:
        print_json([m.to_json() for m in misses])
        return
    if not misses:
        console.print(
            f"no near misses in the last {limit} recalls: every request that got no directive "
            f"was more than {within:g} under every floor"
        )
        return
    table = Table(title=f"nearly recalled, in the last {limit} recalls", title_justify="left")
    table.add_column("request (no directive reached the model)", overflow="fold", ratio=3)
    table.add_column("times", justify="right")
    table.add_column("came nearest: margin < floor", overflow="fold", ratio=2)
    for m in misses:
        near = "\n".join(f"{n.memory_id} {n.margin:.3f} < {n.floor:g}" for n in m.near)
        table.add_row(escape(m.request), str(m.times), escape(near))
    console.print(table)
    console.print(
        "[dim]Where a guide should have answered, add the words the request uses to its "
        "keywords (a keyword lowers its floor), then `olav kb import-guides`. "
        '`olav memory why "<request>"` shows every signal.[/]',
        soft_wrap=True,
    )
