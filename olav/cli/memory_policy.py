"""``olav memory policy``: the resolved memory policy and where each value comes from."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import typer
from rich.markup import escape

from olav.cli.common import console, open_workspace, print_json


def resolved_policy(ws: Any) -> dict[str, Any]:
    """The workspace's policy as data: every value with its source, and the relevance
    floors recall uses for the configured embedder (default, olav.yaml or the calibration
    file)."""
    from olav.memory.policy import policy_for, policy_rows
    from olav.memory.recall.calibration import floors_and_source, floors_key

    cfg = ws.config
    policy = policy_for(cfg)  # a bad memory.policy key is a one-line error here
    embedder = f"{cfg['embedder.provider']}:{cfg['embedder.model']}"
    key = floors_key(cfg, embedder)
    floors, source = floors_and_source(cfg, embedder, ws.databases)
    rows = [
        {"key": k, "value": v, "source": s}
        for k, v, s in policy_rows(policy)
        if k not in ("floors", "relevance")
    ]
    return {
        "relevance": {
            "mode": policy.relevance,
            "floors_key": key,
            "floors": None if floors is None else dataclasses.asdict(floors),
            "source": source,
        },
        "lesson_dedup": {
            "embedder": embedder,
            "distance": policy.dedup_for(embedder),
            "source": policy.source("lesson_dedup"),
        },
        "values": rows,
    }


def policy_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The memory policy in force: every decision's parameters (routing, relevance floors,
    write decisions, conflicts, lifecycle) and where each value comes from."""
    ws = open_workspace()
    data = resolved_policy(ws)
    if as_json:
        print_json(data)
        return
    here = str(ws.config_path)
    rel = data["relevance"]
    floors = rel["floors"]
    shown = (
        "none (the nearest memories are sent)"
        if floors is None
        else ", ".join(f"{k} {v:g}" for k, v in floors.items())
    )
    console.print(f"[bold]relevance[/] {rel['mode']} · floors for {escape(rel['floors_key'])}:")
    console.print(f"  {shown}  [dim]({escape(rel['source'])})[/]", soft_wrap=True)
    width = max(len(r["key"]) for r in data["values"])
    for row in data["values"]:
        value = row["value"]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if value is None:
            text = _NONE.get(row["key"].split(".")[0], "none")
        source = row["source"].replace(here, ws.config_path.name)  # the full path: --json
        console.print(
            f"{escape(row['key']):<{width}}  {escape(str(text))}  [dim]{escape(source)}[/]",
            soft_wrap=True,
        )
    dedup = data["lesson_dedup"]
    console.print(
        f"lesson dedup for {escape(dedup['embedder'])}: {dedup['distance']:g} "
        f"[dim]({escape(dedup['source'])})[/]"
    )


# what a missing value means, by key
_NONE = {"ttl": "never", "capacity": "unbounded", "lesson_dedup": "auto"}
