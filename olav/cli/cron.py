"""``olav cron``: enable, list, run and serve scheduled jobs (the nightly reflector and friends)."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from olav.cli.common import console, err_console, open_workspace, print_json
from olav.core.errors import OlavError
from olav.core.fsutil import atomic_write_text

app = typer.Typer(no_args_is_help=True)

_NOT_RUNNING = (
    "the cron daemon is not running, so no job will fire: start it with `olav cron serve`, "
    "or install it as a service with `olav cron install`"
)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M %Z").strip() if value else "-"


def _next_run(spec: Any, now: datetime) -> tuple[datetime | None, str | None]:
    """(next run, error) for a job; disabled jobs have no next run."""
    from olav.cron import CronExpressionError
    from olav.cron.expression import next_fire

    if not spec.enabled:
        return None, None
    try:
        return next_fire(spec.schedule, now), None
    except CronExpressionError as exc:
        return None, exc.one_line()


@app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print the jobs as JSON.")) -> None:
    """Show every job: schedule, enabled, next run and last result."""
    from olav.cron.expression import local_timezone
    from olav.cron.jobfile import jobs_path, list_jobs
    from olav.cron.scheduler import daemon_pid

    ws = open_workspace()
    specs = list_jobs(ws)
    pid = daemon_pid(ws)
    now = datetime.now(local_timezone())
    rows = []
    for spec in specs:
        nxt, problem = _next_run(spec, now)
        rows.append((spec, nxt, problem))
    if as_json:
        jobs = []
        for spec, nxt, problem in rows:
            item = spec.to_json()
            item["next_run"] = nxt.isoformat(timespec="seconds") if nxt else None
            if problem:
                item["error"] = problem
            jobs.append(item)
        print_json(
            {
                "daemon": {"running": pid is not None, "pid": pid or None},
                "jobs_file": str(jobs_path(ws)),
                "jobs": jobs,
            }
        )
        return

    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("job", "schedule", "enabled", "next run"):
        table.add_column(column, no_wrap=True)
    table.add_column("last result")
    for spec, nxt, problem in rows:
        last = spec.last_result
        if last is None:
            last_text = "[dim]never run[/]"
        else:
            colour = "green" if last.ok else "red"
            at = last.at[:16].replace("T", " ")
            last_text = f"[{colour}]{last.status}[/] {escape(at)} {escape(last.message)}"
        table.add_row(
            escape(spec.name) + ("" if spec.builtin else " [dim](custom)[/]"),
            escape(spec.schedule),
            "[green]yes[/]" if spec.enabled else "no",
            f"[red]{escape(problem)}[/]" if problem else _when(nxt),
            last_text,
        )
    console.print(table)
    if pid is not None:
        console.print(f"[dim]daemon running (pid {pid or '?'})[/]")
    elif any(spec.enabled for spec in specs):
        err_console.print(f"[yellow]note:[/] {escape(_NOT_RUNNING)}", soft_wrap=True)


@app.command("enable")
def enable_cmd(
    name: str = typer.Argument(..., help="A built-in job (reflect, trace-learn, ...) or yours."),
    at: str | None = typer.Option(
        None,
        "--at",
        help='Cron expression, e.g. "0 4 * * *" (day-of-week 0 or 7 = Sunday). '
        "Default: the job's current or built-in schedule.",
    ),
    target: str | None = typer.Option(
        None,
        "--target",
        help="For a custom job: module:function, called as function(workspace) -> summary.",
    ),
) -> None:
    """Enable a job (a running `olav cron serve` picks it up within seconds)."""
    from olav.cron.expression import local_timezone, next_fire
    from olav.cron.jobfile import enable_job
    from olav.cron.scheduler import daemon_pid

    ws = open_workspace()
    spec = enable_job(ws, name, schedule=at, target=target)
    nxt = next_fire(spec.schedule, datetime.now(local_timezone()))
    console.print(
        f"[green]✓[/] {escape(spec.name)} enabled: {escape(spec.schedule)} (next run {_when(nxt)})"
    )
    if daemon_pid(ws) is None:
        err_console.print(f"[yellow]note:[/] {escape(_NOT_RUNNING)}", soft_wrap=True)


@app.command("disable")
def disable_cmd(name: str = typer.Argument(..., help="The job to disable.")) -> None:
    """Disable a job (its schedule and last result are kept)."""
    from olav.cron.jobfile import disable_job

    spec = disable_job(open_workspace(), name)
    console.print(f"[green]✓[/] {escape(spec.name)} disabled")


@app.command("run")
def run_cmd(
    name: str = typer.Argument(..., help="The job to run now."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Run a job now, in this process, and record its result (exit 1 if it failed)."""
    from olav.cron.jobs import run_job

    result = run_job(open_workspace(), name, source="cli")
    if as_json:
        print_json({"job": result.job, **result.to_json()})
    elif result.ok:
        console.print(
            f"[green]✓[/] {escape(name)} ({result.duration_s:.1f} s): {escape(result.message)}",
            soft_wrap=True,
        )
    else:
        err_console.print(
            f"[red]✗[/] {escape(name)} failed: {escape(result.message)}", soft_wrap=True
        )
    if not result.ok:
        raise typer.Exit(1)


