"""``olav kb``: guides, JSONL export/import, re-embedding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from olav.cli import drafts
from olav.cli.common import (
    console,
    memory_actor,
    open_store,
    open_workspace,
    print_json,
    progress_bar,
)
from olav.core.errors import OlavError

app = typer.Typer(no_args_is_help=True)
app.add_typer(
    drafts.app, name="drafts", help="Drafts and fix proposals waiting for you: list, show, confirm."
)


@app.command("import-guides")
def import_guides_cmd(
    directory: Path | None = typer.Argument(
        None, help="Folder to import (default: every agent folder of the workspace)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """(Re)load every *.guide.yaml into memory. Unchanged guides write nothing."""
    from olav.memory.ingest.guides import find_guides, import_guides

    ws = open_workspace()
    store = open_store(ws)
    if directory is not None:
        if not directory.is_dir():
            raise OlavError(f"{directory} is not a folder", hint="Pass a folder of *.guide.yaml")
        files, prune = find_guides(directory), directory
    else:
        files = [f for d in ws.agent_dirs() for f in find_guides(d)]
        prune = ws.root
    with progress_bar("Importing guides", len(files)) as bar:
        task = bar.add_task("Importing guides", total=len(files))
        summary = import_guides(
            store,
            files,
            base=ws.root,
            prune_under=prune,
            progress=lambda n: bar.advance(task, n),
        )
    if as_json:
        print_json(summary.to_json())
    else:
        for err in summary.errors:
            console.print(f"[red]✗[/] {escape(err.one_line())}", soft_wrap=True)
        console.print(
            f"{len(files)} guide files: [green]{len(summary.added)} added[/], "
            f"{len(summary.updated)} updated, {len(summary.unchanged)} unchanged, "
            f"{len(summary.pruned)} pruned, "
            + (f"[red]{len(summary.errors)} errors[/]" if summary.errors else "0 errors")
        )
    if summary.errors:
        raise typer.Exit(1)


@app.command("export")
def export_cmd(file: Path = typer.Argument(..., help="Destination .jsonl file.")) -> None:
    """Write every memory row you may read, vectors included, to a JSONL file (on a team
    table, not another operator's private rows)."""
    from olav.memory.ingest.transfer import export_jsonl
    from olav.memory.store.scopes import Reader

    ws = open_workspace()
    n = export_jsonl(open_store(ws), file, reader=Reader.of(ws.config))
    console.print(f"[green]✓[/] exported {n} rows to {file}")


@app.command("import")
def import_cmd(
    file: Path = typer.Argument(
        ..., help="A .jsonl file written by `olav kb export`, or a .md/.txt document."
    ),
    agent: str = typer.Option("core", "--agent", help="Documents: the agent they belong to."),
    scope: str | None = typer.Option(
        None, "--scope", help="Documents: global, an agent or team:<id> (default from --agent)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import memory rows from a JSONL export, or a Markdown/text document as ~500-token
    chunks plus a summary guide. Re-importing a document replaces its rows."""
    from olav.memory.ingest.documents import DOCUMENT_SUFFIXES, ImportProgress, import_document_file

    suffix = file.suffix.lower()
    if suffix != ".jsonl" and suffix not in DOCUMENT_SUFFIXES:
        raise OlavError(
            f"{file}: cannot import {suffix or 'a file without a suffix'}",
            hint="Pass a .jsonl export (`olav kb export FILE.jsonl`) or a "
            + "/".join(DOCUMENT_SUFFIXES)
            + " document",
        )
    ws = open_workspace()
    store = open_store(ws)
    if suffix == ".jsonl":
        from olav.memory.ingest.transfer import import_jsonl

        result = import_jsonl(store, file)
        if as_json:
            print_json({"added": len(result.added), "updated": len(result.updated)})
            return
        console.print(
            f"[green]✓[/] imported {len(result.added) + len(result.updated)} rows from {file} "
            f"({len(result.added)} new, {len(result.updated)} replaced)"
        )
        return
    with progress_bar(f"Importing {file.name}", None) as bar:
        task = bar.add_task(f"Importing {file.name}", total=None)
        doc = import_document_file(
            store,
            file,
            base=ws.root,
            agent=agent,
            scope=scope,
            progress=ImportProgress(
                total=lambda n: bar.update(task, total=n),
                advance=lambda n: bar.advance(task, n),
            ),
            actor=memory_actor(ws),
        )
    _report_import(
        doc.to_json(),
        as_json=as_json,
        line=f'imported "{doc.title}" from {file}: {len(doc.chunk_ids)} chunks + summary '
        f"guide {doc.summary_id} ({len(doc.added)} new, {len(doc.updated)} replaced, "
        f"{len(doc.unchanged)} unchanged, {len(doc.removed)} removed)",
    )


def _report_import(summary: dict[str, Any], *, as_json: bool, line: str) -> None:
    """An import's summary: JSON, or one green line (the library audited it)."""
    if as_json:
        print_json(summary)
    else:
        console.print(f"[green]✓[/] {line}", soft_wrap=True)


@app.command("import-chat")
def import_chat_cmd(
    file: Path = typer.Argument(
        ..., help='A .jsonl (or .json list) of {"speaker", "text", "time"?, "session"?}.'
    ),
    scope: str = typer.Option("global", "--scope", help="global, an agent or team:<id>."),
    session_gap: float = typer.Option(
        4.0, "--session-gap", help="Hours of silence that start a new session (no 'session')."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import a conversation transcript: one memory per message, each with the messages
    around it as context and its date, so recall finds it by words, surroundings and time.
    Re-importing the same file replaces its rows."""
    from olav.memory.ingest.chatlog import import_chat

    if session_gap <= 0:
        raise OlavError(f"--session-gap must be positive, got {session_gap}")
    ws = open_workspace()
    store = open_store(ws)
    with progress_bar(f"Importing {file.name}", None) as bar:
        task = bar.add_task(f"Importing {file.name}", total=None)
        result = import_chat(
            store,
            file,
            base=ws.root,
            scope=scope,
            session_gap_hours=session_gap,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            actor=memory_actor(ws),
        )
    _report_import(
        result.to_json(),
        as_json=as_json,
        line=f"imported {result.messages} messages in {result.sessions} session(s) "
        f"from {file} ({len(result.added)} new, {len(result.updated)} replaced, "
        f"{result.removed} removed)",
    )


@app.command("re-embed")
def reembed_cmd(
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Rebuild memory with the configured embedder; the old table is kept as a backup."""
    from olav.memory.store.embedders import make_embedder
    from olav.memory.store.remote import memory_location
    from olav.memory.store.table import reembed

    ws = open_workspace()
    embedder = make_embedder(ws.config)
    if not yes:
        typer.confirm(
            f"Re-embed every memory row with {embedder.name} ({embedder.dim}-d)?", abort=True
        )
    with progress_bar("Re-embedding", None) as bar:
        task = bar.add_task("Re-embedding", total=None)
        rows, backup = reembed(
            memory_location(ws),
            embedder,
            progress=lambda d, t: bar.update(task, completed=d, total=t),
        )
    console.print(f"[green]✓[/] re-embedded {rows} rows with {embedder.name}")
    console.print(f"  the previous table is kept as [bold]{backup}[/]; delete it with")
    console.print(f"  olav kb drop-backup {backup}")


@app.command("backups")
def backups_cmd() -> None:
    """List memory tables kept by `olav kb re-embed`."""
    from olav.memory.store.table import MemoryStore

    names = MemoryStore.for_workspace(open_workspace()).backups()
    if not names:
        console.print("no backups")
    for name in names:
        console.print(name)


@app.command("drop-backup")
def drop_backup_cmd(
    name: str,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Delete a backup table kept by `olav kb re-embed`."""
    from olav.memory.store.remote import memory_location
    from olav.memory.store.table import drop_backup

    ws = open_workspace()
    if not yes:
        typer.confirm(f"Delete backup {name} for good?", abort=True)
    drop_backup(memory_location(ws), name)
    console.print(f"[green]✓[/] deleted {name}")


@app.command("extract-patterns")
def extract_patterns_cmd(
    scope: str | None = typer.Option(None, "--scope", help="Only this scope (an agent)."),
    min_samples: int = typer.Option(5, "--min-samples", min=2, help="Events per tool needed."),
    window_days: int = typer.Option(30, "--window-days", min=1, help="Look back this far."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the groups; call no model."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """L2: distil groups of captured operations into reusable patterns (one model call each)."""
    from olav.learning.patterns import extract_patterns
    from olav.llm.models import workspace_chat_model

    ws = open_workspace()
    store = open_store(ws)
    results = extract_patterns(
        store,
        workspace_chat_model(ws),
        scope=scope,
        min_samples=min_samples,
        window_days=window_days,
        dry_run=dry_run,
    )
    rows: list[dict[str, Any]] = [
        {
            "scope": r.scope,
            "tool": r.tool,
            "samples": r.samples,
            "id": r.memory_id,
            "written": r.written,
            "error": r.error,
        }
        for r in results
    ]
    if as_json:
        print_json(rows)
    else:
        if not rows:
            console.print("no operational events in the window")
        for r in rows:
            state = (
                "[green]written[/]"
                if r["written"]
                else f"[red]rejected[/]: {r['error']}"
                if r["error"]
                else f"[dim]below --min-samples {min_samples}[/]"
                if r["samples"] < min_samples
                else "[dim]dry run[/]"
            )
            console.print(
                f"{r['scope']}/{r['tool']}: {r['samples']} events · {state}", soft_wrap=True
            )
    if any(r.error for r in results):
        raise typer.Exit(1)
