"""``olav agent``: list and install agent folders."""

from __future__ import annotations

import shutil
import tarfile
import tempfile
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


def _check_tools(folder: Path, tools: list[str]) -> None:
    """An agent that lists a tool olav does not have would fail every run it is asked to
    make: refused at install, naming the tools there are."""
    from olav.compose import known_tools, unknown_tools

    unknown = unknown_tools(tools)
    if unknown:
        names = ", ".join(repr(n) for n in unknown)
        raise OlavError(
            f"{folder / 'SKILL.md'}: tools lists {names}, which olav does not have",
            hint="Known tools: " + ", ".join(known_tools()),
        )


def _unpack(source: Path, tmp: Path) -> Path:
    if source.is_dir():
        return source
    if source.name.endswith((".tar.gz", ".tgz")) and source.is_file():
        with tarfile.open(source) as tar:
            tar.extractall(tmp, filter="data")
        found = [p.parent for p in tmp.rglob("SKILL.md")]
        if len(found) != 1:
            raise OlavError(f"{source} must hold exactly one folder with a SKILL.md")
        return found[0]
    raise OlavError(f"{source} is not a skill folder or .tar.gz", hint="Pass a folder or archive")


@app.command("install")
def install(
    source: Path = typer.Argument(..., help="A skill folder or a .tar.gz of one."),
    force: bool = typer.Option(False, "--force", help="Replace an existing agent folder."),
) -> None:
    """Validate a skill folder, copy it into the workspace and prime its guides."""
    from olav.admin.setup import open_store_for_priming
    from olav.memory.ingest.guides import find_guides, import_guides, load_guide
    from olav.runtime.skills import load_agent

    ws = open_workspace()
    with tempfile.TemporaryDirectory() as tmp:
        folder = _unpack(source, Path(tmp))
        agent = load_agent(folder)
        _check_tools(folder, agent.spec.tools)
        for guide in find_guides(folder):
            load_guide(guide)  # fail before copying anything
        dest = ws.root / agent.name
        if dest.exists() and not force:
            raise OlavError(f"agent {agent.name} already exists", hint="Use --force to replace it")
        store, reprimed = open_store_for_priming(ws)
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(folder, dest)
    summary = import_guides(store, find_guides(dest), base=ws.root, prune_under=dest)
    tools = counted(len(agent.spec.tools), "tool")
    console.print(f"[green]✓[/] installed agent [bold]{agent.name}[/] ({tools})")
    if reprimed:
        from olav.admin.setup import prime_guides

        prime_guides(ws, store)
        console.print("  the embedder changed; template guides were re-primed")
    console.print(f"  guides primed: {len(summary.added)} added, {len(summary.updated)} updated")


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
