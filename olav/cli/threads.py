"""``olav threads``: the workspace's conversations (olav.runtime.threads)."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from olav.cli.common import console, err_console, open_workspace, print_json
from olav.core.errors import OlavError

app = typer.Typer(no_args_is_help=True)
EXPORT_FORMATS = ("md", "json")


@contextlib.contextmanager
def open_threads(ws: Any) -> Iterator[Any]:
    """The workspace's thread store, closed when the command ends (its connections too: a
    PostgreSQL server's, where ``olav`` runs inside a longer-lived process)."""
    from olav.runtime.threads import ThreadStore

    store = ThreadStore.for_workspace(ws)
    try:
        yield store
    finally:
        store.close()


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _title(info: Any) -> str:
    return info.name or info.preview or "(empty)"


def render_turns(turns: list[Any], *, width: int = 400) -> list[Text]:
    """Turns as the chat shows them on resume: the person's, the agent's, tools dimmed."""
    out: list[Text] = []
    for t in turns:
        text = t.content if len(t.content) <= width else t.content[: width - 1] + "…"
        if t.role == "user":
            out.append(Text("you> ", style="bold") + Text(text))
        elif t.role == "assistant":
            out.append(Text(text, style="dim" if t.name else ""))
        else:
            out.append(
                Text(
                    f"  [{t.name or 'tool'}] {text.splitlines()[0] if text else ''}"[:200],
                    style="dim",
                )
            )
    return out


@app.command("list")
def list_cmd(
    agent: str | None = typer.Option(None, "--agent", "-a", help="Only this agent's threads."),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="How many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print the threads as JSON."),
) -> None:
    """The conversations, newest first."""
    with open_threads(open_workspace()) as store:
        threads = store.recent(agent=agent, limit=limit)
    if as_json:
        print_json([t.to_json() for t in threads])
        return
    if not threads:
        console.print("no threads yet: every `olav` chat starts one")
        return
    table = Table(box=None, header_style="bold")
    for col in ("id", "agent", "updated", "turns", "title"):
        table.add_column(col, no_wrap=col != "title", overflow="fold")
    for t in threads:
        mark = " (running)" if t.running else ""
        # thread ids are per operator: one made after another operator's has a key of its own
        shown = t.id if t.known_as == t.id else f"{t.id} ({t.owner}'s {t.known_as})"
        table.add_row(shown, t.agent, _when(t.updated_at), str(t.turns), escape(_title(t)) + mark)
    console.print(table)


@app.command("show")
def show_cmd(
    thread: str = typer.Argument(..., help="Thread id (or a unique prefix of it)."),
    last: int | None = typer.Option(None, "--last", min=1, help="Only the last N turns."),
    as_json: bool = typer.Option(False, "--json", help="Print the thread as JSON."),
) -> None:
    """A conversation: the person's messages, the answers and the tool calls."""
    with open_threads(open_workspace()) as store:
        info = store.get(thread)
        turns = store.turns(info.id, last=last)
    if as_json:
        print_json({**info.to_json(), "turns": [_turn_json(t) for t in turns]})
        return
    console.print(
        f"[bold]{escape(_title(info))}[/] · {info.id} · {info.agent} · {info.turns} turns"
    )
    for line in render_turns(turns, width=4000):
        console.print(line, soft_wrap=True)


@app.command("search")
def search_cmd(
    text: str = typer.Argument(..., help="Text to find (case-insensitive)."),
    agent: str | None = typer.Option(None, "--agent", "-a", help="Only this agent's threads."),
    limit: int = typer.Option(20, "--limit", "-n", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print the hits as JSON."),
) -> None:
    """Find text across threads (the person's, the agent's and the tools' messages), with the
    turns around each hit."""
    with open_threads(open_workspace()) as store:
        hits = store.search(text, agent=agent, limit=limit)
    if as_json:
        print_json(
            [
                {
                    "thread": h.thread.id,
                    "title": _title(h.thread),
                    "turn": _turn_json(h.turn),
                    "before": _turn_json(h.before) if h.before else None,
                    "after": _turn_json(h.after) if h.after else None,
                }
                for h in hits
            ]
        )
        return
    if not hits:
        console.print(f"no thread mentions {text!r}", markup=False)
        return
    for h in hits:
        console.print(f"[bold]{h.thread.id}[/] {escape(_title(h.thread))} · turn {h.turn.seq}")
        around = [t for t in (h.before, h.turn, h.after) if t is not None]
        for line in render_turns(around, width=300):
            console.print(Text("  ") + line, soft_wrap=True)


@app.command("rename")
def rename_cmd(
    thread: str = typer.Argument(..., help="Thread id (or a unique prefix of it)."),
    name: str = typer.Argument(..., help="The new name."),
) -> None:
    """Name a conversation (the list shows the name instead of its first message)."""
    if not name.strip():
        raise OlavError("the name is empty", hint="Give the thread a name, e.g. 'ospf change'")
    with open_threads(open_workspace()) as store:
        info = store.rename(thread, name)
    console.print(f"{info.id} is now {info.name!r}", markup=False)


@app.command("rm")
def rm_cmd(
    thread: str = typer.Argument(..., help="Thread id (or a unique prefix of it)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
) -> None:
    """Delete a conversation and its checkpoints (the audit keeps its runs)."""
    with open_threads(open_workspace()) as store:
        info = store.get(thread)
        if not yes:
            if not sys.stdin.isatty():
                raise OlavError(
                    f"deleting thread {info.id} needs a yes", hint="Pass --yes to delete it"
                )
            if not typer.confirm(f"Delete thread {info.id} ({_title(info)}, {info.turns} turns)?"):
                raise typer.Exit(1)
        store.delete(info.id)
        console.print(f"deleted thread {info.id}", markup=False)


@app.command("export")
def export_cmd(
    thread: str = typer.Argument(..., help="Thread id (or a unique prefix of it)."),
    fmt: str = typer.Option("md", "--format", "-f", help="md or json."),
    output: Path | None = typer.Option(None, "--output", "-o", help="File (default: stdout)."),
) -> None:
    """Write a conversation as Markdown or JSON."""
    if fmt not in EXPORT_FORMATS:
        raise OlavError(
            f"unknown --format {fmt!r}", hint=f"Use one of: {', '.join(EXPORT_FORMATS)}"
        )
    with open_threads(open_workspace()) as store:
        info = store.get(thread)
        turns = store.turns(info.id)
    if fmt == "json":
        text = json.dumps(
            {**info.to_json(), "turns": [_turn_json(t) for t in turns]},
            ensure_ascii=False,
            indent=2,
        )
    else:
        text = thread_markdown(info, turns)
    if output is None:
        sys.stdout.write(text + "\n")
        return
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(output)
    err_console.print(f"wrote {output} ({len(turns)} messages)", markup=False)


def thread_markdown(info: Any, turns: list[Any]) -> str:
    lines = [f"# {_title(info)}", "", f"thread {info.id} · agent {info.agent}", ""]
    for t in turns:
        if t.role == "user":
            lines += ["## You", "", t.content, ""]
        elif t.role == "assistant":
            lines += [f"## {info.agent}", "", t.content, ""]
        else:
            lines += [f"### tool {t.name}", "", "```", t.content, "```", ""]
    return "\n".join(lines).rstrip()


def _turn_json(t: Any) -> dict[str, Any]:
    return {"seq": t.seq, "role": t.role, "name": t.name, "content": t.content}
