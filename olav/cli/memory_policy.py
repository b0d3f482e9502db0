"""``olav memory policy``: the resolved memory policy and where each value comes from."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import typer
from rich.markup import escape

from olav.cli.common import console, open_workspace, print_json


def resolved_policy(ws: Any) -> dict[str, Any]:
    """The workspace's policy as data: every value under the olav.yaml key that sets it, with
    its source (``default``, ``olav.yaml``, an ``OLAV_*`` variable), the built-in values,
    and the relevance floors recall uses for the configured embedder (default, olav.yaml or
    ``calibration``: the workspace's calibration file)."""
    from olav.memory.policy import display_rows, policy_for, source_label
    from olav.memory.recall.calibration import WORKSPACE_FILE, floors_and_source, floors_key

    cfg = ws.config
    policy = policy_for(cfg)  # a bad memory.policy key is a one-line error here
    embedder = f"{cfg['embedder.provider']}:{cfg['embedder.model']}"
    key = floors_key(cfg, embedder)
    floors, source = floors_and_source(cfg, embedder, ws.databases)
    relevance: dict[str, Any] = {
        "key": "memory.relevance",
        "mode": policy.relevance,
        "floors_key": key,
        "floors": None if floors is None else dataclasses.asdict(floors),
    }
    if source.endswith(WORKSPACE_FILE):
        relevance.update(source="calibration", file=source)
    elif source == "none calibrated":  # auto, and no floors for this embedder
        relevance["source"] = source_label(policy.source("relevance"), policy.relevance != "auto")
    else:
        relevance["source"] = source_label(source)
    settable, built_in = display_rows(policy)
    dedup_changed = policy.lesson_dedup is not None
    return {
        "relevance": relevance,
        "lesson_dedup": {
            "key": "memory.dedup_distance",
            "embedder": embedder,
            "distance": policy.dedup_for(embedder),
            "source": source_label(policy.source("lesson_dedup"), dedup_changed),
        },
        "values": [{"key": k, "value": v, "source": s} for k, v, s in settable],
        "built_in": [{"name": n, "value": v} for n, v in built_in],
    }


def policy_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The memory policy in force: every decision's parameters (routing, relevance floors,
    write decisions, conflicts, lifecycle), each under its olav.yaml key, and where each
    value comes from."""
    ws = open_workspace()
    data = resolved_policy(ws)
    if as_json:
        print_json(data)
        return
    rel = data["relevance"]
    floors = rel["floors"]
    shown = (
        "none (the nearest memories are sent)"
        if floors is None
        else ", ".join(f"{k} {v:g}" for k, v in floors.items())
    )
    where = rel["source"]
    if "file" in rel:
        where += ": " + _relative(rel["file"], ws.root)
    console.print(
        f"[bold]memory.relevance[/] {rel['mode']} · floors for {escape(rel['floors_key'])}:"
    )
    console.print(f"  {shown}  [dim]({escape(where)})[/]", soft_wrap=True)
    rows = data["values"]
    width = max(len(r["key"]) for r in rows)
    for row in rows:
        console.print(
            f"{escape(row['key']):<{width}}  {escape(_text(row))}  "
            f"[{_style(row['source'])}]{escape(row['source'])}[/]",
            soft_wrap=True,
        )
    dedup = data["lesson_dedup"]
    console.print(
        f"{dedup['key']:<{width}}  {dedup['distance']:g} for {escape(dedup['embedder'])}  "
        f"[{_style(dedup['source'])}]{escape(dedup['source'])}[/]",
        soft_wrap=True,
    )
    console.print("[bold]built in[/] [dim](no olav.yaml key)[/]")
    for item in data["built_in"]:
        console.print(f"  {escape(item['name'])}  {escape(_text(item))}", soft_wrap=True)


def _text(row: dict[str, Any]) -> str:
    value = row["value"]
    if value is None:
        name = row.get("key") or row.get("name") or ""
        return next((v for k, v in _NONE.items() if f".{k}." in f".{name}"), "none")
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _style(source: str) -> str:
    return "dim" if source == "default" else "cyan"


def _relative(path: str, root: Any) -> str:
    from pathlib import Path

    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


# what a missing value means, by the key's section
_NONE = {"ttl_days": "never", "capacity": "unbounded"}
