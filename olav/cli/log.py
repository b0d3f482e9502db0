"""`olav log`: the audited runs, and their export as datasets (olav.audit.export)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.text import Text

from olav.cli.common import console, err_console, open_workspace, print_json
from olav.core.errors import OlavError

app = typer.Typer(no_args_is_help=True)

TOOL_RESULT_SHOWN = 1500  # characters of a tool result `olav log show` prints

_RELATIVE = re.compile(r"(\d+)\s*([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(text: str, *, option: str = "--since", end: bool = False) -> datetime:
    """A point in time: ``YYYY-MM-DD`` (local; with ``end`` the day after, so that an
    exclusive ``--until DAY`` takes in that whole day), an ISO time (local unless it has an
    offset), or an age such as ``30m``, ``12h``, ``7d``, ``2w`` (ago)."""
    raw = text.strip().lower()
    rel = _RELATIVE.fullmatch(raw)
    if rel:
        delta = timedelta(**{_UNITS[rel[2]]: int(rel[1])})
        return datetime.now(UTC) - delta
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise OlavError(
            f"{option} {text!r} is not a date",
            hint="Use YYYY-MM-DD, an ISO time such as 2026-12-01T08:00, or an age: 12h, 7d",
        ) from None
    if len(raw) == 10 and end:
        when += timedelta(days=1)
    return when if when.tzinfo else when.astimezone()


def _audit() -> Path:
    from olav.audit.export import ensure_audit

    path = Path(open_workspace().audit_path)
    ensure_audit(path)
    return path


def _filter(
    *,
    outcomes: list[str] | None = None,
    agent: str | None = None,
    since: str | None = None,
    until: str | None = None,
    min_turns: int = 0,
    salvaged: bool | None = None,
    nudged: bool | None = None,
    limit: int | None = None,
) -> Any:
    from olav.audit.events import RUN_OUTCOMES
    from olav.audit.export import RunFilter

    wanted = tuple(outcomes or ())
    for name in wanted:
        if name not in RUN_OUTCOMES:
            raise OlavError(f"unknown outcome {name!r}", hint="Use " + ", ".join(RUN_OUTCOMES))
    return RunFilter(
        outcomes=wanted,
        agent=agent,
        since=parse_when(since, option="--since") if since else None,
        until=parse_when(until, option="--until", end=True) if until else None,
        min_turns=min_turns,
        salvaged=salvaged,
        nudged=nudged,
        limit=limit,
    )


def _when(ts: Any) -> str:
    return ts.astimezone().strftime("%Y-%m-%d %H:%M:%S") if ts is not None else "-"


def _marks(run: Any) -> str:
    marks = []
    if run.salvaged:
        marks.append("salvaged" if run.salvaged == 1 else f"salvaged×{run.salvaged}")
    if run.nudged:
        marks.append("nudged")
    if run.loop_guard:
        marks.append("loop guard")
    if run.context_full:
        marks.append("context full")
    return ", ".join(marks)


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


_OUTCOME_STYLE = {"completed": "green", "narrated": "yellow", "tool_error": "yellow"}


@app.command("list")
def list_cmd(
    agent: str | None = typer.Option(None, "--agent", "-a", help="Only this agent's runs."),
    outcome: list[str] | None = typer.Option(
        None, "--outcome", help="Only runs with this outcome (repeatable)."
    ),
    since: str | None = typer.Option(
        None, "--since", help="Runs started at or after: YYYY-MM-DD, an ISO time, or 7d/12h."
    ),
    until: str | None = typer.Option(
        None, "--until", help="Runs started before (a bare date: up to the end of that day)."
    ),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="How many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print the runs as JSON."),
) -> None:
    """The audited runs, newest first: outcome, turns, tool calls and rescue marks."""
    from olav.audit.export import list_runs

    flt = _filter(outcomes=outcome, agent=agent, since=since, until=until, limit=limit)
    runs = list_runs(_audit(), flt)
    if as_json:
        print_json([r.summary_json() for r in runs])
        return
    if not runs:
        narrowed = flt.outcomes or flt.agent or flt.since or flt.until
        console.print("no runs recorded" + (" that match" if narrowed else ""))
        return
    from rich import box
    from rich.table import Table

    # a terminal (or a width set with COLUMNS) is filled and the query cut to it; a pipe gets
    # lines as long as they are, with the whole query
    tty = console.is_terminal or bool(os.environ.get("COLUMNS"))
    table = Table(
        box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, expand=tty, collapse_padding=True
    )
    table.add_column("run", style="bold", no_wrap=True)
    table.add_column("started", no_wrap=True)
    table.add_column("agent", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("turns", justify="right", no_wrap=True)
    table.add_column("steps", justify="right", no_wrap=True)
    table.add_column("tools", justify="right", no_wrap=True)
    table.add_column("rescue", style="yellow")
    table.add_column("query", no_wrap=True, overflow="ellipsis", ratio=1)
    for r in runs:
        style = _OUTCOME_STYLE.get(r.outcome, "red")
        table.add_row(
            r.id[:8],
            _when(r.started_at)[5:16],
            escape(r.agent),
            f"[{style}]{escape(r.outcome)}[/]",
            str(r.turns),
            str(r.n_steps),
            str(r.n_tool_calls),
            _marks(r),
            escape(_one_line(r.query, 80 if tty else 500)),
        )
    console.print(table)


@app.command("show")
def show_cmd(
    run: str = typer.Argument(
        ..., help="A run id, or a prefix of exactly one (from `olav log list`)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the whole run as JSON."),
) -> None:
    """One run in full: its messages, tool calls with arguments and results, the memories
    injected, its outcome, rescue marks and tokens."""
    from olav.audit.export import load_run, resolve_run

    path = _audit()
    found = load_run(path, resolve_run(path, run))
    if as_json:
        print_json(found.to_json())
        return
    for line in _header(found):
        console.print(line, soft_wrap=True)
    console.print()
    for line in _messages(found):
        console.print(line, soft_wrap=True)
    other = [e["kind"] for e in found.events]
    if other:
        console.print(Text("events: " + ", ".join(other), style="dim"), soft_wrap=True)


def _header(run: Any) -> list[Text]:
    from olav.audit.export import reasoning_paired

    took = ""
    if run.ended_at is not None:
        took = f" · {(run.ended_at - run.started_at).total_seconds():.1f} s"
    style = _OUTCOME_STYLE.get(run.outcome, "red")
    lines = [
        Text.assemble(("run ", "bold"), run.id, f"  {run.agent}  {run.model or '?'}"),
        Text(
            f"started {_when(run.started_at)}{took} · thread {run.thread_id or '-'} · "
            f"session {run.session_id or '-'}"
        ),
        Text.assemble("outcome ", (run.outcome, style), f" (status {run.status})"),
    ]
    if run.error:
        lines.append(Text.assemble(("error ", "red"), run.error))
    lines.append(Text("rescue: " + (_marks(run) or "none")))
    stats = run.stats
    if stats:
        lines.append(
            Text(
                f"tokens: {stats.get('tokens_in', 0)} in, {stats.get('tokens_out', 0)} out"
                f"{_counted_by(stats)}, "
                f"{stats.get('model_calls', 0)} model calls"
            )
        )
    if run.injected:
        lines.append(Text(f"memories injected ({len(run.injected)}): " + ", ".join(run.injected)))
    else:
        lines.append(Text("memories injected: none"))
    if run.memory_block:
        lines.append(Text(run.memory_block, style="dim"))
    if not reasoning_paired(run):
        lines.append(Text("reasoning (which message it came with is unknown):", style="dim"))
        lines += [Text(f"(thinking) {t}", style="dim italic") for t in run.reasoning]
    if run.source != "steps":
        lines.append(Text("(recorded before steps were kept: rebuilt from messages)", style="dim"))
    return lines


def _messages(run: Any) -> list[Text]:
    out: list[Text] = []
    for step in run.steps:
        if step.reasoning:
            out.append(Text(f"(thinking) {step.reasoning}", style="dim italic"))
        if step.role == "user":
            out.append(Text.assemble(("you> ", "bold"), step.content))
        elif step.role == "assistant":
            if step.content:
                out.append(Text.assemble((f"{run.agent}> ", "bold cyan"), step.content))
            for call in step.tool_calls:
                args = json.dumps(call.get("args"), ensure_ascii=False, default=str)
                out.append(
                    Text(f"  → {call.get('name')}({args})  [{call.get('id')}]", style="cyan")
                )
        else:
            text = step.content
            if len(text) > TOOL_RESULT_SHOWN:
                text = text[:TOOL_RESULT_SHOWN] + f"… ({len(step.content)} chars; --json for all)"
            ok = step.status != "error"
            out.append(
                Text.assemble(
                    (f"  ← {step.name or 'tool'} ", "dim"),
                    ("ok" if ok else "error", "green" if ok else "red"),
                    (f"  [{step.tool_call_id}]\n", "dim"),
                    (text, "dim"),
                )
            )
    if not run.steps:
        out.append(Text("(no messages recorded)", style="dim"))
    return out


def _catalog() -> dict[str, dict[str, Any]]:
    """The function specs of every tool olav has: the registry's and the learning tools."""
    from olav.audit.export import tool_catalog
    from olav.compose.tools import LEARNING_TOOLS
    from olav.runtime.tools import registry

    return tool_catalog({**registry._SPECS, **LEARNING_TOOLS})


