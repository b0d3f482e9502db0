"""``olav bench golden``: placeholder, filled in by its own change."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``golden`` command to ``olav bench``."""