@app.command("serve")
def serve_cmd(
    once_for: float | None = typer.Option(
        None,
        "--once-for",
        metavar="SECONDS",
        min=0.0,
        help="Exit cleanly after SECONDS (for tests and smoke checks). "
        "Default: run until SIGTERM or Ctrl-C.",
    ),
) -> None:
    """Run the scheduler daemon: fire enabled jobs, one at a time, logging to logs/cron.log.

    It re-reads .olav/cron.yaml every 2 s, so `olav cron enable/disable` take effect at once.
    Only one daemon runs per workspace (.olav/cron.pid is locked while it runs).
    """
    from olav.cron.scheduler import serve

    ws = open_workspace()
    serve(ws, once_for=once_for, echo=lambda line: err_console.print(escape(line), soft_wrap=True))


@app.command("install")
def install_cmd(
    unit_dir: Path | None = typer.Option(
        None,
        "--unit-dir",
        help="Where to write olav-cron.service (default: ~/.config/systemd/user).",
    ),
    crontab: bool = typer.Option(
        False, "--crontab", help="Print an @reboot crontab line instead of writing a unit."
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace a unit that serves another workspace."
    ),
) -> None:
    """Install the daemon as a systemd user service (never runs systemctl itself)."""
    from olav.cron.scheduler import (
        UNIT_NAME,
        default_unit_dir,
        render_crontab_line,
        render_systemd_unit,
    )

    ws = open_workspace()
    python = sys.executable
    if crontab:
        err_console.print("Add this line with `crontab -e`:")
        typer.echo(render_crontab_line(ws, python))
        return
    directory = (unit_dir or default_unit_dir()).expanduser()
    path = directory / f"{UNIT_NAME}.service"
    text = render_systemd_unit(ws, python)
    if path.exists():
        old = path.read_text(encoding="utf-8", errors="replace")
        wd = next((ln for ln in old.splitlines() if ln.startswith("WorkingDirectory=")), "")
        if old != text and wd and wd != f"WorkingDirectory={ws.root}" and not force:
            raise OlavError(
                f"{path} already serves another workspace ({wd.partition('=')[2]})",
                hint="Pass --force to replace it, or use --crontab for a second workspace",
            )
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    console.print(f"[green]✓[/] wrote {escape(str(path))}", soft_wrap=True)
    console.print("Start it now and at every login with:")
    typer.echo("systemctl --user daemon-reload")
    typer.echo(f"systemctl --user enable --now {UNIT_NAME}")
    console.print(
        "[dim]To keep it running while you are logged out: loginctl enable-linger $USER[/]"
    )
