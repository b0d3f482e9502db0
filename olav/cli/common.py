"""Helpers shared by the command modules: the console, JSON output, opening the workspace."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console, ConsoleDimensions

# the width of output that is not a terminal (a pipe, a file) when COLUMNS does not say: wide
# enough that a table's last column (`olav log list`'s query) is not cut to a few letters
PIPE_WIDTH = 200


class _Console(Console):
    """rich's Console, but output that goes to a pipe or a file is not drawn 80 columns wide
    (rich's default there, or the width of whatever terminal stdin happens to be): it takes
    COLUMNS when that is set, else :data:`PIPE_WIDTH`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._first_width = self._width  # rich's own reading of COLUMNS, once

    @property
    def size(self) -> ConsoleDimensions:
        got = super().size
        if self._width != self._first_width or self.is_terminal:  # a width set since wins
            return got
        columns = os.environ.get("COLUMNS", "")  # now, not when the module was imported
        width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
        return ConsoleDimensions(width, got.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


console = _Console(highlight=False, soft_wrap=False)
err_console = _Console(stderr=True, highlight=False)


def counted(n: int, noun: str, plural: str = "") -> str:
    """``1 turn``, ``2 turns``: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def rows_table(title: str, rows: tuple[list[str], list[list[str]]]) -> Any:
    """A rich table from (header, rows), the rows the Markdown writers use; the first column
    left, the others right."""
    from rich.markup import escape
    from rich.table import Table

    head, body = rows
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(head):
        table.add_column(name, justify="left" if i == 0 else "right", overflow="fold")
    for row in body:
        table.add_row(*(escape(cell.replace("**", "")) for cell in row))
    return table


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def open_workspace() -> Any:
    from olav.core.config import Workspace

    return Workspace.open()


def open_store(ws: Any | None = None) -> Any:
    from olav.memory.store.table import MemoryStore

    return MemoryStore.for_workspace(ws or open_workspace())


def memory_actor(ws: Any) -> Any:
    """The terminal's operator as the actor of memory operations and imports
    (olav.memory.lifecycle.ops.Actor): audited as ``user``, by ``cli``, reading what this
    operator may read."""
    from olav.audit.recorder import AuditRecorder
    from olav.memory.lifecycle.ops import Actor
    from olav.memory.store.scopes import Reader

    return Actor("user", "cli", Reader.of(ws.config), AuditRecorder(ws.audit_path))


def progress_bar(description: str, total: int | None) -> Any:
    """A bar on stderr with the count, the rate (items/s) and the time left."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("-/s" if speed is None else f"{speed:.1f}/s", style="progress.data.speed")

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )


@contextlib.contextmanager
def status_progress(show: bool) -> Iterator[Callable[[str], None] | None]:
    """A spinner on stderr and the callback that updates its text; None when not shown."""
    if not show:
        yield None
        return
    with err_console.status("starting") as status:
        yield status.update


def run_app(app: Any, prog_name: str, *, debug: Callable[[], bool], flag: str) -> None:
    """Run a typer ``app`` with olav's error handling: an OlavError is its one red line and
    its exit status, Ctrl-C is 130, anything else one line and 2. ``debug()`` (read after the
    command parsed its options): the traceback instead; ``flag`` says how to ask for it."""
    from rich.text import Text

    from olav.core.errors import OlavError
    from olav.core.log import quiet_native_libraries

    quiet_native_libraries()
    try:
        app(prog_name=prog_name)
    except OlavError as exc:
        if debug():
            raise
        err_console.print(Text("error: ", style="bold red") + Text(exc.one_line()), soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]")
        sys.exit(130)
    except Exception as exc:
        if debug():
            raise
        err_console.print(
            Text("internal error: ", style="bold red")
            + Text(f"{type(exc).__name__}: {exc}. Run again with {flag} for the traceback"),
            soft_wrap=True,
        )
        sys.exit(2)
