"""``olav bench steer``: what memory does to your own model (tool calls, artifacts, time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from olav.cli.common import console, err_console, open_workspace, print_json, status_progress
from olav.core.errors import ModelError, OlavError


def _table(report: dict[str, Any]) -> Any:
    from rich.table import Table

    from olav.bench.steer import MODES
    from olav.bench.steer_stats import pct

    table = Table(title="memory on vs off", title_justify="left")
    table.add_column("scenario", style="bold", no_wrap=True)
    table.add_column("agent", no_wrap=True)
    table.add_column("memory")
    names: tuple[str, ...] = ("tool called", "tool calls", "artifact", "answered", "salvaged")
    names += ("nudged", "mean s", "p95 s")
    for name in (*names, "errors"):
        table.add_column(name, justify="right")
    for s in report["scenarios"]:
        for mode in MODES:
            m = s[mode]
            table.add_row(
                s["id"] if mode == MODES[0] else "",
                s["agent"] if mode == MODES[0] else "",
                mode,
                pct(m["tool_called"]),
                f"{m['tool_calls_mean']:.2f}",
                pct(m["artifact"]),
                pct(m.get("answered")),
                f"{m.get('salvaged', 0) * 100:.0f}%",
                f"{m.get('nudged', 0) * 100:.0f}%",
                f"{m['seconds_mean']:.1f}",
                f"{m['seconds_p95']:.1f}",
                f"[red]{m['errors']}[/]" if m["errors"] else "0",
                end_section=mode == MODES[-1],
            )
    return table


def _check_server(ws: Any, model: str | None) -> None:
    """Fail fast, in one line, when the Ollama server is down or lacks the model."""
    if ws.config["llm.provider"] != "ollama":
        return  # other providers fail on the first run, through the runtime's translation
    from olav.admin.doctor import check_ollama

    check = check_ollama(ws.config["llm.base_url"], model or ws.config["llm.model"])
    if check.status != "ok":
        raise ModelError(check.detail, hint=check.fix)


def steer(
    scenarios: Path | None = typer.Option(
        None, "--scenarios", help="Scenario YAML file (default: the shipped set)."
    ),
    runs: int = typer.Option(3, "--runs", "-n", min=1, help="Runs per scenario and mode."),
    agent: list[str] = typer.Option(
        [], "--agent", "-a", help="Only the scenarios of this agent (repeatable)."
    ),
    model: str | None = typer.Option(None, "--model", help="Chat model (default: llm.model)."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON."),
) -> None:
    """Run scenarios with memory on and off against the workspace's model.

    Each run uses a throwaway copy of the workspace, so runs never see each other's files or
    memories and the workspace itself is left as it was. See docs/steer.md.
    """
    from olav.bench.steer import DEFAULT_SCENARIOS, load_scenarios, run_steer

    ws = open_workspace()
    path = scenarios or DEFAULT_SCENARIOS
    chosen = load_scenarios(path)
    if agent:
        chosen = [s for s in chosen if s.agent in agent]
        if not chosen:
            raise OlavError(
                f"no scenario in {path} is for agent {', '.join(agent)}",
                hint="Its agents: " + ", ".join(sorted({s.agent for s in load_scenarios(path)})),
            )
    _check_server(ws, model)
    show = err_console.is_terminal and not as_json
    with status_progress(show) as progress:
        report = run_steer(
            ws,
            chosen,
            runs=runs,
            model=model,
            progress=progress,
        )
    report["scenarios_file"] = str(path)
    if as_json:
        print_json(report)
        return
    console.print(
        f"{len(chosen)} scenarios x {runs} runs x memory on/off, model "
        f"{', '.join(report['models'])} ({report['provider']}); each run in a throwaway copy "
        "of the workspace",
        soft_wrap=True,
    )
    console.print(_table(report))
    console.print(report["summary"]["line"], soft_wrap=True, markup=False)
    console.print(f"[dim]total {report['seconds']}s[/]")


def register(app: typer.Typer) -> None:
    """Add the ``steer`` command to ``olav bench``."""
    app.command("steer")(steer)