# what a training export takes unless --outcome says otherwise: runs that completed with every
# tool call succeeding (tool_error covers a refused call too), not the cancelled, narrated or
# failed ones, which would teach a model to claim work it did not do
TRAINING_OUTCOMES = ("completed",)
JOB_AGENTS = ("reflector",)  # the agents of olav's own scheduled jobs


@app.command("export")
def export_cmd(
    fmt: str = typer.Option(
        "openai", "--format", "-f", help="openai (chat fine-tuning), sharegpt or trajectory."
    ),
    output: str = typer.Option("-", "--output", "-o", help="The JSONL file, or - for stdout."),
    outcome: list[str] | None = typer.Option(
        None,
        "--outcome",
        help="Only runs with this outcome (repeatable). Default for openai and sharegpt: "
        "completed (and not the nightly jobs' runs); trajectory: every run.",
    ),
    agent: str | None = typer.Option(None, "--agent", "-a", help="Only this agent's runs."),
    since: str | None = typer.Option(
        None, "--since", help="Runs started at or after: YYYY-MM-DD, an ISO time, or 7d/12h."
    ),
    until: str | None = typer.Option(
        None, "--until", help="Runs started before (a bare date: up to the end of that day)."
    ),
    min_turns: int = typer.Option(
        0, "--min-turns", min=0, help="Only runs with at least this many assistant messages."
    ),
    salvaged: bool | None = typer.Option(
        None,
        "--salvaged/--no-salvaged",
        help="Only runs whose tool call was salvaged from text / none of them (default: both).",
    ),
    nudged: bool | None = typer.Option(
        None, "--nudged/--no-nudged", help="Only nudged runs / none of them (default: both)."
    ),
    memories: bool = typer.Option(
        False,
        "--with-memories/--strip-memories",
        help="Keep the injected <relevant-memories> block before the person's message.",
    ),
    reasoning: bool = typer.Option(
        False, "--reasoning", help="Add the model's reasoning (reasoning_content)."
    ),
    system: str | None = typer.Option(None, "--system", help="A system message to put first."),
    split: float = typer.Option(
        0.0, "--split", min=0.0, max=0.99, help="Share of threads for the test file, e.g. 0.1."
    ),
    seed: int = typer.Option(42, "--seed", help="The split's seed: the same seed, the same split."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Write audited runs as a dataset, one JSON line per run: OpenAI chat fine-tuning,
    ShareGPT with tools (LLaMA-Factory), or trajectories for evaluation.

    Each openai/sharegpt line is validated before it is written; a run that fails (a tool
    call without its result, say) is skipped and counted by reason. Secrets are redacted
    again. A file is written atomically; --split 0.1 also writes FILE.test by thread.
    """
    from olav.audit.export import FORMATS, ExportOptions, export_runs

    if fmt not in FORMATS:
        raise OlavError(f"unknown format {fmt!r}", hint="Use " + ", ".join(FORMATS))
    flt = _filter(
        outcomes=outcome or (list(TRAINING_OUTCOMES) if fmt != "trajectory" else None),
        agent=agent,
        since=since,
        until=until,
        min_turns=min_turns,
        salvaged=salvaged,
        nudged=nudged,
    )
    if fmt != "trajectory" and not outcome and agent is None:
        # a training set teaches what the person's own runs did right: the nightly jobs'
        # runs are olav's maintenance, asked for by naming their agent
        flt = dataclasses.replace(flt, but_agents=JOB_AGENTS)
    opts = ExportOptions(
        format=fmt, system=system, memories=memories, reasoning=reasoning, split=split, seed=seed
    )
    if split and output == "-":
        raise OlavError("--split writes two files", hint="Pass -o FILE, not stdout")
    path = _audit()
    catalog = _catalog() if fmt != "trajectory" else {}
    target: Any = sys.stdout if output == "-" else Path(output)
    summary = export_runs(path, target, flt=flt, opts=opts, catalog=catalog)
    if as_json:
        text = json.dumps(summary.to_json(), ensure_ascii=False, indent=2)
        if output == "-":  # the data has stdout
            sys.stderr.write(text + "\n")
        else:
            print_json(summary.to_json())
        return
    mark = "[green]✓[/]" if summary.exported else "[yellow]![/]"
    err_console.print(f"{mark} {escape(summary.one_line())}", soft_wrap=True)


def _counted_by(stats: dict[str, Any]) -> str:
    """Who counted a run's tokens, when it was not the engine's own usage."""
    if stats.get("tokens_estimated"):
        return " (estimated)"
    return " (the engine's tokenizer)" if stats.get("counted_by") == "tokenizer" else ""
