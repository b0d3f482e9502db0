"""Benchmarks: recall quality on public data, the golden suite, speed and steering; results
as data, rendered as Markdown (docs/benchmarks.md) and by the CLI."""
