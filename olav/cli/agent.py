"""``olav agent``: list, install and remove agent folders. What an install refuses and how it
stays atomic is olav/admin/skill_install.py's; this module shows what it did."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from olav.cli.common import console, counted, open_workspace, print_json
from olav.core.errors import OlavError

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_agents(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show the workspace's agents, their tools and guides."""
    from olav.runtime.skills import load_agent

    ws = open_workspace()
    agents = [load_agent(d) for d in ws.agent_dirs()]
    rows: list[dict[str, Any]] = [
        {
            "name": a.name,
            "role": "orchestrator" if a.name == "core" else "sub-agent",
            "tools": a.spec.tools,
            "guides": len(list((a.folder / "guides").glob("*.guide.yaml"))),
            "description": a.spec.description,
        }
        for a in agents
    ]
    if as_json:
        print_json(rows)
        return
    table = Table(box=None, pad_edge=False)
    for col in ("agent", "role", "tools", "guides", "description"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["name"], r["role"], ", ".join(r["tools"]), str(r["guides"]), r["description"]
        )
    console.print(table)


@app.command("install")
def install(
    source: Path = typer.Argument(..., help="A skill folder or a .tar.gz of one."),
    force: bool = typer.Option(
        False, "--force", help="Replace an existing agent folder olav installed."
    ),
) -> None:
    """Validate a skill folder, copy it into the workspace and prime its guides.

    A skill is untrusted input: links out of it, device files, archives past 2,000 files or
    50 MB, and names of workspace folders are refused; nothing is left behind by a failure."""
    from olav.admin.skill_install import install_skill

    done = install_skill(open_workspace(), source, force=force)
    for folder in done.restored:
        console.print(f"[yellow]![/] put back {folder}, left aside by an install that was killed")
    if done.cleared:
        left = counted(len(done.cleared), "staging folder")
        console.print(f"  removed {left} of killed installs")
    tools = counted(len(done.agent.spec.tools), "tool")
    console.print(f"[green]✓[/] installed agent [bold]{done.agent.name}[/] ({tools})")
    if done.reprimed:
        console.print("  the embedder changed; template guides were re-primed")
    added, updated = len(done.summary.added), len(done.summary.updated)
    console.print(f"  guides primed: {added} added, {updated} updated")


@app.command("remove")
def remove(
    name: str = typer.Argument(..., help="The agent to remove (see `olav agent list`)."),
) -> None:
    """Remove an agent: its folder, and its guides from memory. Memories the agent learned or
    was told (precedents, lessons, facts in its scope) stay, as after any change of guides."""
    from olav.admin.setup import open_store_for_priming
    from olav.memory.ingest.guides import import_guides
    from olav.runtime.skills import load_agents

    ws = open_workspace()
    agents = load_agents(ws)
    if name not in agents:
        known = ", ".join(sorted(agents)) or "none"
        raise OlavError(f"no agent named {name!r}", hint=f"The agents are: {known}")
    if name == "core":
        raise OlavError(
            "core is the orchestrator every chat starts with; it cannot be removed",
            hint="Edit core/SKILL.md to change what it does",
        )
    if name in ws.config.agents:
        raise OlavError(
            f"{ws.config_path}: agents.{name} configures this agent",
            hint=f"Delete the agents.{name} section of olav.yaml first",
        )
    folder = agents[name].folder
    store, _ = open_store_for_priming(ws)
    # the folder moves aside first (one rename), so the guides it held are gone from disk
    # when memory is pruned; a prune that fails puts it back, and nothing is half removed
    aside = folder.with_name(f".{folder.name}.removing")
    folder.rename(aside)
    try:
        summary = import_guides(store, [], base=ws.root, prune_under=folder)
    except BaseException:
        aside.rename(folder)
        raise
    shutil.rmtree(aside)
    retired = counted(len(summary.pruned), "guide")
    console.print(f"[green]✓[/] removed agent [bold]{name}[/] ({retired} retired)")
