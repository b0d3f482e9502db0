"""Fixtures of the `olav serve` end-to-end tests (tests.serve._support has the rest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serve._support import Served, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One `olav serve` per test module (bodies up to 20 000 bytes)."""
    with serving(tmp_path_factory.mktemp("serve") / "ws", "--max-body", "20000") as s:
        yield s
