"""``python -m benchmarks report|perf|recall|hostile`` (see :mod:`benchmarks.cli`)."""

from benchmarks.cli import main

main()
