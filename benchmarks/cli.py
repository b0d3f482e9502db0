"""``python -m benchmarks``: olav's own benchmarks, run from a checkout (olav is imported as a
library). ``report`` runs every one of them and writes docs/benchmarks.md (what ``make bench``
runs); ``recall`` (LoCoMo), ``perf`` and ``hostile`` run one section. The evaluations that ship
with olav are ``olav bench golden|rerank|steer|toolcalls``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

# olav's own help conventions (no ``<bool>`` after a flag) are set on typer when olav's command
# module is imported: the same options read the same here
import olav.cli.app  # noqa: F401
from benchmarks.cli_perf import parse_sizes
from olav.bench.embedders import EMBEDDERS, bench_embedder
from olav.cli.common import console, err_console, print_json, status_progress
from olav.core.errors import OlavError

PROG = "python -m benchmarks"

app = typer.Typer(
    name="benchmarks",
    help="olav's own benchmarks, run from a checkout: recall (LoCoMo), perf, hostile, and "
    "report (all of them, written to docs/benchmarks.md; `make bench`).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)


def _table(report: dict[str, Any], names: list[str], title: str) -> Any:
    from rich.table import Table

    ks = report["ks"]
    table = Table(title=title, title_justify="left")
    table.add_column("method", style="bold")
    for k in ks:
        table.add_column(f"R@{k}", justify="right")
    table.add_column("ms/q", justify="right", style="dim")
    table.add_column("what", style="dim", overflow="fold")
    best = {k: max(report["methods"][m]["overall"][f"R@{k}"] or 0.0 for m in names) for k in ks}
    for name in names:
        m = report["methods"][name]
        cells = []
        for k in ks:
            val = m["overall"][f"R@{k}"]
            text = "-" if val is None else f"{val:.3f}"
            cells.append(f"[green]{text}[/]" if val is not None and val == best[k] else text)
        ms = m.get("search_ms_per_question")
        table.add_row(name, *cells, "-" if ms is None else f"{ms:.1f}", m["label"])
    return table


def _category_table(report: dict[str, Any], name: str) -> Any:
    from rich.table import Table

    ks = report["ks"]
    table = Table(title=f"{name} by question category", title_justify="left")
    table.add_column("category", style="bold")
    table.add_column("questions", justify="right")
    for k in ks:
        table.add_column(f"R@{k}", justify="right")
    m = report["methods"][name]
    rows = [*m["by_category"].items(), ("all", m["overall"])]
    for cat, block in rows:
        vals = [block[f"R@{k}"] for k in ks]
        table.add_row(cat, str(block["n"]), *("-" if v is None else f"{v:.3f}" for v in vals))
    return table


@app.command("recall")
def recall(
    path: Path = typer.Argument(..., help="The dataset file, e.g. locomo_dev.json."),
    dataset: str = typer.Option("locomo", "--dataset", help="Dataset format (locomo)."),
    convs: str | None = typer.Option(
        None, "--convs", help="Conversations to use, e.g. 0-4 or 0,2 (default: all)."
    ),
    ks: str = typer.Option("1,5,10", "-k", help="Cut-offs for recall@k, e.g. 1,5,10."),
    embedder: str = typer.Option("e5", "--embedder", help="e5 (bundled) or hash (tests only)."),
    experiments: bool = typer.Option(
        True, "--experiments/--no-experiments", help="Also run the experimental methods (x-*)."
    ),
    cache: Path | None = typer.Option(
        None, "--cache", help="Embedding cache folder (default: ~/.cache/olav/bench)."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the cache."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON."),
) -> None:
    """Evidence recall@k of olav's search next to BM25, vectors and LangGraph's store.

    Each conversation is indexed on its own; every question except the adversarial category
    (5) is asked, and recall@k is the share of its evidence turns among the top k.
    """
    from benchmarks.locomo import (
        RecallRun,
        default_cache_dir,
        parse_ks,
        parse_range,
        run_recall,
    )

    if dataset != "locomo":
        raise OlavError(f"unknown dataset {dataset!r}", hint="Only --dataset locomo is supported")
    if embedder not in EMBEDDERS:
        raise OlavError(f"unknown embedder {embedder!r}", hint="Use --embedder e5 or hash")
    cache_dir = None if no_cache else (cache or default_cache_dir())
    emb = bench_embedder(embedder)
    show = err_console.is_terminal and not as_json

    with status_progress(show) as progress:
        run = RecallRun(
            convs=parse_range(convs) if convs else None,
            ks=parse_ks(ks),
            experiments=experiments,
            cache_dir=cache_dir,
        )
        report = run_recall(path, embedder=emb, run=run, progress=progress)
    if as_json:
        print_json(report)
        return
    _print_recall(report)


def _print_recall(report: dict[str, Any]) -> None:
    """The recall report as tables: the baselines, olav by category, then the experimental
    methods (and the best one's categories when it is not a baseline)."""
    from benchmarks.locomo import BASELINES, best_method, method_names

    console.print(
        f"LoCoMo {', '.join(report['conversations'])}: {report['turns']} turns, "
        f"{report['questions']} questions ({report['excluded_category_5']} adversarial "
        f"excluded, {report['skipped_no_evidence']} without evidence skipped), "
        f"embedder {report['embedder']}",
        soft_wrap=True,
    )
    console.print(_table(report, list(BASELINES), "evidence recall@k (ms/q: search time)"))
    console.print(_category_table(report, "olav"))
    extra = list(method_names(report, experimental=True))
    if extra:
        console.print(_table(report, ["olav", *extra], "experimental methods (not olav's default)"))
        best = best_method(report)
        console.print(f"best overall: [bold]{best}[/]", soft_wrap=True)
        if best not in BASELINES:
            console.print(_category_table(report, best))
    emb_info = report["embedding"]
    console.print(
        f"[dim]embedding {emb_info['seconds']}s ({emb_info['embedded']} new, "
        f"{emb_info['reused_from_cache']} from cache); total {report['seconds']}s; "
        f"olav search {report['methods']['olav']['search_ms_per_question']} ms/question[/]",
        soft_wrap=True,
    )


@app.command("report")
def report_cmd(
    ctx: typer.Context,
    out: Path = typer.Option(Path("docs/benchmarks.md"), "--out", help="Markdown file to write."),
    locomo: Path | None = typer.Option(
        None, "--locomo", help="LoCoMo JSON (e.g. ../shared/data/locomo/locomo_dev.json)."
    ),
    convs: str | None = typer.Option(None, "--convs", help="LoCoMo conversations, e.g. 0-4."),
    sizes: str = typer.Option("1000,10000,100000", "--sizes", help="Memory counts for perf."),
    queries: int = typer.Option(100, "--queries", help="Queries per latency cell."),
    guides: int = typer.Option(200, "--guides", help="Guides for the import benchmark."),
    steer_workspace: Path | None = typer.Option(
        None, "--steer-workspace", help="A workspace whose model is served: run steer there."
    ),
    steer_runs: int = typer.Option(3, "--steer-runs", help="Runs per scenario and mode."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the raw report."),
    embedder: str = typer.Option(
        "e5", "--embedder", help="e5 (bundled) or hash (tests only) for recall and golden."
    ),
    cli_runs: int = typer.Option(5, "--cli-runs", help="Cold CLI start-ups to time (0: skip)."),
    thread_turns: int = typer.Option(
        200, "--thread-turns", min=1, help="Turns of the thread the resume benchmark continues."
    ),
    export_runs: int = typer.Option(
        10000, "--export-runs", min=1, help="Audited runs the export benchmark writes out."
    ),
    serve_runs: int = typer.Option(
        30, "--serve-runs", min=1, help="Runs per row of the olav serve benchmark."
    ),
    fault_rounds: int = typer.Option(
        3, "--fault-rounds", min=1, help="kill -9 rounds of the thread-store benchmark."
    ),
    console_rows: int = typer.Option(
        100_000, "--console-rows", min=1, help="Memory rows under the web console benchmark."
    ),
    hostile_samples: int = typer.Option(
        200, "--hostile-samples", min=1, help="GET /ok answers timed under each hostile request."
    ),
    remote: bool = typer.Option(
        False,
        "--remote",
        help="Also measure the team table on a local S3 server (needs the dev extras).",
    ),
) -> None:
    """Run every benchmark (LoCoMo recall, golden suite, perf, steer) and write one
    Markdown file: machine, versions, commands and tables. `make bench` runs this."""
    from benchmarks.locomo import default_cache_dir, parse_range
    from benchmarks.perf_options import PerfOptions
    from benchmarks.report import ReportOptions, run_all

    if embedder not in EMBEDDERS:
        raise OlavError(f"unknown embedder {embedder!r}", hint="Use --embedder e5 or hash")
    size_list = parse_sizes(sizes)
    if locomo is not None and not locomo.is_file():  # the report says it was skipped
        err_console.print(f"[yellow]![/] {locomo} does not exist: skipping LoCoMo recall")
    show = err_console.is_terminal
    with status_progress(show) as progress:
        opts = ReportOptions(
            locomo=locomo,
            convs=parse_range(convs) if convs else None,
            cache_dir=default_cache_dir() if embedder == "e5" else None,
            embedder=bench_embedder(embedder),
            perf=PerfOptions(size_list, queries, guides, cli_runs=cli_runs, remote=remote),
            steer_workspace=steer_workspace,
            steer_runs=steer_runs,
            thread_turns=thread_turns,
            export_runs=export_runs,
            serve_runs=serve_runs,
            fault_rounds=fault_rounds,
            console_rows=console_rows,
            hostile_samples=hostile_samples,
        )
        report = run_all(opts, progress)
    command = [*PROG.split(), "report", *_given_options(ctx)]
    _write_report(report, out, json_out, command)


def _write_report(
    report: dict[str, Any], out: Path, json_out: Path | None, command: list[str]
) -> None:
    """The Markdown report, and the raw one as JSON when asked."""
    from benchmarks.report import markdown, write

    write(out, markdown(report, command=command))
    if json_out is not None:
        import json

        write(json_out, json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    console.print(f"[green]✓[/] wrote {out} in {report['seconds']} s", soft_wrap=True)


def _given_options(ctx: typer.Context) -> list[str]:
    """The options of the running command that differ from their defaults, as they would be
    typed (for the report's "how to reproduce"; called from Python as from a shell)."""
    words: list[str] = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if param.param_type_name != "option" or value is None or value == param.default:
            continue
        if getattr(param, "is_flag", False):
            words.append(param.opts[0] if value else (param.secondary_opts or param.opts)[0])
        else:
            words += [param.opts[0], str(value)]
    return words


def _register_more() -> None:
    import inspect

    from benchmarks import cli_hostile, cli_perf, cli_relevance

    for module in (cli_hostile, cli_perf, cli_relevance):
        module.register(app)
    for info in app.registered_commands:  # each command's line in the list: its first paragraph
        doc = inspect.getdoc(info.callback) if info.callback else None
        if info.short_help is None and info.help is None and doc:
            info.short_help = " ".join(doc.split("\n\n")[0].split())


_register_more()


def main() -> None:
    """The commands with olav's error handling (``OLAV_DEBUG=1``: the traceback)."""
    import os

    from olav.cli.common import run_app

    debug = os.environ.get("OLAV_DEBUG", "") in {"1", "true", "yes"}
    run_app(app, PROG, debug=lambda: debug, flag="OLAV_DEBUG=1")
