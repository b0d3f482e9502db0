"""The ``olav`` command. Heavy libraries are imported inside commands, never at start-up."""

from __future__ import annotations

import os

import typer

from olav import __version__
from olav.cli import agent, bench, chat, cron, doctor, engine, init, kb, learn, log, memory, threads
from olav.cli import mcp as mcp_cmd
from olav.cli import serve as serve_cmd


def _flags_without_type() -> None:
    """``--help`` shows no ``<bool>`` after a flag (typer 0.29 writes the type of every
    option, a flag's included: ``--json <bool>`` reads as if it took a value)."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: object) -> str | None:
        return None if self.is_flag and self.metavar is None else shown(self, ctx)  # type: ignore[arg-type]

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_without_type()

app = typer.Typer(
    name="olav",
    help="olav: an agent platform for local small models, steered by memory.\n\n"
    "Run `olav` with no command inside a workspace to chat.",
    no_args_is_help=False,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish)
    rich_markup_mode="rich",
)
app.command("init")(init.init)
app.command("doctor")(doctor.doctor)
app.command("config")(doctor.show_config)
app.command("chat")(chat.chat)
app.command("ask")(chat.ask)
app.command("mcp")(mcp_cmd.mcp)
app.add_typer(kb.app, name="kb", help="Knowledge base: guides, export/import, re-embedding.")
app.add_typer(memory.app, name="memory", help="Inspect and manage what is in memory.")
app.add_typer(agent.app, name="agent", help="Install and list agents.")
app.add_typer(learn.app, name="learn", help="Learn from failures on demand.")
app.add_typer(bench.app, name="bench", help="Evaluate memory and tool calls on your set-up.")
app.add_typer(cron.app, name="cron", help="Scheduled jobs: the nightly reflector and friends.")
app.add_typer(threads.app, name="threads", help="Conversations: list, show, search, export.")
app.add_typer(log.app, name="log", help="Audited runs: list, show, export as datasets.")
app.add_typer(engine.app, name="engine", help="A small local model server, for trying olav.")
app.add_typer(
    serve_cmd.app,
    name="serve",
    help="Serve the agents over HTTP (Agent Protocol, OpenAI API); operators' tokens.",
)


def _one_line_summaries(group: typer.Typer) -> None:
    """Each command's line in its group's list: the first paragraph of its docstring on
    one line. In rich markup mode Typer keeps the docstring's line breaks there, so a
    summary broke wherever the source line did."""
    import inspect

    for info in group.registered_commands:
        doc = inspect.getdoc(info.callback) if info.callback else None
        if info.short_help is None and info.help is None and doc:
            info.short_help = " ".join(doc.split("\n\n")[0].split())
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _one_line_summaries(sub.typer_instance)


_one_line_summaries(app)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("olav")
        except PackageNotFoundError:  # run from a checkout that was never installed
            installed = __version__
        typer.echo(f"olav {installed}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
) -> None:
    _state["debug"] = debug or os.environ.get("OLAV_DEBUG", "") in {"1", "true", "yes"}
    if ctx.invoked_subcommand is None:
        chat.chat(agent="core", auto_approve=False, resume_last=False, thread=None)


def main() -> None:
    from olav.cli.common import run_app

    # a fixed name keeps shell completion (_OLAV_COMPLETE) working under any launcher
    run_app(app, "olav", debug=lambda: bool(_state["debug"]), flag="--debug")


if __name__ == "__main__":
    main()
