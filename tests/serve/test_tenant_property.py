"""Issue 52's one property over 1,000 random sequences of bob's operations: the Agent
Protocol and the store API over HTTP, the console's pages, an MCP service opened as bob, and
every tool of every template agent as his session binds it, called with arbitrary arguments
(and, for a tool that asks for approval, what the approval would show him). alice's canaries
(tests/serve/_tenants.py) never appear in anything bob receives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.serve._tenants import World, _do, _ops, planted

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py)

SEQUENCES = 1_000


@pytest.fixture(scope="module")
def world(_hash_ws_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with planted(_hash_ws_template, tmp_path_factory.mktemp("tenants") / "ws") as w:
        yield w


def test_no_canary_of_alices_reaches_bob_on_any_path(world: World) -> None:
    @settings(
        max_examples=SEQUENCES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(ops=_ops(world))
    def sequence(ops: list[tuple[str, Any]]) -> None:
        for kind, op in ops:
            _do(world, kind, op)

    sequence()
