"""``python -m benchmarks hostile``: ``olav serve`` answering ``/ok`` while hostile requests run,
and the speed of redaction on ordinary and adversarial text (:mod:`benchmarks.serve_hostile`);
``python -m benchmarks fairness``: one operator's load against another's latency
(:mod:`benchmarks.serve_fairness`)."""

from __future__ import annotations

import typer

from olav.cli.common import console, err_console, print_json, status_progress


def hostile(
    as_json: bool = typer.Option(False, "--json", help="The report as JSON."),
    samples: int = typer.Option(200, "--samples", min=1, help="GET /ok answers timed per row."),
) -> None:
    """Start ``olav serve`` on a scratch workspace and send it, one kind at a time, the hostile
    requests of docs/reliability.md (long paths, huge queries and metadata, lone surrogates,
    absurd offsets, a long adversarial message) while another client asks ``GET /ok``: its p99
    says whether one request can stall the server. Exits 1 when a row misses 100 ms."""
    from benchmarks.serve_hostile import markdown_hostile, run_hostile_bench

    with status_progress(err_console.is_terminal and not as_json) as progress:
        report = run_hostile_bench(progress=progress, samples=samples)
    if as_json:
        print_json(report)
    else:
        console.print(markdown_hostile(report), markup=False, highlight=False)
    if not report["met"]:
        raise typer.Exit(1)


def fairness(as_json: bool = typer.Option(False, "--json", help="The report as JSON.")) -> None:
    """Start ``olav serve`` on a scratch workspace and load it as one operator (45 chat posts
    without JavaScript, 40 slow runs, 20,000 partial request heads) while another measures
    ``GET /info`` and a one-line run, idle and under each load, with the log's growth. Exits 1
    when a row misses its target (2x of idle, 1 MB of log)."""
    from benchmarks.serve_fairness import markdown_fairness, run_fairness_bench

    with status_progress(err_console.is_terminal and not as_json) as progress:
        report = run_fairness_bench(progress=progress)
    if as_json:
        print_json(report)
    else:
        console.print(markdown_fairness(report), markup=False, highlight=False)
    if not report["met"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("hostile")(hostile)
    app.command("fairness")(fairness)
