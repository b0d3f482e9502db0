"""``olav bench steer``: placeholder, filled in by its own change."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``steer`` command to ``olav bench``."""
