"""``olav init``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from olav.cli.common import console


def init(
    directory: Path = typer.Argument(Path("."), help="Where to create the workspace."),
    no_prime: bool = typer.Option(False, "--no-prime", help="Do not load guides into memory."),
    memory_uri: str = typer.Option(
        "",
        "--memory-uri",
        help="Keep memory in a table the team shares, e.g. s3://team-bucket/olav/netops "
        "(credentials from AWS_* variables; sets memory.uri).",
    ),
    memory_endpoint: str = typer.Option(
        "",
        "--memory-endpoint",
        help="S3-compatible endpoint for --memory-uri, e.g. http://minio:9000.",
    ),
    reset_config: bool = typer.Option(
        False,
        "--reset-config",
        help="Write the default olav.yaml (the current one is kept in .olav/backups/).",
    ),
) -> None:
    """Create a workspace (or refresh one): config, agents, memory and the audit database."""
    from olav.admin.setup import init_workspace, memory_uri_settings

    memory = memory_uri_settings(memory_uri, memory_endpoint) if memory_uri else None
    with console.status("Creating the workspace and priming guides into memory…"):
        report = init_workspace(
            directory, prime=not no_prime, memory=memory, reset_config=reset_config
        )
    verb = "Created" if report.created else "Refreshed"
    console.print(f"[green]✓[/] {verb} workspace [bold]{report.root}[/]")
    if report.config_reset:
        console.print(f"  olav.yaml is the default again; yours is in [cyan]{report.backups[0]}[/]")
    if report.copied:
        console.print(f"  {len(report.copied)} template files copied")
    for rel in report.refreshed:
        console.print(f"  refreshed [cyan]{rel}[/] (backup in .olav/backups/)")
    for rel in report.kept_edited:
        console.print(f"  kept your edited [cyan]{rel}[/]")
    if report.reprimed_for_embedder:
        console.print(
            "  the embedder changed; only template guides existed, so they were re-primed"
        )
    if report.primed is not None:
        s = report.primed
        console.print(
            f"  guides in memory: {len(s.added)} added, {len(s.updated)} updated, "
            f"{len(s.unchanged)} unchanged, {len(s.pruned)} pruned"
        )
        for err in s.errors:
            console.print(f"  [red]✗[/] {escape(err.one_line())}", soft_wrap=True)
    shown = report.root if report.root != Path.cwd().resolve() else Path(".")
    console.print("\nNext steps:")
    if shown != Path("."):
        console.print(f"  cd {shown}")
    console.print('  olav memory search "备份路由器配置"   # see what memory recalls')
    console.print("  ollama pull qwen3:8b                # the default chat model")
    console.print("  olav                                # chat")
    console.print("  olav doctor                         # check the set-up")
