"""``olav bench``: the evaluations that ship with olav: the golden suite (``golden``), simulated
rerankers on it (``rerank``), what memory does to your own model (``steer``) and the rescue
layer on tool calls written as text (``toolcalls``). The project's own benchmarks (LoCoMo
recall, speed, hostile input, the report) are ``python -m benchmarks`` in a checkout."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True)


def _register() -> None:
    from olav.cli import bench_golden, bench_rerank, bench_steer, bench_toolcalls

    for module in (bench_golden, bench_rerank, bench_steer, bench_toolcalls):
        module.register(app)


_register()
