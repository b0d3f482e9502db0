"""``olav learn``: run the learning jobs on demand."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from olav.cli.common import console, open_store, open_workspace, print_json

app = typer.Typer(no_args_is_help=True)


def render_lessons(lessons: list[Any]) -> Table:
    table = Table(box=None, pad_edge=False)
    table.add_column("result")
    table.add_column("lesson", overflow="fold")
    table.add_column("id")
    for lesson in lessons:
        table.add_row(
            "[green]stored[/]" if lesson.added else "[dim]duplicate[/]",
            lesson.text,
            lesson.memory_id,
        )
    return table


@app.command("trace-review")
def trace_review(
    hours: float = typer.Argument(24, help="Look at failed runs this many hours back."),
    limit: int = typer.Argument(10, help="At most this many runs."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Turn recent failed, cancelled, tool_error and narrated runs into one-line lessons."""
    from olav.learning.trace_learner import learn_from_traces
    from olav.llm.models import workspace_chat_model

    ws = open_workspace()
    lessons = learn_from_traces(
        ws, open_store(ws), workspace_chat_model(ws), hours=hours, limit=limit
    )
    if as_json:
        print_json([{"lesson": x.text, "stored": x.added, "id": x.memory_id} for x in lessons])
    elif not lessons:
        console.print("no new failed, narrated or tool-error runs to learn from")
    else:
        console.print(render_lessons(lessons))


@app.command("reflect")
def reflect(days: int = typer.Option(1, "--days", min=1, help="Days of errors to review.")) -> None:
    """Run the reflector agent once (the same as the `reflect` cron job)."""
    from olav.cron.builtin import run_reflector

    console.print(run_reflector(open_workspace(), days=days), markup=False)
