"""Fixtures of the reliability tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability._support import make_workspace


@pytest.fixture(scope="module")
def ro_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A primed workspace shared by tests that must leave it untouched."""
    return make_workspace(tmp_path_factory.mktemp("hostile") / "ws")
