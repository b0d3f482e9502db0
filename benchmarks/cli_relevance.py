"""``python -m benchmarks relevance``: today's relevance decision on the relevance corpus,
agent by agent (leave-one-agent-out by construction: nothing was tuned on it), by language and
by kind of request (:mod:`benchmarks.relevance`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from olav.cli.common import console, err_console, print_json, status_progress


def row(name: str, s: dict[str, Any]) -> str:
    """One table row of a group's block figures."""
    cells = [s["requests"], s["in_block"], s["empty"], s["precision"]]
    return f"| {name} | " + " | ".join("—" if c is None else str(c) for c in cells) + " |"


def markdown_relevance(report: dict[str, Any]) -> str:
    """The report's tables, as docs/benchmarks.md shows them."""
    head = (
        "| {} | requests | expected guide in block | unrelated empty | precision |\n"
        "|---|---|---|---|---|"
    )
    c = report["corpus"]
    lines = [
        f"Corpus: {c['agents']} agents, {c['guides']} guides, {c['requests']} requests, "
        f"{c['pairs']} (request, guide) pairs ({c['relevant pairs']} relevant). "
        f"Embedder {report['embedder']}, tier {report['tier']}, {report['seconds']} s.",
        "",
        head.format("agent (held out)"),
        *(row(a, s) for a, s in report["agents"].items()),
        row("**all**", report["all"]),
        "",
        head.format("language"),
        *(row(lang, s) for lang, s in report["languages"].items()),
        "",
        head.format("kind"),
        *(row(k, s) for k, s in report["kinds"].items()),
    ]
    return "\n".join(lines)


def relevance(as_json: bool = typer.Option(False, "--json", help="The report as JSON.")) -> None:
    """Recall every request of the relevance corpus (benchmarks/data/relevance) against a
    store of its agent's guides, as the agent's AutoRecall would at the small tier, and score
    the blocks: the expected guide in them, empty blocks for unrelated requests, precision."""
    from benchmarks.relevance import run_relevance

    with status_progress(err_console.is_terminal and not as_json) as progress:
        report = run_relevance(progress=progress)
    if as_json:
        print_json(report)
    else:
        console.print(markdown_relevance(report), markup=False, highlight=False)


def relevance_model(
    write: bool = typer.Option(
        False, "--write", help="Write the shipped model (olav/memory/recall/data)."
    ),
    as_json: bool = typer.Option(False, "--json", help="The report as JSON."),
) -> None:
    """Fit the learned relevance decision on the relevance corpus and report it leave-one-
    agent-out and leave-one-language-out (``make relevance-model`` writes the model)."""
    from benchmarks.relevance_model import run

    with status_progress(err_console.is_terminal and not as_json) as progress:
        report = run(write, progress=progress)
    if as_json:
        print_json(report)
    else:
        console.print(markdown_model(report), markup=False, highlight=False)


def markdown_model(report: dict[str, Any]) -> str:
    """The held-out tables of a fit, as docs/benchmarks.md shows them."""
    lines = []
    for split in ("leave one agent out", "leave one language out"):
        part = report[split]
        lines += [
            f"**{split}** (thresholds chosen without the held-out group: "
            + ", ".join(f"{k} {v:g}" for k, v in part["thresholds"].items())
            + ")",
            "",
            *_table("held out", part.get("agents") or part["languages"], part["all"]),
            "",
            *_table("language", part["languages"], None),
            "",
            *_table("kind", part["kinds"], None),
            "",
        ]
    shipped = ", ".join(f"{k} {v['threshold']:g}" for k, v in report["shipped"].items())
    lines.append(f"Shipped thresholds: {shipped}. {report['seconds']} s.")
    return "\n".join(lines)


def _table(name: str, groups: dict[str, Any], total: dict[str, Any] | None) -> list[str]:
    out = [
        f"| {name} | requests | expected guide in block | unrelated empty | precision |",
        "|---|---|---|---|---|",
        *(row(k, v) for k, v in groups.items()),
    ]
    if total is not None:
        out.append(row("**all**", total))
    return out


def reask(
    base_url: str = typer.Option(..., "--base-url", help="The engine's OpenAI-compatible /v1."),
    model: str = typer.Option("local", "--model", help="The model name to send."),
    repeat: int = typer.Option(12, "--repeat", help="Rounds of the four broken replies."),
) -> None:
    """The constrained re-ask on a real engine (benchmarks.reask): schema-valid calls of
    every re-ask and the time it adds, as JSON."""
    from benchmarks.reask import run_reask

    print_json(run_reask(base_url, model, repeat=repeat))


def placement(
    base_url: str = typer.Option(..., "--base-url", help="The engine's OpenAI-compatible /v1."),
    workspace: Path = typer.Option(..., "--workspace", help="A workspace (its guides, embedder)."),
    model: str = typer.Option("smollm2", "--model", help="The model name to send."),
) -> None:
    """Where the block goes (benchmarks.placement): right answers to guide-only questions
    with no block, the block before the request, in the system prompt, or after it."""
    from benchmarks.placement import run_placement

    print_json(run_placement(base_url, workspace, model))


def register(app: typer.Typer) -> None:
    app.command("relevance")(relevance)
    app.command("relevance-model")(relevance_model)
    app.command("reask")(reask)
    app.command("placement")(placement)
    app.command("client-tools")(client_tools)
    app.command("first-delta")(first_delta)


def client_tools(
    limit: int = typer.Option(0, "--limit", help="Only the first N fixtures (0: all)."),
    corpus: Path = typer.Option(None, "--corpus", help="A toolcalls corpus instead of the suite."),
) -> None:
    """olav as the model of a client's loop (benchmarks.client_tools): CanIToolCall's model
    outputs as the engine's, the client's calls structured and schema-valid, and the added
    p50 over a direct call to the engine."""
    from benchmarks.client_tools import run_client_tools

    print_json(run_client_tools(limit or None, corpus))


def first_delta(
    home: Path = typer.Option(Path(".cache/engine"), "--home", help="The engine's folder."),
    rounds: int = typer.Option(5, "--rounds", help="Requests of each kind."),
    real: bool = typer.Option(False, "--real", help="llama.cpp's server and SmolLM2."),
) -> None:
    """The first answer delta on /v1 and on the Agent Protocol, same run, real engine
    (benchmarks.first_delta)."""
    from benchmarks.first_delta import run_first_delta

    print_json(run_first_delta(home, rounds, real=real))
