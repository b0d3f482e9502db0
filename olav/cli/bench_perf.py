"""``olav bench perf``: placeholder, filled in by its own change."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``perf`` command to ``olav bench``."""
