"""``olav memory gaps``: guides and precedents that nearly reached the model
(:mod:`olav.learning.gaps`), from the recall log."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from olav.cli.common import console, open_workspace, print_json
from olav.learning.gaps import SHOWN_REQUESTS, WITHIN


def gaps_cmd(
    limit: int = typer.Option(
        500, "--limit", "-n", min=1, help="How many of the newest recalls to read."
    ),
    within: float = typer.Option(
        WITHIN, "--within", min=0.0, help="How far under its floor a margin counts as near."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Guides and precedents that nearly reached the model: requests of the recall log that
    got no directive, though one came within --within of its relevance floor. A keyword found
    in a request lowers its guide's floor: add the words these requests use to the guide's
    `keywords:`, then run `olav kb import-guides`."""
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
    for name, justify in (("memory", "left"), ("requests", "right"), ("closest", "right")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    table.add_column("requests that nearly recalled it", overflow="fold")
    for m in misses:
        shown = m.requests[:SHOWN_REQUESTS]
        more = len(m.requests) - len(shown)
        table.add_row(
            escape(m.memory_id),
            str(len(m.requests)),
            f"{m.closest:.3f} < {m.floor:g}",
            escape("\n".join(shown) + (f"\n… {more} more" if more else "")),
        )
    console.print(table)
    console.print(
        "[dim]Add the words these requests use to the guide's keywords (a keyword lowers its "
        'floor), then `olav kb import-guides`. `olav memory why "<request>"` shows every '
        "signal.[/]",
        soft_wrap=True,
    )
